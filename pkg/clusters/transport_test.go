package clusters

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
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
