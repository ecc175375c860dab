package controller

import (
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// mentions decides whether a fast pass over a few namespaces may stand for
// the full reconcile: anything the plan says of them but that they are
// targets would change the source's status or Events.
func TestMentions(t *testing.T) {
	nss := []string{"new"}
	for _, tc := range []struct {
		name string
		out  targets.Outcome
		want bool
	}{
		{"a target only", targets.Outcome{Targets: []targets.Target{{Cluster: "local", Namespace: "new"}}}, false},
		{"nothing", targets.Outcome{}, false},
		{"skipped", targets.Outcome{Skipped: []string{"new"}}, true},
		{"refused", targets.Outcome{Refused: []string{"new"}}, true},
		{"missing", targets.Outcome{Missing: []string{"new"}}, true},
		{"another namespace missing", targets.Outcome{Missing: []string{"named-elsewhere"}}, false},
		{"a decision on it", targets.Outcome{Decisions: []targets.Decision{{Cluster: "local", Namespace: "new"}}}, true},
		{"a decision on another", targets.Outcome{Decisions: []targets.Decision{{Cluster: "local", Namespace: "old"}}}, false},
		{"a decision on the whole cluster", targets.Outcome{Decisions: []targets.Decision{{Cluster: "local"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mentions(tc.out, nss); got != tc.want {
				t.Errorf("mentions = %v, want %v", got, tc.want)
			}
		})
	}
}
