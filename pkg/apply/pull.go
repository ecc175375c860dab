package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// Pull mirrors are the one kind of object the Applier writes without owning
// it: their namespace's owner created them and asked for a source's content
// (LabelPull, AnnotationMirrorFrom), and the source's owner allowed it
// (AnnotationAllowPullInto). The Applier writes only that content, with
// server-side apply under a field manager of its own, so that managedFields
// show which fields came from the source and the owner's other fields are
// never touched; it never creates, replaces or deletes a pull mirror.

// PullFieldManagerSuffix is appended to the writer's field manager to name
// its pull writes: "fleetmirror-member-pull", "fleetmirror-hub-pull". A
// manager of their own keeps the content's fields apart from the status
// annotation, which the writer's own manager patches: an apply that left
// out fields it applied before would remove them.
const PullFieldManagerSuffix = "-pull"

// PullFieldManager names the pull writes of the Applier's writer.
func (a *Applier) PullFieldManager() string { return a.FieldManager + PullFieldManagerSuffix }

// PullConflictError says that fields of the content are managed by someone
// else with other values. They are not taken over: the pull mirror's owner
// decides whether to drop them from their own manifests.
type PullConflictError struct {
	// Fields describe each conflict as the API server reported it: the
	// field path and its manager.
	Fields []string
}

func (e *PullConflictError) Error() string {
	return "fields managed by others hold other values: " + strings.Join(e.Fields, "; ")
}

// ErrPullStale says the pull mirror changed or went away after the cached
// version was read; the cache brings the new version, and with it another
// look.
var ErrPullStale = errors.New("the pull mirror changed since it was read")

// PullInSync reports whether the pull mirror live holds content, whose
// hash (desired.PullHash) is hash: the hash of our last write is hash, and
// every field of content is there with its value. Fields the API server
// defaulted or others added are no difference; fields we wrote that
// content no longer has are, through the hash, and the next write removes
// them.
func PullInSync(live *unstructured.Unstructured, content map[string]any, hash string) bool {
	return live.GetAnnotations()[annotations.AnnotationContentHash] == hash && subset(content, live.Object)
}

// Pull writes content, with hash stamped as AnnotationContentHash, into
// the pull mirror live of kind gvk in cluster c, and returns the metadata
// of the object written. The apply carries live's UID and resourceVersion:
// it never creates an object (an apply naming a UID finds it or fails),
// and never writes over a version of the pull mirror the caller has not
// seen (one whose label or mirror-from changed meanwhile). It never forces:
// fields others manage with other values are a PullConflictError.
func (a *Applier) Pull(ctx context.Context, c *clusters.Cluster, gvk schema.GroupVersionKind, live *unstructured.Unstructured, content map[string]any, hash string) (metav1.Object, error) {
	res, err := c.Resource(gvk, live.GetNamespace())
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{Object: make(map[string]any, len(content)+2)}
	for k, v := range content {
		obj.Object[k] = v
	}
	obj.SetAPIVersion(gvk.GroupVersion().String())
	obj.SetKind(gvk.Kind)
	obj.SetNamespace(live.GetNamespace())
	obj.SetName(live.GetName())
	obj.SetUID(live.GetUID())
	obj.SetResourceVersion(live.GetResourceVersion())
	obj.SetAnnotations(map[string]string{annotations.AnnotationContentHash: hash})
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	written, err := res.Patch(ctx, live.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: a.PullFieldManager()})
	if err != nil {
		return nil, pullError(err)
	}
	return written, nil
}

// pullError sorts out the conflicts of an apply: fields held by other
// managers, or a stale precondition (resourceVersion changed, or the UID
// found no object).
func pullError(err error) error {
	if !apierrors.IsConflict(err) {
		return err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		var fields []string
		for _, c := range status.Status().Details.Causes {
			if c.Type == metav1.CauseTypeFieldManagerConflict {
				fields = append(fields, fmt.Sprintf("%s (%s)", c.Field, strings.TrimPrefix(c.Message, "conflict with ")))
			}
		}
		if len(fields) > 0 {
			slices.Sort(fields)
			return &PullConflictError{Fields: fields}
		}
	}
	return fmt.Errorf("%w: %v", ErrPullStale, err)
}
