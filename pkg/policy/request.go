// Package policy reads MirrorPolicies: what a policy asks for, as the
// annotations of a source would ask for it.
package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
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
	annotations.AnnotationTargetName:              "spec.targetName",
	annotations.AnnotationExcludeNamespaces:       "spec.excludeNamespaces",
	annotations.AnnotationCopyOnce:                "spec.copyOnce",
	annotations.AnnotationDeletionPolicy:          "spec.deletionPolicy",
	annotations.AnnotationAdopt:                   "spec.adopt",
	annotations.AnnotationKeepAdditions:           "spec.keepAdditions",
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
	if len(spec.ExcludeNamespaces) > 0 {
		a[annotations.AnnotationExcludeNamespaces] = strings.Join(spec.ExcludeNamespaces, ",")
	}
	if spec.TargetName != "" {
		a[annotations.AnnotationTargetName] = spec.TargetName
	}
	if spec.CopyOnce {
		a[annotations.AnnotationCopyOnce] = "true"
	}
	if spec.DeletionPolicy != "" {
		a[annotations.AnnotationDeletionPolicy] = string(spec.DeletionPolicy)
	}
	if spec.KeepAdditions {
		a[annotations.AnnotationKeepAdditions] = "true"
	}
	if len(spec.Adopt) > 0 {
		a[annotations.AnnotationAdopt] = strings.Join(spec.Adopt, ",")
	}
	return a
}

// Adopt returns the tools whose copies spec's policy adopts, and what is
// wrong in spec.adopt (the CRD refuses it; an API server that did not
// check gets it here).
func Adopt(spec *v1alpha1.MirrorPolicySpec) (tools []peers.Tool, problems []string) {
	tools, problems = peers.ParseAdopt(strings.Join(spec.Adopt, ","))
	for i, p := range problems {
		problems[i] = strings.Replace(p, annotations.AnnotationAdopt, fields[annotations.AnnotationAdopt], 1)
	}
	return tools, problems
}

// Request is what spec asks for each of its sources: the annotations'
// parser reads it (annotations.ParseAs), so that a policy and the same
// annotations on a source are one request, and its problems name the
// spec's fields.
func Request(spec *v1alpha1.MirrorPolicySpec) annotations.Request {
	req := annotations.ParseAs(map[string]string{annotations.LabelEnabled: "true"}, Annotations(spec), fields)
	if req.TargetName != "" && len(spec.Source.Names) != 1 {
		// Every source would claim the one name in each target; the CRD
		// refuses this, an API server that did not check gets it here.
		req.TargetName = ""
		req.Problems = append(req.Problems, "spec.targetName: names the copies of one source; set it only with spec.source.names of one name. Mirrors keep their sources' names")
	}
	return req
}

// The patterns of spec.source's apiVersion and kind, as the CRD's schema
// states them (TestPatternsAreTheCRDs).
var (
	APIVersionPattern = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`)
	KindPattern       = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)
)

// Source returns the kind of spec's sources and, when it selects them by
// labels, the selector; names are spec.Source.Names. The CRD's schema
// refuses what would fail here; an object written before a schema change,
// or against an API server that did not check, is refused here with the
// same words.
func Source(spec *v1alpha1.MirrorPolicySpec) (schema.GroupVersionKind, labels.Selector, error) {
	gvk, err := kindOf("spec.source", spec.Source.APIVersion, spec.Source.Kind)
	if err != nil {
		return gvk, nil, err
	}
	switch {
	case (len(spec.Source.Names) > 0) == (spec.Source.Selector != nil):
		return gvk, nil, errors.New("spec.source: set exactly one of names and selector")
	case spec.Source.Selector == nil:
		return gvk, nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.Source.Selector)
	if err != nil {
		return gvk, nil, fmt.Errorf("spec.source.selector: %w", err)
	}
	if sel.Empty() {
		return gvk, nil, errors.New("spec.source.selector: an empty selector would select every object of the kind")
	}
	return gvk, sel, nil
}

// kindOf parses the apiVersion and kind of field (spec.source,
// spec.trigger), with the CRD's patterns.
func kindOf(field, apiVersion, kind string) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || !APIVersionPattern.MatchString(apiVersion) {
		return schema.GroupVersionKind{}, fmt.Errorf("%s.apiVersion: %q is not GROUP/VERSION or VERSION", field, apiVersion)
	}
	if !KindPattern.MatchString(kind) {
		return schema.GroupVersionKind{}, fmt.Errorf("%s.kind: %q is not a Kind (CamelCase, at most 63 characters)", field, kind)
	}
	return gv.WithKind(kind), nil
}

// Names reports whether p, not being deleted, names the object name of
// kind gvk with labels lbls in p's namespace (the caller's to check).
func Names(p *v1alpha1.MirrorPolicy, gvk schema.GroupVersionKind, name string, lbls map[string]string) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	want, sel, err := Source(&p.Spec)
	if err != nil || want != gvk {
		return false
	}
	return slices.Contains(p.Spec.Source.Names, name) || (sel != nil && sel.Matches(labels.Set(lbls)))
}

// First orders the policies that name one source: the first mirrors it,
// the others do not. The oldest comes first (by creation time, then name):
// a policy created later never takes a source from one that came before.
// A source labelled as one (annotations.LabelEnabled) comes before any
// policy; that is the caller's to check.
func First(ps []*v1alpha1.MirrorPolicy) (first *v1alpha1.MirrorPolicy, rest []*v1alpha1.MirrorPolicy) {
	if len(ps) == 0 {
		return nil, nil
	}
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b *v1alpha1.MirrorPolicy) int {
		if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return sorted[0], sorted[1:]
}

// Trigger returns the kind of the objects spec's trigger selects and,
// when it selects them by labels, the selector; names are
// spec.Trigger.Names. ok is false when spec has no trigger. The CRD's
// schema refuses what fails here; an API server that did not check gets
// the same words.
func Trigger(spec *v1alpha1.MirrorPolicySpec) (gvk schema.GroupVersionKind, sel labels.Selector, ok bool, err error) {
	t := spec.Trigger
	if t == nil {
		return gvk, nil, false, nil
	}
	if gvk, err = kindOf("spec.trigger", t.APIVersion, t.Kind); err != nil {
		return gvk, nil, true, err
	}
	if spec.TargetClusterSelector != nil || slices.ContainsFunc(spec.TargetNamespaces, func(e string) bool { return strings.Contains(e, "/") }) {
		return gvk, nil, true, errors.New("spec.trigger: narrows the targets of the source's own cluster: not with CLUSTER/NAMESPACE entries or spec.targetClusterSelector")
	}
	if t.Selector == nil {
		return gvk, nil, true, nil
	}
	if sel, err = metav1.LabelSelectorAsSelector(t.Selector); err != nil {
		return gvk, nil, true, fmt.Errorf("spec.trigger.selector: %w", err)
	}
	return gvk, sel, true, nil
}

// TriggerDescription says what a namespace without the trigger's objects
// lacks: "no ConfigMap named a or b labelled x=y".
func TriggerDescription(t *v1alpha1.PolicyTrigger) string {
	d := "no " + t.Kind
	if len(t.Names) > 0 {
		d += " named " + strings.Join(t.Names, " or ")
	}
	if t.Selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(t.Selector); err == nil && !sel.Empty() {
			d += " labelled " + sel.String()
		}
	}
	return d
}
