package clusters_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

func newUnstarted(t *testing.T, opts clusters.Options) *clusters.Cluster {
	t.Helper()
	opts.Name, opts.Handler = "c", ignoreEvents{}
	c, err := clusters.New(&rest.Config{Host: "https://" + refusedAddress(t)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Marking a cluster down aborts the calls in flight with the cluster's
// unreachability as the cause, fails new calls at once, and marking it up
// lets calls through again.
func TestCallContextFollowsHealth(t *testing.T) {
	c := newUnstarted(t, clusters.Options{})
	ctx, done := c.CallContext(context.Background(), time.Minute)
	defer done()
	c.MarkDown("probe timed out")
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a call in flight was not aborted when its cluster was marked down")
	}
	var down *clusters.ErrUnreachable
	if err := clusters.CallError(ctx, ctx.Err()); !errors.As(err, &down) || down.Reason != "probe timed out" {
		t.Fatalf("CallError = %v, want the cluster's unreachability", err)
	}

	start := time.Now()
	next, done2 := c.CallContext(context.Background(), time.Minute)
	defer done2()
	if next.Err() == nil || time.Since(start) > time.Second {
		t.Fatal("a call to a cluster marked down did not fail at once")
	}
	if again := c.Unreachable(); again == nil || !again.Since.Equal(down.Since) {
		t.Errorf("Unreachable() = %v, want the first marking kept", again)
	}
	c.MarkDown("another reason") // no change while down
	if c.Unreachable().Reason != "probe timed out" {
		t.Errorf("a second MarkDown replaced the reason")
	}

	c.MarkUp()
	if c.Unreachable() != nil {
		t.Fatal("still unreachable after MarkUp")
	}
	up, done3 := c.CallContext(context.Background(), time.Minute)
	defer done3()
	if up.Err() != nil {
		t.Fatalf("a call after MarkUp failed: %v", context.Cause(up))
	}
	if err := clusters.CallError(up, errors.New("boom")); err.Error() != "boom" {
		t.Errorf("CallError changed an error of a healthy cluster: %v", err)
	}
}

// A call that outlasts SlowCallAfter reports itself.
func TestSlowCallIsReported(t *testing.T) {
	slow := make(chan struct{}, 1)
	c := newUnstarted(t, clusters.Options{SlowCall: func() { slow <- struct{}{} }, SlowCallAfter: 20 * time.Millisecond})
	_, done := c.CallContext(context.Background(), time.Minute)
	defer done()
	select {
	case <-slow:
	case <-time.After(5 * time.Second):
		t.Fatal("a slow call was not reported")
	}
}
