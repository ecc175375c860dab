package targets

import (
	"slices"
	"strings"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// A source's own exclusions (fleetmirror.io/exclude-namespaces) take
// namespaces out of what its entries and selector match, in the member's
// cluster and the hub's alike, and say so when one is named.
func TestSourceExclusions(t *testing.T) {
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		scope       Scope
		fleet       Fleet
		want        []string // CLUSTER/NS
		refused     string   // a namespace refused, with its reason
		problem     string
	}{
		{name: "all but a name and a glob", fleet: memberFleet(),
			annotations: map[string]string{annotations.AnnotationTargetNamespaces: "all", annotations.AnnotationExcludeNamespaces: "default, team-*"},
			want:        []string{"m/app-1", "m/app-3", "m/platform"}},
		{name: "a named namespace excluded is refused", fleet: memberFleet(),
			annotations: map[string]string{annotations.AnnotationTargetNamespaces: "team-a,platform", annotations.AnnotationExcludeNamespaces: "team-a"},
			want:        []string{"m/platform"}, refused: "team-a"},
		{name: "a selected namespace excluded", fleet: memberFleet(),
			annotations: map[string]string{annotations.AnnotationTargetNamespaceSelector: "tier=web", annotations.AnnotationExcludeNamespaces: "app-*"},
			want:        []string{"m/platform", "m/team-a"}, refused: "kube-system"},
		{name: "in other clusters", fleet: hubFleet(), scope: Scope{Remote: true},
			annotations: map[string]string{annotations.AnnotationTargetNamespaces: "east/team-*", annotations.AnnotationExcludeNamespaces: "team-b"},
			want:        []string{"east/team-a"}},
		{name: "an invalid entry excludes nothing", fleet: memberFleet(),
			annotations: map[string]string{annotations.AnnotationTargetNamespaces: "team-a", annotations.AnnotationExcludeNamespaces: "Team_A"},
			want:        []string{"m/team-a"}, problem: `entry "Team_A"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := annotations.Parse(nil, tt.annotations)
			if got := strings.Join(req.Problems, "; "); !strings.Contains(got, tt.problem) || (tt.problem == "") != (got == "") {
				t.Fatalf("problems %q, want %q", got, tt.problem)
			}
			src := Source{Cluster: "m", Namespace: "src"}
			if tt.scope.Remote {
				src.Cluster = "src"
			}
			tt.scope.Explain = true
			out := Plan(req, src, tt.fleet, Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...)}, tt.scope)
			var got []string
			for _, tg := range out.Targets {
				got = append(got, tg.Cluster+"/"+tg.Namespace)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("targets %v, want %v", got, tt.want)
			}
			if tt.refused != "" && !slices.Contains(out.Refused, tt.refused) {
				t.Errorf("refused %v, want %s among them", out.Refused, tt.refused)
			}
			for _, d := range out.Decisions {
				if d.Namespace == "team-a" && tt.refused == "team-a" && !strings.Contains(d.Message, annotations.AnnotationExcludeNamespaces) {
					t.Errorf("the decision on team-a does not name the source's exclusion: %s", d.Message)
				}
			}
		})
	}
}
