package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/events"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// Reconciler keeps the mirrors of sources where their annotations say.
// Add builds it from Options.
type Reconciler struct {
	opts  Options
	fleet *fleet.Fleet
	// Applier writes and deletes mirrors, and remembers what it wrote.
	Applier *apply.Applier
	// build says how mirrors are built; SourceCluster is set per source.
	build desired.Options

	// breaker spaces out the retries of a source that keeps failing.
	breaker breaker
	// pulls is what is remembered of pull mirrors (pull.go).
	pulls pullState

	observed sync.Map // Key -> time.Time: first unhandled change of a source
	reported sync.Map // Key -> *sync.Map: last message per warning reason
	// snapshots holds each cluster's namespaces as target resolution reads
	// them (cluster name -> *namespaces), made again when they changed.
	snapshots sync.Map
	// hints are the namespaces whose events alone queued a source (Key ->
	// *namespaceHints); planned is what the last complete reconcile of a
	// source found (Key -> planned); carried is what fast passes wrote
	// since (Key -> map[string]apply.Outcome). See newnamespace.go.
	hints, planned, carried sync.Map
	// own tells the watch events of our own writes of sources' metadata
	// from everybody else's changes.
	own ownWrites
	// refusals is the budget of warnings about mirrors posing as sources;
	// made on first use.
	refusals     *rate.Limiter
	refusalsOnce sync.Once

	// policies is what is remembered of MirrorPolicies (policies.go).
	policies policies
	// enqueue adds a work queue item: a policy's sources, a source's
	// policies; enqueueAfter adds it once d has passed, once however
	// often it is asked meanwhile.
	enqueue      func(Key)
	enqueueAfter func(k Key, d time.Duration)
	// parkRetry is parkedRetry but in tests.
	parkRetry time.Duration
}

// retryStale is how soon a source is looked at again when the cache is
// behind the mirrors or a target cluster is unreachable.
const retryStale = 2 * time.Second

// parkedRetry is how soon the sources parked for a policy's watches are
// looked at again if the policy never wakes them.
const parkedRetry = 30 * time.Second

// retryLeaving is how soon a source whose cluster is being torn down is
// looked at again: the teardown's last steps take moments.
const retryLeaving = 250 * time.Millisecond

// retryUnreachable is how soon a source whose targets include an
// unreachable cluster is looked at again; a reconnect also wakes it.
const retryUnreachable = 30 * time.Second

// retryConflict is how soon a source with conflicting targets is looked at
// again.
const retryConflict = time.Minute

// retryThrottled is how soon a source whose only failures were 429 answers
// is looked at again. Its calls then wait for the Retry-After the cluster
// gave (clusters.Throttled), so this is a floor, not the pace.
const retryThrottled = time.Second

// Reconcile brings the mirrors of one source to the desired state.
func (r *Reconciler) Reconcile(ctx context.Context, key Key) (Result, error) {
	res, err := r.reconcile(ctx, key)
	if then := res.then; then != nil && err == nil {
		// What the rest comes to is the reconcile's.
		return Result{then: func(ctx context.Context) (Result, error) {
			res, err := then(ctx)
			return r.settled(key, res, err)
		}}, nil
	}
	return r.settled(key, res, err)
}

// settled is what a reconcile of key that came to res and err returns:
// throttling is no failure, and failures count against the source.
func (r *Reconciler) settled(key Key, res Result, err error) (Result, error) {
	if onlyThrottled(err) {
		// A busy API server asked us to come back later: that is neither
		// a failure to space out nor one to count against the source.
		// Its status and Events still say what was not written.
		_, _ = r.breaker.record(key, Result{}, nil) // a success, as far as the breaker goes
		return Result{RequeueAfter: retryThrottled}, nil
	}
	return r.breaker.record(key, res, err)
}

// onlyThrottled reports whether err is made of 429 Too Many Requests
// answers alone.
func onlyThrottled(err error) bool {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		for _, e := range agg.Errors() {
			if !onlyThrottled(e) {
				return false
			}
		}
		return len(agg.Errors()) > 0
	}
	return apierrors.IsTooManyRequests(err)
}

