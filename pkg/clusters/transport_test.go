package clusters

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// TestClosingTransport checks what a hub relies on when a cluster leaves:
// no request gets through afterwards, and the connections close as soon as
// the requests in flight (here a stream still being read) have ended.
func TestClosingTransport(t *testing.T) {
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if r.URL.Path == "/stream" {
			<-r.Context().Done() // like a watch: until the client hangs up
		}
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
		}
	}
	srv.Start()
	defer srv.Close()
	openConns := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(open)
	}

	dialer := trackedDialer(nil)
	tr := &closingTransport{next: &http.Transport{DialContext: dialer.DialContext}, conns: dialer.ConnectionTracker}
	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL + "/once")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	stream, err := client.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}

	tr.close()
	if _, err := client.Get(srv.URL + "/once"); !errors.Is(err, errClosed) {
		t.Errorf("request after close: err = %v, want errClosed", err)
	}
	if n := openConns(); n == 0 {
		t.Fatalf("the stream's connection closed while the stream was open")
	}
	_ = stream.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for openConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after the last request ended", openConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMarkedDownSendsOnlyTheProbe: while a cluster is marked unreachable
// its transport refuses every request but the probe's, whoever sends it
// (client-go retrying a watch on its own, a discovery, a read), and lets
// them through again once it is marked up.
func TestMarkedDownSendsOnlyTheProbe(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	c, err := New(&rest.Config{Host: srv.URL}, Options{Name: "c", ManagedBy: annotations.ManagedByHub, WatchConnection: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := func(client *http.Client) error {
		resp, err := client.Get(srv.URL + "/api/v1/secrets")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	watchClient := &http.Client{Transport: c.watchTransport}

	c.MarkDown("test")
	for name, client := range map[string]*http.Client{"the cluster's client": c.HTTPClient(), "the watches' client": watchClient} {
		var down *ErrUnreachable
		if err := get(client); !errors.As(err, &down) {
			t.Errorf("%s, marked down: %v, want the cluster's unreachability", name, err)
		}
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Errorf("the probe, marked down: %v", err)
	}
	if r := received(); len(r) != 1 || r[0] != "/readyz" {
		t.Errorf("the server received %q while the cluster was marked down, want only the probe", r)
	}

	c.MarkUp()
	for name, client := range map[string]*http.Client{"the cluster's client": c.HTTPClient(), "the watches' client": watchClient} {
		if err := get(client); err != nil {
			t.Errorf("%s, marked up: %v", name, err)
		}
	}
	if n := len(received()); n != 3 {
		t.Errorf("%d requests received, want 3", n)
	}
}

// A request body larger than smallFrame is read at most smallFrame bytes at
// a time, whole and in order, by a copy of the request: the caller's is
// untouched, and GetBody still gives the body whole. Smaller bodies, none,
// and http.NoBody pass as they are.
func TestSmallFrames(t *testing.T) {
	large := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80,000 bytes
	for _, tc := range []struct {
		name    string
		body    []byte // nil: no body
		noBody  bool
		unknown bool // the length is not known (-1)
		wrapped bool
	}{
		{name: "no body"},
		{name: "http.NoBody", noBody: true},
		{name: "small", body: []byte("{}")},
		{name: "exactly smallFrame", body: large[:smallFrame]},
		{name: "one byte over", body: large[:smallFrame+1], wrapped: true},
		{name: "large", body: large, wrapped: true},
		{name: "large, length unknown", body: large, unknown: true, wrapped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var body io.Reader
			switch {
			case tc.noBody:
				body = http.NoBody
			case tc.body != nil:
				body = bytes.NewReader(tc.body)
			}
			req, err := http.NewRequest(http.MethodPut, "https://example.com/api/v1/namespaces/a/configmaps/b", body)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.unknown {
				req.ContentLength = -1
			}
			orig := req.Body
			got := smallFrames(req)
			g.Expect(req.Body == orig).To(BeTrue(), "the caller's request is modified")
			if !tc.wrapped {
				g.Expect(got).To(BeIdenticalTo(req))
				return
			}
			g.Expect(got).NotTo(BeIdenticalTo(req))
			g.Expect(got.ContentLength).To(Equal(req.ContentLength))
			var read []byte
			buf := make([]byte, 256<<10)
			for {
				n, err := got.Body.Read(buf)
				g.Expect(n).To(BeNumerically("<=", smallFrame))
				read = append(read, buf[:n]...)
				if err == io.EOF {
					break
				}
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(read).To(Equal(tc.body))
			again, err := got.GetBody()
			g.Expect(err).NotTo(HaveOccurred())
			whole, err := io.ReadAll(again)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(whole).To(Equal(tc.body))
		})
	}
}

// A cluster's HTTP/2 connection keeps no table of the header fields sent
// either way: neither the API server's answers' (an audit ID new in every
// answer, which only churns the table) nor its requests' (a bearer token).
// A connection with the tables HPACK allows by default (4 KiB each way)
// keeps both full: here 3 KiB headers each way, which client-go's own
// client keeps.
func TestConnectionsKeepNoHeaderTable(t *testing.T) {
	big := strings.Repeat("h", 3<<10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Large", big)
		w.WriteHeader(http.StatusOK)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := &rest.Config{Host: srv.URL, BearerToken: big, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}

	// held is the heap that 40 clients, each with a connection of its own
	// after one exchange, hold per connection.
	held := func(client func() *http.Client) int64 {
		const conns = 40
		clients := make([]*http.Client, conns)
		before := liveHeap()
		for i := range clients {
			clients[i] = client()
			resp, err := clients[i].Get(srv.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.ProtoMajor != 2 || resp.Header.Get("X-Large") != big {
				t.Fatalf("answer over %s with a header of %d bytes, want HTTP/2 and %d", resp.Proto, len(resp.Header.Get("X-Large")), len(big))
			}
		}
		n := (liveHeap() - before) / conns
		for _, c := range clients {
			c.CloseIdleConnections()
		}
		return n
	}
	ours := held(func() *http.Client {
		_, c, _, err := closingClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
	plain := held(func() *http.Client {
		c := rest.CopyConfig(cfg)
		c.Dial = (&net.Dialer{}).DialContext // a transport of its own
		hc, err := rest.HTTPClientFor(c)
		if err != nil {
			t.Fatal(err)
		}
		return hc
	})
	t.Logf("held per connection after an exchange of 3 KiB headers: %d B, %d B with client-go's own client", ours, plain)
	NewWithT(t).Expect(plain-ours).To(BeNumerically(">=", 5<<10), "bytes a connection keeps less than client-go's after an exchange of 3 KiB headers")
}

// An answer the agent has not read yet waits in its memory only up to the
// stream's window: the API server, here a test server writing 8 MiB as
// fast as it may, gets streamWindow ahead of a reader that reads nothing,
// where client-go's own client lets it get 4 MiB ahead.
func TestStreamWindowBoundsUnreadAnswers(t *testing.T) {
	g := NewWithT(t)
	var written atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 16<<10)
		for range (8 << 20) / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			written.Add(int64(len(chunk)))
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}

	// ahead opens an answer with client and reads none of it; it returns
	// how far the server got once it has written at least least bytes and
	// then no more than most, as long as the check lasts.
	ahead := func(client *http.Client, least, most int64) int64 {
		written.Store(0)
		resp, err := client.Get(srv.URL + "/")
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		g.Expect(resp.ProtoMajor).To(Equal(2))
		g.Eventually(written.Load, 10*time.Second, 10*time.Millisecond).Should(BeNumerically(">=", least))
		g.Consistently(written.Load, 300*time.Millisecond, 10*time.Millisecond).Should(BeNumerically("<=", most))
		return written.Load()
	}
	_, ours, _, err := closingClient(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	// The server writes through a buffer of its own, and stops once the
	// window is used up.
	got := ahead(ours, streamWindow/2, streamWindow+64<<10)
	c := rest.CopyConfig(cfg)
	c.Dial = (&net.Dialer{}).DialContext // a transport of its own
	plain, err := rest.HTTPClientFor(c)
	g.Expect(err).NotTo(HaveOccurred())
	gotPlain := ahead(plain, 4<<20-64<<10, 8<<20)
	t.Logf("the server got %d KiB ahead of our reader, %d KiB ahead of client-go's own client", got>>10, gotPlain>>10)
}
