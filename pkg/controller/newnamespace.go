package controller

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// A namespace that appears, or changes labels, concerns every source of its
// cluster, and a reconcile of a source walks all of its targets: at 2,000
// namespaces and 50 sources, the 50 mirrors of a new namespace waited for
// 50 walks of 2,000 targets each. The member agent therefore answers a
// namespace event first for that namespace alone, source by source (the
// fast pass below), and walks each source's targets afterwards, behind the
// fast passes queued with it, to bring its status and everything else up
// to date. Nothing is skipped: only the order changes, and the fast pass
// writes only what the walk would write, or leaves the source to the walk.
// The walk reports the fast pass's writes as its own (carried): its Events
// and status count each mirror once, as created, updated or adopted.

// maxHinted is the most namespaces a fast pass looks at; a source with
// more pending gets the full reconcile at once.
const maxHinted = 16

// fullAfterFastPass is how soon the full reconcile follows a fast pass: at
// the back of the queue, behind the fast passes of the other sources.
const fullAfterFastPass = time.Millisecond

// namespaceHints are the namespaces whose events alone queued a source
// since its last reconcile.
type namespaceHints struct {
	mu    sync.Mutex
	names []string
	full  bool // too many: reconcile whole
}

// planned is what the last complete reconcile of a source found: the
// source's resourceVersion then, and how many targets it had.
type planned struct {
	resourceVersion string
	targets         int
}

// hintNamespace notes that a namespace event queues key. Call it before
// the key is queued.
func (r *Reconciler) hintNamespace(key Key, ns string) {
	v, _ := r.hints.LoadOrStore(key, &namespaceHints{})
	h := v.(*namespaceHints)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full || slices.Contains(h.names, ns) {
		return
	}
	if len(h.names) == maxHinted {
		h.full, h.names = true, nil
		return
	}
	h.names = append(h.names, ns)
}

// dropHints forgets the namespace hints of key: something else than a
// namespace event queued it.
func (r *Reconciler) dropHints(key Key) { r.hints.Delete(key) }

// takeHints returns the namespaces whose events alone queued key, and
// forgets them; nil when anything else queued it too.
func (r *Reconciler) takeHints(key Key) []string {
	v, ok := r.hints.LoadAndDelete(key)
	if !ok {
		return nil
	}
	h := v.(*namespaceHints)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full {
		return nil
	}
	return h.names
}

// notePlanned records what a complete reconcile of key found; a failed one
// leaves nothing to go by.
func (r *Reconciler) notePlanned(key Key, resourceVersion string, plan Plan, sum summary) {
	if sum.err() != nil || len(sum.conflicts) > 0 || len(plan.Unreachable) > 0 || plan.Pending > 0 {
		r.planned.Delete(key)
		return
	}
	r.planned.Store(key, planned{resourceVersion: resourceVersion, targets: len(plan.Targets)})
}

