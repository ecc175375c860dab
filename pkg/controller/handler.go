package controller

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// Events turns watch events of clusters into work queue items. It is the
// clusters.Handler of every cluster and the source of the controller: until
// the controller starts (and after leader election is won), events are
// dropped, because Start enqueues every known source once anyway.
type Events struct {
	// Reconciler receives the times changes were observed.
	Reconciler *Reconciler
	// Clusters lists the clusters whose sources this controller reconciles.
	Clusters func() []*clusters.Cluster
	// CrossCluster marks the hub: a namespace change in one cluster concerns
	// the sources of every other cluster.
	CrossCluster bool
	// Required are the clusters whose caches must sync before work starts;
	// clusters that join later announce themselves with Synced.
	Required []*clusters.Cluster

	mu    sync.RWMutex
	queue workqueue.TypedRateLimitingInterface[Key]
}

var _ clusters.Handler = (*Events)(nil)

func (e *Events) add(k Key) {
	e.mu.RLock()
	q := e.queue
	e.mu.RUnlock()
	if q != nil {
		q.Add(k)
	}
}

// Source enqueues a changed source.
func (e *Events) Source(cluster string, gvk schema.GroupVersionKind, obj *unstructured.Unstructured, _ bool) {
	k := Key{Cluster: cluster, GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	e.Reconciler.Observe(k)
	e.add(k)
}

// Mirror enqueues the source of a mirror that was deleted or drifted from
// what we wrote. Mirrors that hold what we stamped need no attention: their
// source's own events cover every change we make.
func (e *Events) Mirror(cluster string, gvk schema.GroupVersionKind, obj *clusters.Mirror, deleted bool) {
	if deleted {
		e.Reconciler.Applier.Forget(cluster, gvk, obj)
	} else {
		e.Reconciler.Applier.Seen(cluster, gvk, obj)
	}
	if !deleted && obj.GetDeletionTimestamp() == nil &&
		obj.ObservedHash == obj.GetAnnotations()[annotations.AnnotationContentHash] {
		return
	}
	e.enqueueSourceOf(gvk, obj)
}

func (e *Events) enqueueSourceOf(gvk schema.GroupVersionKind, obj *clusters.Mirror) {
	cluster, ns, name, ok := ParseSourceRef(obj.GetAnnotations()[annotations.AnnotationSource])
	if ok {
		e.add(Key{Cluster: cluster, GVK: gvk, Namespace: ns, Name: name})
	}
}

// Namespace enqueues every source of the cluster when a namespace appears,
// changes labels or goes away: any of them may target it.
func (e *Events) Namespace(cluster string, _ *metav1.PartialObjectMetadata) {
	for _, c := range e.Clusters() {
		if (c.Name() == cluster) != e.CrossCluster {
			e.enqueueSources(c)
		}
	}
}

// KindSynced is called when the watches of a kind newly watched in c have
// synced: its sources, the sources of its mirrors, and for the hub the
// sources of that kind elsewhere (c is a new target) are looked at.
func (e *Events) KindSynced(c *clusters.Cluster, gvk schema.GroupVersionKind) {
	for _, other := range e.Clusters() {
		if other == c || e.CrossCluster {
			for _, s := range other.Sources(gvk) {
				e.add(Key{Cluster: other.Name(), GVK: gvk, Namespace: s.GetNamespace(), Name: s.GetName()})
			}
		}
	}
	for _, m := range c.AllMirrors(gvk) {
		e.enqueueSourceOf(gvk, m)
	}
}

// FleetChanged enqueues every source of every cluster: a target cluster
// left or became unreachable, and their status must say so.
func (e *Events) FleetChanged() {
	for _, c := range e.Clusters() {
		e.enqueueSources(c)
	}
}

// ClusterGone enqueues the sources of every mirror that refers to a source
// in the cluster named name, which left the fleet.
func (e *Events) ClusterGone(name string) {
	for _, c := range e.Clusters() {
		for _, gvk := range c.Watched() {
			for _, m := range c.AllMirrors(gvk) {
				if cl, _, _, ok := ParseSourceRef(m.GetAnnotations()[annotations.AnnotationSource]); ok && cl == name {
					e.enqueueSourceOf(gvk, m)
				}
			}
		}
	}
}

func (e *Events) enqueueSources(c *clusters.Cluster) {
	for _, gvk := range c.Watched() {
		for _, s := range c.Sources(gvk) {
			e.add(Key{Cluster: c.Name(), GVK: gvk, Namespace: s.GetNamespace(), Name: s.GetName()})
		}
	}
}

// Start is the controller source. Once the required caches have synced it
// records the queue and enqueues every source and the source of every
// mirror, which sweeps mirrors orphaned while the agent was down. It
// returns at once.
func (e *Events) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[Key]) error {
	go func() {
		if e.WaitForSync(ctx) != nil {
			return
		}
		e.mu.Lock()
		e.queue = q
		e.mu.Unlock()
		for _, c := range e.Clusters() {
			if c.HasSynced() {
				e.sweep(c)
			}
		}
	}()
	return nil
}

// Synced is called when a cluster that joined after Start has its caches:
// its sources, the sources of its mirrors, and every other source (the
// cluster may be a new target) are looked at.
func (e *Events) Synced(c *clusters.Cluster) {
	for _, other := range e.Clusters() {
		if other != c {
			e.enqueueSources(other)
		}
	}
	e.sweep(c)
}

func (e *Events) sweep(c *clusters.Cluster) {
	e.enqueueSources(c)
	for _, gvk := range c.Watched() {
		for _, m := range c.AllMirrors(gvk) {
			e.enqueueSourceOf(gvk, m)
		}
	}
}

// WaitForSync blocks until every required cluster's caches have synced.
func (e *Events) WaitForSync(ctx context.Context) error {
	for _, c := range e.Required {
		if !c.WaitForSync(ctx) {
			return fmt.Errorf("cluster %s: caches did not sync: %w", c.Name(), ctx.Err())
		}
	}
	return nil
}

// String names the source in logs.
func (e *Events) String() string { return "fleetmirror cluster watches" }
