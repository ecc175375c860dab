package clusters

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// errClosed fails requests to a cluster after Close.
var errClosed = errors.New("the cluster was closed")

// closingTransport is the transport of one cluster's HTTP client. Once the
// cluster is closed it refuses new requests, and when the last request in
// flight has ended (a response body is closed) it closes the connections:
// every one its dialer opened, as the HTTP/2 transport may still count a
// stream whose body was just closed, and skip the connection when asked to
// close the idle ones.
//
// Written by hand: client-go has no way to close one client's connections
// for good. CloseIdleConnections leaves those that still carry a request
// (a watch being torn down, a write of a reconcile that started before the
// cluster left), and a reconcile holding the cluster afterwards would open
// new ones; each lingers with its goroutines until the idle timeout, which
// a hub whose clusters come and go cannot afford.
type closingTransport struct {
	next  http.RoundTripper
	conns *connTracker // the connections next dials

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
		t.closeConns()
	}
}

func (t *closingTransport) closeConns() {
	utilnet.CloseIdleConnectionsFor(t.next)
	t.conns.closeAll()
}

func (t *closingTransport) done() {
	t.mu.Lock()
	t.inFlight--
	last := t.closed && t.inFlight == 0
	t.mu.Unlock()
	if last {
		t.closeConns()
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

// connTracker remembers the connections a dialer opened and not yet closed.
type connTracker struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// dialer wraps next (nil: a plain TCP dialer with client-go's timeouts) so
// that its connections are tracked.
func (t *connTracker) dialer(next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if next == nil {
		next = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: c, t: t}
		t.mu.Lock()
		if t.conns == nil {
			t.conns = map[net.Conn]struct{}{}
		}
		t.conns[tc] = struct{}{}
		t.mu.Unlock()
		return tc, nil
	}
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	conns := make([]net.Conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}
