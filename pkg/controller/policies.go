package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/events"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
	"github.com/fleetmirror/fleetmirror/pkg/policy"
)

// Event reasons and condition reasons of MirrorPolicies.
const (
	// ReasonSourceClaimed: a source this policy names is mirrored by its
	// own annotations or by an older policy; this one leaves it alone.
	ReasonSourceClaimed = "SourceClaimed"
	// ReasonInvalidPolicy: the policy's spec is invalid.
	ReasonInvalidPolicy = "InvalidPolicy"
	// ReasonKindNotMirrored: the agent does not mirror the kind the
	// policy names (not served, denied, or not granted).
	ReasonKindNotMirrored = "KindNotMirrored"
	// ReasonSynced: every source's mirrors are in place.
	ReasonSynced = "Synced"
	// ReasonPending: some sources have not been mirrored yet.
	ReasonPending = "Pending"
	// ReasonNoSources: the policy names no existing object.
	ReasonNoSources = "NoSources"
)

// PolicyFinalizer is the finalizer older versions held on MirrorPolicies.
// None is added any more: a policy's mirrors are removed when its deletion
// is seen, or by the sweep at the next start, so that an agent that is gone
// (uninstalled without its hook, its namespace deleted, scaled to zero)
// never leaves a policy, its namespace or the CRD stuck in deletion.
// Agents take it off wherever they find it.
const PolicyFinalizer = annotations.Prefix + "policy-cleanup"

// retryPolicy is how soon a policy waiting for its sources' watches or
// for the removal of its mirrors is looked at again.
const retryPolicy = 500 * time.Millisecond

// policyOutcome is what the last reconcile of a source named by policies
// found, for its policies' status.
type policyOutcome struct {
	// servedBy is the policy that mirrors the source; claimedBy, when
	// the policy does not, says who does: the source's annotations or an
	// older policy.
	servedBy, claimedBy         string
	synced, conflicts, failures int
	// problem is the first thing wrong, for the Degraded condition.
	reason, problem string
	// copied is the copy-once record of the source: the targets (NS, or
	// CLUSTER/NS) it has a copy in or had one in, comma separated.
	copied string
}

// policyState is the spec (generation) of a policy and the epoch of its
// sources' watches.
type policyState struct {
	generation int64
	watches    uint64
	// triggers counts the changes of the namespaces that hold an object
	// of its trigger: each may add or take away a target of every source.
	triggers uint64
}

// policyMemo is what the reconciler remembers of a policy between its
// reconciles, which the work queue never runs at once for one policy.
type policyMemo struct {
	// acted is the state its sources were last enqueued for: once per
	// change, once its watches have synced; nil before the first time.
	acted *policyState
	// waitingSince is when it was first seen waiting for its kind to be
	// watched, pendingSince when first seen with sources not looked at
	// yet; zero when it is not.
	waitingSince, pendingSince time.Time
}

// policies is the reconciler's memory of policies and of the sources they
// name.
type policies struct {
	memos    sync.Map // Key (Policy) -> *policyMemo
	outcomes sync.Map // Key (source) -> *sync.Map of policy id -> policyOutcome
	// parked holds the sources missing from the caches while a policy
	// that may name them was still listing (release), by scope; the
	// policy wakes them once its watches have synced, or parkedRetry
	// after the scope's first, whichever comes first.
	parked sync.Map // parkScope -> *sync.Map of Key (source) -> struct{}
}

// parkScope is where a parked source is: the objects of one kind in one
// namespace of one cluster, those a policy there may name.
type parkScope struct {
	cluster, namespace string
	gvk                schema.GroupVersionKind
}

// park keeps the source key until a policy of its scope wakes it. The
// first key of a scope sets the scope's fallback, a wake parkedRetry later
// for a watch that never syncs. It is a timer and not a delayed add of
// each key: those would reconcile every source once more after the policy
// has woken them (after a restart, every source 30 s later).
func (r *Reconciler) park(key Key) {
	scope := parkScope{key.Cluster, key.Namespace, key.GVK}
	m, loaded := r.policies.parked.LoadOrStore(scope, &sync.Map{})
	m.(*sync.Map).Store(key, struct{}{})
	if !loaded {
		time.AfterFunc(r.parkRetry, func() { r.wakeParked(scope) })
	}
}