func (r *Reconciler) reconcile(ctx context.Context, key Key) (Result, error) {
	switch {
	case key.Pull:
		return r.reconcilePull(ctx, key)
	case key.Policy:
		return r.reconcilePolicy(ctx, key)
	}
	hinted := r.takeHints(key)
	log := logf.FromContext(ctx).WithValues("cluster", key.Cluster, "gvk", key.GVK.String(), "namespace", key.Namespace, "name", key.Name)
	ctx = logf.IntoContext(ctx, log)
	ref := desired.SourceRef(key.Cluster, key.Namespace, key.Name)

	// 1. A source of an unknown cluster, or gone from the cache, has no
	// mirrors, once we are sure it is really gone and not only late.
	c := r.fleet.Cluster(key.Cluster)
	if c == nil {
		return r.sourceClusterGone(ctx, key, ref)
	}
	if synced, watched := c.KindSynced(key.GVK); watched && !synced {
		// The kind's caches are filling: a mirror not listed yet would
		// look missing. Once they have synced, every source of the kind
		// is enqueued (eventSource.KindSynced).
		return Result{}, nil
	}
	if hinted != nil {
		// Only namespace events queued the source: their namespaces first.
		if done, res, err := r.fastPass(ctx, c, key, hinted); done {
			return res, err
		}
	}
	// What fast passes wrote since the last whole reconcile, which counts
	// it in its Events and status.
	carried := r.takeCarried(key)
	src, ok := c.Source(key.GVK, key.Namespace, key.Name)
	if !ok {
		return r.release(ctx, c, key, ref)
	}
	observedAt := r.takeObserved(key)

	// 2. Deleted, refused, switched off or not ours to serve: remove every
	// mirror, then the finalizer.
	if desired.IsMirror(src.GetLabels()) {
		return r.refuseMirror(ctx, c, key, src, ref)
	}
	req, adopt, via := r.request(c, key, src)
	refusal := desired.Refusal(key.GVK, src)
	if refusal != "" {
		r.warnIf(c, src, ReasonSourceRefused, true, "Not mirrored: %s", refusal)
		req.Sync = false
	}
	// A policy's problems are said on the policy (reconcilePolicy), whose
	// author may not even read the source's Events.
	if r.warnIf(c, src, ReasonInvalidAnnotation, via == nil && len(req.Problems) > 0, "%s", joinLimited(req.Problems)) {
		metrics.InvalidAnnotations.WithLabelValues(metrics.KindLabel(key.GVK)).Inc()
	}
	var plan Plan
	if req.Active() {
		var trig trigger
		var wait bool
		if trig.within, trig.because, wait = r.triggerWithin(c, via); wait {
			// The policy enqueues its sources once its trigger's objects
			// are listed (reconcilePolicy): until then a namespace that
			// holds one would look as if it held none.
			return Result{}, nil
		}
		plan = r.plan(c, src, req, trig)
	}
	if src.GetDeletionTimestamp() != nil || !plan.Relevant || plan.Ignored != "" {
		r.planned.Delete(key)
		if plan.Ignored != "" {
			r.warnIf(c, src, ReasonSourceRefused, true, "%s", plan.Ignored)
		}
		res, err := r.removeAll(ctx, c, key, src, ref)
		if via != nil && err == nil {
			r.servedOutcome(c, key, via, plan, summary{}, refusal)
		}
		return res, err
	}

	// 3. Let go of what an older version or an older claim left on the
	// source: the finalizer older versions held (none is added any
	// more: a finalizer outlives its agent and would leave the owner's
	// object, and its namespace, stuck in deletion), and, for a source a
	// policy now serves, the status its annotations had us write. meta
	// follows our writes, so that the status write below starts from
	// this one and does not conflict with it.
	var meta metav1.Object = src
	if r.stale(c, src, via) {
		var part *string
		if via != nil {
			part = new(string)
		}
		var err error
		if meta, err = r.patchSource(ctx, c, key, src, part); err != nil {
			return Result{}, ignoreNotFound(err)
		}
		src = src.DeepCopy() // the cached object is shared: copy before changing
		src.SetFinalizers(meta.GetFinalizers())
		src.SetAnnotations(meta.GetAnnotations())
	}

	// 4. Fetch the source from the API server when asked to: the cache may
	// lag behind another writer of the source. The mirrors are built from
	// the fresh object, so its transform rules and adopt list are the ones
	// that count; the plan stays that of the cached object.
	if r.opts.VerifySourceFreshness {
		fresh, err := r.getSource(ctx, c, key)
		if err != nil || fresh == nil {
			return Result{RequeueAfter: retryStale}, err
		}
		src = fresh
		if via == nil { // a policy's rules are not the source's to change
			freshReq := annotations.Parse(src.GetLabels(), src.GetAnnotations())
			req.Transform, req.TransformErr = freshReq.Transform, freshReq.TransformErr
			adopt, _ = peers.ParseAdopt(src.GetAnnotations()[annotations.AnnotationAdopt])
		}
	}

	// 5. Report what the annotations got wrong or could not reach. Invalid
	// transform rules stop everything: mirroring untransformed content the
	// owner meant to change would be a surprise write.
	r.reportPlan(c, src, plan)
	if r.warnIf(c, src, ReasonInvalidTransform, via == nil && req.TransformErr != nil, "Nothing written or removed until the rules are fixed: %v", req.TransformErr) {
		metrics.TransformErrors.WithLabelValues(metrics.KindLabel(key.GVK)).Inc()
	}
	if req.TransformErr != nil {
		if via != nil {
			// The policy's status says what is wrong with its rules.
			r.servedOutcome(c, key, via, plan, summary{}, "")
		}
		// Done until the source changes: fixing the rules is an update
		// event. Not a reconcile.TerminalError, which would change the
		// retries: controller-runtime (v0.24, reconcileHandler) does not
		// Forget an item that returns one, so the failures the queue's
		// rate limiter counted for the source before are kept and its
		// next ordinary error after the fix backs off longer; and the
		// breaker counts every error, so past its threshold it would turn
		// this one into a RequeueAfter. It would also log "Reconciler
		// error" for a user's mistake the Warning Event already reports.
		return Result{}, nil
	}

	// 6. Write every target, then delete the mirrors no longer targeted.
	// A copy-once source writes only where it never made a copy.
	var record map[string]bool
	if req.CopyOnce {
		record = r.copiedRecord(key, src, via)
	}
	sum, stale := r.applyTargets(ctx, key, src, &req, record, adopt, plan.Targets, observedAt, r.opts.VerifySourceFreshness, carried)
	if len(stale) > 0 {
		// Some mirror claims newer content than our cached source. Ask the
		// API server: if the cache is current, the claim is wrong.
		fresh, err := r.getSourceMetadata(ctx, c, key)
		if err != nil {
			return Result{}, err
		}
		if fresh == nil || fresh.GetResourceVersion() != src.GetResourceVersion() {
			return Result{RequeueAfter: retryStale}, nil
		}
		again, _ := r.applyTargets(ctx, key, src, &req, record, adopt, stale, observedAt, true, carried)
		sum.add(again)
	}
	sum.add(r.deleteUntargeted(ctx, key, ref, plan.Targets, req.TargetName, plan.Covered, desired.Untargeted))
	r.notePlanned(key, src.GetResourceVersion(), plan, sum)
	for id := range record {
		// The whole record goes on, not only what this reconcile saw in
		// place: a copy deleted meanwhile stays remembered until the
		// record is written (a policy's status follows a moment later).
		sum.copied = append(sum.copied, id)
	}

	// 7. Report once: events on change, the status annotation (or the
	// policy's status), the outcome; and the copy-once record.
	var copied *string
	if req.CopyOnce && via == nil {
		copied = r.copiedPart(key, sum)
	}
	if sum.err() != nil || len(plan.Unreachable) > 0 || plan.Pending > 0 {
		// Some targets do not have this version yet: the reconcile that
		// writes them measures its propagation from the same observation
		// (a target cluster whose kind was still syncing, say).
		r.keepObserved(key, observedAt)
	}
	return r.finish(ctx, c, key, src, meta, plan, sum, via, copied)
}

