package annotations

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		name       string
		value      string
		wantLocal  []string
		wantRemote []string
		problems   int
	}{
		{name: "names and spaces", value: " team-a ,team-b,, team-a", wantLocal: []string{"team-a", "team-b"}},
		{name: "globs and keywords", value: "app-*, team-?, all, all-labeled", wantLocal: []string{"app-*", "team-?", "all", "all-labeled"}},
		{name: "qualified", value: "prod-*/app-*, */shared, eu-1/all-labeled", wantRemote: []string{"prod-*/app-*", "*/shared", "eu-1/all-labeled"}},
		{name: "empty cluster", value: "/shared, ok", wantLocal: []string{"ok"}, problems: 1},
		{name: "empty namespace", value: "prod/, ok", wantLocal: []string{"ok"}, problems: 1},
		{name: "two slashes", value: "a/b/c", problems: 1},
		{name: "unknown keyword", value: "all-labelled, ALL, x", wantLocal: []string{"x"}, problems: 2},
		{name: "invalid glob characters", value: "app-[ab], app_1, Team", problems: 3},
		{name: "over-long name", value: strings.Repeat("a", 64) + ",b", wantLocal: []string{"b"}, problems: 1},
		{name: "cluster may hold dots", value: "eu-1.example.com/ns", wantRemote: []string{"eu-1.example.com/ns"}},
		{name: "empty", value: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Parse(nil, map[string]string{AnnotationTargetNamespaces: tt.value})
			var local, remote []string
			for _, p := range r.Local {
				local = append(local, p.String())
			}
			for _, p := range r.Remote {
				remote = append(remote, p.String())
			}
			if strings.Join(local, ",") != strings.Join(tt.wantLocal, ",") {
				t.Errorf("local = %v, want %v", local, tt.wantLocal)
			}
			if strings.Join(remote, ",") != strings.Join(tt.wantRemote, ",") {
				t.Errorf("remote = %v, want %v", remote, tt.wantRemote)
			}
			if len(r.Problems) != tt.problems {
				t.Errorf("problems = %q, want %d", r.Problems, tt.problems)
			}
		})
	}
}

func TestParseSwitchesAndLimits(t *testing.T) {
	tests := []struct {
		name       string
		labels     map[string]string
		ann        map[string]string
		active     bool
		maxTargets int
		problems   int
		selects    map[string]string // labels the cluster selector must select, when set
		rejects    map[string]string
	}{
		{name: "active", labels: map[string]string{LabelEnabled: "true"}, ann: map[string]string{AnnotationSync: "true"}, active: true},
		{name: "no label", ann: map[string]string{AnnotationSync: "true"}},
		{name: "sync false", labels: map[string]string{LabelEnabled: "true"}, ann: map[string]string{AnnotationSync: "false"}},
		{name: "sync junk", labels: map[string]string{LabelEnabled: "true"}, ann: map[string]string{AnnotationSync: "yes"}, problems: 1},
		{name: "max targets", ann: map[string]string{AnnotationMaxTargets: " 5 "}, maxTargets: 5},
		{name: "max targets zero", ann: map[string]string{AnnotationMaxTargets: "0"}, problems: 1},
		{name: "max targets junk", ann: map[string]string{AnnotationMaxTargets: "ten"}, problems: 1},
		{name: "selector", ann: map[string]string{AnnotationTargetClusterSelector: "env=prod"},
			selects: map[string]string{"env": "prod"}, rejects: map[string]string{"env": "dev"}},
		{name: "bad selector selects nothing", ann: map[string]string{AnnotationTargetClusterSelector: "env in ("},
			problems: 1, rejects: map[string]string{"env": "prod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Parse(tt.labels, tt.ann)
			if r.Active() != tt.active {
				t.Errorf("Active() = %v, want %v", r.Active(), tt.active)
			}
			if r.MaxTargets != tt.maxTargets {
				t.Errorf("MaxTargets = %d, want %d", r.MaxTargets, tt.maxTargets)
			}
			if len(r.Problems) != tt.problems {
				t.Errorf("problems = %q, want %d", r.Problems, tt.problems)
			}
			if tt.selects != nil && !r.ClusterSelector.Matches(labelSet(tt.selects)) {
				t.Errorf("selector %v does not select %v", r.ClusterSelector, tt.selects)
			}
			if tt.rejects != nil && r.ClusterSelector.Matches(labelSet(tt.rejects)) {
				t.Errorf("selector %v selects %v", r.ClusterSelector, tt.rejects)
			}
		})
	}
}

