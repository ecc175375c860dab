package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Whether a key is queued as a change, served first, or as part of a
// sweep (see sweeps).
const (
	asChange = false
	asSweep  = true
)

// queue is the work queue of sources.
type queue = workqueue.TypedRateLimitingInterface[Key]

func newQueue(name string) queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[Key](),
		workqueue.TypedRateLimitingQueueConfig[Key]{Name: name, MetricsProvider: metrics.Queue})
}

// sweeps holds what sweeps look at again (a start, a cluster that came up
// or went down, a kind newly synced: every source of a cluster, or of the
// fleet) and hands it to the work queue a few at a time, only while the
// queue holds fewer items than there are workers. So a change (a source,
// a mirror or a policy that changed) is queued behind at most that many
// items of a sweep, however long the sweep: changes first, the sweep
// after. A swept source that changes is taken out of the sweep and queued
// as a change.
//
// Written by hand because the priority queue that does this in
// controller-runtime (pkg/controller/priorityqueue) links its metrics
// package and with it every typed client of client-go: 9.6 MB more in the
// member's binary, whose goal is 30 MB.
type sweeps struct {
	gauge   prometheus.Gauge // metrics.SweepPending of the controller
	mu      sync.Mutex
	pending []Key
	queued  map[Key]struct{}
	// wake is signalled when a key is added or a worker finished one.
	wake chan struct{}
}

func newSweeps(name string) *sweeps {
	g := metrics.SweepPending.WithLabelValues(name)
	g.Set(0)
	return &sweeps{gauge: g, queued: map[Key]struct{}{}, wake: make(chan struct{}, 1)}
}

func (s *sweeps) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// add puts k at the end of the sweep, unless it is in it already.
func (s *sweeps) add(k Key) {
	s.mu.Lock()
	if _, ok := s.queued[k]; !ok {
		s.queued[k] = struct{}{}
		s.pending = append(s.pending, k)
		s.gauge.Inc()
	}
	s.mu.Unlock()
	s.signal()
}

// drop takes k out of the sweep: it was queued as a change.
func (s *sweeps) drop(k Key) {
	s.mu.Lock()
	if _, ok := s.queued[k]; ok {
		delete(s.queued, k) // pop skips a key no longer in queued
		s.gauge.Dec()
	}
	s.mu.Unlock()
}

// pop returns the next key of the sweep.
func (s *sweeps) pop() (Key, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.pending) > 0 {
		k := s.pending[0]
		s.pending[0] = Key{}
		s.pending = s.pending[1:]
		if _, ok := s.queued[k]; ok {
			delete(s.queued, k)
			s.gauge.Dec()
			return k, true
		}
	}
	s.pending = nil // let the backing array go
	return Key{}, false
}

// feed moves the sweep into q while q holds fewer than low items, until
// ctx ends.
func (s *sweeps) feed(ctx context.Context, q queue, low int) {
	for {
		for q.Len() < low {
			k, ok := s.pop()
			if !ok {
				break
			}
			q.Add(k)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
	}
}

// Result tells the work queue when to look at a source again.
type Result struct {
	// RequeueAfter, when positive, looks at the source again after that
	// long; a change of the source or its mirrors may come first.
	RequeueAfter time.Duration
	// then, when set, is the rest of the reconcile, run while the worker
	// takes the next key: the key stays in process (no other reconcile of
	// it starts) until then returns, and its Result and error are the
	// reconcile's. The writes that are the point of a reconcile (mirrors)
	// are done by then; what is left is bookkeeping on the source, its
	// status, which would otherwise hold a worker for a round trip per
	// source while other sources wait for their mirrors.
	then func(context.Context) (Result, error)
}

// thenSlots bounds the reconciles whose rest (Result.then) runs at once,
// per worker: a worker that would exceed it waits for one to end.
const thenSlots = 4

// Run reconciles sources with Options.Workers workers until ctx ends, then
// waits for the reconciles in flight (their context is ctx: they stop at
// their next call). It runs on the leader only; RunFleet feeds it.
//
// This is controller-runtime's controller loop, written here because its
// controller package links every built-in API type into the binary
// (through its manager, cache and client), about 7 MB of the member's 33.
// The behaviour is the same: controller-runtime's priority queue with its
// default rate limiter, an error retried with per-source backoff,
// RequeueAfter honoured, a panic recovered and counted, and the same series
// (controller_runtime_*, workqueue_*).
func (p *Pipeline) Run(ctx context.Context) error {
	name := p.opts.Name
	q, sw := newQueue(name), newSweeps(name)
	workers := max(p.opts.Workers, 1)
	if err := p.feed(ctx, q, sw); err != nil {
		q.ShutDown()
		return err
	}
	go sw.feed(ctx, q, workers)
	metrics.StartController(name, workers)
	log := logf.FromContext(ctx).WithValues("controller", name)
	ctx = logf.IntoContext(ctx, log)
	log.Info("Starting workers", "workers", workers)
	var wg sync.WaitGroup
	rest := &rests{wg: &wg, slots: make(chan struct{}, workers*thenSlots), done: sw.signal}
	for range workers {
		wg.Go(func() {
			for p.next(ctx, q, rest) {
				sw.signal() // room in the queue for more of a sweep
			}
		})
	}
	<-ctx.Done()
	log.Info("Stopping workers")
	q.ShutDown()
	wg.Wait()
	// A key changed while its rest ran is put back in the queue when the
	// rest ends (q.Done), which may be after every worker left. The queue
	// goes, but the depth it counted is a series that outlives it, and a
	// replica that wins its lease back runs the loop again: take the keys
	// out, so the depth reads zero (one rest stranded so made the depth
	// read 1 for good in a hub restarted in the same process).
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
	}
	return nil
}