// sourceClusterGone handles a source whose cluster left the fleet (only
// the hub sees this). Its mirrors are deleted or kept, as the operator chose.
func (r *Reconciler) sourceClusterGone(ctx context.Context, key Key, ref string) (Result, error) {
	if r.fleet.Leaving(key.Cluster) {
		// Its teardown runs, and the fleet enqueues these sources before
		// it ends: decided once it is known whether the cluster left for
		// good or comes back (new credentials, another replica).
		return Result{RequeueAfter: retryLeaving}, nil
	}
	if r.fleet.Registered(key.Cluster) {
		// Served by another replica of a sharded hub, coming back with
		// new credentials, or refused as a duplicate of a cluster served
		// under another name: not an orphan. Its own replica reports on it.
		return Result{}, nil
	}
	keep, wait := r.renamedMirrors(key, ref)
	if wait {
		return Result{RequeueAfter: retryStale}, nil
	}
	if !r.opts.DeleteOrphansOfUnregistered {
		logf.FromContext(ctx).Info("Keeping mirrors of a source whose cluster is not registered", "source", ref)
		return Result{}, nil
	}
	sum := r.deleteUntargeted(ctx, key, ref, keep, "", nil, desired.SourceGone)
	return Result{}, sum.err()
}

// renamedMirrors returns, for a source whose cluster left the fleet, the
// mirrors its cluster's new registration takes over (Applier.Renamed):
// those of the same source, by UID, as seen through the new name. It
// reports wait while that registration does not serve yet or has not
// listed the kind: nothing is deleted meanwhile.
func (r *Reconciler) renamedMirrors(key Key, ref string) (keep []Target, wait bool) {
	to, renamed := r.fleet.Successor(key.Cluster)
	if !renamed {
		return nil, false
	}
	c := r.fleet.Cluster(to)
	if c == nil {
		return nil, true
	}
	if synced, _ := c.KindSynced(key.GVK); !synced {
		return nil, true
	}
	src, ok := c.Source(key.GVK, key.Namespace, key.Name)
	if !ok {
		return nil, false
	}
	covered, _ := r.mirrorClusters(key.Cluster)
	for _, mc := range covered {
		for _, m := range mc.MirrorsOf(key.GVK, ref) {
			if m.GetAnnotations()[annotations.AnnotationSourceUID] == string(src.GetUID()) {
				keep = append(keep, Target{Cluster: mc, Namespace: m.GetNamespace()})
			}
		}
	}
	return keep, false
}

// refusalsPerSecond and refusalBurst bound the SourceRefused warnings about
// mirrors posing as sources, over all objects: whoever can label objects
// must not be able to flood the API server with Events through us.
const (
	refusalsPerSecond = 1
	refusalBurst      = 20
)

// refuseMirror handles a mirror that carries the enabled label: a mirror is
// never a source (its source is). It warns once per object and message,
// within a shared budget, and writes nothing to the object, which may not
// even be ours. Only our own finalizer, left by an older version from a
// time the object was a source, is taken off, after the mirrors it had are
// removed.
func (r *Reconciler) refuseMirror(ctx context.Context, c *clusters.Cluster, key Key, src *unstructured.Unstructured, ref string) (Result, error) {
	msg := fmt.Sprintf("Not mirrored: it is itself a mirror (label %s=true) of %s; remove the label %s, or annotate its source instead",
		annotations.LabelMirror, cmp.Or(src.GetAnnotations()[annotations.AnnotationSource], "an unknown source"), annotations.LabelEnabled)
	if !r.warned(c, src, ReasonSourceRefused, msg) {
		r.refusalsOnce.Do(func() { r.refusals = rate.NewLimiter(refusalsPerSecond, refusalBurst) })
		if !r.refusals.Allow() {
			return Result{RequeueAfter: retryConflict}, nil
		}
		r.warnIf(c, src, ReasonSourceRefused, true, "%s", msg)
	}
	if !slices.Contains(src.GetFinalizers(), r.opts.Identity.Finalizer) {
		return Result{}, nil
	}
	return r.removeAll(ctx, c, key, src, ref)
}