// unpark enqueues the sources parked in the scope of the policy key, of
// kind gvk, whose watches have synced.
func (r *Reconciler) unpark(key Key, gvk schema.GroupVersionKind) {
	r.wakeParked(parkScope{key.Cluster, key.Namespace, gvk})
}

// wakeParked enqueues the sources parked in scope, once: whichever of
// the policy and the fallback comes second finds none.
func (r *Reconciler) wakeParked(scope parkScope) {
	m, ok := r.policies.parked.LoadAndDelete(scope)
	if !ok {
		return
	}
	m.(*sync.Map).Range(func(k, _ any) bool {
		r.enqueue(k.(Key))
		return true
	})
}

// memo returns what is remembered of the policy key.
func (ps *policies) memo(key Key) *policyMemo {
	m, _ := ps.memos.LoadOrStore(key, &policyMemo{})
	return m.(*policyMemo)
}

// policyKey is the work queue item of the policy id in cluster.
func policyKey(cluster, id string) Key {
	ns, name := clusters.SplitPolicyID(id)
	return Key{Cluster: cluster, GVK: clusters.PolicyGVK, Namespace: ns, Name: name, Policy: true}
}

// claim picks, among the policies named (by id, PoliciesNaming), the one
// that mirrors the source: the oldest, by creation then name. The others
// are told they do not.
func (r *Reconciler) claim(c *clusters.Cluster, key Key, src *unstructured.Unstructured, named []string) *v1alpha1.MirrorPolicy {
	first, rest := policy.First(policiesOf(c, named))
	if first != nil {
		r.claimedElsewhere(c, key, src, rest, "MirrorPolicy "+first.Name)
	}
	return first
}

