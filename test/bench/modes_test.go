package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunsOf(t *testing.T) {
	for _, tc := range []struct {
		name, workload, modes, agentArgs string
		memberKinds                      bool
		// want: label, agent args and member kinds of each run.
		want    []string
		wantErr string
	}{
		{name: "other workloads run once", workload: wlHubFaults, modes: "two-kinds,discovery", agentArgs: "--x=1",
			want: []string{"hub-faults|--x=1|false"}},
		{name: "default modes", workload: wlHubFleet, modes: "two-kinds,discovery",
			want: []string{"hub-fleet-two-kinds||false", "hub-fleet-discovery|--resource-types=|true"}},
		{name: "agent args kept, mode's appended", workload: wlHubFleet, modes: "discovery-without-members, discovery", agentArgs: "--pprof=x",
			want: []string{"hub-fleet-discovery-without-members|--pprof=x --resource-types=|false", "hub-fleet-discovery|--pprof=x --resource-types=|true"}},
		{name: "a mode once", workload: wlHubFleet, modes: "discovery,discovery",
			want: []string{"hub-fleet-discovery|--resource-types=|true"}},
		{name: "no modes: the flags as given", workload: wlHubFleet, modes: " ", agentArgs: "--resource-types=", memberKinds: true,
			want: []string{"hub-fleet|--resource-types=|true"}},
		{name: "unknown mode", workload: wlHubFleet, modes: "two-kinds,everything", wantErr: `unknown mode "everything"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{hubFleetModes: tc.modes, agentArgs: tc.agentArgs, memberKinds: tc.memberKinds}
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
				got = append(got, strings.Join([]string{r.label, r.opts.agentArgs, map[bool]string{true: "true", false: "false"}[r.opts.memberKinds]}, "|"))
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