// release handles a source missing from the cache: deleted, or its enabled
// label removed, or no policy names it any more. It removes the mirrors
// and, if the object still exists, the finalizer an older version held.
func (r *Reconciler) release(ctx context.Context, c *clusters.Cluster, key Key, ref string) (Result, error) {
	r.observed.Delete(key)
	// The policies themselves are always cached whole: WatchPolicies lists
	// them before their watch exists.
	if policySourcesListing(c, key) {
		// A policy may name it, and the caches that would hold it are
		// filling (after a restart): it is looked at again once they have
		// (unpark), without asking the API server meanwhile. Parked, then
		// checked again: a policy that synced meanwhile may have woken its
		// scope already. The scope's fallback (park) covers a watch that
		// never syncs.
		r.park(key)
		if !policySourcesListing(c, key) {
			r.enqueue(key)
		}
		return Result{}, nil
	}
	live, err := r.getSourceMetadata(ctx, c, key)
	if err != nil {
		return Result{}, err
	}
	if live != nil && live.GetDeletionTimestamp() == nil &&
		(live.GetLabels()[annotations.LabelEnabled] == "true" || policyNames(c, key, live)) {
		// Enabled, or named by a policy, and alive: our cache has not
		// seen it yet. Its add event will come; do not touch its mirrors
		// meanwhile.
		return Result{RequeueAfter: retryStale}, nil
	}
	r.forgetOutcomes(key.Cluster, key)
	why := desired.SourceGone
	if live != nil && live.GetDeletionTimestamp() == nil {
		why = desired.ClaimEnded // its policy went, or no longer names it
	}
	sum := r.deleteUntargeted(ctx, key, ref, nil, "", nil, why)
	if err := sum.err(); err != nil {
		return Result{}, err
	}
	if live != nil && !r.readOnly(c) && slices.Contains(live.GetFinalizers(), r.opts.Identity.Finalizer) {
		fins := withoutFinalizer(live.GetFinalizers(), r.opts.Identity.Finalizer)
		if _, err := r.patchMetadata(ctx, c, key, live.GetResourceVersion(), fins, nil, nil); err != nil {
			return Result{}, ignoreNotFound(err)
		}
	}
	if live != nil {
		r.reportRemoved(c, live, sum)
	}
	if live == nil {
		r.forget(key)
	}
	return Result{}, nil
}

// removeAll deletes every mirror of a source that wants none from us and
// then lets go of it: our part of the status cleared, and the finalizer an
// older version held removed. Mirrors in clusters that are unreachable now
// are removed when they come back (the sweep of Up).
func (r *Reconciler) removeAll(ctx context.Context, c *clusters.Cluster, key Key, src *unstructured.Unstructured, ref string) (Result, error) {
	why := desired.ClaimEnded // mirroring turned off, refused, or no policy serves it
	if src.GetDeletionTimestamp() != nil {
		why = desired.SourceGone
	}
	sum := r.deleteUntargeted(ctx, key, ref, nil, "", nil, why)
	if err := sum.err(); err != nil {
		return Result{}, err
	}
	r.reportRemoved(c, src, sum)
	if r.readOnly(c) {
		return Result{}, nil // the status is its serving replica's
	}
	var part *string
	if src.GetDeletionTimestamp() == nil {
		part = new(string) // clear our part of the status
	}
	_, err := r.patchSource(ctx, c, key, src, part)
	return Result{}, ignoreNotFound(err)
}

// reportRemoved tells, on the source obj, what became of the mirrors it
// no longer has.
func (r *Reconciler) reportRemoved(c *clusters.Cluster, obj runtime.Object, sum summary) {
	if sum.deleted > 0 {
		r.recorder(c).Eventf(obj, events.Normal, ReasonMirrorsRemoved, "Removed %d mirrors", sum.deleted)
	}
	if sum.orphaned > 0 {
		r.recorder(c).Eventf(obj, events.Normal, ReasonMirrorsRemoved, "Left %d copies in place as plain objects (copy-once or deletion-policy Orphan); nothing of fleetmirror claims them any more", sum.orphaned)
	}
}