// policiesOf returns the cached policies of c with the ids given.
func policiesOf(c *clusters.Cluster, ids []string) []*v1alpha1.MirrorPolicy {
	var ps []*v1alpha1.MirrorPolicy
	for _, id := range ids {
		if p, ok := c.Policy(clusters.SplitPolicyID(id)); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// claimedElsewhere tells the policies ps, and the source's readers, that
// the source is mirrored by someone else (by): ps do not mirror it.
func (r *Reconciler) claimedElsewhere(c *clusters.Cluster, key Key, src *unstructured.Unstructured, ps []*v1alpha1.MirrorPolicy, by string) {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	r.warnIf(c, src, ReasonSourceClaimed, len(ps) > 0, "Mirrored by %s, which came first; not by MirrorPolicy %s, which names it too", by, strings.Join(names, ", "))
	for _, p := range ps {
		msg := fmt.Sprintf("%s %s is mirrored by %s, which came first; this policy does not mirror it", key.GVK.Kind, key.Name, by)
		r.setOutcome(c, key, clusters.PolicyID(p.Namespace, p.Name), policyOutcome{claimedBy: by, reason: ReasonSourceClaimed, problem: msg})
	}
}

// request reads what the source asks for: its own annotations when it is
// labelled as a source or no policy names it, else what the oldest policy
// that names it asks (via). A policy that names a source labelled as one
// is told it does not serve it.
func (r *Reconciler) request(c *clusters.Cluster, key Key, src *unstructured.Unstructured) (req annotations.Request, adopt []peers.Tool, via *v1alpha1.MirrorPolicy) {
	named := c.PoliciesNaming(key.GVK, key.Namespace, key.Name)
	if src.GetLabels()[annotations.LabelEnabled] == "true" || len(named) == 0 {
		r.claimedElsewhere(c, key, src, policiesOf(c, named), "its own annotations")
		req = annotations.Parse(src.GetLabels(), src.GetAnnotations())
		// The tools whose proven copies are adopted (pkg/peers imports
		// annotations, so Parse cannot read this key itself).
		var problems []string
		adopt, problems = peers.ParseAdopt(src.GetAnnotations()[annotations.AnnotationAdopt])
		req.Problems = append(req.Problems, problems...)
		return req, adopt, nil
	}
	via = r.claim(c, key, src, named)
	if via == nil {
		return annotations.Request{}, nil, nil // its policies are gone: nothing asked
	}
	req = policy.Request(&via.Spec)
	if via.DeletionTimestamp != nil {
		req.Sync = false // the policy's mirrors go before it does
	}
	adopt, _ = policy.Adopt(&via.Spec) // its problems are the policy's (specProblems)
	return req, adopt, via
}

// servedOutcome records what the reconcile of the source key found for
// via, the policy that mirrors it: what was written, and the first thing
// wrong (the source refused, else what the plan or the writes report),
// which the annotations would report in Events on the source. What is
// wrong in the spec itself the policy's reconcile finds (specProblems).
func (r *Reconciler) servedOutcome(c *clusters.Cluster, key Key, via *v1alpha1.MirrorPolicy, plan Plan, sum summary, refused string) {
	id := clusters.PolicyID(via.Namespace, via.Name)
	o := policyOutcome{servedBy: id, synced: sum.synced(),
		conflicts: len(sum.conflicts), failures: len(sum.failures)}
	if len(sum.copied) > 0 {
		copied := slices.Clone(sum.copied)
		slices.Sort(copied)
		o.copied = strings.Join(slices.Compact(copied), ",")
	}
	for _, w := range []struct {
		reason string
		found  bool
		what   string
	}{
		{ReasonSourceRefused, refused != "", refused},
		{ReasonSourceRefused, plan.Ignored != "", plan.Ignored},
		{ReasonTargetConflict, len(sum.conflicts) > 0, "not written, name taken: " + joinLimited(sum.conflicts)},
		{ReasonSyncFailed, len(sum.failures) > 0, "writing failed, will retry: " + joinLimited(sum.failures)},
		{ReasonTransformFailed, len(sum.transformErrs) > 0, "transform rules failed: " + joinLimited(sum.transformErrs)},
		{ReasonNamespaceRefused, len(plan.Refused) > 0, "excluded or opted out, not written: " + joinLimited(plan.Refused)},
		{ReasonNamespaceMissing, len(plan.Missing) > 0, "named namespaces that do not exist yet: " + joinLimited(plan.Missing)},
		{ReasonTargetsOverLimit, len(plan.Skipped) > 0, fmt.Sprintf("%d matching targets skipped over the limit", len(plan.Skipped))},
		{ReasonClusterUnreachable, len(plan.Unreachable) > 0, "not written until the clusters are back: " + joinLimited(plan.unreachable())},
	} {
		if w.found {
			o.reason, o.problem = w.reason, fmt.Sprintf("%s %s: %s", key.GVK.Kind, key.Name, w.what)
			break
		}
	}
	r.setOutcome(c, key, id, o)
}

// setOutcome records the outcome of the source key for the policy id,
// and has the policy's status follow when it changed: policyStatusDelay
// later, so that the outcomes of the sources one change reaches (a new
// namespace, a spec change) make one status write and one Event, not one
// per source.
func (r *Reconciler) setOutcome(c *clusters.Cluster, key Key, id string, o policyOutcome) {
	m, _ := r.policies.outcomes.LoadOrStore(key, &sync.Map{})
	if prev, ok := m.(*sync.Map).Swap(id, o); !ok || prev.(policyOutcome) != o {
		r.enqueueAfter(policyKey(c.Name(), id), policyStatusDelay)
	}
}

// policyStatusDelay is how long a policy's status waits for more of its
// sources' outcomes.
const policyStatusDelay = 250 * time.Millisecond

// forgetOutcomes drops what was recorded of the source key, and has the
// policies that named it look again.
func (r *Reconciler) forgetOutcomes(cluster string, key Key) {
	m, ok := r.policies.outcomes.LoadAndDelete(key)
	if !ok {
		return
	}
	m.(*sync.Map).Range(func(id, _ any) bool {
		r.enqueue(policyKey(cluster, id.(string)))
		return true
	})
}

// outcome returns what was recorded of the source key for the policy id.
func (r *Reconciler) outcome(key Key, id string) (policyOutcome, bool) {
	m, ok := r.policies.outcomes.Load(key)
	if !ok {
		return policyOutcome{}, false
	}
	o, ok := m.(*sync.Map).Load(id)
	if !ok {
		return policyOutcome{}, false
	}
	return o.(policyOutcome), true
}

// policyNames reports whether a policy of c that is not being deleted
// would name live, an object of kind key.GVK: the cache may not have
// seen it yet.
func policyNames(c *clusters.Cluster, key Key, live metav1.Object) bool {
	for _, p := range c.Policies() {
		if p.Namespace == key.Namespace && policy.Names(p, key.GVK, key.Name, live.GetLabels()) {
			return true
		}
	}
	return false
}

// policySourcesListing reports whether a policy of c in key's namespace
// names objects of key's kind and its watches have not synced yet: the
// source key, missing from the caches, may be one it names.
func policySourcesListing(c *clusters.Cluster, key Key) bool {
	for _, p := range c.PoliciesOf(key.Namespace, key.GVK) {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, synced, _ := c.PolicySourcesOf(clusters.PolicyID(p.Namespace, p.Name)); !synced {
			return true
		}
	}
	return false
}

// reconcilePolicy keeps a MirrorPolicy's watches of its sources and its
// status. Its sources are reconciled as any source is
// (reconcile): the policy is how their request is read.
func (r *Reconciler) reconcilePolicy(ctx context.Context, key Key) (Result, error) {
	log := logf.FromContext(ctx).WithValues("cluster", key.Cluster, "mirrorPolicy", key.Namespace+"/"+key.Name)
	ctx = logf.IntoContext(ctx, log)
	id := clusters.PolicyID(key.Namespace, key.Name)

	// 1. A policy gone: stop its watches; the sources they held are
	// looked at again, and lose their mirrors unless named otherwise.
	c := r.fleet.Cluster(key.Cluster)
	if c == nil {
		r.policies.memos.Delete(key)
		return Result{}, nil
	}
	p, ok := c.Policy(key.Namespace, key.Name)
	if ok {
		// The finalizer an older version held goes first, so that a
		// policy being deleted is not held by it.
		if _, err := r.dropPolicyFinalizer(ctx, c, p); err != nil {
			return Result{}, err
		}
	}
	if !ok || p.DeletionTimestamp != nil {
		// Being deleted (another finalizer holds it) is as good as gone:
		// its sources are released now.
		held := c.UnwatchPolicySources(id)
		r.policies.memos.Delete(key)
		r.enqueueSources(c, held)
		r.fleet.KindsChanged()
		return Result{}, nil
	}

	// 2. Watch what the spec names. A spec the CRD's schema should have
	// refused changes nothing until it is fixed, as invalid transform
	// rules do: a typo does not remove every mirror.
	gvk, sel, err := policy.Source(&p.Spec)
	if err != nil {
		return r.writePolicyStatus(ctx, c, p, r.failedStatus(p, ReasonInvalidPolicy, err.Error()))
	}
	trigger, err := r.policyTrigger(p)
	if err != nil {
		return r.writePolicyStatus(ctx, c, p, r.failedStatus(p, ReasonInvalidPolicy, err.Error()))
	}
	// What else the spec gets wrong is said on the policy, whose author
	// may not even read its sources' Events; the valid rest is served.
	invalid := specProblems(&p.Spec)
	spec := clusters.PolicySources{GVK: gvk, Namespace: p.Namespace, Names: p.Spec.Source.Names, Selector: sel, Trigger: trigger}
	held, err := c.WatchPolicySources(ctx, id, spec)
	if held != nil {
		r.enqueueSources(c, held)
		r.fleet.KindsChanged()
	}
	if err != nil {
		res, werr := r.writePolicyStatus(ctx, c, p, r.failedStatus(p, ReasonKindNotMirrored, err.Error()))
		if errors.Is(err, clusters.ErrTriggerRefused) {
			// Its sources are watched all the same: the sources of its
			// scope that waited for them (release) need not wait on.
			if _, synced, _ := c.PolicySourcesOf(id); synced {
				r.unpark(key, gvk)
			}
			if werr == nil {
				// The agent may be granted the kind, or the kind
				// installed, with no event of ours to tell: look again
				// now and then.
				res.RequeueAfter = clusters.TriggerRetry
			}
		}
		return res, werr
	}
	sources, synced, epoch := c.PolicySourcesOf(id)
	switch kindSynced, watched := c.KindSynced(gvk); {
	case !watched:
		r.fleet.KindsChanged()
		// Watched nowhere after a pass: the agent does not mirror it.
		if synced && !slices.Contains(c.Watched(), gvk) && r.kindRefused(key) {
			return r.writePolicyStatus(ctx, c, p, r.failedStatus(p, ReasonKindNotMirrored,
				fmt.Sprintf("the agent does not mirror %s here (not served, denied by --deny-kinds or the built-in list, or not granted to the agent)", gvk.Kind)))
		}
		return Result{RequeueAfter: retryPolicy}, nil
	case !synced:
		// The last of its watches to sync wakes it (WatchPolicySources),
		// however long that takes: nothing to poll meanwhile.
		return Result{}, nil
	case !kindSynced:
		return Result{RequeueAfter: retryPolicy}, nil
	}

	memo := r.policies.memo(key)
	memo.waitingSince = time.Time{}
	r.unpark(key, gvk)

	// 3. Once per change of the spec or of its watches
	// (whose first lists nobody else hands on), and once they have
	// synced, every source it holds is looked at.
	now := policyState{generation: p.Generation, watches: epoch}
	if trigger != nil {
		_, _, now.triggers = c.PolicyTriggers(id)
	}
	if memo.acted == nil || *memo.acted != now {
		memo.acted = &now
		r.enqueueSources(c, sources)
	}

	if r.readOnly(c) {
		return Result{}, nil
	}

	// 4. The status, from what each source's last reconcile found. The
	// sources enqueued above are being looked at, and each enqueues the
	// policy again when done: saying Pending meanwhile would only flap a
	// Ready policy (after a restart no source has an outcome yet). Pending
	// is said once it lasts pendingGrace.
	st, pending := r.aggregate(c, p, id, gvk, sources, invalid)
	if pending == 0 {
		memo.pendingSince = time.Time{}
	} else {
		if memo.pendingSince.IsZero() {
			memo.pendingSince = time.Now()
		}
		if wait := pendingGrace - time.Since(memo.pendingSince); wait > 0 {
			return Result{RequeueAfter: wait}, nil
		}
	}
	return r.writePolicyStatus(ctx, c, p, st)
}

// maxTriggerNamespaces bounds the namespaces a trigger is watched in one
// by one; a policy that names more (or globs, all, a selector) has its
// trigger watched in every namespace.
const maxTriggerNamespaces = 8

// policyTrigger is what p's trigger asks the member agent to watch: nil
// when p has none, and on the hub, whose targets in other clusters a
// trigger never narrows. Its objects are watched only in the namespaces
// p names when it names a few by name alone.
func (r *Reconciler) policyTrigger(p *v1alpha1.MirrorPolicy) (*clusters.PolicyTrigger, error) {
	gvk, sel, ok, err := policy.Trigger(&p.Spec)
	if !ok || err != nil || r.opts.Scope == ScopeRemote {
		return nil, err
	}
	t := &clusters.PolicyTrigger{GVK: gvk, Names: p.Spec.Trigger.Names, Selector: sel}
	req := policy.Request(&p.Spec)
	if req.NamespaceSelector == nil && len(req.Local) <= maxTriggerNamespaces &&
		!slices.ContainsFunc(req.Local, func(pt annotations.Pattern) bool { return pt.Kind != annotations.Name }) {
		for _, pt := range req.Local {
			t.Namespaces = append(t.Namespaces, pt.Raw)
		}
		slices.Sort(t.Namespaces)
		if len(t.Namespaces) == 0 {
			return nil, nil // no targets at all: nothing to watch
		}
	}
	return t, nil
}

// triggerWithin returns the namespaces that hold an object of via's
// trigger, and a description of that trigger for Decisions; within is
// nil when via has no trigger (or on the hub). wait reports that the
// trigger's objects are not all listed yet: until they are, the source's
// targets are not known, and the policy enqueues it again once they are.
func (r *Reconciler) triggerWithin(c *clusters.Cluster, via *v1alpha1.MirrorPolicy) (within sets.Set[string], because string, wait bool) {
	if via == nil || via.Spec.Trigger == nil || r.opts.Scope == ScopeRemote {
		return nil, "", false
	}
	within, ok, _ := c.PolicyTriggers(clusters.PolicyID(via.Namespace, via.Name))
	if !ok {
		return nil, "", true
	}
	return within, policy.TriggerDescription(via.Spec.Trigger), false
}

// pendingGrace is how long a policy's sources may go without an outcome
// before its status says Pending.
const pendingGrace = 5 * time.Second

// kindWait is how long a policy waits for its kind to be watched before
// it says the agent does not mirror it.
const kindWait = 5 * time.Second

// kindRefused reports whether the policy key has waited long enough for
// its kind to be watched to say it will not be: a kinds pass runs at
// once when a policy names a new kind.
func (r *Reconciler) kindRefused(key Key) bool {
	m := r.policies.memo(key)
	if m.waitingSince.IsZero() {
		m.waitingSince = time.Now()
	}
	return time.Since(m.waitingSince) > kindWait
}

// sourceKey is the work queue item of source s of kind gvk in c.
func sourceKey(c *clusters.Cluster, gvk schema.GroupVersionKind, s metav1.Object) Key {
	return Key{Cluster: c.Name(), GVK: gvk, Namespace: s.GetNamespace(), Name: s.GetName()}
}

// enqueueSources enqueues sources, objects of c.
func (r *Reconciler) enqueueSources(c *clusters.Cluster, sources []*unstructured.Unstructured) {
	for _, s := range sources {
		r.enqueue(Key{Cluster: c.Name(), GVK: s.GroupVersionKind(), Namespace: s.GetNamespace(), Name: s.GetName()})
	}
}

// statusPart is the part of a policy's status one writer owns and
// applies: the member agent's (Ready, Degraded, and the counts of its
// cluster) or the hub's (RemoteReady, RemoteDegraded, the remote counts).
type statusPart struct {
	ready, degraded string
	remote          bool
}

func (r *Reconciler) statusPart() statusPart {
	if r.opts.Scope == ScopeRemote {
		return statusPart{ready: v1alpha1.ConditionRemoteReady, degraded: v1alpha1.ConditionRemoteDegraded, remote: true}
	}
	return statusPart{ready: v1alpha1.ConditionReady, degraded: v1alpha1.ConditionDegraded}
}

// own returns the writer's part of st.
func (sp statusPart) own(st v1alpha1.MirrorPolicyStatus) v1alpha1.MirrorPolicyStatus {
	var out v1alpha1.MirrorPolicyStatus
	if sp.remote {
		out.RemoteTargetsSynced, out.RemoteConflicts = st.RemoteTargetsSynced, st.RemoteConflicts
	} else {
		out.ObservedGeneration, out.Sources, out.TargetsSynced, out.Conflicts = st.ObservedGeneration, st.Sources, st.TargetsSynced, st.Conflicts
	}
	for _, c := range st.Conditions {
		if c.Type == sp.ready || c.Type == sp.degraded {
			out.Conditions = append(out.Conditions, c)
		}
	}
	for _, e := range st.Copied {
		// NS/SOURCE is the member agent's, CLUSTER/NS/SOURCE the hub's.
		if (strings.Count(e, "/") == 2) == sp.remote {
			out.Copied = append(out.Copied, e)
		}
	}
	return out
}

// set sets condition typ of st, as of p's generation.
func set(st *v1alpha1.MirrorPolicyStatus, p *v1alpha1.MirrorPolicy, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: p.Generation})
}

