package clusters

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/util/connrotation"
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
// client-go has no way to close one client's connections for good.
// CloseIdleConnections leaves those that still carry a request (a watch
// being torn down, a write of a reconcile that started before the cluster
// left), and a reconcile holding the cluster afterwards would open new
// ones; each lingers with its goroutines until the idle timeout, which a hub
// whose clusters come and go cannot afford. The connections are tracked by
// client-go's connrotation (the dialer client-go's exec credential plugins
// use to drop connections when credentials rotate), and closed with its
// CloseAll. The rest is ours, because connrotation knows connections, not
// requests: CloseAll closes every connection at once, streams in flight
// included, and "new connections may get created before CloseAll returns"
// (its doc), so it neither refuses later requests nor waits for the last
// one in flight. Counting requests (a request ends when its response body is
// closed) must happen at the RoundTripper, here.
type closingTransport struct {
	next  http.RoundTripper
	conns *connrotation.ConnectionTracker // the connections next dials
	// down, when set, returns why the cluster is marked unreachable, or
	// nil. Meanwhile every request but the probe's is refused here: the
	// watches wait for the probe (health), but client-go retries a watch
	// or a read on its own, after a second, when its connection closed
	// under it (Request.Watch and Stream, up to ten times), which would
	// reach a cluster marked down behind their backs.
	down func() error
	// throttle, when set, is the cluster's back-off after 429 answers
	// (throttle.go): every request but the probe's waits for it.
	throttle *throttle
	// answers, when set, notes the answers that came in time (answers.go).
	answers *answers

	mu       sync.Mutex
	closed   bool
	inFlight int
}

var _ utilnet.RoundTripperWrapper = (*closingTransport)(nil)

func (t *closingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	probe := req.Context().Value(probeKey{}) != nil
	if !probe {
		if t.down != nil {
			if err := t.down(); err != nil {
				return nil, err
			}
		}
		if t.throttle != nil {
			if err := t.throttle.wait(req.Context()); err != nil {
				return nil, err
			}
		}
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	t.inFlight++
	t.mu.Unlock()
	sent := time.Now()
	resp, err := t.next.RoundTrip(smallFrames(req))
	if err != nil {
		t.done()
		return nil, err
	}
	if t.throttle != nil {
		t.throttle.observe(resp)
	}
	if !probe {
		t.answers.observe(sent, resp)
	}
	resp.Body = &trackedBody{ReadCloser: resp.Body, done: sync.OnceFunc(t.done)}
	return resp, nil
}

// smallFrame is the most of a request body that one read of it gives the
// HTTP/2 transport (smallFrames).
const smallFrame = 16 << 10

// smallFrames returns req with a body that gives at most smallFrame bytes
// per read, when it is larger. The HTTP/2 transport sends what one read gave
// as one DATA frame, up to the largest frame the API server accepts
// (kube-apiserver: 256 KiB), and its framer keeps its write buffer as large
// as the largest frame it wrote, for as long as the connection lasts. One
// write of a 1 MiB mirror would leave 256 KiB in every cluster's connection
// (a hub with 1,000 clusters: 256 MiB); with reads of 16 KiB the buffer stays
// at 16 KiB. A larger body costs a frame per 16 KiB; GetBody, which the
// transport uses to send the body again, still gives it whole.
//
// Written by hand: neither net/http nor x/net/http2 bounds the frames a
// client writes other than by the peer's maximum.
func smallFrames(req *http.Request) *http.Request {
	if req.Body == nil || req.Body == http.NoBody || (req.ContentLength >= 0 && req.ContentLength <= smallFrame) {
		return req
	}
	r := req.Clone(req.Context())
	r.Body = &limitedReads{ReadCloser: req.Body}
	return r
}

// limitedReads gives at most smallFrame bytes per read.
type limitedReads struct{ io.ReadCloser }

func (l *limitedReads) Read(p []byte) (int, error) {
	return l.ReadCloser.Read(p[:min(len(p), smallFrame)])
}

// probeKey marks the context of the probe's request, the one request sent
// to a cluster marked unreachable.
type probeKey struct{}

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
	t.conns.CloseAll()
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

// trackedDialer wraps next (nil: a plain TCP dialer with client-go's
// timeouts; connrotation has no default of its own) so that its connections
// are tracked and CloseAll closes them.
func trackedDialer(next connrotation.DialFunc) *connrotation.Dialer {
	if next == nil {
		next = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return connrotation.NewDialer(next)
}

// headerTableSize is the HPACK dynamic table each way of a cluster's
// HTTP/2 connection (http.HTTP2Config): one byte holds no header field,
// as a field costs 32 bytes and more, and zero would mean the default.
const headerTableSize = 1

// streamWindow is how much of one answer the API server may send before
// we have read it: the HTTP/2 flow-control window we grant each stream.
// It is the 99th percentile of object sizes that the API server itself
// takes as its own window for what clients upload to it (256 KiB).
const streamWindow = 256 << 10

// leanHTTP2 sets two HTTP/2 settings on rt, the transport client-go built
// for one cluster.
//
// The connections keep no table of the header fields sent before. HPACK's
// default table is 4 KiB each way, per connection, and stays full: the API
// server's answers carry an audit ID new each time, which only churns its
// table, and our requests carry the same few fields (a bearer token, the
// user agent), which a table would spare resending. On a hub the two
// tables held about 9 KiB per connection, a twentieth of an idle cluster's
// live heap; without them each request carries its token again, about a
// kilobyte, and each answer its few fields: little beside the objects they
// carry.
//
// Each stream is granted streamWindow, not Go's 4 MiB. The API server
// sends a list or a watch's events as fast as the window lets it, and
// what we have not read yet waits in memory: a restarted member agent
// listing 1,000 mirrors of 4 KiB held megabytes of them while it decoded,
// and its peak RSS was 30.4 MiB, 26.2 MiB with this window (make bench
// member-small); a hub taking over hundreds of clusters lists from all of
// them at once. The window bounds the throughput of one stream to a window
// per round trip: 256 MB/s at 1 ms (a cluster's own agent), 2.5 MB/s at
// 100 ms (a hub and a cluster on another continent, whose list of 10,000
// mirrors of 1 KiB then takes 4 s).
//
// client-go has no option for either: its transport cache builds the
// http.Transport and configures HTTP/2 on it (SetTransportDefaults), so
// the settings are put on that transport, found under client-go's
// wrappers, before it has connected. It is the cluster's alone: its own
// dialer keeps client-go from sharing it (closingClient). A transport that
// is not an *http.Transport is left as it is.
func leanHTTP2(rt http.RoundTripper) {
	for rt != nil {
		switch t := rt.(type) {
		case *http.Transport:
			t.HTTP2 = &http.HTTP2Config{
				MaxDecoderHeaderTableSize: headerTableSize,
				MaxEncoderHeaderTableSize: headerTableSize,
				MaxReceiveBufferPerStream: streamWindow,
			}
			return
		case utilnet.RoundTripperWrapper:
			rt = t.WrappedRoundTripper()
		default:
			return
		}
	}
}