// applyTargets writes the mirror of src into every target, in parallel.
// Targets whose mirror claims newer source content than src are not
// written and not counted; they are returned for the caller to decide.
// Copies made by the tools of adopt that prove they are of src are adopted.
// carried holds what a fast pass wrote just before, by namespace of the
// source's own cluster: found in place, a mirror counts as so written.
func (r *Reconciler) applyTargets(ctx context.Context, key Key, src *unstructured.Unstructured, req *annotations.Request, record map[string]bool, adopt []peers.Tool, tgts []Target, observedAt time.Time, verified bool, carried map[string]apply.Outcome) (sum summary, stale []Target) {
	if req.CopyOnce {
		ref := desired.SourceRef(key.Cluster, key.Namespace, key.Name)
		tgts = r.copyOnce(key, ref, req.Name(key.Name), tgts, record, &sum)
	}
	results := r.ensureTargets(ctx, key, src, req, adopt, tgts, observedAt, verified)
	stale = tally(key, tgts, results, carried, &sum)
	if req.CopyOnce {
		recordCopies(key, tgts, results, &sum)
	}
	return sum, stale
}

// tally records the results of writing tgts in sum, and returns the
// targets whose mirror claims newer source content, which it leaves out.
// carried holds what a fast pass wrote just before (see applyTargets).
func tally(key Key, tgts []Target, results []result, carried map[string]apply.Outcome, sum *summary) (stale []Target) {
	for i, res := range results {
		if errors.Is(res.err, apply.ErrStaleSource) {
			stale = append(stale, tgts[i])
			continue
		}
		as := res.outcome
		if o, ok := carried[res.namespace]; ok && as == apply.Unchanged && res.cluster == key.Cluster {
			as = o // written by the fast pass just before
		}
		sum.recordAs(metrics.KindLabel(key.GVK), res, as)
	}
	return stale
}

// ensureTargets makes the mirror of src in each of tgts hold the content
// it should, and returns each target's result.
func (r *Reconciler) ensureTargets(ctx context.Context, key Key, src *unstructured.Unstructured, req *annotations.Request, adopt []peers.Tool, tgts []Target, observedAt time.Time, verified bool) []result {
	opts := r.build
	opts.SourceCluster = key.Cluster
	opts.Name, opts.CopyOnce, opts.Orphan, opts.KeepAdditions = req.TargetName, req.CopyOnce, req.Orphan, req.KeepAdditions
	results := make([]result, len(tgts))
	todo := r.notInPlace(key, src, req, opts, tgts, results)
	parallelPerCluster(ctx, max(r.opts.Parallelism, 1), targetsAt(tgts, todo), func(j int) {
		i := todo[j]
		t := tgts[i]
		// The call's slot first (--cluster-max-in-flight), then the mirror:
		// a write that waits for a slot holds no copy of the source yet.
		callCtx, cancel := r.callContext(ctx, t.Cluster)
		defer cancel()
		want, ruleErrs, err := desired.Build(src, desired.Target{Cluster: t.Cluster.Name(), Namespace: t.Namespace}, opts, req.Transform)
		results[i] = result{cluster: t.Cluster.Name(), namespace: t.Namespace, ruleErrs: ruleErrs}
		if err != nil {
			results[i].outcome, results[i].transformErr = apply.Skipped, err
			return
		}
		outcome, err := r.Applier.Ensure(callCtx, t.Cluster, key.GVK, want, verified, adopt...)
		results[i].outcome, results[i].err = outcome, clusters.CallError(callCtx, err)
		switch outcome {
		case apply.Created, apply.Updated, apply.Replaced, apply.Adopted:
			if !observedAt.IsZero() {
				metrics.ObservePropagation(metrics.KindLabel(key.GVK), key.Cluster, t.Cluster.Name(), time.Since(observedAt))
			}
		}
	})
	return results
}

// notInPlace returns the indices of the targets whose mirrors need Ensure,
// and records the others in results as unchanged. Without transform rules
// every target's mirror has the same content, so its hash is built once
// and a target whose mirror holds it already (all of them, but the one
// that a new namespace adds, when a namespace event reconciles every
// source) costs two map reads instead of a copy of the source and a hash.
// With rules, the content may differ per target: every target needs
// Ensure.
func (r *Reconciler) notInPlace(key Key, src *unstructured.Unstructured, req *annotations.Request, opts desired.Options, tgts []Target, results []result) []int {
	all := make([]int, len(tgts))
	for i := range all {
		all[i] = i
	}
	if len(tgts) < 2 || (req.Transform != nil && req.Transform.Rules != nil) {
		return all
	}
	tmpl, _, err := desired.Build(src, desired.Target{Cluster: tgts[0].Cluster.Name(), Namespace: tgts[0].Namespace}, opts, nil)
	if err != nil {
		return all
	}
	ref, hash := tmpl.GetAnnotations()[annotations.AnnotationSource], tmpl.GetAnnotations()[annotations.AnnotationContentHash]
	todo := all[:0]
	for i, t := range tgts {
		if r.Applier.InPlace(t.Cluster, key.GVK, t.Namespace, tmpl.GetName(), ref, hash) {
			results[i] = result{cluster: t.Cluster.Name(), namespace: t.Namespace, outcome: apply.Unchanged}
			continue
		}
		todo = append(todo, i)
	}
	return todo
}

// targetsAt returns the targets of tgts at the indices idx.
func targetsAt(tgts []Target, idx []int) []Target {
	out := make([]Target, len(idx))
	for j, i := range idx {
		out[j] = tgts[i]
	}
	return out
}

// callContext bounds one call to cluster c: CallTimeout, and no longer
// than c is reachable.
func (r *Reconciler) callContext(ctx context.Context, c *clusters.Cluster) (context.Context, context.CancelFunc) {
	return c.CallContext(ctx, r.opts.CallTimeout)
}

