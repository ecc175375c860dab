package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// shardReplicas is how many hub replicas hub-shards runs.
const shardReplicas = 3

// hubShards is what hub-shards measured: three hub replicas with
// --shards=auto over -members clusters; one is killed (SIGKILL, its Lease
// left as it was) and every source is changed at once; the takeover is the
// time until every mirror, those of the killed replica's clusters
// included, has the new content.
type hubShards struct {
	Replicas      int     `json:"replicas"`
	LeaseSeconds  float64 `json:"leaseSeconds"`
	Clusters      int     `json:"clusters"` // registered clusters, the hub's own included
	KilledServed  float64 `json:"killedServed"`
	SplitSeconds  float64 `json:"splitSeconds"` // replicas started to every cluster served once
	TakeoverSecs  float64 `json:"takeoverSeconds"`
	KilledReplica string  `json:"killedReplica"`
	// Split is each replica's memory once the clusters are divided and
	// every replica is idle; Survivors the live replicas' once the killed
	// one's clusters are served again and they are idle.
	Split     []replicaUsage `json:"split"`
	Survivors []replicaUsage `json:"survivors"`
	// FanOut are single-source updates before the kill, every replica up.
	FanOut *fanOut `json:"fanOut,omitempty"`
	// KCP is set when the members are logical clusters of kcp (-kcp).
	KCP *kcpInfo `json:"kcp,omitempty"`
	// Machine is the memory of the whole machine during the run.
	Machine *machineMemory `json:"machine,omitempty"`
}

// replicaUsage is one hub replica's memory and CPU.
type replicaUsage struct {
	Replica string  `json:"replica"`
	Served  float64 `json:"served"` // fleetmirror_hub_shard_clusters
	usage
}

// fanOut are updates of one source at a time, each timed from its write
// until every mirror of that source, one per target namespace of every
// cluster, has the new content; and the CPU every party used meanwhile,
// which tells who the bottleneck was.
type fanOut struct {
	Mirrors int       `json:"mirrors"` // per update
	Seconds []float64 `json:"seconds"`
	P50     float64   `json:"p50"`
	Max     float64   `json:"max"`
	// Wall is the whole phase; the CPU seconds are over it: the hub
	// replicas', the member clusters' control plane (kcp processes, or API
	// servers and their etcd, the hub cluster's included), with -kcp the
	// hub cluster's apart, and the bench's own.
	Wall            float64 `json:"wallSeconds"`
	HubCPU          float64 `json:"hubCPUSeconds"`
	ControlPlaneCPU float64 `json:"controlPlaneCPUSeconds"`
	HubClusterCPU   float64 `json:"hubClusterCPUSeconds,omitempty"`
	BenchCPU        float64 `json:"benchCPUSeconds"`
	// KCPRequests are the requests kcp served per update (-kcp), by
	// "VERB resource"; KCPTerminated the watchers kcp closed per update as
	// too slow to take its events, by resource.
	KCPRequests   counts `json:"kcpRequestsPerUpdate,omitempty"`
	KCPTerminated counts `json:"kcpTerminatedWatchersPerUpdate,omitempty"`
}

