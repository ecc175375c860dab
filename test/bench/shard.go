package main

import (
	"context"
	"errors"
	"fmt"
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
}

func (b *bench) runHubShards(ctx context.Context) (err error) {
	n := b.scale.Members
	b.planTargets(n)
	b.res.ExpectedMirrors = len(b.targets) * len(b.sources)
	hs := &hubShards{Replicas: shardReplicas, LeaseSeconds: b.opts.shardLease.Seconds(), Clusters: n + 1}
	b.res.Shards = hs
	if err := b.startFleet(n); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.stopFleet()) }()
	if err := b.seed(ctx); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	if err := b.register(ctx, b.tgtC...); err != nil {
		return err
	}
	if err := b.watchAndPrepare(ctx); err != nil {
		return err
	}
	replicas := make([]*agent, shardReplicas)
	for i := range replicas {
		id := fmt.Sprintf("hub-%d", i)
		if replicas[i], err = b.makeAgent("-"+id, "--shards=auto", "--shard-id="+id, "--shard-lease-duration="+b.opts.shardLease.String()); err != nil {
			return err
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
	killed := time.Now()
	_ = syscall.Kill(-replicas[victim].cmd.Process.Pid, syscall.SIGKILL)
	<-replicas[victim].exited
	for _, s := range b.sources {
		if err := b.patchSource(ctx, s, "key-0"); err != nil {
			return err
		}
	}
	live := append(append([]*agent{}, replicas[:victim]...), replicas[victim+1:]...)
	b.agent = live[0]
	at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
	if err != nil {
		return fmt.Errorf("after the kill: %w", err)
	}
	hs.TakeoverSecs = at.Sub(killed).Seconds()
	progress("%s: hub-%d (%.0f clusters) killed; every mirror current again after %.3fs", b.workload, victim, served[victim], hs.TakeoverSecs)
	if _, err := waitServed(ctx, live, n+1, b.opts.timeout); err != nil {
		return err
	}
	want := b.want(b.sources, b.targets)
	extra, wrong := b.tracker.unexpected(want)
	b.res.EndState = &endState{Mirrors: b.tracker.count(""), Expected: len(b.live()) * len(b.targets), Extra: len(extra), Wrong: len(wrong)}
	return nil
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
	row("replicas split the clusters", fmt.Sprintf("%.3fs", hs.SplitSeconds),
		fmt.Sprintf("%d replicas started together to every mirror written and each of %d clusters served by one", hs.Replicas, hs.Clusters))
	row("takeover after a kill", fmt.Sprintf("%.3fs", hs.TakeoverSecs),
		fmt.Sprintf("%s (%.0f clusters) killed with SIGKILL, every source changed at once, until every mirror has the change; lease duration %.0fs", hs.KilledReplica, hs.KilledServed, hs.LeaseSeconds))
}

func (hs *hubShards) check(check func(name, target, value string, ok bool)) {
	check("takeover after a kill", fmt.Sprintf("<= %.0fs (two lease durations)", 2*hs.LeaseSeconds),
		fmt.Sprintf("%.3fs", hs.TakeoverSecs), hs.TakeoverSecs <= 2*hs.LeaseSeconds)
}
