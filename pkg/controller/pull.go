package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/events"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Pull mirrors: an object labelled fleetmirror.io/pull=true and annotated
// fleetmirror.io/mirror-from receives the content of that source, of its
// own kind, if the source allows it (fleetmirror.io/allow-pull-into). Its
// namespace's owner created it and owns it: the agent writes only the
// content (apply.Applier.Pull) and its status annotation, and never
// creates or deletes it. A source that goes away or withdraws its consent
// leaves the content as it was, with a Warning. The member agent serves
// NS/NAME references, the hub CLUSTER/NS/NAME ones; a work queue Key with
// Pull set is one pull mirror.

// pullState is what the Reconciler remembers of the pull mirrors it serves.
type pullState struct {
	// writes holds the resourceVersion of our last write of each pull
	// mirror, to tell a cache that lags behind it.
	writes sync.Map // Key -> string
	// missing holds, per pull mirror, the reference whose source the API
	// server said was not there, and why, so that reconciles in quick
	// succession (every namespace event enqueues every pull mirror) do not
	// each ask again. A source that appears is cached, and found there.
	missing sync.Map // Key -> missingSource
	// states holds the state of each pull mirror, for the gauge.
	states sync.Map // Key -> PullState
}

type missingSource struct {
	ref     string
	verdict PullVerdict
}

// reconcilePull brings one pull mirror to its source's content, or says why
// it does not.
func (r *Reconciler) reconcilePull(ctx context.Context, key Key) (Result, error) {
	log := logf.FromContext(ctx).WithValues("cluster", key.Cluster, "gvk", key.GVK.String(), "namespace", key.Namespace, "name", key.Name, "pull", true)
	ctx = logf.IntoContext(ctx, log)

	// 1. A pull mirror gone from the cache (deleted, or its label removed)
	// keeps what it holds: forget it. A cache that has not caught up with
	// our own last write will bring the newer version; wait for it.
	// A pull mirror in a read-only cluster is served by the replica of a
	// sharded hub that serves the cluster.
	c := r.fleet.Cluster(key.Cluster)
	if c == nil || r.readOnly(c) {
		r.forgetPull(key)
		return Result{}, nil
	}
	if synced, watched := c.KindSynced(key.GVK); watched && !synced {
		return Result{}, nil // eventSource.KindSynced enqueues it
	}
	dst, ok := c.Pull(key.GVK, key.Namespace, key.Name)
	if !ok {
		r.forgetPull(key)
		return Result{}, nil
	}
	if v, ok := r.pulls.writes.Load(key); ok {
		if olderThan(dst.GetResourceVersion(), v.(string)) {
			return Result{}, nil
		}
		r.pulls.writes.CompareAndDelete(key, v)
	}

	// 2. The member agent serves NS/NAME, the hub CLUSTER/NS/NAME; each
	// leaves the other's alone. Then what concerns the pull mirror alone.
	remote := r.opts.Scope == ScopeRemote
	p := PullMirror{Cluster: c.Name(), Object: dst}
	p.Ref, p.RefErr = ParsePullMirror(dst)
	if !Serves(remote, p.Ref) {
		r.forgetPull(key)
		return Result{}, nil
	}
	refusal, known := r.pullNamespaceRefusal(c, dst.GetNamespace())
	if !known {
		// A namespace created just before the pull mirror in it may not
		// be in the cache yet, and without its labels whether it opted
		// out of mirrors is not known: nothing is written until it is.
		// Its add event enqueues this pull mirror (enqueuePullsIn).
		return Result{}, nil
	}
	p.NamespaceRefusal = refusal
	if remote && p.RefErr == nil {
		p.SourceRefusal = PullSourceRefusal(r.opts.AllowedSourceClusters, r.opts.AllowedSourceNamespaces, p.Ref)
	}
	v := CheckPullMirror(p)

	// 3. Find the source; what stops the pull there is reported, and the
	// pull mirror keeps its content.
	var res Result
	if v == nil {
		src, missing, wait, err := r.pullSource(ctx, c, key, p.Ref)
		switch {
		case err != nil:
			return Result{}, err
		case missing != nil:
			v, res = missing, wait
		case src == nil:
			return wait, nil // the cache has not caught up with the source
		default:
			checked := CheckPullSource(PullSource{GVK: key.GVK, Mirror: p, Source: src})
			v = &checked
		}
	}

	// 4. Write the content when it differs. A stale cached pull mirror is
	// looked at again when the cache brings the newer version.
	written := false
	if v.State == PullOutOfSync {
		callCtx, cancel := r.callContext(ctx, c)
		got, err := r.Applier.Pull(callCtx, c, key.GVK, dst, v.Content, v.Hash)
		err = clusters.CallError(callCtx, err)
		cancel()
		switch {
		case err == nil:
			r.pulls.writes.Store(key, got.GetResourceVersion())
			dst = dst.DeepCopy() // the cached object is shared: copy before changing
			dst.SetResourceVersion(got.GetResourceVersion())
			dst.SetAnnotations(got.GetAnnotations())
			v.State, written = PullInSync, true
		case errors.Is(err, apply.ErrPullStale):
			metrics.PullOperations.WithLabelValues(metrics.KindLabel(key.GVK), c.Name(), "stale").Inc()
			return Result{RequeueAfter: retryStale}, nil
		default:
			failed := WriteVerdict(*v, err)
			v = &failed
			if v.State == PullConflict {
				res = Result{RequeueAfter: retryConflict}
			}
		}
	}

	// 5. Report: an Event on a write, a Warning per distinct problem, the
	// status annotation, the metrics.
	return r.finishPull(ctx, c, key, dst, p.Ref, *v, written, res)
}

