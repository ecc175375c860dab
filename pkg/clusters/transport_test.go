package clusters

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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
