package fleet

import (
	"context"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// A connection closes however its probe timer and its cancellation meet:
// a run that fires as the connection is cancelled must leave the lock to
// the closing, which waits for it (it once returned holding it, and the
// closing, and with it the agent's shutdown, waited for ever). The cluster
// is an address nobody listens on, so every probe fails at once.
func TestConnectionClosesWhileProbing(t *testing.T) {
	f := &Fleet{opts: Options{ProbeInterval: time.Millisecond, ProbeTimeout: time.Second}}
	newConn := func(t *testing.T) *connection {
		cl, err := clusters.New(&rest.Config{Host: "https://127.0.0.1:1"}, clusters.Options{Name: "gone"})
		if err != nil {
			t.Fatal(err)
		}
		return &connection{spec: Spec{Name: "gone"}, cluster: cl, events: record.NewFakeRecorder(1), done: make(chan struct{})}
	}

	// The run that meets the cancellation, on its own.
	c := newConn(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	f.step(cancelled, c)
	if !c.probing.TryLock() {
		t.Fatal("a run after the cancellation kept the lock")
	}

	// And the whole connection, cancelled at once or after a few runs.
	for i := range 300 {
		c := newConn(t)
		ctx, cancel := context.WithCancel(context.Background())
		f.start(ctx, c)
		for range i % 3 {
			runtime.Gosched()
		}
		cancel()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection %d did not close", i)
		}
	}
}