// keptNamespaces returns the namespaces of keep in each cluster, sorted,
// for deleteUntargeted to look up every mirror of a source in: a plan's
// targets are sorted by namespace in each cluster already, so this costs
// no sort and no hashing, where a set of Targets cost a map of every
// namespace on each reconcile of each source.
func keptNamespaces(keep []Target) map[*clusters.Cluster][]string {
	out := map[*clusters.Cluster][]string{}
	for _, t := range keep {
		out[t.Cluster] = append(out[t.Cluster], t.Namespace)
	}
	for _, nss := range out {
		if !slices.IsSorted(nss) {
			slices.Sort(nss)
		}
	}
	return out
}

// deleteUntargeted releases our mirrors of ref except those named name
// ("" is the source's name) in the targets of keep: deleted, or made plain
// objects where their markers say so for why (desired.Kept). A mirror of
// ref under another name (the source's target-name changed) is released
// too. It looks in the clusters of covered (those the plan resolved
// targets in), or with covered nil in every reachable cluster where they
// may exist; in either case only where the kind's caches have synced, so a
// cache still filling never makes a mirror look untargeted.
func (r *Reconciler) deleteUntargeted(ctx context.Context, key Key, ref string, keep []Target, name string, covered []*clusters.Cluster, why desired.Release) summary {
	var sum summary
	if covered == nil {
		covered, _ = r.mirrorClusters(key.Cluster)
	}
	kept := keptNamespaces(keep)
	for _, mc := range covered {
		if synced, _ := mc.KindSynced(key.GVK); !synced {
			continue
		}
		for _, m := range mc.MirrorsOf(key.GVK, ref) {
			_, targeted := slices.BinarySearch(kept[mc], m.GetNamespace())
			if !desired.NamedAsBuilt(m.GetName(), m.GetAnnotations()) || (m.GetName() == cmp.Or(name, key.Name) && targeted) {
				continue
			}
			callCtx, cancel := r.callContext(ctx, mc)
			outcome, err := r.Applier.Release(callCtx, mc, key.GVK, m, ref, why)
			err = clusters.CallError(callCtx, err)
			cancel()
			sum.record(metrics.KindLabel(key.GVK), result{cluster: mc.Name(), namespace: m.GetNamespace(), outcome: outcome, err: err})
		}
	}
	return sum
}

// finish reports the outcome of a reconcile and says when to come back.
// meta is the source's metadata as this reconcile last wrote it (src's
// when it wrote nothing).
func (r *Reconciler) finish(ctx context.Context, c *clusters.Cluster, key Key, src *unstructured.Unstructured, meta metav1.Object, plan Plan, sum summary, via *v1alpha1.MirrorPolicy, copied *string) (Result, error) {
	line := statusLine(plan, sum, r.opts.Scope == ScopeRemote)
	if len(sum.errors) > 0 && r.breaker.open(key) {
		line += "; retries backing off"
	}
	if changed := sum.created + sum.updated + sum.replaced + sum.deleted; changed > 0 {
		r.recorder(c).Eventf(src, events.Normal, ReasonMirrorsSynced,
			"Created %d, updated %d, replaced %d, deleted %d mirrors; %s", sum.created, sum.updated, sum.replaced, sum.deleted, line)
	}
	if len(sum.adopted) > 0 {
		names := make([]string, len(sum.adopted))
		for i, ns := range sum.adopted {
			names[i] = ns + "/" + key.Name
		}
		r.recorder(c).Eventf(src, events.Normal, ReasonAdopted, "Adopted proven copies of this source made by another tool; they are mirrors now: %s",
			joinLimited(names))
	}
	r.warnIf(c, src, ReasonTargetConflict, len(sum.conflicts) > 0, "Not written, name taken: %s", joinLimited(sum.conflicts))
	r.warnIf(c, src, ReasonSyncFailed, len(sum.failures) > 0, "Writing failed, will retry: %s", joinLimited(sum.failures))
	if r.warnIf(c, src, ReasonTransformFailed, len(sum.transformErrs) > 0, "Transform rules failed: %s", joinLimited(sum.transformErrs)) {
		metrics.TransformErrors.WithLabelValues(metrics.KindLabel(key.GVK)).Add(float64(len(sum.transformErrs)))
	}
	r.warnIf(c, src, ReasonClusterUnreachable, len(plan.Unreachable) > 0, "Not written until the clusters are back: %s", joinLimited(plan.unreachable()))
	r.warnIf(c, src, ReasonNotInShard, len(plan.Elsewhere) > 0 && !plan.ReadEverywhere,
		"Not mirrored to %s: another replica of the sharded hub serves them and does not read cluster %s; a source in a member cluster reaches only the clusters of its own shard (docs/federation.md)",
		joinLimited(plan.Elsewhere), key.Cluster)
	if via != nil {
		r.servedOutcome(c, key, via, plan, sum, "")
		return r.resultOf(plan, sum)
	}
	if r.readOnly(c) {
		return r.resultOf(plan, sum)
	}
	var part *string
	if r.opts.WriteStatus && plan.Pending == 0 {
		part = &line
	}
	// The source's record is written while the worker goes on to the next
	// source (Result.then): a namespace event reconciles every source,
	// whose mirrors should not wait for the status writes of the others.
	return Result{then: func(ctx context.Context) (Result, error) {
		if _, err := r.patchSourceRecord(ctx, c, key, meta, part, copied); err != nil {
			return Result{}, ignoreNotFound(err)
		}
		return r.resultOf(plan, sum)
	}}, nil
}

