package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// The worker loop, with a reconciler that follows a script per source:
// each source is reconciled until its script says done, an error or a
// panic is retried (a panic counted), RequeueAfter comes back after its
// delay, no more reconciles run at once than there are workers, the
// series count every outcome, and Run returns once the reconcile in
// flight at cancellation has returned.
func TestWorkerLoop(t *testing.T) {
	g := NewWithT(t)
	name := fmt.Sprintf("loop-test-%d", time.Now().UnixNano()) // the series are global; -count runs again
	type step struct {
		res   Result
		err   error
		panic bool
	}
	scripts := map[string][]step{
		"once":     {{}},
		"fails":    {{err: errors.New("boom")}, {err: errors.New("boom")}, {}},
		"requeues": {{res: Result{RequeueAfter: 50 * time.Millisecond}}, {}},
		"panics":   {{panic: true}, {}},
	}
	var (
		mu       sync.Mutex
		calls    = map[string]int{}
		lastCall = map[string]time.Time{}
		gaps     = map[string]time.Duration{}
		running  atomic.Int32
		maxRun   atomic.Int32
	)
	p := &Pipeline{
		opts: Options{Name: name, Workers: 2},
		reconcile: func(_ context.Context, k Key) (Result, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := maxRun.Load(); n > m && !maxRun.CompareAndSwap(m, n); m = maxRun.Load() {
			}
			time.Sleep(time.Millisecond) // overlap the workers
			mu.Lock()
			i := calls[k.Name]
			calls[k.Name]++
			if !lastCall[k.Name].IsZero() {
				gaps[k.Name] = time.Since(lastCall[k.Name])
			}
			lastCall[k.Name] = time.Now()
			mu.Unlock()
			s := scripts[k.Name]
			if i >= len(s) {
				return Result{}, nil
			}
			if s[i].panic {
				panic("scripted")
			}
			return s[i].res, s[i].err
		},
		feed: func(_ context.Context, q queue, _ *sweeps) error {
			for n := range scripts {
				q.Add(Key{Name: n})
			}
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()

	want := map[string]int{"once": 1, "fails": 3, "requeues": 2, "panics": 2}
	g.Eventually(func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(calls)
	}, "5s", "10ms").Should(Equal(want))
	g.Consistently(func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(calls)
	}, "200ms", "10ms").Should(Equal(want), "a source that succeeded is not reconciled again")
	mu.Lock()
	g.Expect(gaps["requeues"]).To(BeNumerically(">=", 50*time.Millisecond), "RequeueAfter is honoured")
	mu.Unlock()
	g.Expect(maxRun.Load()).To(BeNumerically("<=", 2), "no more reconciles at once than workers")

	g.Expect(testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(name, "success"))).To(Equal(4.0))
	g.Expect(testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(name, "error"))).To(Equal(3.0))
	g.Expect(testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(name, "requeue_after"))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(metrics.ReconcileErrors.WithLabelValues(name))).To(Equal(3.0))
	g.Expect(testutil.ToFloat64(metrics.ReconcilePanics.WithLabelValues(name))).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(metrics.MaxWorkers.WithLabelValues(name))).To(Equal(2.0))
	g.Expect(testutil.ToFloat64(metrics.ActiveWorkers.WithLabelValues(name))).To(Equal(0.0))

	cancel()
	g.Eventually(done, "5s").Should(Receive(BeNil()))

	// A reconcile in flight at cancellation: Run waits for it.
	var returned atomic.Bool
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	p.feed = func(_ context.Context, q queue, _ *sweeps) error {
		q.Add(Key{Name: "slow"})
		return nil
	}
	p.reconcile = func(ctx context.Context, _ Key) (Result, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond)
		returned.Store(true)
		return Result{}, ctx.Err()
	}
	go func() { done <- p.Run(ctx) }()
	g.Eventually(started, "5s").Should(BeClosed())
	cancel()
	g.Eventually(done, "5s").Should(Receive(BeNil()))
	g.Expect(returned.Load()).To(BeTrue(), "Run returned before the reconcile in flight")
}

// A change is served before the rest of a sweep: with a sweep of 200
// sources queued and reconciled one at a time, a source that changes
// meanwhile is among the next reconciles, not the 201st; a swept source
// that changes moves up too, and is not reconciled twice for it.
func TestChangesBeforeTheSweep(t *testing.T) {
	g := NewWithT(t)
	name := fmt.Sprintf("priority-test-%d", time.Now().UnixNano())
	const swept = 200
	var (
		mu    sync.Mutex
		order []string
	)
	e := &eventSource{}
	started := make(chan struct{})
	p := &Pipeline{
		opts: Options{Name: name, Workers: 2},
		reconcile: func(_ context.Context, k Key) (Result, error) {
			time.Sleep(2 * time.Millisecond) // a sweep that takes a while
			mu.Lock()
			defer mu.Unlock()
			order = append(order, k.Name)
			return Result{}, nil
		},
		feed: func(_ context.Context, q queue, sw *sweeps) error {
			e.queue, e.sweeps = q, sw
			for i := range swept {
				e.addAt(Key{Name: fmt.Sprintf("swept-%d", i)}, asSweep)
			}
			e.addAt(Key{Name: "swept-0"}, asSweep) // a second sweep: once is enough
			g.Expect(testutil.ToFloat64(metrics.SweepPending.WithLabelValues(name))).To(Equal(float64(swept)))
			close(started)
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-started
	reconciled := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(order)
	}
	g.Eventually(reconciled, "5s", "1ms").Should(BeNumerically(">=", 10))
	e.add(Key{Name: "changed"})
	e.add(Key{Name: fmt.Sprintf("swept-%d", swept-1)}) // queued by the sweep, then changed
	// About this many of the sweep's may be reconciled before the change:
	// those done by now, those in flight and those in the queue (as many
	// as there are workers each), with a worker's worth of slack for the
	// scheduler. Without the sweep list, it would be every one of them.
	ahead := reconciled() + 3*p.opts.Workers
	g.Eventually(reconciled, "10s", "5ms").Should(Equal(swept + 1))
	g.Consistently(reconciled, "100ms", "5ms").Should(Equal(swept+1), "a swept source that changed was reconciled twice")
	g.Expect(testutil.ToFloat64(metrics.SweepPending.WithLabelValues(name))).To(BeZero())
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"changed", fmt.Sprintf("swept-%d", swept-1)} {
		i := slices.Index(order, name)
		g.Expect(i).To(BeNumerically("<=", ahead), "%s reconciled %d-th", name, i+1)
	}
	cancel()
	g.Eventually(done, "5s").Should(Receive(BeNil()))
}

