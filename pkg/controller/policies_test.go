package controller

import (
	"strings"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// TestSpecProblems: what the parser finds wrong in a policy's spec names
// the field, invalid transform rules first and marked as stopping all
// mirroring; a valid spec has nothing to say.
func TestSpecProblems(t *testing.T) {
	for _, tt := range []struct {
		name      string
		spec      v1alpha1.MirrorPolicySpec
		want      []string // substrings of the problems, in order
		transform bool
	}{
		{name: "valid", spec: v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"a", "team-*"}}},
		{name: "a bad entry beside a good one", spec: v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"a", "Not_A_Namespace"}},
			want: []string{`spec.targetNamespaces: entry "Not_A_Namespace"`}},
		{name: "a bad namespace selector", spec: v1alpha1.MirrorPolicySpec{TargetNamespaceSelector: new("team in (")},
			want: []string{"spec.targetNamespaceSelector"}},
		{name: "a bad cluster selector", spec: v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"*/a"}, TargetClusterSelector: new("env in (")},
			want: []string{"spec.targetClusterSelector"}},
		{name: "bad rules first", spec: v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"Bad_One"}, Transform: "this is not a rule"},
			want: []string{"spec.transform", "spec.targetNamespaces"}, transform: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := specProblems(&tt.spec)
			if got.transform != tt.transform {
				t.Errorf("transform = %v, want %v", got.transform, tt.transform)
			}
			if len(got.problems) != len(tt.want) {
				t.Fatalf("problems = %q, want %d", got.problems, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got.problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got.problems[i], w)
				}
			}
		})
	}
}
