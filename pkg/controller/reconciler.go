package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Reconciler keeps the mirrors of sources in one cluster within that cluster.
type Reconciler struct {
	Cluster  *clusters.Cluster
	Applier  *apply.Applier
	Build    desired.Options
	Policy   targets.Policy
	Recorder events.EventRecorder
	// Finalizer is held on sources that have mirrors, for prompt cleanup.
	Finalizer string
	// WriteStatus enables AnnotationStatus on sources.
	WriteStatus bool
	// VerifySourceFreshness reads a source from the API server before
	// writing mirrors from it.
	VerifySourceFreshness bool
	// Parallelism bounds concurrent writes for one source.
	Parallelism int

	observed sync.Map // Key -> time.Time: first unhandled change of a source
	reported sync.Map // Key -> *sync.Map: last message per warning reason
}

// retryStale is how soon a source is looked at again when the cache is
// behind the mirrors or a target could not be written.
const retryStale = 2 * time.Second

// Reconcile brings the mirrors of one source to the desired state.
func (r *Reconciler) Reconcile(ctx context.Context, key Key) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", key.Cluster, "gvk", key.GVK.String(), "namespace", key.Namespace, "name", key.Name)
	ctx = ctrl.LoggerInto(ctx, log)
	ref := desired.SourceRef(key.Cluster, key.Namespace, key.Name)

	// 1. A source gone from the cache has no mirrors, once we are sure it is
	// really gone or disabled and not only late in the cache.
	src, ok := r.Cluster.Source(key.GVK, key.Namespace, key.Name)
	if !ok {
		return r.release(ctx, key, ref)
	}
	observedAt := r.takeObserved(key)

	// 2. Deleted, refused or switched off: remove every mirror, then the finalizer.
	req := annotations.Parse(src.GetLabels(), src.GetAnnotations())
	if refusal := desired.Refusal(key.GVK, src); refusal != "" {
		r.warnOnce(src, ReasonSourceRefused, "Not mirrored: %s", refusal)
		req.Sync = false
	}
	if src.GetDeletionTimestamp() != nil || !req.Active() {
		return reconcile.Result{}, r.removeAll(ctx, key, src, ref)
	}

	// 3. Fetch the source from the API server when asked to: the cache may
	// lag behind another writer of the source.
	if r.VerifySourceFreshness {
		fresh, err := r.getSource(ctx, key)
		if err != nil || fresh == nil {
			return reconcile.Result{RequeueAfter: retryStale}, err
		}
		src = fresh
	}

	// 4. Resolve targets and report what the annotations got wrong.
	res := targets.Resolve(req.Local, key.Namespace, r.namespaces(), r.Policy, r.Policy.Limit(req.MaxTargets))
	r.reportRequest(key, src, req, res)

	// 5. Hold the finalizer before the first mirror exists.
	if !slices.Contains(src.GetFinalizers(), r.Finalizer) {
		if err := r.patchSource(ctx, key, src, true, nil); err != nil {
			return reconcile.Result{}, ignoreNotFound(err)
		}
		src = src.DeepCopy() // the cached object is shared: copy before changing
		src.SetFinalizers(append(src.GetFinalizers(), r.Finalizer))
	}

	// 6. Write every target, then delete the mirrors no longer targeted.
	sum := r.applyTargets(ctx, key, src, res.Namespaces, observedAt)
	sum.add(r.deleteUntargeted(ctx, key, ref, res.Namespaces))

	// 7. Report once: events on change, the status annotation, the outcome.
	return r.finish(ctx, key, src, res, sum)
}

