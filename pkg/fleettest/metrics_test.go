package fleettest_test

import (
	"strings"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// exposition is a scrape of an agent's /metrics, one family of each type.
const exposition = `# TYPE fleetmirror_sync_operations_total counter
fleetmirror_sync_operations_total{cluster="hub",result="created"} 3
fleetmirror_sync_operations_total{cluster="hub",result="unchanged"} 5
fleetmirror_sync_operations_total{cluster="member-a",result="created"} 2
# TYPE fleetmirror_cluster_up gauge
fleetmirror_cluster_up{cluster="member-a"} 1
# TYPE fleetmirror_sync_duration_seconds histogram
fleetmirror_sync_duration_seconds_bucket{cluster="hub",le="+Inf"} 7
fleetmirror_sync_duration_seconds_sum{cluster="hub"} 0.5
fleetmirror_sync_duration_seconds_count{cluster="hub"} 7
# TYPE federated untyped
federated{cluster="member-b"} 4
`

// TestMetricValues reads series as the tests do: summed over every series
// whose labels include the given pairs.
func TestMetricValues(t *testing.T) {
	fams, err := fleettest.ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		family     string
		labelPairs []string
		want       float64
		wantFound  bool
	}{
		{"every series of a counter", "fleetmirror_sync_operations_total", nil, 10, true},
		{"one label", "fleetmirror_sync_operations_total", []string{"cluster", "hub"}, 8, true},
		{"two labels", "fleetmirror_sync_operations_total", []string{"cluster", "hub", "result", "created"}, 3, true},
		{"no series with the labels", "fleetmirror_sync_operations_total", []string{"cluster", "ghost"}, 0, false},
		{"a gauge", "fleetmirror_cluster_up", []string{"cluster", "member-a"}, 1, true},
		{"a histogram counts observations", "fleetmirror_sync_duration_seconds", nil, 7, true},
		{"untyped, as /federate serves", "federated", []string{"cluster", "member-b"}, 4, true},
		{"no such family", "fleetmirror_nothing", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found := fams.Value(tc.family, tc.labelPairs...)
			if got != tc.want || found != tc.wantFound {
				t.Errorf("Value(%s, %v) = %v, %v; want %v, %v", tc.family, tc.labelPairs, got, found, tc.want, tc.wantFound)
			}
			if n := len(fams.Series(tc.family, tc.labelPairs...)); (n > 0) != tc.wantFound {
				t.Errorf("Series(%s, %v) has %d series; found %v", tc.family, tc.labelPairs, n, tc.wantFound)
			}
		})
	}
}

// TestParseMetricsRefusesGarbage: a scrape that is not the text format is
// an error, not an empty set of families that every wait would read as
// "not yet".
func TestParseMetricsRefusesGarbage(t *testing.T) {
	if fams, err := fleettest.ParseMetrics(strings.NewReader("<html>not metrics</html>\n")); err == nil {
		t.Errorf("ParseMetrics of HTML = %v, want an error", fams)
	}
}