// failedStatus is the writer's part of p's next status when the policy
// cannot be served: for reason, as msg says.
func (r *Reconciler) failedStatus(p *v1alpha1.MirrorPolicy, reason, msg string) v1alpha1.MirrorPolicyStatus {
	sp := r.statusPart()
	st := sp.own(p.Status)
	if !sp.remote {
		st.ObservedGeneration = p.Generation
	}
	set(&st, p, sp.ready, metav1.ConditionFalse, reason, msg)
	set(&st, p, sp.degraded, metav1.ConditionTrue, reason, msg)
	return st
}

// specProblems is what the parser finds wrong in spec beyond its source:
// target entries, selectors, limits, transform rules, each naming its
// field. invalid transform rules come first: they stop all mirroring.
func specProblems(spec *v1alpha1.MirrorPolicySpec) (invalid invalidSpec) {
	req := policy.Request(spec)
	if req.TransformErr != nil {
		invalid.transform = true
		invalid.problems = append(invalid.problems, fmt.Sprintf("spec.transform: %v; nothing is mirrored until it is fixed", req.TransformErr))
	}
	invalid.problems = append(invalid.problems, req.Problems...)
	_, adopt := policy.Adopt(spec)
	invalid.problems = append(invalid.problems, adopt...)
	return invalid
}