// pullSource finds the source of a pull mirror: in the caches of the
// source's cluster, or, when it is not there, by asking that cluster's API
// server, since a cache may lag behind a source just created. It returns
// the source; or a verdict on a source that is missing or cannot be
// reached, with when to look again; or neither, when the cache lags and
// the source's own event will come.
func (r *Reconciler) pullSource(ctx context.Context, c *clusters.Cluster, key Key, ref annotations.MirrorFrom) (*unstructured.Unstructured, *PullVerdict, Result, error) {
	sc := c
	if ref.Remote() {
		if sc = r.fleet.Cluster(ref.Cluster); sc == nil && r.fleet.Registered(ref.Cluster) {
			v := SourceMissing(fmt.Sprintf("the cluster %s of the source %s is served by another replica of the sharded hub, which does not read it for this one; a pull mirror reaches sources of the hub's own cluster and of the clusters of its shard (docs/federation.md)",
				ref.Cluster, ref))
			return nil, &v, Result{RequeueAfter: retryConflict}, nil
		}
		if sc == nil {
			v := SourceMissing(fmt.Sprintf("the cluster %s of the source %s is not registered with the hub", ref.Cluster, ref))
			return nil, &v, Result{}, nil
		}
		if down := sc.Unreachable(); down != nil {
			v := PullVerdict{State: PullUnreachable, Reason: ReasonClusterUnreachable,
				Message: fmt.Sprintf("the cluster %s of the source %s is unreachable since %s", ref.Cluster, ref, down.Since.UTC().Format("15:04:05Z"))}
			return nil, &v, Result{RequeueAfter: retryUnreachable}, nil
		}
	}
	switch synced, watched := sc.KindSynced(key.GVK); {
	case !watched:
		v := SourceMissing(fmt.Sprintf("the agent does not watch %s in the cluster %s of the source %s", key.GVK.Kind, sc.Name(), ref))
		return nil, &v, Result{RequeueAfter: retryConflict}, nil
	case !synced:
		return nil, nil, Result{}, nil // eventSource.KindSynced enqueues the pull mirrors
	}
	if src, ok := sc.Source(key.GVK, ref.Namespace, ref.Name); ok {
		r.pulls.missing.Delete(key)
		return src, nil, Result{}, nil
	}
	if m, ok := sc.Mirror(key.GVK, ref.Namespace, ref.Name); ok {
		v := SourceIsMirror(ref, m.GetAnnotations()[annotations.AnnotationSource])
		return nil, &v, Result{}, nil
	}
	if m, ok := r.pulls.missing.Load(key); ok && m.(missingSource).ref == ref.String() {
		v := m.(missingSource).verdict
		return nil, &v, Result{}, nil
	}
	live, err := r.getSourceMetadata(ctx, sc, Key{Cluster: sc.Name(), GVK: key.GVK, Namespace: ref.Namespace, Name: ref.Name})
	if err != nil {
		return nil, nil, Result{}, err
	}
	var obj metav1.Object
	if live != nil {
		obj = live
	}
	v := CheckFoundSource(ref, obj)
	if v == nil {
		// A source our cache has not seen yet: its add event enqueues
		// this pull mirror.
		return nil, nil, Result{RequeueAfter: retryStale}, nil
	}
	r.pulls.missing.Store(key, missingSource{ref: ref.String(), verdict: *v})
	return nil, v, Result{}, nil
}

