package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// slowDelay is how late a slow member answers.
const slowDelay = 5 * time.Second

// faults is the result of hub-faults: how fast updates reach the healthy
// members while one member is sick, and how fast the sick one catches up.
type faults struct {
	Sick string `json:"sick"`
	// Baseline, Hung, Slow and Outage are the times from a source update
	// until every healthy member's mirrors of it are current: without a
	// fault, with the sick member hung, answering slowDelay late, and cut
	// off.
	Baseline *latencies `json:"baseline,omitempty"`
	Hung     *latencies `json:"hung,omitempty"`
	Slow     *latencies `json:"slow,omitempty"`
	Outage   *latencies `json:"outage,omitempty"`
	// Recovered* are the times from healing a fault until every mirror in
	// the sick member is current; CatchUp is that time after the outage.
	RecoveredHung float64 `json:"recoveredHungSeconds"`
	RecoveredSlow float64 `json:"recoveredSlowSeconds"`
	OutageSeconds float64 `json:"outageSeconds"`
	CatchUp       float64 `json:"catchUpSeconds"`
	// CatchUpWrites is, per fault, the hub's writes to Secrets and
	// ConfigMaps of the sick member while it caught up, and Changed the
	// mirrors there whose source changed meanwhile: no write storm means
	// no more writes than that (fewer when some landed before the fault
	// was noticed).
	CatchUpWrites map[string]float64 `json:"catchUpWrites"`
	Changed       int                `json:"changedMirrors"`
	// Own is the last phase: a member agent's own API server's outage.
	Own *ownOutage `json:"memberOwnOutage,omitempty"`
	// Goroutines and RSSMiB are the hub's before the faults, at the end of
	// each fault, and at the end.
	Goroutines map[string]float64 `json:"goroutines"`
	RSSMiB     map[string]float64 `json:"rssMiB"`
}

func (f *faults) print(row func(name, value, detail string)) {
	lat := func(name string, l *latencies, detail string) {
		if l != nil {
			row(name, fmt.Sprintf("%.3fs / %.3fs", l.P50, l.P95), fmt.Sprintf("p50 / p95; max %.3fs over %d updates; %s", l.Max, l.Count, detail))
		}
	}
	lat("healthy members, no fault", f.Baseline, "")
	lat("healthy members, "+f.Sick+" hung", f.Hung, fmt.Sprintf("%s healed: caught up %.3fs later", f.Sick, f.RecoveredHung))
	lat("healthy members, "+f.Sick+" slow", f.Slow, fmt.Sprintf("every answer %s late; healed: caught up %.3fs later", slowDelay, f.RecoveredSlow))
	lat("healthy members, "+f.Sick+" cut off", f.Outage, "")
	if f.OutageSeconds > 0 {
		row("catch-up after the outage", fmt.Sprintf("%.3fs", f.CatchUp), fmt.Sprintf("%s cut off for %.0fs while every source changed", f.Sick, f.OutageSeconds))
	}
	for _, name := range faultNames {
		if w, ok := f.CatchUpWrites[name]; ok {
			row("  writes catching up after "+name, fmt.Sprintf("%.0f", w), fmt.Sprintf("to %s's Secrets/ConfigMaps; %d of its mirrors changed meanwhile", f.Sick, f.Changed))
		}
	}
	if f.Own != nil {
		f.Own.print(row)
	}
	if g := f.Goroutines; g != nil {
		row("hub goroutines", fmt.Sprintf("%.0f -> %.0f", g["before"], g["after"]),
			fmt.Sprintf("before the faults -> after; at the end of each fault: hung %.0f, slow %.0f, cut off %.0f", g["hang"], g["slowness"], g["outage"]))
	}
	if m := f.RSSMiB; m != nil {
		row("hub RSS", fmt.Sprintf("%.1f -> %.1f MiB", m["before"], m["after"]),
			fmt.Sprintf("at the end of each fault: hung %.1f, slow %.1f, cut off %.1f MiB", m["hang"], m["slowness"], m["outage"]))
	}
}

// faultNames are the faults of hub-faults, in order.
var faultNames = []string{"hang", "slowness", "outage"}

func (f *faults) check(check func(name, target, value string, ok bool)) {
	if f.Baseline == nil {
		return
	}
	limit := 1.5 * f.Baseline.P95
	for _, l := range []struct {
		name string
		l    *latencies
	}{{"hung", f.Hung}, {"slow", f.Slow}, {"cut off", f.Outage}} {
		if l.l != nil {
			check("healthy p95, sick member "+l.name, fmt.Sprintf("<= %.3fs (1.5 x no fault)", limit), fmt.Sprintf("%.3fs", l.l.P95), l.l.P95 <= limit)
		}
	}
	if f.OutageSeconds > 0 {
		check(fmt.Sprintf("catch-up after a %.0fs outage", f.OutageSeconds), "<= 5s", fmt.Sprintf("%.3fs", f.CatchUp), f.CatchUp <= 5)
	}
	for _, name := range faultNames {
		if w, ok := f.CatchUpWrites[name]; ok {
			// Fewer when some writes landed before the fault was noticed.
			check("writes catching up after "+name, fmt.Sprintf("<= %d changed mirrors", f.Changed), fmt.Sprintf("%.0f", w), w <= float64(f.Changed))
		}
	}
	if f.Own != nil {
		f.Own.check(check)
	}
	if g := f.Goroutines; g != nil {
		check("hub goroutines after the faults", fmt.Sprintf("<= %.0f (before) + 5", g["before"]), fmt.Sprintf("%.0f", g["after"]), g["after"] <= g["before"]+5)
	}
}

