package main

import (
	"strings"
	"testing"
)

func TestPoliciesFor(t *testing.T) {
	src := func(ns, kind, name string) *source { return &source{Namespace: ns, Kind: kind, Name: name} }
	for _, tc := range []struct {
		name    string
		srcs    []*source
		targets string
		// want: namespace/name kind selector targets, per policy.
		want []string
	}{
		{name: "no sources, no policy"},
		{name: "one policy per kind, however many sources", targets: "bench-*",
			srcs: []*source{src("source", kindSecret, "a"), src("source", kindConfigMap, "b"), src("source", kindSecret, "c"), src("source", kindConfigMap, "d")},
			want: []string{"source/bench-configmaps ConfigMap bench-source=true [bench-*]", "source/bench-secrets Secret bench-source=true [bench-*]"}},
		{name: "per namespace, each entry of the targets an item", targets: "*/bench-*,other",
			srcs: []*source{src("b", kindSecret, "x"), src("a", kindSecret, "y")},
			want: []string{"a/bench-secrets Secret bench-source=true [*/bench-* other]", "b/bench-secrets Secret bench-source=true [*/bench-* other]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range policiesFor(tc.srcs, tc.targets) {
				s := p.Spec.Source
				if s.APIVersion != "v1" || len(s.Names) > 0 || s.Selector == nil || len(s.Selector.MatchExpressions) > 0 {
					t.Errorf("policy %s: source %+v, want v1 selected by label alone", p.Name, s)
				}
				var sel []string
				for k, v := range s.Selector.MatchLabels {
					sel = append(sel, k+"="+v)
				}
				got = append(got, p.Namespace+"/"+p.Name+" "+s.Kind+" "+strings.Join(sel, ",")+" ["+strings.Join(p.Spec.TargetNamespaces, " ")+"]")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("policies\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