// release handles a source missing from the cache: deleted, or its enabled
// label removed. It removes the mirrors and, if the object still exists,
// our finalizer.
func (r *Reconciler) release(ctx context.Context, key Key, ref string) (reconcile.Result, error) {
	r.observed.Delete(key)
	live, err := r.getSourceMetadata(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	if live != nil && live.GetDeletionTimestamp() == nil && live.GetLabels()[annotations.LabelEnabled] == "true" &&
		!desired.IsMirror(live.GetLabels()) {
		// Enabled and alive: our cache has not seen it yet. Its add event
		// will come; do not touch its mirrors meanwhile.
		return reconcile.Result{RequeueAfter: retryStale}, nil
	}
	sum := r.deleteUntargeted(ctx, key, ref, nil)
	if err := sum.err(); err != nil {
		return reconcile.Result{}, err
	}
	if live != nil && slices.Contains(live.GetFinalizers(), r.Finalizer) {
		if err := r.patchMetadata(ctx, key, live.GetResourceVersion(), withoutFinalizer(live.GetFinalizers(), r.Finalizer), nil); err != nil {
			return reconcile.Result{}, ignoreNotFound(err)
		}
	}
	if live != nil && sum.deleted > 0 {
		r.Recorder.Eventf(live, nil, corev1.EventTypeNormal, ReasonMirrorsRemoved, "Cleanup", "Removed %d mirrors", sum.deleted)
	}
	if live == nil {
		r.forget(key)
	}
	return reconcile.Result{}, nil
}

// removeAll deletes every mirror of an inactive or deleted source and then
// lets go of it: finalizer removed, status annotation cleared.
func (r *Reconciler) removeAll(ctx context.Context, key Key, src *unstructured.Unstructured, ref string) error {
	sum := r.deleteUntargeted(ctx, key, ref, nil)
	if err := sum.err(); err != nil {
		return err
	}
	if sum.deleted > 0 {
		r.Recorder.Eventf(src, nil, corev1.EventTypeNormal, ReasonMirrorsRemoved, "Cleanup", "Removed %d mirrors", sum.deleted)
	}
	var clear *string
	if _, ok := src.GetAnnotations()[annotations.AnnotationStatus]; ok && src.GetDeletionTimestamp() == nil {
		clear = new(string) // "" deletes the annotation
	}
	return ignoreNotFound(r.patchSource(ctx, key, src, false, clear))
}

// applyTargets writes the mirror of src into every namespace, in parallel.
func (r *Reconciler) applyTargets(ctx context.Context, key Key, src *unstructured.Unstructured, namespaces []string, observedAt time.Time) summary {
	results := make([]result, len(namespaces))
	workqueue.ParallelizeUntil(ctx, max(r.Parallelism, 1), len(namespaces), func(i int) {
		want := desired.Build(src, namespaces[i], r.Build)
		outcome, err := r.Applier.Ensure(ctx, r.Cluster, key.GVK, want)
		results[i] = result{namespace: namespaces[i], outcome: outcome, err: err}
		switch outcome {
		case apply.Created, apply.Updated, apply.Replaced:
			if !observedAt.IsZero() {
				metrics.ObservePropagation(key.GVK.Kind, key.Cluster, r.Cluster.Name(), time.Since(observedAt))
			}
		}
	})
	var sum summary
	for _, res := range results {
		sum.record(key.GVK.Kind, r.Cluster.Name(), res)
	}
	return sum
}

// deleteUntargeted deletes our mirrors of ref outside keep.
func (r *Reconciler) deleteUntargeted(ctx context.Context, key Key, ref string, keep []string) summary {
	var sum summary
	for _, m := range r.Cluster.MirrorsOf(key.GVK, ref) {
		if m.GetName() != key.Name || slices.Contains(keep, m.GetNamespace()) {
			continue
		}
		outcome, err := r.Applier.Delete(ctx, r.Cluster, key.GVK, m, ref)
		sum.record(key.GVK.Kind, r.Cluster.Name(), result{namespace: m.GetNamespace(), outcome: outcome, err: err})
	}
	return sum
}

// finish reports the outcome of a reconcile and says when to come back.
func (r *Reconciler) finish(ctx context.Context, key Key, src *unstructured.Unstructured, res targets.Result, sum summary) (reconcile.Result, error) {
	if changed := sum.created + sum.updated + sum.replaced + sum.deleted; changed > 0 {
		r.Recorder.Eventf(src, nil, corev1.EventTypeNormal, ReasonMirrorsSynced, "Sync",
			"Created %d, updated %d, replaced %d, deleted %d mirrors; %s", sum.created, sum.updated, sum.replaced, sum.deleted, statusLine(res, sum))
	}
	r.warnIf(src, ReasonTargetConflict, len(sum.conflicts) > 0, "Not written, name taken: %s", joinLimited(sum.conflicts))
	r.warnIf(src, ReasonSyncFailed, len(sum.failures) > 0, "Writing failed, will retry: %s", joinLimited(sum.failures))
	if r.WriteStatus {
		line := statusLine(res, sum)
		if src.GetAnnotations()[annotations.AnnotationStatus] != line {
			if err := r.patchSource(ctx, key, src, true, &line); err != nil {
				return reconcile.Result{}, ignoreNotFound(err)
			}
		}
	}
	if err := sum.err(); err != nil {
		if errors.Is(err, apply.ErrStaleSource) && len(sum.failures) == sum.stale {
			return reconcile.Result{RequeueAfter: retryStale}, nil
		}
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// reportRequest warns about invalid annotations and unreachable targets,
// once per distinct message.
func (r *Reconciler) reportRequest(key Key, src *unstructured.Unstructured, req annotations.Request, res targets.Result) {
	if len(req.Problems) > 0 && r.warnIf(src, ReasonInvalidAnnotation, true, "%s", joinLimited(req.Problems)) {
		metrics.InvalidAnnotations.WithLabelValues(key.GVK.Kind).Inc()
	} else if len(req.Problems) == 0 {
		r.warnIf(src, ReasonInvalidAnnotation, false, "")
	}
	r.warnIf(src, ReasonTargetsOverLimit, len(res.Skipped) > 0, "%d matching namespaces skipped over the limit of %d targets (first skipped: %s)",
		len(res.Skipped), len(res.Namespaces), firstOr(res.Skipped))
	r.warnIf(src, ReasonNamespaceRefused, len(res.Refused) > 0, "Excluded or opted out, not written: %s", joinLimited(res.Refused))
	r.warnIf(src, ReasonNamespaceMissing, len(res.Missing) > 0, "Named namespaces that do not exist yet: %s", joinLimited(res.Missing))
}

// warnIf emits a Warning event when cond holds and the message differs from
// the last one of that reason for this source, so a resync repeats nothing.
// It reports whether it emitted.
func (r *Reconciler) warnIf(src *unstructured.Unstructured, reason string, cond bool, format string, args ...any) bool {
	key := Key{GVK: src.GroupVersionKind(), Namespace: src.GetNamespace(), Name: src.GetName()}
	v, _ := r.reported.LoadOrStore(key, &sync.Map{})
	last := v.(*sync.Map)
	if !cond {
		last.Delete(reason)
		return false
	}
	msg := fmt.Sprintf(format, args...)
	if prev, ok := last.Load(reason); ok && prev == msg {
		return false
	}
	last.Store(reason, msg)
	r.Recorder.Eventf(src, nil, corev1.EventTypeWarning, reason, "Sync", "%s", msg)
	return true
}

func (r *Reconciler) warnOnce(src *unstructured.Unstructured, reason, format string, args ...any) {
	r.warnIf(src, reason, true, format, args...)
}

func (r *Reconciler) forget(key Key) {
	r.observed.Delete(key)
	r.reported.Delete(Key{GVK: key.GVK, Namespace: key.Namespace, Name: key.Name})
}

// namespaces lists the cluster's namespaces for target resolution.
func (r *Reconciler) namespaces() []targets.Namespace {
	cached := r.Cluster.Namespaces()
	out := make([]targets.Namespace, 0, len(cached))
	for _, ns := range cached {
		out = append(out, targets.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: ns.DeletionTimestamp != nil})
	}
	return out
}

// Observe records that a source changed now, for the propagation metric.
// Only the first change before a reconcile counts.
func (r *Reconciler) Observe(key Key) {
	r.observed.LoadOrStore(key, time.Now())
}

func (r *Reconciler) takeObserved(key Key) time.Time {
	if v, ok := r.observed.LoadAndDelete(key); ok {
		return v.(time.Time)
	}
	return time.Time{}
}

// patchSource adds or removes our finalizer on src and sets its status
// annotation (nil: leave it; "": remove it). It writes only when something
// changes. The patch carries src's resourceVersion when it changes the
// finalizers, so a concurrent change of the list is never lost.
func (r *Reconciler) patchSource(ctx context.Context, key Key, src *unstructured.Unstructured, hold bool, status *string) error {
	fins := src.GetFinalizers()
	has := slices.Contains(fins, r.Finalizer)
	var newFins []string
	switch {
	case hold && !has:
		newFins = append(slices.Clone(fins), r.Finalizer)
	case !hold && has:
		newFins = withoutFinalizer(fins, r.Finalizer)
	}
	if status != nil && src.GetAnnotations()[annotations.AnnotationStatus] == *status {
		status = nil
	}
	if newFins == nil && status == nil {
		return nil
	}
	rv := ""
	if newFins != nil {
		rv = src.GetResourceVersion()
	}
	return r.patchMetadata(ctx, key, rv, newFins, status)
}

func (r *Reconciler) patchMetadata(ctx context.Context, key Key, resourceVersion string, finalizers []string, status *string) error {
	md := map[string]any{}
	if resourceVersion != "" {
		md["resourceVersion"] = resourceVersion
	}
	if finalizers != nil {
		md["finalizers"] = finalizers
	}
	if status != nil {
		var v any = *status
		if *status == "" {
			v = nil // merge patch null deletes the key
		}
		md["annotations"] = map[string]any{annotations.AnnotationStatus: v}
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return err
	}
	res, err := r.metadataResource(key)
	if err != nil {
		return err
	}
	// A merge patch never creates: a source deleted meanwhile is NotFound.
	_, err = res.Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: r.Applier.FieldManager})
	return err
}

func withoutFinalizer(fins []string, f string) []string {
	out := make([]string, 0, len(fins))
	for _, x := range fins {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// errs collects target errors into one.
func errs(list []error) error { return kerrors.NewAggregate(list) }
