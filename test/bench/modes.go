package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// benchRun is one run of a workload: with the command line's options, or
// with those of one of its modes (hub-fleet's, or the member workloads'
// source modes).
type benchRun struct {
	mode  string // "" when the workload runs once as the flags say
	doc   string // what the mode does
	label string // names its results file and logs
	opts  *options
}

// runsOf returns the runs of workload w: one; for hub-fleet one per mode
// of -hub-fleet-modes, each adding its flags to -agent-args; for
// member-small and member-large one per mode of -source-modes.
func (o *options) runsOf(w string) ([]benchRun, error) {
	if w == wlMemberSmall || w == wlMemberLarge {
		return o.sourceRuns(w)
	}
	if w == o.workload && strings.TrimSpace(o.sourceModes) != sourceAnnotations {
		return nil, fmt.Errorf("-source-modes: %s reads no MirrorPolicies; the source modes are member-small's and member-large's", w)
	}
	if w != wlHubFleet || strings.TrimSpace(o.hubFleetModes) == "" {
		return []benchRun{{label: w, opts: o}}, nil
	}
	var runs []benchRun
	for _, name := range strings.Split(o.hubFleetModes, ",") {
		name = strings.TrimSpace(name)
		m, ok := hubFleetModes[name]
		if !ok {
			return nil, fmt.Errorf("-hub-fleet-modes: unknown mode %q (want %s)", name, strings.Join(hubFleetModeOrder, ", "))
		}
		if slices.ContainsFunc(runs, func(r benchRun) bool { return r.mode == name }) {
			continue
		}
		mo := *o
		mo.agentArgs = strings.TrimSpace(o.agentArgs + " " + m.args)
		mo.memberKinds = o.memberKinds || m.memberKinds
		mo.receiveOnly = o.receiveOnly || m.receiveOnly
		runs = append(runs, benchRun{mode: name, doc: m.doc, label: w + "-" + name, opts: &mo})
	}
	return runs, nil
}

// sourceRuns returns a member workload's runs, one per source mode of
// -source-modes in the order given. The annotations' results keep the
// workload's name; the policies' are <workload>-policies.
func (o *options) sourceRuns(w string) ([]benchRun, error) {
	var modes []string
	for _, name := range strings.Split(o.sourceModes, ",") {
		name = strings.TrimSpace(name)
		names := []string{name}
		if name == "both" {
			names = sourceModeOrder
		} else if _, ok := sourceModeDocs[name]; !ok {
			return nil, fmt.Errorf("-source-modes: unknown mode %q (want %s or both)", name, strings.Join(sourceModeOrder, ", "))
		}
		for _, n := range names {
			if !slices.Contains(modes, n) {
				modes = append(modes, n)
			}
		}
	}
	repeat := max(o.repeat, 1)
	if len(modes) == 1 && repeat > 1 {
		return nil, fmt.Errorf("-repeat %d: repeats are compared between source modes; give -source-modes more than one", repeat)
	}
	var runs []benchRun
	// Alternating, so that the machine's drift over the runs falls on
	// every mode alike.
	for i := 1; i <= repeat; i++ {
		for _, m := range modes {
			mo := *o
			mo.sourceMode = m
			r := benchRun{mode: m, doc: sourceModeDocs[m], label: w, opts: &mo}
			if m != sourceAnnotations {
				r.label = w + "-" + m
			}
			if repeat > 1 {
				r.label += fmt.Sprintf("-%d", i)
			}
			if len(modes) == 1 && m == sourceAnnotations {
				r.mode = "" // as before source modes: no heading, no comparison
			}
			runs = append(runs, r)
		}
	}
	return runs, nil
}

// modeResult is the result of one of hub-fleet's modes.
type modeResult struct {
	mode  string
	fleet *hubFleet
}

