// Package desired is the third stage of the mirroring pipeline: from a source
// object and one target it builds the mirror the agent wants to exist
// (content copied, metadata stripped and stamped, content hashed). It also
// holds the ownership rules that decide whether a live object is ours. It is
// pure: no client.
package desired

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/transform"
)

// DefaultStrip lists label and annotation keys (globs over the key) that are
// never copied onto a mirror: they tie an object to the tool that deployed
// the source, and copied onto a mirror they make that tool adopt or prune it.
// The keys of the mirroring tools fleetmirror replaces are among them: on a
// mirror they would make a reflector, replicator or kubemirror still
// running beside the agent take the mirror for a source of its own
// (docs/migration.md).
var DefaultStrip = []string{
	"kubectl.kubernetes.io/last-applied-configuration",
	"meta.helm.sh/*",
	"argocd.argoproj.io/*",
	"kustomize.toolkit.fluxcd.io/*",
	"helm.toolkit.fluxcd.io/*",
	"deployment.kubernetes.io/revision",
	"reflector.v1.k8s.emberstack.com/*",
	"replicator.v1.mittwald.de/*",
	"kubemirror.raczylo.com/*",
}

// Options say how mirrors are built.
type Options struct {
	// SourceCluster names the source's cluster in the source reference.
	SourceCluster string
	// ManagedBy is the value of LabelManagedBy on mirrors.
	ManagedBy string
	// Strip lists label and annotation key globs never copied.
	Strip glob.List

	// Name is the mirror's name; "" is the source's (target-name).
	Name string
	// CopyOnce and Orphan are the source's copy-once and deletion-policy
	// Orphan: stamped on the mirror, so that what becomes of it when its
	// source stops asking is known without the source (or the policy).
	CopyOnce, Orphan bool
	// KeepAdditions is the source's keep-additions, stamped on the mirror
	// so that the writers know what of it to correct.
	KeepAdditions bool
}

// metadataOnly are the top-level fields that are not content.
var notContent = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "status": true}

// Content returns the top-level fields of obj that a mirror copies: every
// field but apiVersion, kind, metadata and status (data, binaryData, type and
// immutable for core kinds; spec and the like for others). The map shares
// its values with obj.
func Content(obj *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		if !notContent[k] {
			out[k] = v
		}
	}
	return out
}

// copied returns the keys of m that a mirror carries: all but control keys
// and those matching a strip glob.
func copied(m map[string]string, strip glob.List) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if isControlKey(k) || strip.Match(k) {
			continue
		}
		out[k] = v
	}
	return out
}

func isControlKey(k string) bool { return strings.HasPrefix(k, annotations.Prefix) }

// Hash is the content hash of a live mirror: its Content and its labels
// and annotations but the keys Build stamps. It equals the content hash
// Build stamped exactly when nothing we propagate differs and the mirror
// carries no control key besides our stamps: a mirror is never built with
// one, so any other (a source's annotations or the enabled label, added by
// hand) is drift and is reverted like any other edit.
func Hash(obj *unstructured.Unstructured) string {
	return HashWith(obj, obj.GetLabels(), obj.GetAnnotations())
}

// HashWith is Hash of obj with labels and annots for its own: the hash of
// a mirror whose content is obj's and whose metadata the API server
// answered a write with.
func HashWith(obj *unstructured.Unstructured, labels, annots map[string]string) string {
	return hashOf(Content(obj), unstamped(labels), unstamped(annots))
}

// stampedKeys are the control keys Build sets on every mirror.
var stampedKeys = map[string]bool{
	annotations.LabelMirror:                     true,
	annotations.LabelManagedBy:                  true,
	annotations.AnnotationSource:                true,
	annotations.AnnotationSourceUID:             true,
	annotations.AnnotationSourceResourceVersion: true,
	annotations.AnnotationContentHash:           true,
	annotations.AnnotationTargetName:            true,
}

func unstamped(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !stampedKeys[k] {
			out[k] = v
		}
	}
	return out
}

// SourceRef is the value of AnnotationSource: cluster/namespace/name.
func SourceRef(cluster, namespace, name string) string {
	return cluster + "/" + namespace + "/" + name
}

// Target is where one mirror goes.
type Target struct {
	Cluster   string
	Namespace string
}