// resultOf is what a reconcile that came to plan and sum returns once its
// writes are done.
func (r *Reconciler) resultOf(plan Plan, sum summary) (Result, error) {
	if err := sum.err(); err != nil {
		return Result{}, err
	}
	if len(plan.Unreachable) > 0 {
		return Result{RequeueAfter: retryUnreachable}, nil
	}
	if plan.Pending > 0 {
		return Result{RequeueAfter: retryStale}, nil
	}
	if len(sum.conflicts) > 0 {
		// Objects that are not ours are not watched: look again now and
		// then, so the mirror appears once the name is free.
		return Result{RequeueAfter: retryConflict}, nil
	}
	return Result{}, nil
}

// reportPlan warns about targets that matched but cannot be written, once
// per distinct message.
func (r *Reconciler) reportPlan(c *clusters.Cluster, src *unstructured.Unstructured, plan Plan) {
	r.warnIf(c, src, ReasonTargetsOverLimit, len(plan.Skipped) > 0, "%d matching targets skipped over the limit of %d (first skipped: %s)",
		len(plan.Skipped), len(plan.Targets), firstOr(plan.Skipped))
	r.warnIf(c, src, ReasonNamespaceRefused, len(plan.Refused) > 0, "Excluded or opted out, not written: %s", joinLimited(plan.Refused))
	r.warnIf(c, src, ReasonNamespaceMissing, len(plan.Missing) > 0, "Named namespaces that do not exist yet: %s", joinLimited(plan.Missing))
}

// warnIf emits a Warning event when cond holds and the message differs from
// the last one of that reason for this source, so a resync repeats nothing.
// It reports whether it emitted.
func (r *Reconciler) warnIf(c *clusters.Cluster, src *unstructured.Unstructured, reason string, cond bool, format string, args ...any) bool {
	if cond && sourceWide[reason] && r.readOnly(c) {
		return false // every replica would say the same; the serving one does
	}
	key := Key{Cluster: c.Name(), GVK: src.GroupVersionKind(), Namespace: src.GetNamespace(), Name: src.GetName()}
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
	r.recorder(c).Eventf(src, events.Warning, reason, "%s", msg)
	return true
}

// sourceWide are the warnings about the source itself, the same from every
// replica of a sharded hub: only the replica that serves the source's
// cluster emits them. The others are about targets, which each replica
// reports for its own clusters.
var sourceWide = map[string]bool{ReasonInvalidAnnotation: true, ReasonInvalidTransform: true, ReasonSourceRefused: true}

// warned reports whether warnIf already emitted msg for reason about src.
func (r *Reconciler) warned(c *clusters.Cluster, src *unstructured.Unstructured, reason, msg string) bool {
	key := Key{Cluster: c.Name(), GVK: src.GroupVersionKind(), Namespace: src.GetNamespace(), Name: src.GetName()}
	v, ok := r.reported.Load(key)
	if !ok {
		return false
	}
	prev, ok := v.(*sync.Map).Load(reason)
	return ok && prev == msg
}

func (r *Reconciler) forget(key Key) {
	r.own.forget(key)
	r.breaker.forget(key)
	r.observed.Delete(key)
	r.reported.Delete(key)
	r.hints.Delete(key)
	r.planned.Delete(key)
	r.carried.Delete(key)
}

// Observe records that a source changed now, for the propagation metric.
// Only the first change before a reconcile counts.
func (r *Reconciler) Observe(key Key) {
	r.observed.LoadOrStore(key, time.Now())
}

// keepObserved puts back an observation takeObserved took, unless a later
// event noted one already (the earlier is kept either way).
func (r *Reconciler) keepObserved(key Key, at time.Time) {
	if !at.IsZero() {
		r.observed.LoadOrStore(key, at)
	}
}

func (r *Reconciler) takeObserved(key Key) time.Time {
	if v, ok := r.observed.LoadAndDelete(key); ok {
		return v.(time.Time)
	}
	return time.Time{}
}

// patchSource sets our part of src's status annotation (part nil: leave
// it; "": remove our part) and takes off the finalizer older versions
// held. It writes only what changes, and always with the resourceVersion
// of the metadata it computed the change from, so that a concurrent change
// of the finalizers or of the other writer's part of the status is never
// lost. It returns the source's metadata as written (src when nothing was).
//
// The agent's own writes never conflict with each other. A cached src
// older than our last write of it (the cache has not caught up) is read
// again first; a conflict with somebody else's write is answered by
// reading the source again and computing the change once more.
func (r *Reconciler) patchSource(ctx context.Context, c *clusters.Cluster, key Key, src metav1.Object, part *string) (metav1.Object, error) {
	return r.patchSourceRecord(ctx, c, key, src, part, nil)
}

