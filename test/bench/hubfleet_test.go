package main

import (
	"maps"
	"math"
	"slices"
	"testing"
)

func TestFleetSteps(t *testing.T) {
	for _, tc := range []struct {
		members int
		want    []int
	}{
		{1, []int{0, 1}},
		{2, []int{0, 1, 2}},
		{3, []int{0, 1, 3}},
		{10, []int{0, 2, 5, 10}},
		{100, []int{0, 25, 50, 100}},
	} {
		if got := fleetSteps(tc.members); !slices.Equal(got, tc.want) {
			t.Errorf("fleetSteps(%d) = %v, want %v", tc.members, got, tc.want)
		}
	}
}

func TestLeastSquaresSlope(t *testing.T) {
	for _, tc := range []struct {
		name string
		x, y []float64
		want float64
	}{
		{"line", []float64{0, 25, 50, 100}, []float64{40, 45, 50, 60}, 0.2},
		{"flat", []float64{0, 1, 2}, []float64{7, 7, 7}, 0},
		{"noisy", []float64{0, 1, 2, 3}, []float64{0, 2, 1, 3}, 0.8},
		{"one x", []float64{5, 5}, []float64{1, 3}, 0},
	} {
		if got := leastSquaresSlope(tc.x, tc.y); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: slope %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseFamilies(t *testing.T) {
	text := []byte(`# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests.
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{resource="secrets",verb="WATCH"} 2
apiserver_longrunning_requests{resource="pods",verb="WATCH"} 1
# HELP apiserver_longrunning_requests_other Not the family asked for.
# TYPE apiserver_longrunning_requests_other gauge
apiserver_longrunning_requests_other 9
# HELP rest_latency Latency.
# TYPE rest_latency histogram
rest_latency_bucket{le="1"} 3
rest_latency_bucket{le="+Inf"} 4
rest_latency_sum 2.5
rest_latency_count 4
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1e+08
`)
	fams, err := parseFamilies(text, "apiserver_longrunning_requests", "rest_latency")
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 2 {
		t.Errorf("families %v, want apiserver_longrunning_requests and rest_latency", slices.Sorted(maps.Keys(fams)))
	}
	if v, _ := fams.Value("apiserver_longrunning_requests", "verb", "WATCH"); v != 3 {
		t.Errorf("open watches %v, want 3", v)
	}
	if v, _ := fams.Value("rest_latency"); v != 4 {
		t.Errorf("histogram observations %v, want 4", v)
	}
}

func TestHeapProfilerOff(t *testing.T) {
	for _, c := range []struct {
		godebug string
		want    []string
	}{
		{"", []string{"GODEBUG=memprofilerate=0"}},
		{"gctrace=1", []string{"GODEBUG=gctrace=1,memprofilerate=0"}},
		{"memprofilerate=4096", nil}, // a rate of the bench user's own wins
		{"gctrace=1,memprofilerate=1", nil},
	} {
		if got := heapProfilerOff(c.godebug); !slices.Equal(got, c.want) {
			t.Errorf("heapProfilerOff(%q) = %q, want %q", c.godebug, got, c.want)
		}
	}
}
