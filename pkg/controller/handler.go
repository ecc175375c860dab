package controller

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
)

// eventSource turns what happens in the fleet into work queue items: it
// is the fleet's Subscriber and the controller's source. Until the
// controller starts (and after leader election is won), events are
// dropped, because Start enqueues every known source once anyway.
type eventSource struct {
	reconciler *Reconciler
	fleet      *fleet.Fleet
	// crossCluster marks the hub: a namespace change in one cluster
	// concerns the sources of every other cluster.
	crossCluster bool

	mu     sync.RWMutex
	queue  queue
	sweeps *sweeps
	// ups counts the Up calls of each cluster; startSwept holds the
	// clusters Start swept before their first Up (see Up).
	ups        map[string]int
	startSwept map[string]bool
}

var _ fleet.Subscriber = (*eventSource)(nil)

// current returns the work queue and the sweeps, nil before Start.
func (e *eventSource) current() (queue, *sweeps) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.queue, e.sweeps
}

// add queues k as a change.
func (e *eventSource) add(k Key) { e.addAt(k, asChange) }

// addAt queues k as a change, or with sweep as part of a sweep (see
// sweeps), for whatever may have changed: not for namespaces alone (see
// addForNamespace).
func (e *eventSource) addAt(k Key, sweep bool) {
	if e.reconciler != nil {
		e.reconciler.dropHints(k)
	}
	e.queueAt(k, sweep)
}

// addForNamespace queues the source k as a change because namespace ns
// changed, which its reconcile may look at first (newnamespace.go).
func (e *eventSource) addForNamespace(k Key, ns string) {
	e.reconciler.hintNamespace(k, ns)
	e.queueAt(k, asChange)
}

func (e *eventSource) queueAt(k Key, sweep bool) {
	q, sw := e.current()
	switch {
	case q == nil:
	case sweep:
		sw.add(k)
	default:
		sw.drop(k)
		q.Add(k)
	}
}

func (e *eventSource) addAfter(k Key, d time.Duration) {
	if q, _ := e.current(); q != nil {
		q.AddAfter(k, d)
	}
}