// printModes prints, side by side, what one more registered cluster costs
// the hub in each mode: the figures the issue of discovery mode's cost
// compares (open watches, goroutines, memory, idle requests).
func printModes(w io.Writer, workload string, results []modeResult) {
	fmt.Fprintf(w, "\n== %s: per registered cluster, by mode\n", workload)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\topen watches\tgoroutines (slope)\tRSS (slope)\tlive heap (slope)\tidle requests a minute")
	for _, r := range results {
		f := r.fleet
		watches, goroutines, rss, heap, idle := "-", "-", "-", "-", "-"
		if v := f.Watches; v != nil {
			watches = fmt.Sprintf("%.1f", v.PerCluster)
			if by := v.ByResource; len(by) > 0 {
				var parts []string
				for _, res := range slices.Sorted(maps.Keys(by)) {
					parts = append(parts, fmt.Sprintf("%s %.0f", res, by[res]))
				}
				watches += " (" + strings.Join(parts, ", ") + ")"
			}
		}
		if s := f.Slope; s != nil {
			goroutines, rss, heap = fmt.Sprintf("%.1f", s.Goroutines), fmt.Sprintf("%.3f MiB", s.RSSMiB), fmt.Sprintf("%.3f MiB", s.HeapLiveMiB)
		}
		if i := f.Idle; i != nil && i.Seconds > 0 {
			idle = fmt.Sprintf("%.1f", i.RequestsPerCluster*60/i.Seconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.mode, watches, goroutines, rss, heap, idle)
	}
	_ = tw.Flush()
}

// sourceModeTolerance is issue 28's bound on how far the figures of
// mirrors driven by policies may be from the annotated ones.
const sourceModeTolerance = 0.10

// figure is one figure of a run, to compare runs by.
type figure struct {
	name   string
	value  float64
	format string // of value
	// requests are the agent's requests of a phase by "VERB resource",
	// for the figures that sum them: the comparison names what differs.
	requests counts
	// runs, min and max: for a median of several runs (medianFigures),
	// their number and range.
	runs     int
	min, max float64
	// noAgent: measured without the agent (the floor, the seed): its
	// difference between runs is the machine's, not the mode's.
	noAgent bool
	// samples and stat, for a figure of a latency distribution: its
	// samples and which of their statistics it is. Over several runs it is
	// that statistic of all their samples together (medianFigures).
	samples []float64
	stat    func(*latencies) float64
}

// figures lists the figures of a mirroring workload's result in the order
// they are printed: the floor's first (no agent runs in it: their
// difference between two runs is the machine's noise), then the agent's,
// then the agent's requests and writes per phase, the API server's own
// loopback traffic and the requests outside the REST API (the probes,
// as many as the phase is long) left out.
func figures(r *Result) []figure {
	var fs []figure
	add := func(name, format string, v float64) { fs = append(fs, figure{name: name, value: v, format: format}) }
	machine := func(name, format string, v float64) {
		fs = append(fs, figure{name: name, value: v, format: format, noAgent: true})
	}
	const secs, count, mib = "%.3fs", "%.0f", "%.1f MiB"
	// dist adds a statistic of a latency distribution.
	dist := func(name string, l *latencies, stat func(*latencies) float64, noAgent bool) {
		fs = append(fs, figure{name: name, value: stat(l), format: secs, noAgent: noAgent, samples: l.Samples, stat: stat})
	}
	if f := r.Floor; f != nil {
		machine("floor (no agent)", secs, f.Seconds)
		if u := f.Updates; u != nil && u.Count > 0 {
			dist("update floor p95 (no agent)", u, func(l *latencies) float64 { return l.P95 }, true)
		}
	}
	machine("seed (untimed setup)", "%.2fs", r.SeedSeconds)
	if c := r.Convergence; c != nil {
		add("1 initial convergence", secs, c.Seconds)
		add("  ready", secs, c.ReadySeconds)
	}
	if u := r.Updates; u != nil && u.Count > 0 {
		dist("2 update propagation p50", u, func(l *latencies) float64 { return l.P50 }, false)
		dist("  p95", u, func(l *latencies) float64 { return l.P95 }, false)
		dist("  p99", u, func(l *latencies) float64 { return l.P99 }, false)
		dist("  max", u, func(l *latencies) float64 { return l.Max }, false)
		dist("  mean", u, func(l *latencies) float64 { return l.Mean }, false)
		add("  agent writes per update", "%.2f", u.AgentWritesPerUpdate)
		add("  control-plane CPU per update", secs, u.ControlPlaneCPU)
		add("  agent CPU per update", secs, u.AgentCPU)
	}
	if n := r.NewNamespace; n != nil {
		add("3 new namespace", secs, n.Seconds)
	}
	if d := r.Deletion; d != nil {
		add("4 deletion", secs, d.Seconds)
	}
	if s := r.Resync; s != nil {
		add("5 restart: writes to Secrets/ConfigMaps", count, s.MirrorWrites)
		add("  writes with Events", count, s.Writes)
		add("  ready", secs, s.ReadySeconds)
		add("  idle", secs, s.IdleSeconds)
		add("  objects served on restart", count, s.ObjectsServed)
	}
	if p := r.NoiseProbe; p != nil {
		add("  noise probe: agent's watch events", count, p.AgentWatchEvents)
	}
	if a := r.Resources.Agent; a != nil {
		add("6 agent peak RSS", mib, a.PeakRSSMiB)
		add("  RSS at the end", mib, a.RSSMiB)
		add("  Go heap in use", mib, a.HeapInuseMiB)
		add("  goroutines", count, a.Goroutines)
		add("  agent CPU", "%.2fs", a.CPUSeconds)
	}
	if a := r.Resources.Restarted; a != nil {
		add("  restarted agent peak RSS", mib, a.PeakRSSMiB)
		add("  restarted agent CPU", "%.2fs", a.CPUSeconds)
	}
	if len(r.Phases) > 0 {
		total, _, _ := r.watchRestarts()
		add("watch restarts", count, total)
	}
	if e := r.EndState; e != nil {
		add("mirrors at the end", count, float64(e.Mirrors))
	}
	for _, p := range r.Phases {
		reqs := counts{}
		for _, c := range p.Clusters {
			for k, v := range c.Agent {
				if !apiServerOwn(k) && !strings.HasSuffix(k, " "+nonResource) {
					reqs[k] += v
				}
			}
		}
		var all, writes float64
		for k, v := range reqs {
			all += v
			if verb, _, _ := strings.Cut(k, " "); writeVerbs.Has(verb) {
				writes += v
			}
		}
		fs = append(fs, figure{name: "requests: " + p.Name, value: all, format: count, requests: reqs},
			figure{name: "  writes: " + p.Name, value: writes, format: count})
	}
	return fs
}

// comparison is one figure of two runs.
type comparison struct {
	name        string
	base, other string
	// rel is (other - base) / base; +Inf when base is 0 and other not.
	rel     float64
	noAgent bool
	// worse and better: the agent's figure is that much higher (every
	// figure is better lower) or lower than base, beyond
	// sourceModeTolerance. Never for a figure without the agent.
	worse, better bool
	// detail names the requests that differ, for the requests of a phase.
	detail string
}

// compare pairs the figures of two runs by name, in base's order; a
// figure missing from either run (a run that failed early) is left out.
func compare(base, other []figure) []comparison {
	byName := map[string]figure{}
	for _, f := range other {
		byName[f.name] = f
	}
	var out []comparison
	for _, b := range base {
		o, ok := byName[b.name]
		if !ok {
			continue
		}
		c := comparison{name: b.name, base: fmt.Sprintf(b.format, b.value), other: fmt.Sprintf(o.format, o.value), noAgent: b.noAgent}
		switch b.value {
		case o.value:
		case 0:
			c.rel = math.Inf(1)
		default:
			c.rel = (o.value - b.value) / math.Abs(b.value)
		}
		if !b.noAgent {
			c.worse, c.better = c.rel > sourceModeTolerance, c.rel < -sourceModeTolerance
		}
		if b.requests != nil || o.requests != nil {
			c.detail = formatSigned(counts(o.requests).sub(b.requests))
		}
		out = append(out, c)
	}
	return out
}

// formatSigned prints differences of counts sorted by key, with their sign.
func formatSigned(c counts) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %+.0f", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// printSourceModes prints, figure by figure, how far each source mode's
// runs are from the first mode's (annotations), and which of the agent's
// figures are worse (*) or better (+) by more than sourceModeTolerance. With more than one run of a mode (-repeat)
// each figure is the median of its runs, and the range of the runs is
// printed beside it.
func printSourceModes(w io.Writer, workload string, results []*Result) {
	var modes []string
	runs := map[string][]*Result{}
	for _, r := range results {
		if _, ok := runs[r.SourceMode]; !ok {
			modes = append(modes, r.SourceMode)
		}
		runs[r.SourceMode] = append(runs[r.SourceMode], r)
	}
	baseMode := modes[0]
	base := medianFigures(runs[baseMode])
	for _, mode := range modes[1:] {
		other := medianFigures(runs[mode])
		of := ""
		if n := len(runs[baseMode]) + len(runs[mode]); n > 2 {
			of = fmt.Sprintf("; medians of %d and %d runs, latencies of their samples pooled, [min – max] of the runs beside them", len(runs[baseMode]), len(runs[mode]))
		}
		fmt.Fprintf(w, "\n== %s: %s against %s (difference = (%s - %s) / %s, lower is better; * worse by over %.0f %%, + better by over %.0f %%%s)\n",
			workload, mode, baseMode, mode, baseMode, baseMode, sourceModeTolerance*100, sourceModeTolerance*100, of)
		for _, r := range append(slices.Clone(runs[baseMode]), runs[mode]...) {
			if r.Error != "" {
				fmt.Fprintln(w, "a run ended in an error: its missing figures are left out")
				break
			}
		}
		rows := compare(base, other)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "figure\t%s\t%s\tdifference\t\trequests that differ (agent's)\n", baseMode, mode)
		var worse, better []string
		agents := 0
		for _, c := range rows {
			diff, mark := fmt.Sprintf("%+.1f %%", c.rel*100), ""
			if math.IsInf(c.rel, 1) {
				diff = "from 0"
			}
			if !c.noAgent {
				agents++
			}
			switch {
			case c.worse:
				mark = "*"
				worse = append(worse, strings.TrimSpace(c.name))
			case c.better:
				mark = "+"
				better = append(better, strings.TrimSpace(c.name))
			}
			fmt.Fprintf(tw, "%s\t%s%s\t%s%s\t%s\t%s\t%s\n", c.name, c.base, spread(base, c.name), c.other, spread(other, c.name), diff, mark, c.detail)
		}
		_ = tw.Flush()
		fmt.Fprintf(w, "%d of the agent's %d figures worse by over %.0f %%: %s\n", len(worse), agents, sourceModeTolerance*100, strings.Join(worse, "; "))
		fmt.Fprintf(w, "%d better by over %.0f %%: %s\n", len(better), sourceModeTolerance*100, strings.Join(better, "; "))
		fmt.Fprintln(w, "note: every phase is the same in both modes (no phase changes a source's annotations, so none changes a policy); the floor and seed rows involve no agent: their difference is the machine's noise between the runs, and they are not marked.")
	}
}