// pullNamespaceRefusal says why the writer never writes content into
// namespace ns of c, or "": the operator's policy (and for the hub the
// cluster's own exclusions), and the namespace's opt-out label. They bind
// pull mirrors as they bind mirrors: a namespace kept free of mirrored
// content stays free of it, whoever asks. known is false while the
// namespace is not in c's cache: its labels are not known yet.
func (r *Reconciler) pullNamespaceRefusal(c *clusters.Cluster, ns string) (refusal string, known bool) {
	var excluded glob.List
	var because string
	if r.opts.Scope == ScopeRemote {
		for _, m := range r.fleet.Members() {
			if m.Cluster == c {
				excluded, because = m.ExcludedNamespaces, m.ExcludedBecause
			}
		}
	}
	labels, known := c.NamespaceLabels(ns)
	return PullNamespaceRefusal(r.opts.Policy, excluded, because, c.Name(), ns, labels), known
}

// finishPull reports the outcome of a reconcile of a pull mirror. A pull
// mirror that is a source or one of our mirrors (refused) gets Events
// only: its status annotation is the source's, or ours to keep as built.
func (r *Reconciler) finishPull(ctx context.Context, c *clusters.Cluster, key Key, dst *unstructured.Unstructured, ref annotations.MirrorFrom, v PullVerdict, written bool, res Result) (Result, error) {
	kind := metrics.KindLabel(key.GVK)
	r.setPullState(key, v.State)
	result := pullResults[v.State]
	if written {
		result = "written"
		r.recorder(c).Eventf(dst, events.Normal, ReasonPulled, "Wrote the content of %s", ref)
	}
	metrics.PullOperations.WithLabelValues(kind, c.Name(), result).Inc()
	kept := holdsPulled(dst)
	msg := v.Message
	if kept && v.State != PullConflict && v.State != PullFailed {
		msg += "; the content pulled last is kept"
	}
	for _, reason := range []string{ReasonInvalidAnnotation, ReasonPullRefused, ReasonPullNotAllowed, ReasonPullSourceMissing, ReasonClusterUnreachable, ReasonPullConflict, ReasonPullFailed} {
		r.warnIf(c, dst, reason, v.Reason == reason, "Not pulled: %s", msg)
	}
	if labels := dst.GetLabels(); r.opts.WriteStatus && labels[annotations.LabelEnabled] != "true" && labels[annotations.LabelMirror] != "true" {
		status := PullStatus(v, ref, kept)
		if dst.GetAnnotations()[annotations.AnnotationStatus] != status {
			patched, err := r.patchMetadata(ctx, c, key, dst.GetResourceVersion(), nil, &status, nil)
			if err != nil {
				// A conflict is a newer version on its way; gone is gone.
				return Result{}, ignoreNotFound(ignoreConflict(err))
			}
			r.pulls.writes.Store(key, patched.GetResourceVersion())
		}
	}
	if v.State == PullFailed {
		return Result{}, errors.New(v.Message)
	}
	return res, nil
}

// pullResults are the result label values of metrics.PullOperations.
var pullResults = map[PullState]string{
	PullInSync: "unchanged", PullRefused: "refused", PullNotAllowed: "not_allowed", PullSourceMissing: "source_missing",
	PullUnreachable: "unreachable", PullConflict: "conflict", PullFailed: "error",
}

// setPullState moves a pull mirror in the state gauge.
func (r *Reconciler) setPullState(key Key, s PullState) {
	kind := metrics.KindLabel(key.GVK)
	if old, ok := r.pulls.states.Swap(key, s); ok {
		if old.(PullState) == s {
			return
		}
		metrics.PullMirrors.WithLabelValues(kind, key.Cluster, string(old.(PullState))).Dec()
	}
	metrics.PullMirrors.WithLabelValues(kind, key.Cluster, string(s)).Inc()
}

// forgetPull drops what is remembered of a pull mirror the writer no
// longer serves.
func (r *Reconciler) forgetPull(key Key) {
	if old, ok := r.pulls.states.LoadAndDelete(key); ok {
		metrics.PullMirrors.WithLabelValues(metrics.KindLabel(key.GVK), key.Cluster, string(old.(PullState))).Dec()
	}
	r.pulls.writes.Delete(key)
	r.pulls.missing.Delete(key)
	r.breaker.forget(key)
	object := key
	object.Pull = false // warnIf remembers by object
	r.reported.Delete(object)
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