// Source enqueues a changed source, unless the change is our own write of
// its metadata (ownWrites).
func (e *eventSource) Source(cluster string, gvk schema.GroupVersionKind, obj *unstructured.Unstructured, deleted bool) {
	k := Key{Cluster: cluster, GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	changed := func() {
		e.reconciler.Observe(k)
		e.add(k)
		e.enqueuePullsOf(cluster, gvk, obj)
	}
	if deleted {
		changed()
		return
	}
	e.reconciler.own.sort(k, obj.GetResourceVersion(), changed)
}

// Mirror enqueues the source of a mirror that was deleted or drifted from
// what we wrote, or whose source is not cached. Mirrors that hold what we
// stamped need no attention: their source's own events cover every change
// we make. But a mirror written by a reconcile that ran while its source was
// being deleted may reach the cache after the source's release looked for
// mirrors to delete: no finalizer holds the source for it, so the mirror's
// own arrival has its (missing) source looked at again.
func (e *eventSource) Mirror(cluster string, gvk schema.GroupVersionKind, obj *clusters.Mirror, deleted bool) {
	if deleted {
		e.reconciler.Applier.Forget(cluster, gvk, obj)
	} else {
		e.reconciler.Applier.Seen(cluster, gvk, obj)
	}
	if !deleted && obj.GetDeletionTimestamp() == nil && e.reconciler.Applier.AsWritten(obj) {
		// A cluster that left, or a reference that cannot be read: Left
		// and the sweeps look at these.
		if cached, inFleet := e.sourceCached(gvk, obj); cached || !inFleet {
			return
		}
	}
	e.enqueueSourceOf(gvk, obj, asChange)
}

// sourceCached reports whether the source of mirror m is in its cluster's
// caches, and whether that cluster is in the fleet (false too when the
// reference cannot be read).
func (e *eventSource) sourceCached(gvk schema.GroupVersionKind, m *clusters.Mirror) (cached, inFleet bool) {
	cluster, ns, name, ok := ParseSourceRef(m.GetAnnotations()[annotations.AnnotationSource])
	if !ok {
		return false, false
	}
	c := e.fleet.Cluster(cluster)
	if c == nil {
		return false, false
	}
	_, cached = c.Source(gvk, ns, name)
	return cached, true
}

func (e *eventSource) enqueueSourceOf(gvk schema.GroupVersionKind, obj *clusters.Mirror, sweep bool) {
	cluster, ns, name, ok := ParseSourceRef(obj.GetAnnotations()[annotations.AnnotationSource])
	if ok {
		e.addAt(Key{Cluster: cluster, GVK: gvk, Namespace: ns, Name: name}, sweep)
	}
}

// Namespace enqueues every source of the cluster when a namespace appears,
// changes labels or goes away: any of them may target it. So may the pull
// mirrors in it receive content or not.
func (e *eventSource) Namespace(cluster string, ns *metav1.PartialObjectMetadata) {
	for _, c := range e.fleet.Clusters() {
		switch {
		case e.crossCluster && c.Name() != cluster:
			e.enqueueSources(c, asChange)
		case !e.crossCluster && c.Name() == cluster:
			for _, gvk := range c.Watched() {
				for _, s := range c.Sources(gvk) {
					e.addForNamespace(Key{Cluster: c.Name(), GVK: gvk, Namespace: s.GetNamespace(), Name: s.GetName()}, ns.GetName())
				}
				e.enqueuePulls(c, gvk, asChange)
			}
		}
	}
	e.enqueuePullsIn(cluster, ns.GetName())
}

// Policy enqueues a changed MirrorPolicy; its reconcile enqueues its
// sources when what it asks for changed.
func (e *eventSource) Policy(cluster string, p *v1alpha1.MirrorPolicy, _ bool) {
	e.add(policyKey(cluster, clusters.PolicyID(p.Namespace, p.Name)))
}

// KindSynced is called when the watches of a kind newly watched in c have
// synced: its sources, the sources of its mirrors, and for the hub the
// sources of that kind elsewhere (c is a new target) are looked at.
func (e *eventSource) KindSynced(c *clusters.Cluster, gvk schema.GroupVersionKind) {
	for _, other := range e.fleet.Clusters() {
		if other == c || e.crossCluster {
			e.enqueueKind(other, gvk, asSweep)
		}
	}
	e.enqueueOrphanCandidates(c, gvk)
}

// Down enqueues every source of every cluster: a target cluster became
// unreachable, and their status must say so.
func (e *eventSource) Down(*clusters.Cluster) { e.enqueueAll() }

// Left forgets what was written to the cluster named name and enqueues
// every source: the cluster left or was replaced, and their status must
// say so. The mirrors of the sources of a cluster that left are looked at.
func (e *eventSource) Left(name string, gone bool) {
	e.reconciler.Applier.ForgetCluster(name)
	e.reconciler.snapshots.Delete(name) // keeps the connection that left alive
	if gone {
		e.clusterGone(name)
		e.reconciler.forgetPullCluster(name)
	}
	e.enqueueAll()
}

// enqueueAll queues every source of every cluster, as a sweep does.
func (e *eventSource) enqueueAll() {
	for _, c := range e.fleet.Clusters() {
		e.enqueueSources(c, asSweep)
	}
}

// clusterGone enqueues the sources of every mirror that refers to a source
// in the cluster named name, which left the fleet.
func (e *eventSource) clusterGone(name string) {
	for _, c := range e.fleet.Clusters() {
		for _, gvk := range c.Watched() {
			for _, m := range c.AllMirrors(gvk) {
				if cl, _, _, ok := ParseSourceRef(m.GetAnnotations()[annotations.AnnotationSource]); ok && cl == name {
					e.enqueueSourceOf(gvk, m, asSweep)
				}
			}
		}
	}
}

func (e *eventSource) enqueueSources(c *clusters.Cluster, sweep bool) {
	for _, gvk := range c.Watched() {
		e.enqueueKind(c, gvk, sweep)
	}
}

// enqueueKind enqueues the sources and the pull mirrors of kind gvk in c.
func (e *eventSource) enqueueKind(c *clusters.Cluster, gvk schema.GroupVersionKind, sweep bool) {
	for _, s := range c.Sources(gvk) {
		e.addAt(Key{Cluster: c.Name(), GVK: gvk, Namespace: s.GetNamespace(), Name: s.GetName()}, sweep)
	}
	e.enqueuePulls(c, gvk, sweep)
}

// Start is the controller source. Once the fleet is known and the local
// caches have synced it records the queue and enqueues every source and
// the source of every mirror, which sweeps mirrors orphaned while the
// agent was down. It returns at once.
func (e *eventSource) Start(ctx context.Context, q queue, sw *sweeps) error {
	go func() {
		// After an outage of the agent's own API server, a leader that
		// took over meanwhile starts once its watches have caught up.
		if e.fleet.WaitForLocal(ctx) != nil || e.fleet.WaitForLocalWatches(ctx) != nil {
			return
		}
		clusters := e.fleet.Clusters()
		names := make([]string, len(clusters))
		for i, c := range clusters {
			names[i] = c.Name()
		}
		e.begin(q, sw, names)
		for _, c := range clusters {
			e.sweep(c)
		}
	}()
	return nil
}

// Up is called when a cluster has its caches and answers, at first or
// again: its sources, the sources of its mirrors, and every other source
// (the cluster may be a new target) are looked at.
//
// The member agent's own cluster, when Start swept it from synced caches
// before its first Up, is not swept again then: nothing changed in between
// that its events did not bring, and the second sweep made every source
// of a starting agent be reconciled twice. (On the hub a cluster that was
// not up yet is a pending target for the others, so it is swept.)
func (e *eventSource) Up(c *clusters.Cluster) {
	if e.firstUpAfterStart(c.Name()) && !e.crossCluster {
		return
	}
	for _, other := range e.fleet.Clusters() {
		if other != c {
			e.enqueueSources(other, asSweep)
		}
	}
	e.sweep(c)
}

// begin records the queue and the sweeps, and notes which of the clusters
// named, about to be swept, have not been up yet.
func (e *eventSource) begin(q queue, sw *sweeps, names []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queue, e.sweeps = q, sw
	if e.startSwept == nil {
		e.startSwept = map[string]bool{}
	}
	for _, name := range names {
		if e.ups[name] == 0 {
			e.startSwept[name] = true
		}
	}
}

// firstUpAfterStart counts an Up of the cluster named name and reports
// whether it is the first one and Start swept the cluster before it.
func (e *eventSource) firstUpAfterStart(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ups == nil {
		e.ups = map[string]int{}
	}
	e.ups[name]++
	swept := e.startSwept[name]
	delete(e.startSwept, name)
	return swept && e.ups[name] == 1
}

// sweep enqueues the sources of c and the sources of its mirrors, of every
// kind whose caches have synced there; a kind still syncing is looked at
// when it has (KindSynced).
func (e *eventSource) sweep(c *clusters.Cluster) {
	for _, p := range c.Policies() {
		e.addAt(policyKey(c.Name(), clusters.PolicyID(p.Namespace, p.Name)), asSweep)
	}
	for _, gvk := range c.Watched() {
		if synced, _ := c.KindSynced(gvk); !synced {
			continue
		}
		e.enqueueKind(c, gvk, asSweep)
		e.enqueueOrphanCandidates(c, gvk)
	}
}

// enqueueOrphanCandidates enqueues the source of every mirror of kind gvk
// in c that is not cached in its cluster: deleted while the agent was
// down, say, so that its mirrors are released. The sources that are cached
// are swept with their own cluster's sources, or will be when their kind
// has synced there; enqueued again per mirror, a source that a worker had
// already taken was reconciled once more, which made a starting agent
// reconcile most of its sources twice.
func (e *eventSource) enqueueOrphanCandidates(c *clusters.Cluster, gvk schema.GroupVersionKind) {
	for _, m := range c.AllMirrors(gvk) {
		if cached, _ := e.sourceCached(gvk, m); !cached {
			e.enqueueSourceOf(gvk, m, asSweep)
		}
	}
}

// String names the source in logs.
func (e *eventSource) String() string { return "fleetmirror cluster watches" }