// fastPass serves the namespaces nss of the local cluster c for source
// key: it writes the mirrors they need, and reports done when that is all
// the event asks now: a source that none of nss concerns needs nothing, one
// that targets some of them has its whole reconcile queued after, which
// reports what the fast pass wrote (carried). It declines (done false)
// wherever the whole reconcile could decide otherwise than a look at nss
// alone: the hub, a source changed since its last complete reconcile,
// anything to report or remove, copy-once records, fresh reads, a limit
// the new targets could pass, a write that failed. The whole reconcile
// then runs at once and reports what the fast pass wrote before declining.
func (r *Reconciler) fastPass(ctx context.Context, c *clusters.Cluster, key Key, nss []string) (done bool, res Result, err error) {
	if r.opts.Scope == ScopeRemote || r.opts.VerifySourceFreshness || len(nss) == 0 {
		return false, Result{}, nil
	}
	if len(r.carriedOf(key))+len(nss) > maxHinted {
		// Namespaces keep coming: the whole reconcile, and its status,
		// are not put off any longer.
		return false, Result{}, nil
	}
	if synced, watched := c.KindSynced(key.GVK); !watched || !synced {
		return false, Result{}, nil
	}
	src, ok := c.Source(key.GVK, key.Namespace, key.Name)
	if !ok || src.GetDeletionTimestamp() != nil || desired.IsMirror(src.GetLabels()) {
		return false, Result{}, nil
	}
	v, ok := r.planned.Load(key)
	if !ok || v.(planned).resourceVersion != src.GetResourceVersion() {
		return false, Result{}, nil
	}
	req, adopt, via := r.request(c, key, src)
	if !req.Active() || len(req.Problems) > 0 || req.TransformErr != nil || req.CopyOnce || via != nil && via.Spec.Trigger != nil ||
		desired.Refusal(key.GVK, src) != "" || r.stale(c, src, via) {
		return false, Result{}, nil
	}
	if limit := r.opts.Policy.Limit(req.MaxTargets); limit > 0 && v.(planned).targets+len(nss) > limit {
		return false, Result{}, nil
	}
	all := r.namespaces(c)
	var some []targets.Namespace
	for _, ns := range nss {
		i := sort.Search(len(all), func(i int) bool { return all[i].Name >= ns })
		if i == len(all) || all[i].Name != ns {
			return false, Result{}, nil // gone: what it held is the whole reconcile's
		}
		some = append(some, all[i])
	}
	snap := targets.Fleet{Clusters: []targets.Cluster{{Name: c.Name(), State: targets.Ready, KindSynced: true, Namespaces: some}}}
	out := targets.Plan(req, sourceOf(c, src, &req), snap, r.opts.Policy, targets.Scope{
		AllowedSourceClusters: r.opts.AllowedSourceClusters, AllowedSourceNamespaces: r.opts.AllowedSourceNamespaces,
	})
	if !out.Relevant || out.Ignored != "" || mentions(out, nss) {
		return false, Result{}, nil
	}
	ref := desired.SourceRef(key.Cluster, key.Namespace, key.Name)
	var tgts []Target
	for _, ns := range nss {
		if slices.Contains(out.Targets, targets.Target{Cluster: c.Name(), Namespace: ns}) {
			tgts = append(tgts, Target{Cluster: c, Namespace: ns})
			continue
		}
		// Not a target: fine as long as no mirror of the source is there
		// to remove.
		if m, ok := c.Mirror(key.GVK, ns, req.Name(key.Name)); ok && desired.Owned(m.GetLabels(), m.GetAnnotations(), r.Applier.ManagedBy, ref) {
			return false, Result{}, nil
		}
	}
	if len(tgts) == 0 {
		return true, Result{}, nil // nothing of this source changes
	}
	var sum summary
	results := r.ensureTargets(ctx, key, src, &req, adopt, tgts, time.Time{}, false)
	stale := tally(key, tgts, results, nil, &sum) // the whole reconcile asks the API server about these
	for i, res := range results {
		switch res.outcome {
		case apply.Created, apply.Updated, apply.Replaced, apply.Adopted:
			r.carry(key, tgts[i].Namespace, res.outcome)
		}
	}
	if len(stale) > 0 || sum.err() != nil || len(sum.conflicts) > 0 || sum.skipped > 0 || len(sum.transformErrs) > 0 {
		// The whole reconcile says and retries what went wrong.
		return false, Result{}, nil
	}
	// Until the whole reconcile counts them, the new targets count against
	// the limit for the next fast pass (some may have been in place: the
	// count only errs on the side of declining).
	r.planned.Store(key, planned{resourceVersion: src.GetResourceVersion(), targets: v.(planned).targets + len(tgts)})
	// The status, and the rest, follow.
	return true, Result{RequeueAfter: fullAfterFastPass}, nil
}

// carry notes that a fast pass wrote the mirror of key in namespace ns.
// Only the worker that holds key calls it (the queue hands a key to one
// worker at a time), so the map needs no lock of its own.
func (r *Reconciler) carry(key Key, ns string, outcome apply.Outcome) {
	m := r.carriedOf(key)
	if m == nil {
		m = map[string]apply.Outcome{}
		r.carried.Store(key, m)
	}
	if _, ok := m[ns]; !ok {
		m[ns] = outcome // the first write is what happened to the namespace
	}
}

// carriedOf returns what fast passes wrote for key since its last whole
// reconcile.
func (r *Reconciler) carriedOf(key Key) map[string]apply.Outcome {
	if v, ok := r.carried.Load(key); ok {
		return v.(map[string]apply.Outcome)
	}
	return nil
}

// takeCarried returns what fast passes wrote for key, for the whole
// reconcile to report, and forgets it.
func (r *Reconciler) takeCarried(key Key) map[string]apply.Outcome {
	if v, ok := r.carried.LoadAndDelete(key); ok {
		return v.(map[string]apply.Outcome)
	}
	return nil
}

// advancePlanned moves what the last complete reconcile of key found from
// the source's version from to to, our own write of the source's record
// (status, copy-once record) on top of from.
func (r *Reconciler) advancePlanned(key Key, from, to string) {
	if v, ok := r.planned.Load(key); ok && v.(planned).resourceVersion == from {
		r.planned.CompareAndSwap(key, v, planned{resourceVersion: to, targets: v.(planned).targets})
	}
}

// mentions reports whether the outcome says anything of one of nss but
// that it is a target: a refusal, a skip, a namespace missing or a
// decision, which the source's status and Events would report.
func mentions(out targets.Outcome, nss []string) bool {
	for _, list := range [][]string{out.Skipped, out.Refused, out.Missing} {
		for _, n := range list {
			if slices.Contains(nss, n) {
				return true
			}
		}
	}
	for _, d := range out.Decisions {
		if d.Namespace == "" || slices.Contains(nss, d.Namespace) {
			return true
		}
	}
	return false
}