// runFaults runs hub-faults: the hub with its default deadlines and the
// members registered through fault proxies; one member is made sick in
// turn by a hang, by slowness and by an outage, while sources change.
func (b *bench) runFaults(ctx context.Context) (err error) {
	members := b.scale.Members
	b.planTargets(members)
	b.res.ExpectedMirrors = len(b.targets) * len(b.sources)
	if err := b.startFleet(members); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.stopFleet()) }()
	seedStart := time.Now()
	if err := b.seed(ctx); err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	proxies := map[string]*fleettest.FaultProxy{}
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
	}()
	for _, c := range b.tgtC {
		u, err := url.Parse(c.fc.Config.Host)
		if err != nil {
			return err
		}
		p, err := fleettest.NewFaultProxy(u.Host)
		if err != nil {
			return err
		}
		proxies[c.name] = p
		kc, err := c.fc.Kubeconfig()
		if err != nil {
			return err
		}
		if kc, err = p.Through(kc); err != nil {
			return err
		}
		if err := fleettest.RegisterPlain(ctx, b.srcC.ctrl, systemNS, c.fc, kc, nil); err != nil {
			return err
		}
	}
	b.res.SeedSeconds = time.Since(seedStart).Seconds()
	if err := b.watchAndPrepare(ctx); err != nil {
		return err
	}
	if err := b.converge(ctx); err != nil {
		return err
	}

	sick := b.tgtC[len(b.tgtC)-1]
	proxy := proxies[sick.name]
	b.groups = map[string][]*cluster{"hub": {b.srcC}, "healthy members": b.tgtC[:len(b.tgtC)-1], "sick member": {sick}}
	f := &faults{Sick: sick.name, CatchUpWrites: map[string]float64{}, Goroutines: map[string]float64{}, RSSMiB: map[string]float64{}}
	b.res.Faults = f
	goroutines := func(at string) {
		if fams, err := b.agent.scrape(ctx); err == nil {
			f.Goroutines[at] = sum(fams, "go_goroutines")
		}
		if u, err := b.agent.usage(); err == nil {
			f.RSSMiB[at] = u.RSSMiB
		}
	}
	var healthy, sickTargets []target
	for _, t := range b.targets {
		if t.cluster == sick.name {
			sickTargets = append(sickTargets, t)
		} else {
			healthy = append(healthy, t)
		}
	}
	next := 0
	// Each phase changes this many distinct sources, round-robin.
	f.Changed = min(b.scale.Updates, len(b.sources)) * len(sickTargets)
	timedUpdates := func(name string) (*latencies, error) {
		progress("%s: %d updates, %s", b.workload, b.scale.Updates, name)
		p, err := b.beginPhase(ctx, "updates, "+name)
		if err != nil {
			return nil, err
		}
		defer func() { _, _ = p.end(ctx) }()
		var lat []float64
		for range b.scale.Updates {
			s := b.sources[next%len(b.sources)]
			key := fmt.Sprintf("key-%d", (next/len(b.sources))%sourceKeys)
			next++
			s.data[key] = b.value()
			s.digest = digest(s.data)
			g := b.tracker.expect(b.want([]*source{s}, healthy))
			start := time.Now()
			if err := b.patchSource(ctx, s, key); err != nil {
				return nil, err
			}
			at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
			if err != nil {
				return nil, fmt.Errorf("%s: update of %s/%s: %w", name, s.Kind, s.Name, err)
			}
			lat = append(lat, at.Sub(start).Seconds())
		}
		l := summarize(lat)
		progress("%s: %s: healthy members p50 %.3fs p95 %.3fs max %.3fs", b.workload, name, l.P50, l.P95, l.Max)
		return l, nil
	}
	// recover heals the proxy and times the sick member's catch-up, then
	// counts the writes it took once the hub is idle.
	recover := func(name string) (float64, error) {
		goroutines(name)
		g := b.tracker.expect(b.want(b.sources, sickTargets))
		p, err := b.beginPhase(ctx, "catch-up after "+name)
		if err != nil {
			return 0, err
		}
		if err := proxy.Heal(); err != nil {
			return 0, err
		}
		healed := time.Now()
		at, err := b.tracker.wait(ctx, g, b.opts.timeout, b.agent.failed)
		if err != nil {
			return 0, fmt.Errorf("%s: catching up: %w", name, err)
		}
		secs := at.Sub(healed).Seconds()
		if _, err := b.agent.waitIdle(ctx, 0, b.opts.timeout); err != nil {
			return 0, err
		}
		ph, err := p.end(ctx)
		if err != nil {
			return 0, err
		}
		f.CatchUpWrites[name] = ph.Clusters["sick member"].Agent.writes("secrets", "configmaps")
		progress("%s: %s healed; caught up in %.3fs with %.0f writes", b.workload, name, secs, f.CatchUpWrites[name])
		return secs, nil
	}
	goroutines("before")

	if f.Baseline, err = timedUpdates("no fault"); err != nil {
		return err
	}
	proxy.Hang()
	if f.Hung, err = timedUpdates(sick.name + " hung"); err != nil {
		return err
	}
	if f.RecoveredHung, err = recover("hang"); err != nil {
		return err
	}
	proxy.Delay(slowDelay)
	if f.Slow, err = timedUpdates(sick.name + " slow"); err != nil {
		return err
	}
	if f.RecoveredSlow, err = recover("slowness"); err != nil {
		return err
	}
	proxy.Cut()
	cut := time.Now()
	if f.Outage, err = timedUpdates(sick.name + " cut off"); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(cut.Add(b.opts.outage))):
	}
	f.OutageSeconds = time.Since(cut).Seconds()
	if f.CatchUp, err = recover("outage"); err != nil {
		return err
	}
	goroutines("after")
	if f.Own, err = b.runOwnOutage(ctx); err != nil {
		return err
	}
	return b.agent.stop()
}