// medianFigures returns the figures of runs, each the median of its values
// in the runs that have it (the mean of the middle two for an even
// number), with the range kept for printing. The requests of a phase are
// the median of each "VERB resource" alike. A statistic of a latency
// distribution is that of every run's samples pooled instead: the p99 of
// one run's 100 updates is its one or two slowest, and the median of five
// such is as noisy as any of them, where the p99 of all 500 is not.
func medianFigures(runs []*Result) []figure {
	var order []string
	byName := map[string][]figure{}
	for _, r := range runs {
		for _, f := range figures(r) {
			if _, ok := byName[f.name]; !ok {
				order = append(order, f.name)
			}
			byName[f.name] = append(byName[f.name], f)
		}
	}
	out := make([]figure, 0, len(order))
	for _, name := range order {
		fs := byName[name]
		m := fs[0]
		if len(fs) > 1 {
			values := make([]float64, len(fs))
			for i, f := range fs {
				values[i] = f.value
			}
			m.value = median(values)
			if pooled := poolSamples(fs); pooled != nil {
				m.value = m.stat(summarize(pooled))
			}
			m.min, m.max = slices.Min(values), slices.Max(values)
			m.runs = len(fs)
			if m.requests != nil {
				m.requests = counts{}
				keys := map[string]bool{}
				for _, f := range fs {
					for k := range f.requests {
						keys[k] = true
					}
				}
				for k := range keys {
					vs := make([]float64, len(fs))
					for i, f := range fs {
						vs[i] = f.requests[k]
					}
					if v := median(vs); v != 0 {
						m.requests[k] = v
					}
				}
			}
		}
		out = append(out, m)
	}
	return out
}

