package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

const (
	// churnUpdateInterval is how often a source changes during the churn.
	churnUpdateInterval = 250 * time.Millisecond
	// scavengeWait is how long the hub's memory is left to the Go
	// scavenger after a forced collection before its RSS is read.
	scavengeWait = 10 * time.Second
)

// hubStats are the hub's figures at one moment.
type hubStats struct {
	Goroutines   float64 `json:"goroutines"`   // go_goroutines
	RSSMiB       float64 `json:"rssMiB"`       // VmRSS
	RSSAnonMiB   float64 `json:"rssAnonMiB"`   // RssAnon: the heap and stacks, not the binary's pages
	HeapLiveMiB  float64 `json:"heapLiveMiB"`  // go_gc_heap_live_bytes just after a forced collection
	HeapInuseMiB float64 `json:"heapInuseMiB"` // go_memstats_heap_inuse_bytes
	Clusters     float64 `json:"clusters"`     // fleetmirror_hub_registered_clusters
}

// churn is the result of hub-churn.
type churn struct {
	Cycles        int       `json:"cycles"`
	SourceUpdates int       `json:"sourceUpdates"`
	Before        *hubStats `json:"before,omitempty"`
	After         *hubStats `json:"after,omitempty"`
	// RegisterToMirrors is, per cycle, the time from writing the
	// registration Secret until every mirror in the registered cluster has
	// its source's current content.
	RegisterToMirrors *latencies `json:"registerToMirrors,omitempty"`
	// UnregisterSeconds is, per cycle, the time from deleting the
	// registration Secret until the hub reports the cluster gone.
	Unregister *latencies `json:"unregister,omitempty"`
	// Final is the last registration: from writing the Secret until every
	// mirror in every cluster has its source's current content.
	Final *timed `json:"final,omitempty"`
}

func (c *churn) print(row func(name, value, detail string)) {
	if c.Before != nil {
		row("hub before churn", fmt.Sprintf("%.0f goroutines", c.Before.Goroutines), fmt.Sprintf("RSS %.1f MiB, live heap %.1f MiB, heap in use %.1f MiB", c.Before.RSSMiB, c.Before.HeapLiveMiB, c.Before.HeapInuseMiB))
	}
	if c.After != nil {
		row("hub after churn", fmt.Sprintf("%.0f goroutines", c.After.Goroutines), fmt.Sprintf("RSS %.1f MiB, live heap %.1f MiB, heap in use %.1f MiB", c.After.RSSMiB, c.After.HeapLiveMiB, c.After.HeapInuseMiB))
	}
	if l := c.RegisterToMirrors; l != nil {
		row("register -> mirrors current p50", fmt.Sprintf("%.3fs", l.P50), fmt.Sprintf("p95 %.3fs, max %.3fs over %d cycles, %d source updates meanwhile", l.P95, l.Max, c.Cycles, c.SourceUpdates))
	}
	if l := c.Unregister; l != nil {
		row("unregister -> cluster dropped p50", fmt.Sprintf("%.3fs", l.P50), fmt.Sprintf("max %.3fs", l.Max))
	}
	if f := c.Final; f != nil {
		row("converge after the last registration", fmt.Sprintf("%.3fs", f.Seconds), fmt.Sprintf("%d mirrors, all clusters, current content", f.Mirrors))
	}
}