// patchSourceRecord is patchSource that also sets this writer's part of
// the copy-once record (fleetmirror.io/copied) to the entries of *copied,
// unless copied is nil. A conflict computes both again from the fresh
// source; the record keeps what the other writer put there meanwhile.
func (r *Reconciler) patchSourceRecord(ctx context.Context, c *clusters.Cluster, key Key, src metav1.Object, part, copied *string) (metav1.Object, error) {
	cur := src
	if last := r.own.lastOf(key); last != "" && olderThan(cur.GetResourceVersion(), last) {
		fresh, err := r.freshSource(ctx, c, key)
		if err != nil {
			return nil, err
		}
		cur = fresh
	}
	var mine []string
	if copied != nil {
		mine = splitList(*copied)
	}
	for attempt := 0; ; attempt++ {
		fins, status := r.sourceChange(cur, part)
		record := nextRecordValue(cur, mine, copied != nil, r.opts.Scope == ScopeRemote)
		if fins == nil && status == nil && record == nil {
			return cur, nil
		}
		end := r.own.begin(key)
		written, err := r.patchMetadata(ctx, c, key, cur.GetResourceVersion(), fins, status, record)
		if err == nil {
			end(written.GetResourceVersion())
			if cur == src {
				// Our own write on the version last planned on changes
				// nothing a fast pass goes by.
				r.advancePlanned(key, src.GetResourceVersion(), written.GetResourceVersion())
			}
			return written, nil
		}
		end("")
		if !apierrors.IsConflict(err) || attempt > 0 {
			return nil, err
		}
		if cur, err = r.freshSource(ctx, c, key); err != nil {
			return nil, err
		}
	}
}

// sourceChange returns what patchSource writes onto cur: the finalizers
// without the one older versions held, and the new status annotation,
// each nil when unchanged.
func (r *Reconciler) sourceChange(cur metav1.Object, part *string) (finalizers []string, status *string) {
	if fins := cur.GetFinalizers(); slices.Contains(fins, r.opts.Identity.Finalizer) {
		finalizers = withoutFinalizer(fins, r.opts.Identity.Finalizer)
	}
	if part != nil {
		current := cur.GetAnnotations()[annotations.AnnotationStatus]
		if merged := mergeStatus(current, *part, r.opts.Scope == ScopeRemote); merged != current {
			status = &merged
		}
	}
	return finalizers, status
}

// stale reports whether src carries what patchSource takes off before a
// reconcile writes mirrors: the finalizer older versions held or, when a
// policy serves src (via), our part of its status.
func (r *Reconciler) stale(c *clusters.Cluster, src metav1.Object, via *v1alpha1.MirrorPolicy) bool {
	if r.readOnly(c) {
		return false
	}
	empty := ""
	fins, status := r.sourceChange(src, &empty)
	return fins != nil || (via != nil && status != nil)
}

// freshSource reads the source's metadata from the API server; a source
// that is gone is NotFound.
func (r *Reconciler) freshSource(ctx context.Context, c *clusters.Cluster, key Key) (metav1.Object, error) {
	fresh, err := r.getSourceMetadata(ctx, c, key)
	if err == nil && fresh == nil {
		err = apierrors.NewNotFound(schema.GroupResource{Group: key.GVK.Group, Resource: key.GVK.Kind}, key.Name)
	}
	if err != nil {
		return nil, err
	}
	return fresh, nil
}

// olderThan reports whether resourceVersion a is older than b. Versions
// of one object from one API server are ordered; anything that does not
// parse as such is not older.
func olderThan(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp < 0
}

func (r *Reconciler) patchMetadata(ctx context.Context, c *clusters.Cluster, key Key, resourceVersion string, finalizers []string, status, record *string) (*metav1.PartialObjectMetadata, error) {
	md := map[string]any{"resourceVersion": resourceVersion}
	if finalizers != nil {
		md["finalizers"] = finalizers
	}
	annots := map[string]any{}
	for k, v := range map[string]*string{annotations.AnnotationStatus: status, annotations.AnnotationCopied: record} {
		switch {
		case v == nil:
		case *v == "":
			annots[k] = nil // merge patch null deletes the key
		default:
			annots[k] = *v
		}
	}
	if len(annots) > 0 {
		md["annotations"] = annots
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return nil, err
	}
	res, err := c.MetadataResource(key.GVK, key.Namespace)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := r.callContext(ctx, c)
	defer cancel()
	// A merge patch never creates: a source deleted meanwhile is NotFound.
	written, err := res.Patch(callCtx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: r.Applier.FieldManager})
	return written, clusters.CallError(callCtx, err)
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

// errs collects target errors into one.
func errs(list []error) error { return kerrors.NewAggregate(list) }

// parallelPerCluster calls fn for every target, with at most per calls in
// flight for each cluster and the clusters side by side: each API server
// gets the load --write-parallelism allows, and a hub's fan-out to a
// hundred clusters is not queued behind one bound for all of them.
func parallelPerCluster(ctx context.Context, per int, tgts []Target, fn func(i int)) {
	byCluster := map[*clusters.Cluster][]int{}
	for i, t := range tgts {
		byCluster[t.Cluster] = append(byCluster[t.Cluster], i)
	}
	var wg sync.WaitGroup
	for _, idx := range byCluster {
		wg.Go(func() {
			workqueue.ParallelizeUntil(ctx, per, len(idx), func(j int) { fn(idx[j]) })
		})
	}
	wg.Wait()
}
