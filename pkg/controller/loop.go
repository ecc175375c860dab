package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Result tells the work queue when to look at a source again.
type Result struct {
	// RequeueAfter, when positive, looks at the source again after that
	// long; a change of the source or its mirrors may come first.
	RequeueAfter time.Duration
}

// Run reconciles sources with Options.Workers workers until ctx ends, then
// waits for the reconciles in flight (their context is ctx: they stop at
// their next call). It runs on the leader only; RunFleet feeds it.
//
// This is controller-runtime's controller loop, written here because its
// controller package links every built-in API type into the binary
// (through its manager, cache and client), about 7 MB of the member's 33.
// The behaviour is the same: a rate-limited work queue (client-go's, with
// controller-runtime's default limiter), an error retried with per-source
// backoff, RequeueAfter honoured, a panic recovered and counted, and the
// same series (controller_runtime_*, workqueue_*).
func (p *Pipeline) Run(ctx context.Context) error {
	name := p.opts.Name
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[Key](),
		workqueue.TypedRateLimitingQueueConfig[Key]{Name: name, MetricsProvider: metrics.Queue})
	if err := p.feed(ctx, q); err != nil {
		q.ShutDown()
		return err
	}
	workers := max(p.opts.Workers, 1)
	metrics.StartController(name, workers)
	log := logf.FromContext(ctx).WithValues("controller", name)
	ctx = logf.IntoContext(ctx, log)
	log.Info("Starting workers", "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p.next(ctx, q) {
			}
		})
	}
	<-ctx.Done()
	log.Info("Stopping workers")
	q.ShutDown()
	wg.Wait()
	return nil
}

// next reconciles the next source of q; false once q is shut down.
func (p *Pipeline) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key]) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	name := p.opts.Name
	metrics.ActiveWorkers.WithLabelValues(name).Inc()
	defer metrics.ActiveWorkers.WithLabelValues(name).Dec()
	start := time.Now()
	res, err := p.reconcileSafely(ctx, key)
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
	return true
}

// reconcileSafely reconciles key; a panic is an error.
func (p *Pipeline) reconcileSafely(ctx context.Context, key Key) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			metrics.ReconcilePanics.WithLabelValues(p.opts.Name).Inc()
			logf.FromContext(ctx).Error(fmt.Errorf("%v", r), "Observed a panic", "key", key.String(), "stacktrace", string(debug.Stack()))
			err = fmt.Errorf("panic: %v [recovered]", r)
		}
	}()
	return p.reconcile(ctx, key)
}
