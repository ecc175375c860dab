package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// benchRun is one run of a workload: with the command line's options, or
// with those of one of hub-fleet's modes.
type benchRun struct {
	mode  string // "" when the workload has no modes
	label string // names its results file
	opts  *options
}

// runsOf returns the runs of workload w: one, or for hub-fleet one per
// mode of -hub-fleet-modes, each adding its flags to -agent-args.
func (o *options) runsOf(w string) ([]benchRun, error) {
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
		runs = append(runs, benchRun{mode: name, label: w + "-" + name, opts: &mo})
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