// The first Up of a cluster that Start swept just before is the only one
// that needs no sweep of its own: an Up before Start (its sweep was
// dropped: no queue yet), and every later Up (a reconnect), do.
func TestFirstUpAfterStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string // "start" or "up"
		want  []bool   // firstUpAfterStart of each "up"
	}{
		{"start, then up, then a reconnect", []string{"start", "up", "up"}, []bool{true, false}},
		{"up before start", []string{"up", "start", "up"}, []bool{false, false}},
		{"a second leadership", []string{"start", "up", "start", "up"}, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &eventSource{}
			var got []bool
			for _, step := range tc.steps {
				if step == "start" {
					e.begin(nil, nil, []string{"local"})
				} else {
					got = append(got, e.firstUpAfterStart("local"))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// The rest of a reconcile (Result.then) runs while the worker goes on: a
// single worker reconciles the next source meanwhile, the source whose
// rest runs is not reconciled again until the rest ends (a change queued
// meanwhile waits for it), the rest's error is the reconcile's (retried,
// counted), and Run waits for a rest in flight at cancellation.
func TestReconcileRest(t *testing.T) {
	g := NewWithT(t)
	name := fmt.Sprintf("rest-test-%d", time.Now().UnixNano())
	var (
		mu    sync.Mutex
		order []string
		q     queue
	)
	log := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	logged := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(order)
	}
	release := make(chan error)
	var restsRun atomic.Int32
	p := &Pipeline{
		opts: Options{Name: name, Workers: 1},
		reconcile: func(_ context.Context, k Key) (Result, error) {
			log(k.Name)
			if k.Name != "a" {
				return Result{}, nil
			}
			return Result{then: func(context.Context) (Result, error) {
				n := restsRun.Add(1)
				err := <-release
				log(fmt.Sprintf("a rest %d", n))
				return Result{}, err
			}}, nil
		},
		feed: func(_ context.Context, queue queue, _ *sweeps) error {
			q = queue
			q.Add(Key{Name: "a"})
			q.Add(Key{Name: "b"})
			return nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	g.Eventually(logged, "5s", "10ms").Should(Equal([]string{"a", "b"}), "the worker went on while a's rest runs")
	q.Add(Key{Name: "a"}) // a change of a, while its rest runs
	g.Consistently(logged, "200ms", "10ms").Should(Equal([]string{"a", "b"}), "a reconciled again before its rest ended")
	release <- nil
	g.Eventually(logged, "5s", "10ms").Should(Equal([]string{"a", "b", "a rest 1", "a"}), "the change queued meanwhile, reconciled once the rest ended")
	release <- nil
	g.Eventually(logged, "5s", "10ms").Should(HaveLen(5))
	g.Consistently(logged, "200ms", "10ms").Should(Equal([]string{"a", "b", "a rest 1", "a", "a rest 2"}))
	g.Expect(testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(name, "success"))).To(Equal(3.0))

	// A rest that fails fails the reconcile: retried, counted.
	q.Add(Key{Name: "a"})
	g.Eventually(restsRun.Load, "5s", "10ms").Should(Equal(int32(3)))
	release <- errors.New("status write failed")
	g.Eventually(restsRun.Load, "5s", "10ms").Should(Equal(int32(4)), "the failed reconcile retried")
	release <- nil
	g.Eventually(logged, "5s", "10ms").Should(Equal([]string{"a", "b", "a rest 1", "a", "a rest 2", "a", "a rest 3", "a", "a rest 4"}))
	g.Expect(testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(name, "error"))).To(Equal(1.0))

	// A rest in flight at cancellation, and a change of its source queued
	// meanwhile: Run waits for the rest, and leaves nothing counted in the
	// queue's depth, a series that outlives the run (a replica that loses
	// its lease and wins it back runs the loop again in the same process).
	q.Add(Key{Name: "a"})
	g.Eventually(restsRun.Load, "5s", "10ms").Should(Equal(int32(5)))
	q.Add(Key{Name: "a"})
	cancel()
	g.Consistently(done, "100ms").ShouldNot(Receive(), "Run returned before the rest in flight")
	release <- nil
	g.Eventually(done, "5s").Should(Receive(BeNil()))
	depth := metrics.Queue.NewDepthMetric(name).(prometheus.Collector)
	g.Expect(testutil.ToFloat64(depth)).To(BeZero(), "keys left counted in the queue's depth")
}