func (b *bench) runHubShards(ctx context.Context) (err error) {
	n := b.scale.Members
	b.planTargets(n)
	b.res.ExpectedMirrors = len(b.targets) * len(b.sources)
	hs := &hubShards{Replicas: shardReplicas, LeaseSeconds: b.opts.shardLease.Seconds(), Clusters: n + 1}
	b.res.Shards = hs
	mem := startMemorySampler()
	defer func() { hs.Machine = mem.stop() }()
	if err := b.startFleet(n); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.stopFleet()) }()
	if b.kcp != nil {
		hs.KCP = b.kcp.info
		defer b.kcpEnd()
	}
	if err := b.seed(ctx); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	if err := b.register(ctx, b.tgtC...); err != nil {
		return err
	}
	if err := b.watchAndPrepare(ctx); err != nil {
		return err
	}
	if b.kcp != nil {
		if b.kcp.info.Before, err = b.kcp.usage(); err != nil {
			return err
		}
		if b.kcp.info.WatchesBefore, err = b.kcp.watches(ctx); err != nil {
			return err
		}
		progress("%s: waiting for kcp's controllers to fill the seeded namespaces", b.workload)
		if err := b.kcp.settle(ctx, b.opts.timeout); err != nil {
			return err
		}
		progress("%s: kcp settled after %.1fs; its CPU while idle, for %s", b.workload, b.kcp.info.SettleSeconds, b.opts.idle)
		if b.kcp.info.IdleCPU, err = b.kcp.idleCPU(ctx, b.opts.idle); err != nil {
			return err
		}
		f, err := b.kcp.floor(ctx, b.tgtC, b.opts.floorWorkers, b.value)
		if err != nil {
			return fmt.Errorf("kcp write floor: %w", err)
		}
		progress("%s: kcp write floor: %d writes in %.3fs, kcp CPU %.1fs", b.workload, f.Writes, f.Seconds, f.CPUSeconds)
	}
	replicas := make([]*agent, shardReplicas)
	ids := make([]string, shardReplicas)
	for i := range replicas {
		id := fmt.Sprintf("hub-%d", i)
		ids[i] = id
		if replicas[i], err = b.makeAgent("-"+id, "--shards=auto", "--shard-id="+id, "--shard-lease-duration="+b.opts.shardLease.String()); err != nil {
			return err
		}
		if replicas[i].pprofAddr != "" {
			progress("%s: %s's pprof at http://%s/debug/pprof/", b.workload, id, replicas[i].pprofAddr)
		}
	}
	defer func() {
		for _, a := range replicas {
			err = errors.Join(err, a.stop())
		}
	}()
	b.agent = replicas[0]
	b.res.Agent = agentInfo{Binary: b.agent.name, Args: b.agent.args, Log: b.agent.logPath, Pprof: b.agent.pprofAddr}

	progress("%s: starting %d hub replicas over %d clusters", b.workload, shardReplicas, n+1)
	g := b.tracker.expect(b.want(b.sources, b.targets))
	start := time.Now()
	for _, a := range replicas {
		if err := a.start(); err != nil {
			return err
		}
	}
	if _, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed); err != nil {
		return err
	}
	served, err := waitServed(ctx, replicas, n+1, b.opts.timeout)
	if err != nil {
		return err
	}
	hs.SplitSeconds = time.Since(start).Seconds()
	progress("%s: every mirror written and every cluster served once after %.3fs: %v", b.workload, hs.SplitSeconds, served)
	if hs.Split, err = b.replicaUsage(ctx, replicas, ids, served); err != nil {
		return err
	}
	if b.kcp != nil {
		if b.kcp.info.WatchesSplit, err = b.kcp.watches(ctx); err != nil {
			return err
		}
		if b.kcp.info.HubIdleCPU, err = b.kcp.idleCPU(ctx, b.opts.idle); err != nil {
			return err
		}
		progress("%s: kcp's CPU: %.1f%% idle, %.1f%% with the hub's replicas idle", b.workload, b.kcp.info.IdleCPU, b.kcp.info.HubIdleCPU)
	}
	if hs.FanOut, err = b.fanOut(ctx, replicas); err != nil {
		return err
	}

	// Kill the replica that serves the most clusters, change every source
	// at once, and wait for every mirror.
	victim := 0
	for i := range served {
		if served[i] > served[victim] {
			victim = i
		}
	}
	hs.KilledReplica, hs.KilledServed = fmt.Sprintf("hub-%d", victim), served[victim]
	for _, s := range b.sources {
		s.data["key-0"] = b.value()
		s.digest = digest(s.data)
	}
	g = b.tracker.expect(b.want(b.sources, b.targets))
	progress("%s: killing hub-%d (%.0f clusters) and changing every source", b.workload, victim, served[victim])
	killed := time.Now()
	_ = syscall.Kill(-replicas[victim].cmd.Process.Pid, syscall.SIGKILL)
	<-replicas[victim].exited
	for _, s := range b.sources {
		if err := b.patchSource(ctx, s, "key-0"); err != nil {
			return err
		}
	}
	live := append(append([]*agent{}, replicas[:victim]...), replicas[victim+1:]...)
	liveIDs := append(append([]string{}, ids[:victim]...), ids[victim+1:]...)
	b.agent = live[0]
	at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	if err != nil {
		return fmt.Errorf("after the kill: %w", err)
	}
	hs.TakeoverSecs = at.Sub(killed).Seconds()
	progress("%s: hub-%d (%.0f clusters) killed; every mirror current again after %.3fs", b.workload, victim, served[victim], hs.TakeoverSecs)
	servedLive, err := waitServed(ctx, live, n+1, b.opts.timeout)
	if err != nil {
		return err
	}
	if hs.Survivors, err = b.replicaUsage(ctx, live, liveIDs, servedLive); err != nil {
		return err
	}
	want := b.want(b.sources, b.targets)
	extra, wrong := b.tracker.unexpected(want)
	b.res.EndState = &endState{Mirrors: b.tracker.count(""), Expected: len(b.live()) * len(b.targets), Extra: len(extra), Wrong: len(wrong)}
	return nil
}

