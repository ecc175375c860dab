package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// adoptOrRefuse decides about full, the object holding want's name, which refused
// (a *ConflictError) says is not ours. When the source asks for the copies
// of tools to be adopted and full proves to be one of them (Adoptable), a
// single write turns it into our mirror: want, with full's resourceVersion
// as precondition; for a copy-once want, full is that copy, made already,
// and nothing is written (Unchanged). Anything else stays the conflict,
// with the reason it was not adopted.
func (a *Applier) adoptOrRefuse(ctx context.Context, key target, res *clusters.Objects, full, want *unstructured.Unstructured, sourceVerified bool, tools []peers.Tool, refused error) (Outcome, error) {
	var ce *ConflictError
	if len(tools) == 0 || !errors.As(refused, &ce) {
		return Conflict, refused
	}
	for attempt := 0; ; attempt++ {
		tool, why := Adoptable(key.cluster, full, want, tools)
		if tool == "" {
			// ce is fresh from checkOwner: setting why changes no memo.
			ce.NotAdopted = why
			return Conflict, ce
		}
		if want.GetAnnotations()[annotations.AnnotationCopyOnce] == "true" {
			// A copy made once is its namespace's: the tool's copy of
			// this very source is that copy, made already. It is left as
			// it is, and counted (the caller records it as made).
			logf.FromContext(ctx).Info("Counted a copy made by another tool as this copy-once source's copy", "tool", tool,
				"targetNamespace", full.GetNamespace(), "uid", full.GetUID())
			return Unchanged, nil
		}
		out, err := a.takeOver(ctx, key, res, full, want)
		if err == nil {
			logf.FromContext(ctx).Info("Adopted a copy made by another tool as a mirror", "tool", tool,
				"targetNamespace", full.GetNamespace(), "uid", full.GetUID())
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return out, err
		}
		// The copy changed since it was read (its tool may have written
		// it again): read it and decide once more.
		if full, err = res.Get(ctx, want.GetName(), metav1.GetOptions{}); err != nil {
			return Failed, ignoreNotFoundAsRetry(err)
		}
		err = a.checkOwner(full, want)
		if err == nil {
			return a.reconcileLive(ctx, key, res, full, want, sourceVerified, nil)
		}
		if !errors.As(err, &ce) {
			return Conflict, err
		}
	}
}

// Adoptable returns the tool among tools that made full, an object holding
// the name of want (a mirror built by desired.Build) that is not ours, as a
// copy of want's source and that Ensure adopts; or "" and why Ensure does
// not adopt it ("" when full is a fleetmirror mirror: the conflict says
// whose). cluster is where full lives. Tools that report on mirrors (the
// kubectl plugin) use it to say what Ensure will do.
func Adoptable(cluster string, full, want *unstructured.Unstructured, tools []peers.Tool) (peers.Tool, string) {
	l, a := full.GetLabels(), full.GetAnnotations()
	switch {
	case desired.IsMirror(l):
		// Another source's or the other writer's, as the conflict says:
		// adopting it would take it from its owner.
		return "", ""
	case l[annotations.LabelEnabled] == "true" && a[annotations.AnnotationSync] == "true":
		// Overwritten, its own mirrors would be left without a source.
		return "", "it is a fleetmirror source itself"
	case full.GetDeletionTimestamp() != nil:
		return "", "it is being deleted"
	case len(full.GetFinalizers()) > 0:
		// Our write would remove them, which only their owners may do.
		return "", fmt.Sprintf("it has finalizers (%s)", strings.Join(full.GetFinalizers(), ", "))
	}
	srcCluster, origin := originOf(want)
	if srcCluster != cluster {
		// The other tools copy within one cluster: whatever source their
		// copy names lives here, not in the source's cluster. Only what
		// fleetmirror released may come from another cluster.
		within := fmt.Sprintf("the other tools copy within one cluster, and the source is in cluster %s", srcCluster)
		tools = slices.DeleteFunc(slices.Clone(tools), func(t peers.Tool) bool { return !t.AcrossClusters() })
		if len(tools) == 0 {
			return "", within
		}
		tool, why := peers.Prove(tools, full, origin)
		if tool == "" {
			why += "; " + within
		}
		return tool, why
	}
	return peers.Prove(tools, full, origin)
}

// originOf reads the source want was built from off the stamps desired.Build
// put on it: its cluster, and what a copy records of it.
func originOf(want *unstructured.Unstructured) (cluster string, o peers.Origin) {
	a := want.GetAnnotations()
	// cluster/namespace/name: no part of it holds a '/'.
	ref := strings.Split(a[annotations.AnnotationSource], "/")
	if len(ref) != 3 {
		return "", peers.Origin{}
	}
	return ref[0], peers.Origin{
		Namespace:       ref[1],
		Name:            ref[2],
		UID:             types.UID(a[annotations.AnnotationSourceUID]),
		ResourceVersion: a[annotations.AnnotationSourceResourceVersion],
		Ref:             a[annotations.AnnotationSource],
	}
}

// takeOver writes want over full, a copy proven adoptable, in one update
// whose precondition is full's resourceVersion: our labels, the source
// reference, the content. Labels, annotations and owner references are
// replaced, so the other tool's marks go. The update also resets
// managedFields, so that the other writers' entries go too and the mirror
// reads as one we created (serverAdditionsOnly). A copy that cannot be
// updated in place (immutable, another Secret type) is replaced, deleted
// on the same precondition.
func (a *Applier) takeOver(ctx context.Context, key target, res *clusters.Objects, full, want *unstructured.Unstructured) (Outcome, error) {
	if secretType, immutable := clusters.Traits(full); needsReplace(secretType, immutable, want) {
		if _, err := a.replace(ctx, key, res, full, want); err != nil {
			return Failed, err
		}
		return Adopted, nil
	}
	obj := want.DeepCopy()
	obj.SetResourceVersion(full.GetResourceVersion())
	// One empty entry is the API's way to clear managedFields; the fields
	// of this write are then owned by FieldManager alone.
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{}})
	got, err := res.UpdateMeta(ctx, obj, metav1.UpdateOptions{FieldManager: a.FieldManager})
	if err != nil {
		return Failed, err
	}
	a.remember(key, got, want.GetAnnotations()[annotations.AnnotationContentHash])
	return Adopted, nil
}
