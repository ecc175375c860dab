package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is everything measured in one workload; it is written as JSON.
type Result struct {
	Workload string    `json:"workload"`
	Started  time.Time `json:"started"`
	Machine  machine   `json:"machine"`
	Scale    scale     `json:"scale"`
	Agent    agentInfo `json:"agent"`
	// SourceMode is how the member workloads' sources ask for their
	// mirrors (-source-modes): annotations or policies.
	SourceMode string `json:"sourceMode,omitempty"`
	// Error is set when the workload did not run to its end.
	Error string `json:"error,omitempty"`

	ExpectedMirrors int          `json:"expectedMirrors"`
	SeedSeconds     float64      `json:"seedSeconds"`
	Floor           *floor       `json:"floor,omitempty"`
	Convergence     *convergence `json:"convergence,omitempty"`
	Updates         *latencies   `json:"updates,omitempty"`
	NewNamespace    *timed       `json:"newNamespace,omitempty"`
	Deletion        *timed       `json:"deletion,omitempty"`
	Resync          *resync      `json:"resync,omitempty"`
	NoiseProbe      *noiseProbe  `json:"noiseProbe,omitempty"`
	EndState        *endState    `json:"endState,omitempty"`
	Resources       resources    `json:"resources"`
	Churn           *churn       `json:"churn,omitempty"`
	Faults          *faults      `json:"faults,omitempty"`
	Fleet           *hubFleet    `json:"fleet,omitempty"`
	Shards          *hubShards   `json:"shards,omitempty"`
	Phases          []*phase     `json:"phases"`
	// IdleRequests are the agent's requests in the idle window, by "VERB
	// resource" (member-small, member-large, hub).
	IdleRequests map[string]float64 `json:"idleRequests,omitempty"`
	Targets      []targetCheck      `json:"targets"`
	Notes        []string           `json:"notes"`
}

