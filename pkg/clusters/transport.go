package clusters

import (
	"errors"
	"io"
	"net/http"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// errClosed fails requests to a cluster after Close.
var errClosed = errors.New("the cluster was closed")

// closingTransport is the transport of one cluster's HTTP client. Once the
// cluster is closed it refuses new requests, and when the last request in
// flight has ended (a response body is closed) it closes the connections.
//
// Written by hand: client-go has no way to close one client's connections
// for good. CloseIdleConnections leaves those that still carry a request
// (a watch being torn down, a write of a reconcile that started before the
// cluster left), and a reconcile holding the cluster afterwards would open
// new ones; each lingers with its goroutines until the idle timeout, which
// a hub whose clusters come and go cannot afford.
type closingTransport struct {
	next http.RoundTripper

	mu       sync.Mutex
	closed   bool
	inFlight int
}

var _ utilnet.RoundTripperWrapper = (*closingTransport)(nil)

func (t *closingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	t.inFlight++
	t.mu.Unlock()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.done()
		return nil, err
	}
	resp.Body = &trackedBody{ReadCloser: resp.Body, done: sync.OnceFunc(t.done)}
	return resp, nil
}

// WrappedRoundTripper lets client-go's helpers see through the wrapper.
func (t *closingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// close refuses requests from now on; the connections are closed once no
// request is in flight.
func (t *closingTransport) close() {
	t.mu.Lock()
	t.closed = true
	idle := t.inFlight == 0
	t.mu.Unlock()
	if idle {
		utilnet.CloseIdleConnectionsFor(t.next)
	}
}

func (t *closingTransport) done() {
	t.mu.Lock()
	t.inFlight--
	last := t.closed && t.inFlight == 0
	t.mu.Unlock()
	if last {
		utilnet.CloseIdleConnectionsFor(t.next)
	}
}

// trackedBody reports the end of its request when closed.
type trackedBody struct {
	io.ReadCloser
	done func()
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}
