// Package policy reads MirrorPolicies: what a policy asks for, as the
// annotations of a source would ask for it.
package policy

import (
	"strconv"
	"strings"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// Field paths of a policy's spec, by the annotation key each one stands
// for: problems name them.
var fields = map[string]string{
	annotations.AnnotationTargetNamespaces:        "spec.targetNamespaces",
	annotations.AnnotationTargetNamespaceSelector: "spec.targetNamespaceSelector",
	annotations.AnnotationTargetClusterSelector:   "spec.targetClusterSelector",
	annotations.AnnotationMaxTargets:              "spec.maxTargets",
	annotations.AnnotationTransform:               "spec.transform",
	annotations.AnnotationTransformStrict:         "spec.transformStrict",
}

// Annotations returns the annotations that ask, on a source, for what
// spec asks for its sources: the policy's fields under the keys of the
// annotations they stand for.
func Annotations(spec *v1alpha1.MirrorPolicySpec) map[string]string {
	a := map[string]string{annotations.AnnotationSync: "true"}
	if len(spec.TargetNamespaces) > 0 {
		a[annotations.AnnotationTargetNamespaces] = strings.Join(spec.TargetNamespaces, ",")
	}
	if spec.TargetNamespaceSelector != nil {
		a[annotations.AnnotationTargetNamespaceSelector] = *spec.TargetNamespaceSelector
	}
	if spec.TargetClusterSelector != nil {
		a[annotations.AnnotationTargetClusterSelector] = *spec.TargetClusterSelector
	}
	if spec.MaxTargets != nil {
		a[annotations.AnnotationMaxTargets] = strconv.Itoa(int(*spec.MaxTargets))
	}
	if spec.Transform != "" {
		a[annotations.AnnotationTransform] = spec.Transform
	}
	if spec.TransformStrict {
		a[annotations.AnnotationTransformStrict] = "true"
	}
	return a
}

// Request is what spec asks for each of its sources: the annotations'
// parser reads it (annotations.ParseAs), so that a policy and the same
// annotations on a source are one request, and its problems name the
// spec's fields.
func Request(spec *v1alpha1.MirrorPolicySpec) annotations.Request {
	return annotations.ParseAs(map[string]string{annotations.LabelEnabled: "true"}, Annotations(spec), fields)
}