func TestParseTransform(t *testing.T) {
	const valid = "rules:\n- {path: data.k, value: v}"
	manyRules := func(n int) string {
		var b strings.Builder
		b.WriteString("rules:\n")
		for i := range n {
			fmt.Fprintf(&b, "- {path: data.k%d, value: v}\n", i)
		}
		return b.String()
	}
	tests := []struct {
		name    string
		ann     map[string]string
		rules   bool   // a parsed Transform is expected
		strict  bool   // and its Strict
		wantErr string // TransformErr contains it; "" means none
	}{
		{name: "absent", ann: map[string]string{}},
		{name: "strict alone is no transform", ann: map[string]string{AnnotationTransformStrict: "true"}},
		{name: "valid", ann: map[string]string{AnnotationTransform: valid}, rules: true},
		{name: "strict", ann: map[string]string{AnnotationTransform: valid, AnnotationTransformStrict: "true"}, rules: true, strict: true},
		{name: "strict only when true", ann: map[string]string{AnnotationTransform: valid, AnnotationTransformStrict: "yes"}, rules: true},
		{name: "empty rules", ann: map[string]string{AnnotationTransform: ""}, rules: true},
		{name: "unknown field", ann: map[string]string{AnnotationTransform: "rules: [{path: data.k, colour: red}]"}, wantErr: "rules[0]"},
		{name: "invalid rule", ann: map[string]string{AnnotationTransform: "rules:\n- {path: data.k}"}, wantErr: "exactly one of"},
		{name: "own key reserved", ann: map[string]string{AnnotationTransform: "rules:\n- {path: metadata.labels, merge: {" + LabelMirror + ": x}}"}, wantErr: "belong to the agent"},
		{name: "rule count limit", ann: map[string]string{AnnotationTransform: manyRules(51)}, wantErr: "51 rules, over the limit of 50"},
		{name: "rule count at limit", ann: map[string]string{AnnotationTransform: manyRules(50)}, rules: true},
		{name: "size limit", ann: map[string]string{AnnotationTransform: valid + "\n#" + strings.Repeat("x", 10<<10)}, wantErr: "over the limit of 10240"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Parse(nil, tt.ann)
			if (r.Transform != nil) != tt.rules {
				t.Fatalf("Transform = %+v, want one: %v (error %v)", r.Transform, tt.rules, r.TransformErr)
			}
			if r.Transform != nil && r.Transform.Strict != tt.strict {
				t.Errorf("Strict = %v, want %v", r.Transform.Strict, tt.strict)
			}
			switch {
			case tt.wantErr == "" && r.TransformErr != nil:
				t.Errorf("TransformErr = %v, want none", r.TransformErr)
			case tt.wantErr != "" && (r.TransformErr == nil || !strings.Contains(r.TransformErr.Error(), tt.wantErr)):
				t.Errorf("TransformErr = %v, want one containing %q", r.TransformErr, tt.wantErr)
			}
			if len(r.Problems) != 0 {
				t.Errorf("problems = %q: an invalid transform is not an annotation problem", r.Problems)
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern string
		name    string
		want    bool
	}{
		{"team-a", "team-a", true},
		{"team-a", "team-ab", false},
		{"app-*", "app-", true},
		{"app-*", "app-frontend", true},
		{"app-*", "xapp-1", false},
		{"team-?", "team-1", true},
		{"team-?", "team-12", false},
		{"*", "anything", true},
		{"all", "kube-system", true},
	}
	for _, tt := range tests {
		r := Parse(nil, map[string]string{AnnotationTargetNamespaces: tt.pattern})
		if len(r.Local) != 1 {
			t.Fatalf("pattern %q did not parse: %v", tt.pattern, r.Problems)
		}
		if got := r.Local[0].Match(tt.name); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestParseNamespaceSelector(t *testing.T) {
	tests := []struct {
		name     string
		ann      map[string]string
		none     bool              // NamespaceSelector is nil
		selects  map[string]string // namespace labels it must select, when set
		rejects  map[string]string
		problem  string // the one Problem contains it; "" means none
		remote   bool   // RemoteNamespaceSelector is not nil
		entities int    // len(Local), unchanged by the selector
	}{
		{name: "absent", ann: map[string]string{}, none: true},
		{name: "equality", ann: map[string]string{AnnotationTargetNamespaceSelector: "team=payments"},
			selects: map[string]string{"team": "payments", "x": "y"}, rejects: map[string]string{"team": "web"}},
		{name: "set based", ann: map[string]string{AnnotationTargetNamespaceSelector: "env in (prod, staging), !legacy"},
			selects: map[string]string{"env": "staging"}, rejects: map[string]string{"env": "prod", "legacy": ""}},
		{name: "beside entries", ann: map[string]string{AnnotationTargetNamespaceSelector: "team", AnnotationTargetNamespaces: "a, b"},
			selects: map[string]string{"team": ""}, rejects: map[string]string{}, entities: 2},
		{name: "with a cluster selector it reaches other clusters",
			ann:     map[string]string{AnnotationTargetNamespaceSelector: "team=a", AnnotationTargetClusterSelector: "env=prod"},
			selects: map[string]string{"team": "a"}, remote: true},
		{name: "invalid selects nothing", ann: map[string]string{AnnotationTargetNamespaceSelector: "team in (a"},
			rejects: map[string]string{"team": "a"}, problem: AnnotationTargetNamespaceSelector + ": "},
		{name: "invalid value", ann: map[string]string{AnnotationTargetNamespaceSelector: "team=a b"},
			rejects: map[string]string{"team": "a b"}, problem: "no namespace is selected"},
		{name: "empty selects nothing", ann: map[string]string{AnnotationTargetNamespaceSelector: ""},
			rejects: map[string]string{}, problem: "write fleetmirror.io/target-namespaces: all to mean every namespace"},
		{name: "blank selects nothing", ann: map[string]string{AnnotationTargetNamespaceSelector: " \t"},
			rejects: map[string]string{"team": "a"}, problem: "would select every namespace"},
		{name: "invalid with a cluster selector selects nothing there either",
			ann:     map[string]string{AnnotationTargetNamespaceSelector: "=", AnnotationTargetClusterSelector: "env=prod"},
			rejects: map[string]string{}, problem: AnnotationTargetNamespaceSelector, remote: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Parse(nil, tt.ann)
			if (r.NamespaceSelector == nil) != tt.none {
				t.Fatalf("NamespaceSelector = %v, want nil: %v", r.NamespaceSelector, tt.none)
			}
			if tt.selects != nil && !r.NamespaceSelector.Matches(labelSet(tt.selects)) {
				t.Errorf("selector %v does not select %v", r.NamespaceSelector, tt.selects)
			}
			if tt.rejects != nil && r.NamespaceSelector.Matches(labelSet(tt.rejects)) {
				t.Errorf("selector %v selects %v", r.NamespaceSelector, tt.rejects)
			}
			switch {
			case tt.problem == "" && len(r.Problems) > 0:
				t.Errorf("problems = %q, want none", r.Problems)
			case tt.problem != "" && (len(r.Problems) != 1 || !strings.Contains(r.Problems[0], tt.problem)):
				t.Errorf("problems = %q, want one containing %q", r.Problems, tt.problem)
			}
			if got := r.RemoteNamespaceSelector() != nil; got != tt.remote {
				t.Errorf("RemoteNamespaceSelector() set = %v, want %v", got, tt.remote)
			}
			if len(r.Local) != tt.entities {
				t.Errorf("local entries = %v, want %d", r.Local, tt.entities)
			}
		})
	}
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// FuzzParse checks that no annotation value crashes the parser and that
// every accepted entry is a well-formed pattern.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a, b", "app-*/team-?", "*/shared", "all,all-labeled", "/x", "a/b/c", "ALL", "x[", strings.Repeat("a,", 100)} {
		f.Add(s, "3", "env in (a,b)", "team=a")
	}
	f.Add("", "", "", "")
	f.Add("a", "1", "", "team in (a, b), !legacy")
	f.Add("a", "1", "env", "team in (a")
	f.Fuzz(func(t *testing.T, targets, max, selector, nsSelector string) {
		r := Parse(map[string]string{LabelEnabled: "true"}, map[string]string{
			AnnotationSync: "true", AnnotationTargetNamespaces: targets,
			AnnotationMaxTargets: max, AnnotationTargetClusterSelector: selector,
			AnnotationTargetNamespaceSelector: nsSelector,
		})
		// A namespace selector is never absent when written, and never
		// selects every namespace: an empty one is refused.
		if r.NamespaceSelector == nil || r.NamespaceSelector.Empty() {
			t.Fatalf("namespace selector %q parsed to %v", nsSelector, r.NamespaceSelector)
		}
		// What status prints of a valid one means the same to the agent.
		if !slices.ContainsFunc(r.Problems, func(p string) bool { return strings.HasPrefix(p, AnnotationTargetNamespaceSelector) }) {
			again := Parse(nil, map[string]string{AnnotationTargetNamespaceSelector: r.NamespaceSelector.String()})
			if len(again.Problems) > 0 || again.NamespaceSelector.String() != r.NamespaceSelector.String() {
				t.Fatalf("namespace selector %q prints as %q, which parses to %v %q", nsSelector, r.NamespaceSelector, again.NamespaceSelector, again.Problems)
			}
		}
		if rs := r.RemoteNamespaceSelector(); rs != nil && r.ClusterSelector == nil {
			t.Fatalf("namespace selector %q reaches other clusters without a cluster selector", nsSelector)
		}
		for _, p := range append(r.Local, remoteNamespaces(r.Remote)...) {
			if p.Raw == "" || strings.ContainsAny(p.Raw, ",/ []\\") || !utf8.ValidString(p.Raw) {
				t.Fatalf("accepted malformed pattern %q from %q", p.Raw, targets)
			}
			p.Match("team-a") // must not panic
		}
		if r.MaxTargets < 0 {
			t.Fatalf("negative MaxTargets from %q", max)
		}
	})
}

func remoteNamespaces(rs []RemoteTarget) []Pattern {
	var out []Pattern
	for _, r := range rs {
		out = append(out, r.Cluster, r.Namespace)
	}
	return out
}
