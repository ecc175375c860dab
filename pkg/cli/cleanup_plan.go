package cli

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// Writer is one of the two agents whose marks cleanup removes: what it
// writes into a cluster and how its marks are told from the other's.
type Writer struct {
	// Name is the value of --managed-by: member or hub.
	Name string
	// ManagedBy is its value of the fleetmirror.io/managed-by label on
	// its mirrors.
	ManagedBy string
	// Finalizers are those its earlier versions held on objects it does
	// not own (sources, MirrorPolicies).
	Finalizers []string
	// Remote: its part of the fleetmirror.io/status annotation is the
	// hub's (after " | remote: "), and the pull mirrors it serves name
	// CLUSTER/NS/NAME.
	Remote bool
	// KindsObject: it keeps the member kinds object (a ConfigMap in its
	// namespace), which its uninstall deletes.
	KindsObject bool
}

// Writers are the member agent and the hub, by --managed-by name.
var Writers = map[string]Writer{
	annotations.ManagedByMember: {
		Name: annotations.ManagedByMember, ManagedBy: annotations.ManagedByMember,
		Finalizers: []string{member.Finalizer, controller.PolicyFinalizer}, KindsObject: true,
	},
	annotations.ManagedByHub: {
		Name: annotations.ManagedByHub, ManagedBy: annotations.ManagedByHub,
		Finalizers: []string{hub.Finalizer}, Remote: true,
	},
}

// CleanupObject is one object cleanup changes, and what it does to it.
type CleanupObject struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Delete says why the object is deleted: a mirror proven ours, or the
	// member's kinds object; empty when it is not.
	Delete string `json:"delete,omitempty"`
	// Orphan says why a mirror proven ours is kept as a plain object
	// instead (copy-once, deletion-policy Orphan): our labels and
	// annotations are taken off, as the agents do when its source stops
	// asking for it.
	Orphan string `json:"orphan,omitempty"`
	// RemoveFinalizers are the agents' finalizers taken off it.
	RemoveFinalizers []string `json:"removeFinalizers,omitempty"`
	// Status is its fleetmirror.io/status annotation; NewStatus, set when
	// cleanup changes it, what is left of it ("" removes the annotation).
	Status    string  `json:"status,omitempty"`
	NewStatus *string `json:"newStatus,omitempty"`
	// Result is what --apply did: done, gone (deleted by someone else
	// meanwhile), "skipped: why" or "failed: error".
	Result string `json:"result,omitempty"`

	// The object as the plan was made from it, and where it is served.
	resource        schema.GroupVersionResource
	uid             types.UID
	resourceVersion string
	finalizers      []string
	// labels and annotations are the object's, for Orphan.
	labels, annotations map[string]string
}

// PlanCleanup returns what cleanup does to obj, an object of kind, for the
// writers whose marks it removes; false when nothing. It writes only what
// the writers' own uninstall would:
//
//   - a mirror is deleted only when proven a writer's, by the test the
//     agents apply before every delete (desired.Owned: the mirror label,
//     the writer's managed-by label and the source reference, and the
//     name the agent gave it: its source's or the target-name stamped on
//     it); a name never makes an object ours, nor a label alone; a copy-once mirror,
//     or one of a source with deletion-policy Orphan, is made a plain
//     object instead, as the agents do when its source lets go of it;
//   - the writers' finalizers are removed from any object, also one being
//     deleted (that is what lets it go);
//   - of the status annotation on a source, the writers' parts go, and on
//     a pull mirror the whole annotation when a writer serves it (only it
//     writes it); a mirror's annotations are left as they are;
//   - the member's kinds object is deleted, as its uninstall does, even
//     with keepMirrors.
func PlanCleanup(kind string, obj metav1.Object, writers []Writer, keepMirrors bool) (CleanupObject, bool) {
	labels, annots := obj.GetLabels(), obj.GetAnnotations()
	c := CleanupObject{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		uid: obj.GetUID(), resourceVersion: obj.GetResourceVersion(), finalizers: obj.GetFinalizers()}
	mirror := desired.IsMirror(labels)
	// An object being deleted already needs no delete, only its
	// finalizers removed.
	deleting := obj.GetDeletionTimestamp() != nil
	for _, w := range writers {
		switch ref, ok := ownedMirror(obj, w); {
		case !ok || keepMirrors || deleting:
		case desired.Kept(annots, desired.ClaimEnded):
			c.Orphan = fmt.Sprintf("mirror of %s (managed-by %s), copy-once or deletion-policy Orphan", ref, w.ManagedBy)
			c.labels, c.annotations = labels, annots
		default:
			c.Delete = fmt.Sprintf("mirror of %s (managed-by %s)", ref, w.ManagedBy)
		}
		if w.KindsObject && !deleting && kind == "ConfigMap" && obj.GetName() == clusters.MemberKindsName && labels[clusters.LabelMemberKinds] == "true" {
			c.Delete = "the member agent's kinds object"
		}
		for _, f := range obj.GetFinalizers() {
			if slices.Contains(w.Finalizers, f) && !slices.Contains(c.RemoveFinalizers, f) {
				c.RemoveFinalizers = append(c.RemoveFinalizers, f)
			}
		}
	}
	if status, ok := annots[annotations.AnnotationStatus]; ok && !mirror {
		c.Status = status
		left := statusLeft(labels, annots, status, writers)
		if left != status {
			c.NewStatus = &left
		}
	}
	return c, c.Delete != "" || c.Orphan != "" || len(c.RemoveFinalizers) > 0 || c.NewStatus != nil
}

