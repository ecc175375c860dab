package main

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestRunsOf(t *testing.T) {
	for _, tc := range []struct {
		name, workload, modes, agentArgs, sourceModes string
		memberKinds                                   bool
		repeat                                        int
		// want: label, agent args, member kinds and source mode of each run.
		want    []string
		wantErr string
	}{
		{name: "other workloads run once", workload: wlHubFaults, modes: "two-kinds,discovery", agentArgs: "--x=1",
			want: []string{"hub-faults|--x=1|false|"}},
		{name: "member workloads: annotations alone by default", workload: wlMemberSmall, modes: "two-kinds", sourceModes: "annotations",
			want: []string{"member-small||false|annotations"}},
		{name: "source modes in the order given", workload: wlMemberLarge, sourceModes: "policies, annotations,policies", agentArgs: "--x=1",
			want: []string{"member-large-policies|--x=1|false|policies", "member-large|--x=1|false|annotations"}},
		{name: "both", workload: wlMemberSmall, sourceModes: "both",
			want: []string{"member-small||false|annotations", "member-small-policies||false|policies"}},
		{name: "repeats alternate the modes", workload: wlMemberSmall, sourceModes: "both", repeat: 2,
			want: []string{"member-small-1||false|annotations", "member-small-policies-1||false|policies", "member-small-2||false|annotations", "member-small-policies-2||false|policies"}},
		{name: "repeats need two modes", workload: wlMemberSmall, sourceModes: "policies", repeat: 3, wantErr: "give -source-modes more than one"},
		{name: "unknown source mode", workload: wlMemberSmall, sourceModes: "labels", wantErr: `unknown mode "labels"`},
		{name: "no policies for the hub", workload: wlHub, sourceModes: "both", wantErr: "hub reads no MirrorPolicies"},
		{name: "default modes", workload: wlHubFleet, modes: "two-kinds,discovery",
			want: []string{"hub-fleet-two-kinds||false|", "hub-fleet-discovery|--resource-types=|true|"}},
		{name: "agent args kept, mode's appended", workload: wlHubFleet, modes: "discovery-without-members, discovery", agentArgs: "--pprof=x",
			want: []string{"hub-fleet-discovery-without-members|--pprof=x --resource-types=|false|", "hub-fleet-discovery|--pprof=x --resource-types=|true|"}},
		{name: "receive-only registrations", workload: wlHubFleet, modes: "discovery-without-members,receive-only",
			want: []string{"hub-fleet-discovery-without-members|--resource-types=|false|", "hub-fleet-receive-only|--resource-types=|false||receive-only"}},
		{name: "a mode once", workload: wlHubFleet, modes: "discovery,discovery",
			want: []string{"hub-fleet-discovery|--resource-types=|true|"}},
		{name: "no modes: the flags as given", workload: wlHubFleet, modes: " ", agentArgs: "--resource-types=", memberKinds: true,
			want: []string{"hub-fleet|--resource-types=|true|"}},
		{name: "unknown mode", workload: wlHubFleet, modes: "two-kinds,everything", wantErr: `unknown mode "everything"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sourceModes == "" {
				tc.sourceModes = sourceAnnotations // the flag's default
			}
			o := &options{workload: tc.workload, hubFleetModes: tc.modes, agentArgs: tc.agentArgs, memberKinds: tc.memberKinds, sourceModes: tc.sourceModes, repeat: tc.repeat}
			runs, err := o.runsOf(tc.workload)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range runs {
				run := strings.Join([]string{r.label, r.opts.agentArgs, map[bool]string{true: "true", false: "false"}[r.opts.memberKinds], r.opts.sourceMode}, "|")
				if r.opts.receiveOnly {
					run += "|receive-only"
				}
				got = append(got, run)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("runs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if o.agentArgs != tc.agentArgs || o.memberKinds != tc.memberKinds {
				t.Error("the command line's options were changed")
			}
		})
	}
}

func TestPrintModes(t *testing.T) {
	var buf bytes.Buffer
	printModes(&buf, wlHubFleet, []modeResult{
		{mode: "two-kinds", fleet: &hubFleet{Watches: &openWatches{PerCluster: 7, ByResource: map[string]float64{"secrets": 3, "configmaps": 3, "namespaces": 1}},
			Slope: &hubSlope{RSSMiB: 0.56, Goroutines: 14.9, HeapLiveMiB: 0.2}, Idle: &idleCost{Seconds: 30, RequestsPerCluster: 3}}},
		{mode: "discovery", fleet: &hubFleet{}},
	})
	for _, want := range []string{"per registered cluster, by mode", "7.0 (configmaps 3, namespaces 1, secrets 3)", "14.9", "0.560 MiB", "6.0", "discovery"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("missing %q in\n%s", want, buf.String())
		}
	}
}

func TestCompareFigures(t *testing.T) {
	r := func(converge, p95, rss float64, converged counts) *Result {
		return &Result{
			Convergence: &convergence{Seconds: converge},
			Updates:     &latencies{Count: 1, P95: p95, AgentWritesPerUpdate: 200},
			Resources:   resources{Agent: &usage{PeakRSSMiB: rss}},
			Phases:      []*phase{{Name: "converge", Clusters: map[string]clusterCost{"cluster": {Agent: converged}}}},
		}
	}
	annotated := r(2, 0.1, 40, counts{"POST secrets": 1200, "PUT leases.coordination.k8s.io": 7, "LIST secrets": 2, "GET (non-resource)": 5})
	policies := r(2.1, 0.2, 40, counts{"POST secrets": 1200, "PATCH mirrorpolicies.fleetmirror.io/status": 2, "PUT leases.coordination.k8s.io": 9, "LIST secrets": 4})
	got := map[string]comparison{}
	for _, c := range compare(figures(annotated), figures(policies)) {
		got[strings.TrimSpace(c.name)] = c
	}
	for _, tc := range []struct {
		name, base, other, detail string
		rel                       float64
		worse, better             bool
	}{
		{name: "1 initial convergence", base: "2.000s", other: "2.100s", rel: 0.05},
		{name: "p95", base: "0.100s", other: "0.200s", rel: 1, worse: true},
		{name: "agent writes per update", base: "200.00", other: "200.00"},
		{name: "6 agent peak RSS", base: "40.0 MiB", other: "40.0 MiB"},
		// The API server's own leases and the probes are left out; what
		// differs is named.
		{name: "requests: converge", base: "1202", other: "1206", rel: 4.0 / 1202, detail: "LIST secrets +2, PATCH mirrorpolicies.fleetmirror.io/status +2"},
		{name: "writes: converge", base: "1200", other: "1202", rel: 2.0 / 1200},
		{name: "update floor p95 (no agent)"}, // no floor: left out
	} {
		c, ok := got[tc.name]
		if tc.base == "" {
			if ok {
				t.Errorf("%s: compared, want left out", tc.name)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: missing", tc.name)
			continue
		}
		if c.base != tc.base || c.other != tc.other || math.Abs(c.rel-tc.rel) > 1e-9 || c.worse != tc.worse || c.better != tc.better || c.detail != tc.detail {
			t.Errorf("%s: %+v, want base %s other %s rel %v worse %v better %v detail %q", tc.name, c, tc.base, tc.other, tc.rel, tc.worse, tc.better, tc.detail)
		}
	}

	// From zero is worse; zero to zero is no difference; lower by over
	// 10 % is better; a figure without the agent is neither.
	zero := compare([]figure{{name: "a", format: "%.0f"}, {name: "b", format: "%.0f"}, {name: "c", value: 10, format: "%.0f"}, {name: "d", value: 10, format: "%.0f", noAgent: true}},
		[]figure{{name: "a", value: 1, format: "%.0f"}, {name: "b", format: "%.0f"}, {name: "c", value: 8, format: "%.0f"}, {name: "d", value: 20, format: "%.0f", noAgent: true}})
	if !math.IsInf(zero[0].rel, 1) || !zero[0].worse || zero[1].rel != 0 || zero[1].worse || zero[1].better ||
		!zero[2].better || zero[2].worse || zero[3].worse || zero[3].better {
		t.Errorf("from zero, to zero, better, no agent: %+v", zero)
	}

	var buf bytes.Buffer
	annotated.SourceMode, policies.SourceMode = sourceAnnotations, sourcePolicies
	printSourceModes(&buf, wlMemberSmall, []*Result{annotated, policies})
	for _, want := range []string{"policies against annotations", "+100.0 %", "1 of the agent's ", "worse by over 10 %: p95"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("missing %q in\n%s", want, buf.String())
		}
	}
}

func TestMedianFigures(t *testing.T) {
	run := func(mode string, deletion float64, lists float64) *Result {
		return &Result{SourceMode: mode, Deletion: &timed{Seconds: deletion},
			Phases: []*phase{{Name: "deletion", Clusters: map[string]clusterCost{"cluster": {Agent: counts{"DELETE secrets": 100, "LIST secrets": lists}}}}}}
	}
	// Odd: the middle one; even: the mean of the middle two. A request
	// kind missing from a run counts as 0 there.
	got := map[string]figure{}
	for _, f := range medianFigures([]*Result{run(sourceAnnotations, 0.9, 0), run(sourceAnnotations, 0.4, 2), run(sourceAnnotations, 0.5, 2)}) {
		got[strings.TrimSpace(f.name)] = f
	}
	if d := got["4 deletion"]; d.value != 0.5 || d.min != 0.4 || d.max != 0.9 || d.runs != 3 {
		t.Errorf("deletion %+v, want median 0.5 of 3 in [0.4, 0.9]", d)
	}
	if r := got["requests: deletion"]; r.value != 102 || r.requests["LIST secrets"] != 2 || r.requests["DELETE secrets"] != 100 {
		t.Errorf("requests %+v, want 102 with LIST secrets 2", r)
	}
	// Latencies: the statistic of every run's samples pooled, not the
	// median of the runs' statistics (one slow update decides a run's
	// max; the median of the maxes would hide it).
	same := func(v float64, n int) []float64 { return slices.Repeat([]float64{v}, n) }
	lat := func(samples []float64) *Result { return &Result{Updates: summarize(samples)} }
	got = map[string]figure{}
	for _, f := range medianFigures([]*Result{lat(append(same(0.1, 99), 1.0)), lat(same(0.2, 100)), lat(same(0.3, 100))}) {
		got[strings.TrimSpace(f.name)] = f
	}
	if m := got["max"]; m.value != 1.0 || m.min != 0.2 || m.max != 1.0 {
		t.Errorf("max %+v, want 1.0 pooled (the runs' 1.0, 0.2, 0.3: median 0.3)", m)
	}
	if p := got["2 update propagation p50"]; p.value != 0.2 {
		t.Errorf("p50 %v, want 0.2 of the 300 samples", p.value)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", m)
	}

	// Printed: medians compared, ranges beside them, one heading per mode.
	var buf bytes.Buffer
	printSourceModes(&buf, wlMemberSmall, []*Result{
		run(sourceAnnotations, 0.5, 2), run(sourcePolicies, 0.9, 2),
		run(sourceAnnotations, 0.6, 2), run(sourcePolicies, 0.5, 2),
		run(sourceAnnotations, 0.4, 2), run(sourcePolicies, 0.52, 2),
	})
	out := buf.String()
	for _, want := range []string{"medians of 3 and 3 runs", "0.500s [0.400s – 0.600s]", "0.520s [0.500s – 0.900s]", "+4.0 %", "0 of the agent's"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "policies against annotations"); n != 1 {
		t.Errorf("%d comparisons, want 1:\n%s", n, out)
	}
}
