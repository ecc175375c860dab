package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// A policy asks for what the same annotations ask for on a source, and
// its problems name the spec's fields, not annotation keys.
func TestRequestIsTheAnnotations(t *testing.T) {
	tests := []struct {
		name     string
		spec     v1alpha1.MirrorPolicySpec
		ann      map[string]string
		problems []string // each problem starts with one of these, in order
	}{{
		name: "targets",
		spec: v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"team-a", "app-*", "all-labeled", "prod-*/shared"}},
		ann:  map[string]string{annotations.AnnotationTargetNamespaces: "team-a,app-*,all-labeled,prod-*/shared"},
	}, {
		name: "selectors and limits",
		spec: v1alpha1.MirrorPolicySpec{TargetNamespaceSelector: ptr.To("env=prod"), TargetClusterSelector: ptr.To("region in (eu,us)"), MaxTargets: ptr.To[int32](5)},
		ann: map[string]string{annotations.AnnotationTargetNamespaceSelector: "env=prod", annotations.AnnotationTargetClusterSelector: "region in (eu,us)",
			annotations.AnnotationMaxTargets: "5"},
	}, {
		name: "an empty cluster selector selects every cluster, as the annotation",
		spec: v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"*/shared"}, TargetClusterSelector: ptr.To("")},
		ann:  map[string]string{annotations.AnnotationTargetNamespaces: "*/shared", annotations.AnnotationTargetClusterSelector: ""},
	}, {
		name: "transform",
		spec: v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"a"}, Transform: "rules:\n- path: data.x\n  value: y\n", TransformStrict: true},
		ann: map[string]string{annotations.AnnotationTargetNamespaces: "a", annotations.AnnotationTransform: "rules:\n- path: data.x\n  value: y\n",
			annotations.AnnotationTransformStrict: "true"},
	}, {
		name:     "bad entries and selectors",
		spec:     v1alpha1.MirrorPolicySpec{TargetNamespaces: []string{"ok", "Bad_Name", "a/b/c"}, TargetNamespaceSelector: ptr.To(""), TargetClusterSelector: ptr.To("x in (")},
		ann:      map[string]string{annotations.AnnotationTargetNamespaces: "ok,Bad_Name,a/b/c", annotations.AnnotationTargetNamespaceSelector: "", annotations.AnnotationTargetClusterSelector: "x in ("},
		problems: []string{"spec.targetNamespaces:", "spec.targetNamespaces:", "spec.targetClusterSelector:", "spec.targetNamespaceSelector: empty, which would select every namespace; no namespace is selected (write spec.targetNamespaces: all"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Request(&tt.spec)
			ann := map[string]string{annotations.AnnotationSync: "true"}
			for k, v := range tt.ann {
				ann[k] = v
			}
			want := annotations.Parse(map[string]string{annotations.LabelEnabled: "true"}, ann)
			if !got.Active() {
				t.Error("the request is not active")
			}
			if fmt.Sprint(got.Local, got.Remote, got.MaxTargets, got.ClusterSelector, got.NamespaceSelector) !=
				fmt.Sprint(want.Local, want.Remote, want.MaxTargets, want.ClusterSelector, want.NamespaceSelector) {
				t.Errorf("policy asks for %v %v %d %v %v; the annotations for %v %v %d %v %v", got.Local, got.Remote, got.MaxTargets, got.ClusterSelector, got.NamespaceSelector,
					want.Local, want.Remote, want.MaxTargets, want.ClusterSelector, want.NamespaceSelector)
			}
			if !reflect.DeepEqual(got.Transform, want.Transform) || (got.TransformErr == nil) != (want.TransformErr == nil) {
				t.Errorf("transform %+v (%v), want %+v (%v)", got.Transform, got.TransformErr, want.Transform, want.TransformErr)
			}
			if len(got.Problems) != len(tt.problems) || len(want.Problems) != len(tt.problems) {
				t.Fatalf("problems %q (the annotations': %q), want %d", got.Problems, want.Problems, len(tt.problems))
			}
			for i, p := range got.Problems {
				if !strings.HasPrefix(p, tt.problems[i]) {
					t.Errorf("problem %d = %q, want it to start with %q", i, p, tt.problems[i])
				}
				if strings.Contains(p, annotations.Prefix) {
					t.Errorf("problem %d = %q names an annotation", i, p)
				}
			}
		})
	}
}

// Whatever a policy holds, its request is the request of the same
// annotations, but for the names in its problems.
func FuzzRequest(f *testing.F) {
	f.Add("team-a,app-*", "env=prod", true, "region=eu", true, int32(3), "rules:\n- path: data.x\n  value: y\n", false)
	f.Add("Bad_Name,a/b/c,", "", true, "x in (", true, int32(0), "rules: [", true)
	f.Fuzz(func(t *testing.T, targets, nsSel string, hasNS bool, clSel string, hasCl bool, max int32, transform string, strict bool) {
		spec := v1alpha1.MirrorPolicySpec{Transform: transform, TransformStrict: strict}
		if targets != "" {
			spec.TargetNamespaces = strings.Split(targets, ",")
		}
		if hasNS {
			spec.TargetNamespaceSelector = &nsSel
		}
		if hasCl {
			spec.TargetClusterSelector = &clSel
		}
		if max != 0 {
			spec.MaxTargets = &max
		}
		got := Request(&spec)
		want := annotations.Parse(map[string]string{annotations.LabelEnabled: "true"}, Annotations(&spec))
		if fmt.Sprint(got.Local, got.Remote, got.MaxTargets, got.ClusterSelector, got.NamespaceSelector, len(got.Problems), got.TransformErr) !=
			fmt.Sprint(want.Local, want.Remote, want.MaxTargets, want.ClusterSelector, want.NamespaceSelector, len(want.Problems), want.TransformErr) {
			t.Errorf("policy request %+v differs from the annotations' %+v", got, want)
		}
		for _, p := range got.Problems {
			if strings.HasPrefix(p, annotations.Prefix) {
				t.Errorf("problem %q names an annotation", p)
			}
		}
	})
}
