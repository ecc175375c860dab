package targets

import (
	"slices"
	"strings"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

func ns(name string, kv ...string) Namespace {
	n := Namespace{Name: name, Labels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

func TestResolve(t *testing.T) {
	cluster := memberFleet().Clusters[0].Namespaces
	policy := Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...)}
	tests := []struct {
		name    string
		targets string
		policy  Policy
		limit   int
		want    string
		skipped string
		refused string
		missing string
	}{
		{name: "names", targets: "team-a, team-b", policy: policy, want: "team-a,team-b"},
		{name: "source namespace is never a target", targets: "platform, team-a", policy: policy, want: "team-a"},
		{name: "glob", targets: "team-?", policy: policy, want: "team-a,team-b"},
		{name: "all skips excluded, opted out, terminating, source", targets: "all", policy: policy,
			want: "app-1,app-3,default,team-a,team-b,team-cc"},
		{name: "all-labeled", targets: "all-labeled", policy: policy, want: "app-1"},
		{name: "named excluded is refused", targets: "kube-system, team-a", policy: policy, want: "team-a", refused: "kube-system"},
		{name: "named opted out is refused", targets: "app-2", policy: policy, refused: "app-2"},
		{name: "named missing", targets: "nope, app-4", policy: policy, missing: "app-4,nope"},
		{name: "glob never reaches excluded", targets: "kube-*", policy: policy},
		{name: "included limits", targets: "all", policy: Policy{Included: glob.MustParseList("team-*")}, want: "team-a,team-b,team-cc"},
		{name: "limit keeps sort order", targets: "team-cc, app-*, team-a", policy: policy, limit: 2,
			want: "app-1,app-3", skipped: "team-a,team-cc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := annotations.Parse(nil, map[string]string{annotations.AnnotationTargetNamespaces: tt.targets})
			if len(req.Problems) > 0 {
				t.Fatalf("bad test input: %v", req.Problems)
			}
			got := Resolve(req.Local, "platform", slices.Clone(cluster), tt.policy, tt.limit)
			check := func(what string, got []string, want string) {
				if g := strings.Join(got, ","); g != want {
					t.Errorf("%s = %q, want %q", what, g, want)
				}
			}
			check("namespaces", got.Namespaces, tt.want)
			check("skipped", got.Skipped, tt.skipped)
			check("refused", got.Refused, tt.refused)
			check("missing", got.Missing, tt.missing)
		})
	}
}

func TestResolveIsDeterministicUnderLimit(t *testing.T) {
	var many []Namespace
	for _, c := range "zyxwvutsrqponmlkjihgfedcba" {
		many = append(many, ns("ns-"+string(c)))
	}
	req := annotations.Parse(nil, map[string]string{annotations.AnnotationTargetNamespaces: "all"})
	first := Resolve(req.Local, "", many, Policy{}, 5)
	for i := 0; i < 20; i++ {
		slices.Reverse(many)
		if got := Resolve(req.Local, "", many, Policy{}, 5); !slices.Equal(got.Namespaces, first.Namespaces) {
			t.Fatalf("run %d chose %v, first run chose %v", i, got.Namespaces, first.Namespaces)
		}
	}
	if want := []string{"ns-a", "ns-b", "ns-c", "ns-d", "ns-e"}; !slices.Equal(first.Namespaces, want) {
		t.Fatalf("chose %v, want %v", first.Namespaces, want)
	}
	if len(first.Skipped) != 21 {
		t.Fatalf("skipped %d, want 21", len(first.Skipped))
	}
}

func TestPolicyLimit(t *testing.T) {
	for _, tt := range []struct{ global, perSource, want int }{
		{100, 0, 100}, {100, 5, 5}, {100, 500, 100}, {0, 7, 7}, {0, 0, 0},
	} {
		if got := (Policy{MaxTargets: tt.global}).Limit(tt.perSource); got != tt.want {
			t.Errorf("Limit(global %d, source %d) = %d, want %d", tt.global, tt.perSource, got, tt.want)
		}
	}
}

// globMatch is an independent reference for * and ? matching.
func globMatch(p, s string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatch(p[1:], s[1:])
	default:
		return s != "" && s[0] == p[0] && globMatch(p[1:], s[1:])
	}
}

// FuzzGlobMatch checks accepted namespace globs against the reference matcher.
func FuzzGlobMatch(f *testing.F) {
	for _, s := range [][2]string{{"app-*", "app-1"}, {"team-?", "team-a"}, {"*-*", "a-b"}, {"a*b*c", "abbbc"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		req := annotations.Parse(nil, map[string]string{annotations.AnnotationTargetNamespaces: pattern})
		if len(req.Local) != 1 || req.Local[0].Kind != annotations.Glob {
			return
		}
		p := req.Local[0]
		if len(name) > 63 || strings.ContainsAny(name, "*?[]\\/") || strings.IndexFunc(name, func(r rune) bool { return r >= 0x80 }) >= 0 {
			return // namespace names are short ASCII; the reference counts bytes
		}
		if got, want := p.Match(name), globMatch(p.Raw, name); got != want {
			t.Fatalf("%q.Match(%q) = %v, reference says %v", p.Raw, name, got, want)
		}
	})
}