// rests runs the rests of reconciles (Result.then), each in a goroutine of
// its own, at most cap(slots) at once; Run waits for them as for its
// workers.
type rests struct {
	wg    *sync.WaitGroup
	slots chan struct{}
	done  func() // a key was let go: room for more of a sweep
}

// next reconciles the next source of q; false once q is shut down. A
// reconcile that left a rest (Result.then) has it run in rest, and its key
// is let go once that ends.
func (p *Pipeline) next(ctx context.Context, q queue, rest *rests) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	name := p.opts.Name
	metrics.ActiveWorkers.WithLabelValues(name).Inc()
	start := time.Now()
	res, err := p.reconcileSafely(ctx, key)
	metrics.ActiveWorkers.WithLabelValues(name).Dec()
	if then := res.then; then != nil && err == nil {
		rest.slots <- struct{}{}
		rest.wg.Go(func() {
			defer func() { <-rest.slots }()
			res, err := p.safely(ctx, key, then)
			p.settle(ctx, q, key, res, err, start)
			q.Done(key)
			rest.done()
		})
		return true
	}
	p.settle(ctx, q, key, res, err, start)
	q.Done(key)
	return true
}

// settle tells q what a reconcile of key that began at start came to.
func (p *Pipeline) settle(ctx context.Context, q queue, key Key, res Result, err error, start time.Time) {
	name := p.opts.Name
	result := "success"
	switch {
	case err != nil:
		result = "error"
		q.AddRateLimited(key)
		if ctx.Err() == nil {
			logf.FromContext(ctx).Error(err, "Reconciler error", "cluster", key.Cluster, "gvk", key.GVK.String(),
				"namespace", key.Namespace, "name", key.Name)
		}
	case res.RequeueAfter > 0:
		result = "requeue_after"
		q.Forget(key)
		q.AddAfter(key, res.RequeueAfter)
	default:
		q.Forget(key)
	}
	metrics.ObserveReconcile(name, result, time.Since(start))
}

// reconcileSafely reconciles key; a panic is an error.
func (p *Pipeline) reconcileSafely(ctx context.Context, key Key) (res Result, err error) {
	return p.safely(ctx, key, func(ctx context.Context) (Result, error) { return p.reconcile(ctx, key) })
}

// safely runs fn, a reconcile of key or its rest; a panic is an error.
func (p *Pipeline) safely(ctx context.Context, key Key, fn func(context.Context) (Result, error)) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			metrics.ReconcilePanics.WithLabelValues(p.opts.Name).Inc()
			logf.FromContext(ctx).Error(fmt.Errorf("%v", r), "Observed a panic", "key", key.String(), "stacktrace", string(debug.Stack()))
			err = fmt.Errorf("panic: %v [recovered]", r)
		}
	}()
	return fn(ctx)
}