// poolSamples returns the samples of every figure in fs together, nil
// when a figure has none (a run from before samples were kept).
func poolSamples(fs []figure) []float64 {
	var all []float64
	for _, f := range fs {
		if f.stat == nil || len(f.samples) == 0 {
			return nil
		}
		all = append(all, f.samples...)
	}
	return all
}

// median of values, which it sorts; the mean of the middle two for an
// even number.
func median(values []float64) float64 {
	slices.Sort(values)
	n := len(values)
	if n%2 == 1 {
		return values[n/2]
	}
	return (values[n/2-1] + values[n/2]) / 2
}

// spread prints the range of the runs of figure name, for a median of
// more than one run; "" otherwise.
func spread(fs []figure, name string) string {
	for _, f := range fs {
		if f.name == name && f.runs > 1 && f.min != f.max {
			return " [" + fmt.Sprintf(f.format, f.min) + " – " + fmt.Sprintf(f.format, f.max) + "]"
		}
	}
	return ""
}

// compareFiles prints the comparison of the source modes of each workload
// from the results files of its runs (-compare-only): the runs runsOf
// lists, read from out by their labels.
func (o *options) compareFiles(workloads []string) int {
	for _, w := range workloads {
		runs, err := o.runsOf(w)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		var results []*Result
		for _, r := range runs {
			if r.opts.sourceMode == "" || r.mode == "" { // not a source mode's run
				continue
			}
			path := filepath.Join(o.out, r.label+".json")
			data, err := os.ReadFile(path) //nolint:gosec // a results file in the -out directory the user named
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				return 1
			}
			res := &Result{}
			if err := json.Unmarshal(data, res); err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", path, err)
				return 1
			}
			results = append(results, res)
		}
		if len(results) < 2 {
			fmt.Fprintf(os.Stderr, "bench: -compare-only: %s has no source modes to compare (-source-modes both)\n", w)
			return 2
		}
		printSourceModes(os.Stdout, w, results)
	}
	return 0
}
