package controller

import (
	"sync"
	"time"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// breaker is a per-source circuit breaker. After threshold failed
// reconciles in a row a source's retries are spaced out, doubling from
// base up to max, instead of following the work queue's fast per-item
// backoff; the other sources are not slowed. One success closes it.
type breaker struct {
	threshold int
	base, max time.Duration

	mu       sync.Mutex
	failures map[Key]int
}

// open reports whether key's next failure keeps or makes its breaker open.
func (b *breaker) open(key Key) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.threshold > 0 && b.failures[key]+1 >= b.threshold
}

// record turns the outcome of a reconcile into what the queue is told.
func (b *breaker) record(key Key, res Result, err error) (Result, error) {
	if b.threshold <= 0 {
		return res, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == nil {
		b.failures = map[Key]int{}
	}
	n := b.failures[key]
	if err == nil {
		if n >= b.threshold {
			metrics.CircuitOpen.WithLabelValues(metrics.KindLabel(key.GVK)).Dec()
		}
		delete(b.failures, key)
		return res, nil
	}
	n++
	b.failures[key] = n
	if n < b.threshold {
		return res, err
	}
	if n == b.threshold {
		metrics.CircuitOpen.WithLabelValues(metrics.KindLabel(key.GVK)).Inc()
	}
	wait := b.base << min(n-b.threshold, 16)
	if wait <= 0 || wait > b.max {
		wait = b.max
	}
	// The error is reported in Events and status; returning it would put
	// the source back on the queue's fast backoff.
	return Result{RequeueAfter: wait}, nil
}

// forget drops a source that is gone.
func (b *breaker) forget(key Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures[key] >= b.threshold && b.threshold > 0 {
		metrics.CircuitOpen.WithLabelValues(metrics.KindLabel(key.GVK)).Dec()
	}
	delete(b.failures, key)
}