// ownedMirror reports whether obj is a mirror written by w, and of which
// source: the test of the agents' uninstall and apply.Delete, with the
// name the agent gave it (desired.NamedAsBuilt: its source's, or the
// target-name stamped on it).
func ownedMirror(obj metav1.Object, w Writer) (string, bool) {
	ref := obj.GetAnnotations()[annotations.AnnotationSource]
	_, _, _, ok := controller.ParseSourceRef(ref)
	return ref, ok && desired.NamedAsBuilt(obj.GetName(), obj.GetAnnotations()) && desired.Owned(obj.GetLabels(), obj.GetAnnotations(), w.ManagedBy, ref)
}

// statusLeft is what is left of status once the writers' parts are gone.
// A pull mirror's status (not a source's: an object labelled as both is
// a source) is its server's alone: the member serves NS/NAME and values
// of no form, the hub CLUSTER/NS/NAME.
func statusLeft(labels, annots map[string]string, status string, writers []Writer) string {
	if labels[annotations.LabelPull] == "true" && labels[annotations.LabelEnabled] != "true" {
		ref, err := annotations.ParseMirrorFrom(annots[annotations.AnnotationMirrorFrom])
		remote := err == nil && ref.Remote()
		if slices.ContainsFunc(writers, func(w Writer) bool { return w.Remote == remote }) {
			return ""
		}
		return status
	}
	for _, w := range writers {
		status = controller.StatusWithout(status, w.Remote)
	}
	return status
}

// Action says in words what cleanup does to the object.
func (c CleanupObject) Action() string {
	var parts []string
	if c.Delete != "" {
		parts = append(parts, "delete: "+c.Delete)
	}
	if c.Orphan != "" {
		parts = append(parts, "keep as a plain object: "+c.Orphan)
	}
	if len(c.RemoveFinalizers) > 0 {
		parts = append(parts, "remove finalizer "+strings.Join(c.RemoveFinalizers, ", "))
	}
	switch {
	case c.NewStatus == nil:
	case *c.NewStatus == "":
		parts = append(parts, fmt.Sprintf("remove %s %q", annotations.AnnotationStatus, c.Status))
	default:
		parts = append(parts, fmt.Sprintf("%s %q -> %q", annotations.AnnotationStatus, c.Status, *c.NewStatus))
	}
	return strings.Join(parts, "; ")
}

// ParseWriters parses --managed-by: member, hub, or both.
func ParseWriters(names []string) ([]Writer, error) {
	var out []Writer
	for _, n := range names {
		w, ok := Writers[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("--managed-by %q: want %s, %s or both", n, annotations.ManagedByMember, annotations.ManagedByHub)
		}
		if !slices.ContainsFunc(out, func(o Writer) bool { return o.Name == w.Name }) {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--managed-by: name %s, %s or both", annotations.ManagedByMember, annotations.ManagedByHub)
	}
	return out, nil
}