type machine struct {
	CPUs          int     `json:"cpus"`
	CPUModel      string  `json:"cpuModel,omitempty"`
	MemoryGiB     float64 `json:"memoryGiB"`
	OS            string  `json:"os"`
	Go            string  `json:"go"`
	KubeAPIServer string  `json:"kubeAPIServer"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg around the run: other
	// work on the machine makes the figures noisy.
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
}

type agentInfo struct {
	Binary string   `json:"binary"`
	Args   []string `json:"args"`
	Log    string   `json:"log"`
	Pprof  string   `json:"pprof,omitempty"`
}

type floor struct {
	Objects int `json:"objects"`
	Workers int `json:"workers"`
	// Seconds is when the bench's watch had seen every object, like the
	// agent's convergence; CreatedSeconds when the last create returned.
	Seconds        float64 `json:"seconds"`
	CreatedSeconds float64 `json:"createdSeconds"`
	// Ratio is the agent's convergence over the floor.
	Ratio float64 `json:"ratio"`
	// Updates is the update floor: one source's objects rewritten by the
	// plain client, timed until the bench's watch has seen them all.
	Updates *latencies `json:"updates,omitempty"`
}

type convergence struct {
	Mirrors int     `json:"mirrors"`
	Seconds float64 `json:"seconds"` // process start to the last mirror
	// ReadySeconds is process start to /readyz answering 200.
	ReadySeconds float64 `json:"readySeconds"`
	// AgentCPUSeconds is the agent's utime+stime from its start to the
	// last mirror.
	AgentCPUSeconds float64 `json:"agentCPUSeconds,omitempty"`
}

type latencies struct {
	Count            int       `json:"count"`
	MirrorsPerUpdate int       `json:"mirrorsPerUpdate"`
	P50              float64   `json:"p50"`
	P95              float64   `json:"p95"`
	P99              float64   `json:"p99"`
	Max              float64   `json:"max"`
	Mean             float64   `json:"mean"`
	Samples          []float64 `json:"samples"`
	// AgentWritesPerUpdate is the agent's writes to Secrets and ConfigMaps
	// in the phase over the number of updates; it should equal
	// MirrorsPerUpdate.
	AgentWritesPerUpdate float64 `json:"agentWritesPerUpdate"`
	// ControlPlaneCPU is the CPU seconds the API servers and their etcds
	// used per update, over the whole phase (controlPlaneCPU).
	ControlPlaneCPU float64 `json:"controlPlaneCPUPerUpdate"`
	// AgentCPU is the agent's CPU seconds per update (not for the floor).
	AgentCPU float64 `json:"agentCPUPerUpdate,omitempty"`
}

type timed struct {
	Mirrors int     `json:"mirrors"`
	Seconds float64 `json:"seconds"`
}

type resync struct {
	ReadySeconds float64 `json:"readySeconds"` // restart to /readyz
	IdleSeconds  float64 `json:"idleSeconds"`  // restart to the last reconcile
	// MirrorWrites are the agent's writes to Secrets and ConfigMaps from the
	// restart until idle, but those of its kinds object; Writes adds
	// Events and the kinds object's.
	MirrorWrites float64 `json:"mirrorWrites"`
	Writes       float64 `json:"writes"`
	// KindsObjectWrites are the writes of the member's kinds object, which
	// a new leader writes again by design.
	KindsObjectWrites float64 `json:"kindsObjectWrites"`
	// ObjectsServed is Secrets and ConfigMaps handed out by LISTs and
	// watches (all clients) while the agent filled its caches;
	// LabelledObjects is how many carry the labels the agent selects on.
	ObjectsServed   float64 `json:"objectsServed"`
	LabelledObjects int     `json:"labelledObjects"`
}

// noiseProbe counts the watch events new unlabelled Secrets and ConfigMaps
// cause while the agent runs: those its watches delivered to it (its own
// fleetmirror_watch_events_total), and, for scale, those the API server
// sent to any watcher (its own included).
type noiseProbe struct {
	Objects           int     `json:"objects"`
	ServerWatchEvents float64 `json:"serverWatchEvents"`
	AgentWatchEvents  float64 `json:"agentWatchEvents"`
}

type endState struct {
	Mirrors  int `json:"mirrors"`
	Expected int `json:"expected"`
	Extra    int `json:"extra"`
	Wrong    int `json:"wrong"`
}

type resources struct {
	// Agent is the first agent process, from start through the deletion phase.
	Agent *usage `json:"agent,omitempty"`
	// Restarted is the process started for the resync phase.
	Restarted *usage `json:"restarted,omitempty"`
}

type phase struct {
	Name     string                 `json:"name"`
	Seconds  float64                `json:"seconds"`
	Clusters map[string]clusterCost `json:"clusters"`
	// SyncOps is the agent's fleetmirror_sync_operations_total by result.
	SyncOps map[string]float64 `json:"syncOps,omitempty"`
}

type targetCheck struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Got    string `json:"got"`
	Met    bool   `json:"met"`
}

func newResult(workload string, s scale) *Result {
	return &Result{Workload: workload, Started: time.Now(), Machine: machineFacts(), Scale: s}
}

// summarize computes nearest-rank percentiles of samples, in seconds.
func summarize(samples []float64) *latencies {
	l := &latencies{Count: len(samples), Samples: samples}
	if len(samples) == 0 {
		return l
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(q float64) float64 { return s[max(0, int(math.Ceil(q*float64(len(s))))-1)] }
	l.P50, l.P95, l.P99, l.Max = rank(0.50), rank(0.95), rank(0.99), s[len(s)-1]
	var total float64
	for _, v := range s {
		total += v
	}
	l.Mean = total / float64(len(s))
	return l
}

// updateFloorNote names the update floor's p95 beside the update goal: a
// goal below it cannot be met on this machine by any writer.
func (r *Result) updateFloorNote() string {
	if r.Floor == nil || r.Floor.Updates == nil {
		return ""
	}
	return fmt.Sprintf(" (floor p95 %.3fs)", r.Floor.Updates.P95)
}

// maxFloorRatio is the fleet-scale issue's goal for the member's initial
// convergence over the floor of 16 writers.
const maxFloorRatio = 1.2

// finish records the error and compares the figures with the targets.
func (r *Result) finish(err error) {
	if err != nil {
		r.Error = err.Error()
	}
	r.Notes = append(r.Notes,
		"API cost: agent = the API server's apiserver_request_total delta minus the bench's own requests (counted by its client transport); it includes the API server's own loopback traffic (leases, endpoints), never Secrets or ConfigMaps.",
		"Mirror content is judged by comparing a digest of each mirror's data with the digest of the data last written to its source, not by the agent's content-hash annotation.",
		"WATCH requests appear in apiserver_request_total only when they end.",
	)
	check := func(name, target, got string, met bool) {
		r.Targets = append(r.Targets, targetCheck{Name: name, Target: target, Got: got, Met: met})
	}
	secs := func(v float64) string { return fmt.Sprintf("%.3fs", v) }
	mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v) }
	if c := r.Convergence; c != nil {
		switch r.Workload {
		case wlMemberSmall, wlMemberLarge:
			if r.Workload == wlMemberSmall {
				check("converge", "<= 3s", secs(c.Seconds), c.Seconds <= 3)
				if c.AgentCPUSeconds > 0 {
					// Issue 39's "CPU for the whole run" of 1,200 mirrors.
					check("agent CPU to converge", "<= 2s", secs(c.AgentCPUSeconds), c.AgentCPUSeconds <= 2)
				}
			}
			if f := r.Floor; f != nil {
				check("converge / floor", fmt.Sprintf("<= %.1f (floor of %d writers)", maxFloorRatio, f.Workers), fmt.Sprintf("%.2f", f.Ratio), f.Ratio <= maxFloorRatio)
			}
		case wlHub:
			check("converge", "<= 30s", secs(c.Seconds), c.Seconds <= 30)
		}
	}
	if r.IdleRequests != nil && r.Workload != wlHub {
		var other []string
		for k, v := range r.IdleRequests {
			// Probes, and the API server's own loopback traffic (the
			// agent runs without leader election here).
			if v > 0 && !strings.Contains(k, "(non-resource)") && !apiServerOwn(k) {
				other = append(other, fmt.Sprintf("%s=%.0f", k, v))
			}
		}
		slices.Sort(other)
		check("idle requests but probes", "0", fmt.Sprintf("%d %v", len(other), other), len(other) == 0)
	}
	if u := r.Updates; u != nil && u.Count > 0 {
		switch r.Workload {
		case wlMemberSmall:
			check("update p95", "<= 300ms"+r.updateFloorNote(), secs(u.P95), u.P95 <= 0.3)
		case wlMemberLarge:
			check("update p95", "<= 600ms"+r.updateFloorNote(), secs(u.P95), u.P95 <= 0.6)
		case wlHub:
			check("update p99", "<= 2s", secs(u.P99), u.P99 <= 2)
		}
		check("writes per update", fmt.Sprintf("= %d mirrors", u.MirrorsPerUpdate), fmt.Sprintf("%.2f", u.AgentWritesPerUpdate),
			math.Abs(u.AgentWritesPerUpdate-float64(u.MirrorsPerUpdate)) < 0.005)
	}
	if a := r.Resources.Agent; a != nil {
		limit := map[string]float64{wlMemberSmall: 50, wlMemberLarge: 100, wlHub: 150}[r.Workload]
		if limit > 0 {
			check("peak RSS", fmt.Sprintf("<= %.0f MiB", limit), mib(a.PeakRSSMiB), a.PeakRSSMiB <= limit)
		}
	}
	if s := r.Resync; s != nil {
		check("writes on resync (Secrets/ConfigMaps, the kinds object apart)", "0", fmt.Sprintf("%.0f", s.MirrorWrites), s.MirrorWrites == 0)
		if noise := float64(r.Scale.Noise); noise > 0 {
			check("no LIST/WATCH of unlabelled objects (restart)", fmt.Sprintf("served - labelled < %.0f (half the noise)", noise/2),
				fmt.Sprintf("%.0f served, %d labelled", s.ObjectsServed, s.LabelledObjects), s.ObjectsServed-float64(s.LabelledObjects) < noise/2)
		}
	}
	if r.Workload == wlMemberSmall || r.Workload == wlMemberLarge {
		total, _, _ := r.watchRestarts()
		check("watch restarts", "0", fmt.Sprintf("%.0f", total), total == 0)
	}
	if p := r.NoiseProbe; p != nil {
		check("no watch of unlabelled objects (probe)", "0 watch events to the agent", fmt.Sprintf("%.0f for %d new objects", p.AgentWatchEvents, p.Objects), p.AgentWatchEvents == 0)
	}
	if e := r.EndState; e != nil {
		check("mirrors at the end", fmt.Sprintf("%d, all current", e.Expected), fmt.Sprintf("%d (%d extra, %d stale/missing)", e.Mirrors, e.Extra, e.Wrong),
			e.Mirrors == e.Expected && e.Extra == 0 && e.Wrong == 0)
	}
	if f := r.Faults; f != nil {
		f.check(check)
	}
	if f := r.Fleet; f != nil {
		f.check(r.Updates, check)
	}
	if sh := r.Shards; sh != nil && sh.TakeoverSecs > 0 {
		sh.check(check)
	}
	if c := r.Churn; c != nil && c.After != nil && c.Before != nil {
		check("hub goroutines after churn", fmt.Sprintf("<= %.0f (before)", c.Before.Goroutines), fmt.Sprintf("%.0f", c.After.Goroutines), c.After.Goroutines <= c.Before.Goroutines)
		check("hub RSS after churn", fmt.Sprintf("<= %.1f MiB (before +10%%)", c.Before.RSSMiB*1.1), mib(c.After.RSSMiB), c.After.RSSMiB <= c.Before.RSSMiB*1.1)
	}
}

// apiServerOwn reports whether requests keyed "VERB resource" are the API
// server's own loopback traffic, which the bench cannot tell from the
// agent's: its identity lease, the kubernetes Service's endpoints and its
// service IP repair loop.
func apiServerOwn(key string) bool {
	return strings.HasSuffix(key, " endpoints") || strings.HasSuffix(key, " leases.coordination.k8s.io") || key == "LIST services"
}

// agentResources are what the agent under test watches with the bench's
// --resource-types. Restarts are summed over these alone: the API servers'
// own informers (of nodes, roles, apiservices...) restart too on a loaded
// machine, and the server-side counts cannot tell them from the agent's.
var agentResources = []string{"secrets", "configmaps", "namespaces"}

// watchRestarts sums the agent's watch restarts over every phase and
// cluster: in all, by resource and by phase.
func (r *Result) watchRestarts() (total float64, byResource, byPhase map[string]float64) {
	byResource, byPhase = map[string]float64{}, map[string]float64{}
	for _, p := range r.Phases {
		for _, c := range p.Clusters {
			for res, n := range c.Watches.Restarts {
				if !slices.Contains(agentResources, res) {
					continue
				}
				total += n
				byResource[res] += n
				byPhase[p.Name] += n
			}
		}
	}
	return total, byResource, byPhase
}

func (r *Result) write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

// print writes the readable tables.
func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\n== %s  (%s)\n", r.Workload, r.Started.Format(time.RFC3339))
	m := r.Machine
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, %s, %s, kube-apiserver %s, load %s -> %s\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.OS, m.Go, m.KubeAPIServer, m.LoadAvgStart, m.LoadAvgEnd)
	s := r.Scale
	fmt.Fprintf(w, "scale: %d namespaces, %d sources (%d values of %d bytes), %d noise, %d members, %d updates, %d cycles; %d mirrors expected\n",
		s.Namespaces, s.Sources, sourceKeys, s.ValueSize, s.Noise, s.Members, s.Updates, s.Cycles, r.ExpectedMirrors)
	fmt.Fprintf(w, "agent: %s %s\n", r.Agent.Binary, strings.Join(r.Agent.Args, " "))
	if r.SourceMode != "" {
		fmt.Fprintf(w, "sources: %s (%s)\n", r.SourceMode, sourceModeDocs[r.SourceMode])
	}
	fmt.Fprint(w, binarySizes())
	if r.Error != "" {
		fmt.Fprintf(w, "ERROR: %s\n", r.Error)
	}

	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nmeasure\tvalue\tdetail")
	row := func(name, value, detail string) { fmt.Fprintf(tw, "%s\t%s\t%s\n", name, value, detail) }
	row("seed (untimed setup)", fmt.Sprintf("%.2fs", r.SeedSeconds), "")
	if f := r.Fleet; f != nil {
		f.printSetup(row)
	}
	if f := r.Floor; f != nil {
		row("floor", fmt.Sprintf("%.3fs", f.Seconds), fmt.Sprintf("%d objects, plain client, %d writers, no rate limit, fresh API server(s); all seen by the bench's watch (creates returned at %.3fs)", f.Objects, f.Workers, f.CreatedSeconds))
		if u := f.Updates; u != nil {
			row("update floor p50 / p95 / max", fmt.Sprintf("%.3fs / %.3fs / %.3fs", u.P50, u.P95, u.Max),
				fmt.Sprintf("%d rounds: one source's %d objects rewritten (PUT) by the plain client, %d writers, until the bench's watch saw them", u.Count, u.MirrorsPerUpdate, f.Workers))
			row("  control-plane CPU per round", fmt.Sprintf("%.3fs", u.ControlPlaneCPU), "kube-apiserver and etcd, utime+stime over the rounds")
		}
	}
	if c := r.Convergence; c != nil {
		detail := fmt.Sprintf("%d mirrors; ready after %.3fs", c.Mirrors, c.ReadySeconds)
		if r.Floor != nil {
			detail += fmt.Sprintf("; %.2f x floor", r.Floor.Ratio)
		}
		if c.AgentCPUSeconds > 0 {
			detail += fmt.Sprintf("; agent CPU %.2fs", c.AgentCPUSeconds)
		}
		row("1 initial convergence", fmt.Sprintf("%.3fs", c.Seconds), detail)
	}
	if u := r.Updates; u != nil {
		row("2 update propagation p50", fmt.Sprintf("%.3fs", u.P50), fmt.Sprintf("%d updates x %d mirrors", u.Count, u.MirrorsPerUpdate))
		row("  p95 / p99 / max", fmt.Sprintf("%.3fs / %.3fs / %.3fs", u.P95, u.P99, u.Max), fmt.Sprintf("mean %.3fs", u.Mean))
		row("  agent writes per update", fmt.Sprintf("%.2f", u.AgentWritesPerUpdate), "to Secrets/ConfigMaps; should equal the mirrors per update")
		detail := "kube-apiserver and etcd of every cluster, utime+stime over the updates"
		if r.Floor != nil && r.Floor.Updates != nil && r.Floor.Updates.ControlPlaneCPU > 0 {
			detail += fmt.Sprintf("; %.2f x the update floor's", u.ControlPlaneCPU/r.Floor.Updates.ControlPlaneCPU)
		}
		row("  control-plane CPU per update", fmt.Sprintf("%.3fs", u.ControlPlaneCPU), detail)
		row("  agent CPU per update", fmt.Sprintf("%.3fs", u.AgentCPU), "utime+stime over the updates")
	}
	if n := r.NewNamespace; n != nil {
		row("3 new namespace", fmt.Sprintf("%.3fs", n.Seconds), fmt.Sprintf("%d mirrors", n.Mirrors))
	}
	if d := r.Deletion; d != nil {
		row("4 deletion", fmt.Sprintf("%.3fs", d.Seconds), fmt.Sprintf("%d mirrors gone", d.Mirrors))
	}
	if s := r.Resync; s != nil {
		row("5 restart: writes to Secrets/ConfigMaps", fmt.Sprintf("%.0f", s.MirrorWrites), fmt.Sprintf("%.0f with Events and the kinds object's %.0f; ready %.3fs, idle %.3fs after start", s.Writes, s.KindsObjectWrites, s.ReadySeconds, s.IdleSeconds))
		row("  objects served on restart", fmt.Sprintf("%.0f", s.ObjectsServed), fmt.Sprintf("Secrets+ConfigMaps by LIST/watch; %d carry the selected labels", s.LabelledObjects))
	}
	if p := r.NoiseProbe; p != nil {
		row("  noise probe: agent's watch events", fmt.Sprintf("%.0f", p.AgentWatchEvents), fmt.Sprintf("for %d new unlabelled objects, by its fleetmirror_watch_events_total (the API server sent %.0f events to all its watchers)", p.Objects, p.ServerWatchEvents))
	}
	if a := r.Resources.Agent; a != nil {
		row("6 agent peak RSS", fmt.Sprintf("%.1f MiB", a.PeakRSSMiB), fmt.Sprintf("VmHWM; at the end: RSS %.1f MiB (anon %.1f, file-backed binary pages %.1f), Go heap in use %.1f MiB, %.0f goroutines",
			a.RSSMiB, a.RSSAnonMiB, a.RSSFileMiB, a.HeapInuseMiB, a.Goroutines))
		row("  agent CPU", fmt.Sprintf("%.2fs", a.CPUSeconds), "utime+stime of the first agent process (until the restart, or the end)")
	}
	if a := r.Resources.Restarted; a != nil {
		row("  restarted agent", fmt.Sprintf("%.1f MiB", a.PeakRSSMiB), fmt.Sprintf("peak RSS; CPU %.2fs", a.CPUSeconds))
	}
	if len(r.Phases) > 0 {
		total, byRes, byPhase := r.watchRestarts()
		row("watch restarts", fmt.Sprintf("%.0f", total), fmt.Sprintf("watches of Secrets, ConfigMaps and Namespaces opened beyond the first per informer; by resource: %s; by phase: %s (table below)",
			formatCounts(byRes), formatCounts(byPhase)))
	}
	if e := r.EndState; e != nil {
		row("mirrors at the end", fmt.Sprintf("%d", e.Mirrors), fmt.Sprintf("expected %d; %d extra, %d stale or missing", e.Expected, e.Extra, e.Wrong))
	}
	if c := r.Churn; c != nil {
		c.print(row)
	}
	if f := r.Faults; f != nil {
		f.print(row)
	}
	if f := r.Fleet; f != nil {
		f.print(row)
	}
	if sh := r.Shards; sh != nil {
		sh.print(row)
	}
	_ = tw.Flush()

	if len(r.Phases) > 0 {
		fmt.Fprintln(w, "\nAPI cost by phase (agent requests = server delta - bench's own; by verb and resource)")
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "phase\tcluster\tsecs\tagent requests\tbench's own (subtracted)\tagent sync ops (all clusters)")
		for _, p := range r.Phases {
			groups := slices.SortedFunc(maps.Keys(p.Clusters), func(a, b string) int { return groupRank(a) - groupRank(b) })
			for i, g := range groups {
				c := p.Clusters[g]
				ops := ""
				if i == 0 {
					ops = formatCounts(p.SyncOps)
				}
				fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%s\n", p.Name, g, p.Seconds, formatCounts(c.Agent), formatCounts(c.Bench), ops)
			}
		}
		_ = tw.Flush()
	}

	if len(r.Phases) > 0 {
		fmt.Fprintln(w, "\nWatches by phase (the agent's, by resource: opened = ended + open at the end - open at the start, the bench's own taken out)")
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "phase\tcluster\topened\trestarts\topen at the end\tclosed by the API server as unresponsive (any client)")
		for _, p := range r.Phases {
			groups := slices.SortedFunc(maps.Keys(p.Clusters), func(a, b string) int { return groupRank(a) - groupRank(b) })
			for _, g := range groups {
				wc := p.Clusters[g].Watches
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, g, formatCounts(wc.Opened), formatCounts(wc.Restarts), formatCounts(wc.OpenAtEnd), formatCounts(wc.Unresponsive))
			}
		}
		_ = tw.Flush()
	}

	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "\nTargets of the benchmark issue")
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\ttarget\tgot\t")
		for _, t := range r.Targets {
			verdict := "met"
			if !t.Met {
				verdict = "MISSED"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Target, t.Got, verdict)
		}
		_ = tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// groupRank orders the groups of clusters in tables: where the agent runs first.
func groupRank(g string) int {
	return slices.Index([]string{"cluster", "hub", "members", "stable members", "churned member", "healthy members", "sick member"}, g)
}

// formatCounts prints counts sorted by key, zeroes left out.
func formatCounts(c map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if c[k] == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, c[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