// replicaUsage reads each replica's memory, CPU and Go runtime figures
// once every one is idle.
func (b *bench) replicaUsage(ctx context.Context, replicas []*agent, ids []string, served []float64) ([]replicaUsage, error) {
	for _, a := range replicas {
		if _, err := a.waitIdle(ctx, 0, b.opts.timeout); err != nil {
			return nil, err
		}
	}
	out := make([]replicaUsage, len(replicas))
	for i, a := range replicas {
		u, err := a.usage()
		if err != nil {
			return nil, err
		}
		agentGoStats(ctx, a, &u)
		out[i] = replicaUsage{Replica: ids[i], Served: served[i], usage: u}
		progress("%s: %s serves %.0f clusters: RSS %.1f MiB (peak %.1f), %.0f goroutines", b.workload, ids[i], served[i], u.RSSMiB, u.PeakRSSMiB, u.Goroutines)
	}
	return out, nil
}

// fanOut changes one source at a time, round-robin, -updates times, every
// replica up, and times each until every mirror of that source has the
// change.
func (b *bench) fanOut(ctx context.Context, replicas []*agent) (*fanOut, error) {
	f := &fanOut{Mirrors: len(b.targets)}
	progress("%s: %d updates of one source, %d mirrors each", b.workload, b.scale.Updates, f.Mirrors)
	cpu := func() (hub, controlPlane, hubCluster, bench float64) {
		for _, a := range replicas {
			if u, err := a.usage(); err == nil {
				hub += u.CPUSeconds
			}
		}
		if b.kcp != nil {
			controlPlane = b.kcp.cpuSeconds() // the members are kcp's
			hubCluster, _ = controlPlaneCPU([]*cluster{b.srcC})
		} else {
			controlPlane, _ = controlPlaneCPU(b.clusters)
		}
		if u, err := procUsage(os.Getpid()); err == nil {
			bench = u.CPUSeconds
		}
		return hub, controlPlane, hubCluster, bench
	}
	var kcpBefore, terminatedBefore counts
	if b.kcp != nil {
		var err error
		if kcpBefore, err = b.kcp.requests(ctx, ""); err != nil {
			return nil, err
		}
		if terminatedBefore, err = b.kcp.terminatedWatchers(ctx); err != nil {
			return nil, err
		}
	}
	hub0, cp0, hc0, bench0 := cpu()
	start := time.Now()
	for i := range b.scale.Updates {
		s := b.sources[i%len(b.sources)]
		key := fmt.Sprintf("key-%d", (i/len(b.sources))%sourceKeys)
		s.data[key] = b.value()
		s.digest = digest(s.data)
		g := b.tracker.expect(b.want([]*source{s}, b.targets))
		t0 := time.Now()
		if err := b.patchSource(ctx, s, key); err != nil {
			return nil, err
		}
		at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
		if err != nil {
			return nil, fmt.Errorf("update %d of %s/%s: %w", i, s.Kind, s.Name, err)
		}
		f.Seconds = append(f.Seconds, at.Sub(t0).Seconds())
	}
	f.Wall = time.Since(start).Seconds()
	hub1, cp1, hc1, bench1 := cpu()
	f.HubCPU, f.ControlPlaneCPU, f.HubClusterCPU, f.BenchCPU = hub1-hub0, cp1-cp0, hc1-hc0, bench1-bench0
	if b.kcp != nil && len(f.Seconds) > 0 {
		after, err := b.kcp.requests(ctx, "")
		if err != nil {
			return nil, err
		}
		terminated, err := b.kcp.terminatedWatchers(ctx)
		if err != nil {
			return nil, err
		}
		f.KCPRequests, f.KCPTerminated = perUpdate(kcpBefore, after, len(f.Seconds)), perUpdate(terminatedBefore, terminated, len(f.Seconds))
	}
	if l := summarize(f.Seconds); l.Count > 0 {
		f.P50, f.Max = l.P50, l.Max
	}
	progress("%s: one source to %d mirrors: p50 %.3fs, max %.3fs", b.workload, f.Mirrors, f.P50, f.Max)
	return f, nil
}