// invalidSpec is what specProblems found.
type invalidSpec struct {
	problems []string
	// transform: the transform rules are invalid, so nothing is mirrored.
	transform bool
}

// notReady are the reasons a source's outcome gives that keep its mirrors
// from being in place: the policy is not Ready while one of its sources
// gives one. The others (a namespace excluded, opted out or missing) say
// why a mirror is not wanted, not that a wanted one is missing.
var notReady = map[string]bool{
	ReasonSourceRefused: true, ReasonInvalidPolicy: true, ReasonTargetConflict: true, ReasonSyncFailed: true,
	ReasonTransformFailed: true, ReasonTargetsOverLimit: true, ReasonClusterUnreachable: true,
}

// aggregate is the writer's part of p's next status, from what the last
// reconcile of each of its sources found and what is wrong in its spec
// (invalid), and how many sources have no outcome yet. The hub has nothing
// to say of a policy without CLUSTER/NS entries.
//
// Degraded is True, with InvalidPolicy first, when anything is wrong;
// Ready is True only when every source's wanted mirrors are in place.
func (r *Reconciler) aggregate(c *clusters.Cluster, p *v1alpha1.MirrorPolicy, id string, gvk schema.GroupVersionKind, sources []*unstructured.Unstructured, invalid invalidSpec) (st v1alpha1.MirrorPolicyStatus, pending int) {
	sp := r.statusPart()
	st = sp.own(p.Status)
	if sp.remote {
		if req := policy.Request(&p.Spec); len(req.Remote) == 0 && req.RemoteNamespaceSelector() == nil {
			return v1alpha1.MirrorPolicyStatus{}, 0
		}
	} else {
		st.ObservedGeneration = p.Generation
	}
	var synced, conflicts int32
	problems, reason := slices.Clone(invalid.problems), ""
	if len(problems) > 0 {
		reason = ReasonInvalidPolicy
	}
	notReadyReason, notReadyProblems := "", []string{}
	for _, s := range sources {
		o, ok := r.outcome(sourceKey(c, gvk, s), id)
		if !ok {
			pending++
			continue
		}
		synced += int32(o.synced)       //nolint:gosec // a count of targets
		conflicts += int32(o.conflicts) //nolint:gosec // a count of targets
		if o.claimedBy != "" {
			conflicts++
		}
		if o.problem == "" {
			continue
		}
		problems = append(problems, o.problem)
		if reason == "" {
			reason = o.reason
		}
		if notReady[o.reason] {
			notReadyProblems = append(notReadyProblems, o.problem)
			if notReadyReason == "" {
				notReadyReason = o.reason
			}
		}
	}
	st.Copied = r.policyCopied(c, id, gvk, sources, st.Copied)
	if sp.remote {
		st.RemoteTargetsSynced, st.RemoteConflicts = synced, conflicts
	} else {
		st.Sources, st.TargetsSynced, st.Conflicts = int32(len(sources)), synced, conflicts //nolint:gosec // a count of cached objects
	}
	if len(problems) > 0 {
		set(&st, p, sp.degraded, metav1.ConditionTrue, reason, joinLimited(problems))
	} else {
		set(&st, p, sp.degraded, metav1.ConditionFalse, ReasonSynced, "Nothing wrong")
	}
	switch {
	case invalid.transform:
		set(&st, p, sp.ready, metav1.ConditionFalse, ReasonInvalidPolicy, invalid.problems[0])
	case pending > 0:
		set(&st, p, sp.ready, metav1.ConditionFalse, ReasonPending, fmt.Sprintf("%d of %d sources not mirrored yet", pending, len(sources)))
	case notReadyReason != "":
		set(&st, p, sp.ready, metav1.ConditionFalse, notReadyReason, joinLimited(notReadyProblems))
	case len(sources) == 0:
		set(&st, p, sp.ready, metav1.ConditionTrue, ReasonNoSources, "No "+gvk.Kind+" named by the policy exists in "+p.Namespace)
	default:
		set(&st, p, sp.ready, metav1.ConditionTrue, ReasonSynced, fmt.Sprintf("%d sources, %d mirrors in place", len(sources), synced))
	}
	return st, pending
}