// Build returns the mirror of src in target: content, labels and
// annotations copied, tr's rules applied (may be nil), then our labels,
// source reference and content hash stamped. The hash covers the
// transformed result, so an edit of the rules that changes what a target
// receives updates it. ruleErrs lists the rules that failed and were
// skipped; err says the target gets no mirror at all (a strict rule
// failure, or an object over the size limit). The result shares no memory
// with src.
func Build(src *unstructured.Unstructured, target Target, o Options, tr *annotations.Transform) (m *unstructured.Unstructured, ruleErrs []error, err error) {
	m = &unstructured.Unstructured{Object: deepCopy(Content(src))}
	m.SetAPIVersion(src.GetAPIVersion())
	m.SetKind(src.GetKind())
	m.SetName(cmp.Or(o.Name, src.GetName()))
	m.SetNamespace(target.Namespace)
	m.SetLabels(copied(src.GetLabels(), o.Strip))
	m.SetAnnotations(copied(src.GetAnnotations(), o.Strip))

	if tr != nil && tr.Rules != nil {
		ruleErrs = tr.Rules.Apply(m.Object, transform.Target{
			TargetNamespace: target.Namespace, TargetCluster: target.Cluster, TargetName: m.GetName(),
			SourceNamespace: src.GetNamespace(), SourceCluster: o.SourceCluster, SourceName: src.GetName(),
			Labels: src.GetLabels(), Annotations: src.GetAnnotations(),
		}, src.GroupVersionKind().GroupKind() == schema.GroupKind{Kind: "Secret"})
		for _, e := range ruleErrs {
			if errors.Is(e, transform.ErrObjectTooLarge) {
				return nil, ruleErrs, e
			}
		}
		if tr.Strict && len(ruleErrs) > 0 {
			return nil, ruleErrs, fmt.Errorf("transform-strict: %w", errors.Join(ruleErrs...))
		}
	}

	labels := m.GetLabels()
	annots := m.GetAnnotations()
	if labels == nil {
		labels = map[string]string{}
	}
	if annots == nil {
		annots = map[string]string{}
	}
	// The markers count in the hash like content: a policy switched to or
	// from them updates its mirrors, and a mirror without them (every
	// mirror before they existed) keeps the hash it had.
	if o.CopyOnce {
		annots[annotations.AnnotationCopyOnce] = "true"
	}
	if o.Orphan {
		annots[annotations.AnnotationDeletionPolicy] = annotations.DeletionPolicyOrphan
	}
	if o.KeepAdditions {
		annots[annotations.AnnotationKeepAdditions] = "true"
	}
	hash := hashOf(Content(m), labels, annots)
	labels[annotations.LabelMirror] = "true"
	labels[annotations.LabelManagedBy] = o.ManagedBy
	m.SetLabels(labels)
	annots[annotations.AnnotationSource] = SourceRef(o.SourceCluster, src.GetNamespace(), src.GetName())
	annots[annotations.AnnotationSourceUID] = string(src.GetUID())
	annots[annotations.AnnotationSourceResourceVersion] = src.GetResourceVersion()
	annots[annotations.AnnotationContentHash] = hash
	if m.GetName() != src.GetName() {
		annots[annotations.AnnotationTargetName] = m.GetName()
	}
	m.SetAnnotations(annots)
	return m, ruleErrs, nil
}

// NamedAsBuilt reports whether a mirror has the name Build gave it: its
// source's (the last part of its source reference) or the one stamped
// when the source asked for another (target-name). A copy of a mirror
// under a name of somebody's choosing carries our labels and source
// reference too, and is not ours.
func NamedAsBuilt(name string, annots map[string]string) bool {
	ref := annots[annotations.AnnotationSource]
	return name == ref[strings.LastIndex(ref, "/")+1:] || name == annots[annotations.AnnotationTargetName]
}

func deepCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}

// Owned reports whether obj is a mirror written by managedBy for the source
// sourceRef. Both our labels and the source reference must agree: a name
// match alone never makes an object ours.
func Owned(labels, annots map[string]string, managedBy, sourceRef string) bool {
	return labels[annotations.LabelMirror] == "true" &&
		labels[annotations.LabelManagedBy] == managedBy &&
		annots[annotations.AnnotationSource] == sourceRef
}

// Release says what becomes of a mirror whose source no longer wants it
// there.
type Release int

const (
	// Untargeted means the source asks for mirrors, not in that namespace.
	Untargeted Release = iota
	// ClaimEnded means the source exists but no longer asks for mirrors (its
	// policy was deleted or no longer names it, mirroring turned off).
	ClaimEnded
	// SourceGone means the source was deleted.
	SourceGone
)

// Kept reports whether a mirror with annotations annots is made a plain
// object instead of being deleted when released for why: a copy-once
// mirror always is (it was left to its namespace), one of a source that
// chose deletion-policy Orphan when its claim ends.
func Kept(annots map[string]string, why Release) bool {
	return annots[annotations.AnnotationCopyOnce] == "true" ||
		(why == ClaimEnded && annots[annotations.AnnotationDeletionPolicy] == annotations.DeletionPolicyOrphan)
}

// OurKeys reports whether key is one fleetmirror stamps on a mirror:
// taken off when a mirror is made a plain object.
func OurKeys(key string) bool {
	return stampedKeys[key] || key == annotations.AnnotationCopyOnce || key == annotations.AnnotationDeletionPolicy ||
		key == annotations.AnnotationKeepAdditions
}

// IsMirror reports whether an object carries the mirror label of any writer.
// A mirror is never a source.
func IsMirror(labels map[string]string) bool {
	return labels[annotations.LabelMirror] == "true"
}

// neverMirroredSecretTypes hold credentials that are bound to their own
// namespace or to a tool's bookkeeping.
var neverMirroredSecretTypes = map[string]bool{
	"kubernetes.io/service-account-token": true,
	"bootstrap.kubernetes.io/token":       true,
	"helm.sh/release.v1":                  true,
}

// Refusal says why src may never be a source, or "" when it may.
func Refusal(gvk schema.GroupVersionKind, src *unstructured.Unstructured) string {
	if IsMirror(src.GetLabels()) {
		return "it is itself a mirror"
	}
	if gvk.Group == strings.TrimSuffix(annotations.Prefix, "/") {
		// A copy of a MirrorPolicy would copy the objects of the namespace
		// it lands in out of it: a right only that namespace's editors
		// may grant (docs/security.md).
		return fmt.Sprintf("%s objects are never mirrored", gvk.Kind)
	}
	if gvk.Group == "" && gvk.Kind == "Secret" {
		if t, _, _ := unstructured.NestedString(src.Object, "type"); neverMirroredSecretTypes[t] {
			return fmt.Sprintf("Secrets of type %s are never mirrored", t)
		}
	}
	return ""
}