// runChurn registers and unregisters a member with the hub Cycles times
// while sources change, and compares the hub's goroutines and memory before
// and after; then registers it a last time and times full convergence.
func (b *bench) runChurn(ctx context.Context) (err error) {
	stable := b.scale.Members
	b.planTargets(stable)
	b.res.ExpectedMirrors = len(b.targets) * len(b.sources)
	if err := b.startFleet(stable + 1); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.stopFleet()) }()
	churner := b.tgtC[len(b.tgtC)-1]
	var churnTargets []target
	for i := range b.scale.Namespaces {
		churnTargets = append(churnTargets, target{cluster: churner.name, namespace: fmt.Sprintf("%s%03d", targetPrefix, i)})
	}

	seedStart := time.Now()
	stableTargets := b.targets
	b.targets = append(append([]target{}, stableTargets...), churnTargets...) // seed the churner's namespaces too
	err = b.seed(ctx)
	b.targets = stableTargets
	if err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	if err := b.register(ctx, b.tgtC[:stable]...); err != nil {
		return err
	}
	b.res.SeedSeconds = time.Since(seedStart).Seconds()
	if err := b.watchAndPrepare(ctx); err != nil {
		return err
	}
	// The group of clusters reported apart: the churner.
	b.groups = map[string][]*cluster{"hub": {b.srcC}, "stable members": b.tgtC[:stable], "churned member": {churner}}

	// Initial convergence over the stable members.
	g := b.tracker.expect(b.want(b.sources, b.targets))
	p, err := b.beginPhase(ctx, "converge")
	if err != nil {
		return err
	}
	if b.res.Convergence, err = b.startAgent(ctx, g); err != nil {
		return err
	}
	if err := b.waitClusters(ctx, stable); err != nil {
		return err
	}
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	if _, err := p.end(ctx); err != nil {
		return err
	}
	c := &churn{Cycles: b.scale.Cycles}
	b.res.Churn = c
	// One cycle before the baseline, not counted: the first registration
	// of a cluster initialises things once for good (client-go's request
	// metrics of a new API server host, code paths run for the first
	// time), which is not growth with churn.
	absent := map[mirrorKey]string{}
	for _, k := range keysOf(b.want(b.sources, churnTargets)) {
		absent[k] = wantAbsent
	}
	var warmup sync.Mutex
	if _, _, err := b.churnCycle(ctx, &warmup, churner, churnTargets, absent, stable); err != nil {
		return fmt.Errorf("warm-up cycle: %w", err)
	}
	progress("%s: converged in %.3fs; one warm-up cycle done; settling %s", b.workload, b.res.Convergence.Seconds, b.opts.settle)
	if c.Before, err = b.settledHubStats(ctx); err != nil {
		return err
	}

	// Cycles, while a source changes every churnUpdateInterval.
	p, err = b.beginPhase(ctx, "churn")
	if err != nil {
		return err
	}
	var mu sync.Mutex // guards the sources' data while the updater runs
	updCtx, stopUpdates := context.WithCancel(ctx)
	updErr := make(chan error, 1)
	go func() { updErr <- b.churnUpdates(updCtx, &mu, &c.SourceUpdates) }()
	stopUpdater := func() error {
		stopUpdates()
		if err := <-updErr; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("updating sources: %w", err)
		}
		return nil
	}
	var regLat, unregLat []float64
	progress("%s: %d register/unregister cycles of %s", b.workload, c.Cycles, churner.name)
	for i := range c.Cycles {
		reg, unreg, err := b.churnCycle(ctx, &mu, churner, churnTargets, absent, stable)
		if err != nil {
			return errors.Join(fmt.Errorf("cycle %d: %w", i, err), stopUpdater())
		}
		regLat, unregLat = append(regLat, reg), append(unregLat, unreg)
	}
	if err := stopUpdater(); err != nil {
		return err
	}
	c.RegisterToMirrors, c.Unregister = summarize(regLat), summarize(unregLat)
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	if _, err := p.end(ctx); err != nil {
		return err
	}
	progress("%s: churn done; settling %s", b.workload, b.opts.settle)
	if c.After, err = b.settledHubStats(ctx); err != nil {
		return err
	}

	// The last registration: everything current everywhere.
	p, err = b.beginPhase(ctx, "final registration")
	if err != nil {
		return err
	}
	b.targets = append(b.targets, churnTargets...)
	g = b.tracker.expect(b.want(b.sources, b.targets))
	start := time.Now()
	if err := b.register(ctx, churner); err != nil {
		return err
	}
	at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	if err != nil {
		return err
	}
	c.Final = &timed{Mirrors: len(g.want), Seconds: at.Sub(start).Seconds()}
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return err
	}
	if _, err := p.end(ctx); err != nil {
		return err
	}
	u, err := b.agent.usage()
	if err != nil {
		return err
	}
	b.goStats(ctx, &u)
	b.res.Resources.Agent = &u
	progress("%s: final registration converged in %.3fs", b.workload, c.Final.Seconds)
	return nil
}