// kcpEnd records kcp's and the bench's own usage at the end of the run.
func (b *bench) kcpEnd() {
	b.kcp.info.End, _ = b.kcp.usage()
	b.kcp.info.Throttled, _ = b.kcp.requests(context.Background(), "429")
	b.kcp.info.Bench, _ = procUsage(os.Getpid())
}

// waitServed waits until the replicas' fleetmirror_hub_shard_clusters add
// up to clusters, and returns each replica's.
func waitServed(ctx context.Context, replicas []*agent, clusters int, timeout time.Duration) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		served := make([]float64, len(replicas))
		total := 0.0
		for i, a := range replicas {
			if fams, err := a.scrape(ctx); err == nil {
				served[i], _ = fleettest.Families(fams).Value("fleetmirror_hub_shard_clusters")
				total += served[i]
			}
		}
		if int(total) == clusters {
			return served, nil
		}
		select {
		case <-ctx.Done():
			return served, fmt.Errorf("replicas serve %v clusters, want %d in all: %w", served, clusters, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (hs *hubShards) print(row func(name, value, detail string)) {
	if hs.KCP != nil {
		hs.KCP.print(row)
	}
	row("replicas split the clusters", fmt.Sprintf("%.3fs", hs.SplitSeconds),
		fmt.Sprintf("%d replicas started together to every mirror written and each of %d clusters served by one", hs.Replicas, hs.Clusters))
	printReplicas(row, "  replica RSS after the split", hs.Split)
	if f := hs.FanOut; f != nil {
		row("one source to every mirror p50 / max", fmt.Sprintf("%.3fs / %.3fs", f.P50, f.Max),
			fmt.Sprintf("%d updates of one source, each until its %d mirrors have the change, every replica up", len(f.Seconds), f.Mirrors))
		if hs.KCP != nil {
			row("  CPU meanwhile", fmt.Sprintf("%.1fs in %.1fs", f.HubCPU+f.ControlPlaneCPU+f.HubClusterCPU+f.BenchCPU, f.Wall),
				fmt.Sprintf("hub replicas %.1fs, kcp %.1fs, the hub cluster's API server and etcd %.1fs, bench %.1fs", f.HubCPU, f.ControlPlaneCPU, f.HubClusterCPU, f.BenchCPU))
		} else {
			row("  CPU meanwhile", fmt.Sprintf("%.1fs in %.1fs", f.HubCPU+f.ControlPlaneCPU+f.BenchCPU, f.Wall),
				fmt.Sprintf("hub replicas %.1fs, API servers and etcd (members' and hub's) %.1fs, bench %.1fs", f.HubCPU, f.ControlPlaneCPU, f.BenchCPU))
		}
		if f.KCPRequests != nil {
			row("  kcp requests per update", fmt.Sprintf("%.0f", sumCounts(f.KCPRequests)), "every process, by verb and resource (and code, if not 2xx): "+formatPerCluster(f.KCPRequests))
			row("  watchers kcp closed per update", fmt.Sprintf("%.0f", sumCounts(f.KCPTerminated)),
				"too slow to take its events (apiserver_terminated_watchers_total), by resource: "+formatPerCluster(f.KCPTerminated))
		}
	}
	row("takeover after a kill", fmt.Sprintf("%.3fs", hs.TakeoverSecs),
		fmt.Sprintf("%s (%.0f clusters) killed with SIGKILL, every source changed at once, until every mirror has the change; lease duration %.0fs", hs.KilledReplica, hs.KilledServed, hs.LeaseSeconds))
	printReplicas(row, "  survivors' RSS after the kill", hs.Survivors)
	if m := hs.Machine; m != nil {
		row("machine memory in use", fmt.Sprintf("%.0f MiB peak", m.UsedPeakMiB),
			fmt.Sprintf("MemTotal - MemAvailable, every process; %.0f MiB at the start, %.0f MiB total", m.UsedStartMiB, m.TotalMiB))
	}
}

// printReplicas prints the largest RSS of replicas and each one's figures.
func printReplicas(row func(name, value, detail string), name string, replicas []replicaUsage) {
	if len(replicas) == 0 {
		return
	}
	var each []string
	for _, r := range replicas {
		each = append(each, fmt.Sprintf("%s %.0f clusters %.1f MiB (peak %.1f, heap in use %.1f, %.0f goroutines)",
			r.Replica, r.Served, r.RSSMiB, r.PeakRSSMiB, r.HeapInuseMiB, r.Goroutines))
	}
	row(name, fmt.Sprintf("%.1f MiB", maxRSS(replicas)), "largest, once idle; "+strings.Join(each, "; "))
}

// perUpdate is the difference of two counts over n updates.
func perUpdate(before, after counts, n int) counts {
	out := counts{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d / float64(n)
		}
	}
	return out
}

// sumCounts adds up c.
func sumCounts(c counts) float64 {
	var t float64
	for _, v := range c {
		t += v
	}
	return t
}

// maxRSS is the largest RSS of replicas.
func maxRSS(replicas []replicaUsage) float64 {
	var m float64
	for _, r := range replicas {
		m = max(m, r.RSSMiB)
	}
	return m
}

// check compares the figures with the goals of the thousand-cluster issue
// (one replica's share, the survivors' after a kill, the takeover, one
// update's fan-out).
func (hs *hubShards) check(check func(name, target, value string, ok bool)) {
	if len(hs.Split) > 0 {
		m := maxRSS(hs.Split)
		check("replica RSS after the split", "<= 150 MiB each", fmt.Sprintf("%.1f MiB (largest)", m), m <= 150)
	}
	if f := hs.FanOut; f != nil && len(f.Seconds) > 0 {
		check(fmt.Sprintf("one update to all %d mirrors", f.Mirrors), "<= 10s", fmt.Sprintf("%.3fs (max)", f.Max), f.Max <= 10)
	}
	if hs.TakeoverSecs > 0 {
		check("takeover after a kill", fmt.Sprintf("<= %.0fs (two lease durations)", 2*hs.LeaseSeconds),
			fmt.Sprintf("%.3fs", hs.TakeoverSecs), hs.TakeoverSecs <= 2*hs.LeaseSeconds)
	}
	if len(hs.Survivors) > 0 {
		m := maxRSS(hs.Survivors)
		check("survivors' RSS after the kill", "<= 300 MiB each", fmt.Sprintf("%.1f MiB (largest)", m), m <= 300)
	}
}
