package fleet

import (
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetmirror/fleetmirror/pkg/events"
)

// lazyRecorder is a cluster's Event recorder that starts its broadcaster at
// the first Event. A broadcaster costs two goroutines and a queue of a
// thousand Events from the start; on a hub most clusters are only targets
// and never get an Event (Events go to sources and pull mirrors), so they
// should not pay for one.
type lazyRecorder struct {
	start func() (events.Recorder, func(), error)
	log   logr.Logger

	mu      sync.Mutex
	rec     events.Recorder
	stop    func()
	stopped bool // Shutdown was called: Events are dropped
	failed  bool // start failed (logged once): Events are dropped
}

var _ events.Recorder = (*lazyRecorder)(nil)

func (l *lazyRecorder) recorder() events.Recorder {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil && !l.stopped && !l.failed {
		rec, stop, err := l.start()
		if err != nil {
			l.failed = true
			l.log.Error(err, "Cannot record Events in the cluster")
			return nil
		}
		l.rec, l.stop = rec, stop
	}
	if l.stopped {
		return nil
	}
	return l.rec
}

// Shutdown stops the broadcaster, if it was started; later Events are
// dropped.
func (l *lazyRecorder) Shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.stop != nil {
		l.stop()
	}
}

func (l *lazyRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	if r := l.recorder(); r != nil {
		r.Eventf(obj, eventtype, reason, format, args...)
	}
}