// writePolicyStatus applies st, the writer's part of p's status, when it
// differs from what p holds, and tells the policy's users, once per
// change, what became wrong and when all is in place. Server-side apply
// with the writer's field manager: the member agent's and the hub's parts
// are owned apart, so neither writes over the other's, and a count that
// drops to zero (left out) is removed.
func (r *Reconciler) writePolicyStatus(ctx context.Context, c *clusters.Cluster, p *v1alpha1.MirrorPolicy, st v1alpha1.MirrorPolicyStatus) (Result, error) {
	sp := r.statusPart()
	cur := sp.own(p.Status)
	if r.readOnly(c) || equality.Semantic.DeepEqual(st, cur) {
		return Result{}, nil
	}
	if d := meta.FindStatusCondition(st.Conditions, sp.degraded); d != nil && d.Status == metav1.ConditionTrue {
		if old := meta.FindStatusCondition(cur.Conditions, sp.degraded); old == nil || old.Message != d.Message {
			r.recorder(c).Eventf(p, events.Warning, d.Reason, "%s", d.Message)
		}
	}
	if rd := meta.FindStatusCondition(st.Conditions, sp.ready); rd != nil && rd.Reason == ReasonSynced {
		if old := meta.FindStatusCondition(cur.Conditions, sp.ready); old == nil || old.Message != rd.Message {
			r.recorder(c).Eventf(p, events.Normal, ReasonMirrorsSynced, "%s", rd.Message)
		}
	}
	patch, err := json.Marshal(map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": clusters.PolicyGVK.Kind,
		"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace},
		"status":   st,
	})
	if err != nil {
		return Result{}, err
	}
	res, err := c.Resource(clusters.PolicyGVK, p.Namespace)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := r.callContext(ctx, c)
	defer cancel()
	_, err = res.Patch(ctx, p.Name, types.ApplyPatchType, patch, metav1.PatchOptions{FieldManager: r.opts.Identity.FieldManager, Force: ptr.To(true)}, "status")
	return Result{}, ignoreNotFound(err)
}

// dropPolicyFinalizer takes the finalizer older member agents held off p,
// guarded by its resourceVersion: a conflict is retried from the next
// event. Only the member agent writes it; the hub never held one.
func (r *Reconciler) dropPolicyFinalizer(ctx context.Context, c *clusters.Cluster, p metav1.Object) (dropped bool, err error) {
	if r.opts.Scope != ScopeLocal || r.readOnly(c) || !slices.Contains(p.GetFinalizers(), PolicyFinalizer) {
		return false, nil
	}
	key := policyKey(c.Name(), clusters.PolicyID(p.GetNamespace(), p.GetName()))
	_, err = r.patchMetadata(ctx, c, key, p.GetResourceVersion(), withoutFinalizer(p.GetFinalizers(), PolicyFinalizer), nil, nil)
	return err == nil, ignoreNotFound(err)
}
