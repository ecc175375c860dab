package fleet

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/fleetmirror/fleetmirror/pkg/events"
)

// The broadcaster starts at the first Event and only then, once; after
// Shutdown it is stopped and Events are dropped; a failed start is not
// retried at every Event.
func TestLazyRecorder(t *testing.T) {
	starts, stops := 0, 0
	fake := record.NewFakeRecorder(10)
	l := &lazyRecorder{log: logr.Discard(), start: func() (events.Recorder, func(), error) {
		starts++
		return fake, func() { stops++ }, nil
	}}
	if starts != 0 {
		t.Fatal("started before any Event")
	}
	l.Shutdown()
	if stops != 0 {
		t.Fatal("stopped a broadcaster never started")
	}

	l = &lazyRecorder{log: logr.Discard(), start: l.start}
	obj := &corev1.Secret{}
	l.Eventf(obj, events.Normal, "A", "one")
	l.Eventf(obj, events.Normal, "B", "%s", "two")
	l.Eventf(obj, events.Warning, "C", "%s", "three")
	if starts != 1 {
		t.Fatalf("started %d times, want once", starts)
	}
	if got := len(fake.Events); got != 3 {
		t.Fatalf("%d Events recorded, want 3", got)
	}
	l.Shutdown()
	l.Eventf(obj, events.Normal, "D", "after shutdown")
	if stops != 1 || starts != 1 || len(fake.Events) != 3 {
		t.Fatalf("after Shutdown: %d starts, %d stops, %d Events; want 1, 1, 3", starts, stops, len(fake.Events))
	}

	failures := 0
	l = &lazyRecorder{log: logr.Discard(), start: func() (events.Recorder, func(), error) {
		failures++
		return nil, nil, errors.New("no client")
	}}
	l.Eventf(obj, events.Normal, "A", "one")
	l.Eventf(obj, events.Normal, "B", "two")
	if failures != 1 {
		t.Fatalf("a failed start was tried %d times", failures)
	}
}