// churnCycle registers the churner and waits until its mirrors carry
// their sources' current content (source updates pause meanwhile, so that
// the goal holds still), unregisters it and waits until the hub dropped it.
// The mirrors stay (the hub keeps them by default) and go stale while the
// cluster is out, as sources keep changing; with -churn-delete-mirrors the
// bench deletes them, so that the next registration creates them anew.
func (b *bench) churnCycle(ctx context.Context, mu *sync.Mutex, churner *cluster, tgts []target, absent map[mirrorKey]string, stable int) (reg, unreg float64, err error) {
	mu.Lock()
	g := b.tracker.expect(b.want(b.sources, tgts))
	start := time.Now()
	err = b.register(ctx, churner)
	var at time.Time
	if err == nil {
		at, err = b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	}
	mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	reg = at.Sub(start).Seconds()

	start = time.Now()
	if err := fleettest.Unregister(ctx, b.srcC.ctrl, systemNS, churner.fc); err != nil {
		return 0, 0, err
	}
	if err := b.waitRegistered(ctx, float64(stable+1)); err != nil {
		return 0, 0, err
	}
	unreg = time.Since(start).Seconds()

	if b.opts.churnDelete {
		g = b.tracker.expect(absent)
		sel := metav1.ListOptions{LabelSelector: annotations.LabelMirror + "=true"}
		for _, ns := range b.targetNamespaces() {
			if err := churner.cs.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
				return 0, 0, err
			}
			if err := churner.cs.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
				return 0, 0, err
			}
		}
		if _, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed); err != nil {
			return 0, 0, err
		}
	}
	// Let sources change while the cluster is out.
	select {
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	case <-time.After(2 * churnUpdateInterval):
	}
	return reg, unreg, nil
}

// keysOf returns the keys of a goal.
func keysOf(want map[mirrorKey]string) []mirrorKey {
	out := make([]mirrorKey, 0, len(want))
	for k := range want {
		out = append(out, k)
	}
	return out
}

// targetNamespaces lists the target namespace names (the same in every member).
func (b *bench) targetNamespaces() []string {
	out := make([]string, b.scale.Namespaces)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", targetPrefix, i)
	}
	return out
}

// churnUpdates changes one source every churnUpdateInterval until ctx ends.
func (b *bench) churnUpdates(ctx context.Context, mu *sync.Mutex, n *int) error {
	t := time.NewTicker(churnUpdateInterval)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		s := b.sources[i%len(b.sources)]
		key := fmt.Sprintf("key-%d", (i/len(b.sources))%sourceKeys)
		mu.Lock()
		s.data[key] = b.value()
		s.digest = digest(s.data)
		err := b.patchSource(ctx, s, key)
		mu.Unlock()
		if err != nil {
			return err
		}
		*n = i + 1
	}
}

// waitRegistered waits until the hub reports n registered clusters.
func (b *bench) waitRegistered(ctx context.Context, n float64) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	for {
		if fams, err := b.agent.scrape(ctx); err == nil && sum(fams, "fleetmirror_hub_registered_clusters") == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the hub does not report %v registered clusters: %w", n, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settledHubStats waits until the hub is idle and lets it settle
// (-settle), reads its live heap just after a collection it is made to run
// (without one, the last collection may predate the settle and still count
// what has since been let go), and, once the scavenger has had time to
// return the pages that collection freed, its goroutines and resident
// memory.
func (b *bench) settledHubStats(ctx context.Context) (*hubStats, error) {
	if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(b.opts.settle):
	}
	live, err := b.agent.liveHeap(ctx)
	if err != nil {
		return nil, err
	}
	// The Go scavenger returns the pages that collection freed in the
	// background, within seconds.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(scavengeWait):
	}
	fams, err := b.agent.scrape(ctx)
	if err != nil {
		return nil, err
	}
	u, err := b.agent.usage()
	if err != nil {
		return nil, err
	}
	return &hubStats{
		Goroutines:   sum(fams, "go_goroutines"),
		RSSMiB:       u.RSSMiB,
		RSSAnonMiB:   u.RSSAnonMiB,
		HeapLiveMiB:  live / (1 << 20),
		HeapInuseMiB: sum(fams, "go_memstats_heap_inuse_bytes") / (1 << 20),
		Clusters:     sum(fams, "fleetmirror_hub_registered_clusters"),
	}, nil
}
