package controller

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// The event source's part for pull mirrors: their own watch events, and
// the events of their sources, found through the pull mirrors' index by
// the source they name (clusters.IndexMirrorFrom), so that a change of a
// source reaches its pull mirrors at once.

var _ clusters.PullHandler = (*eventSource)(nil)

// Pull enqueues a pull mirror that was added, changed or deleted.
func (e *eventSource) Pull(cluster string, gvk schema.GroupVersionKind, obj *unstructured.Unstructured, _ bool) {
	e.add(Key{Cluster: cluster, GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName(), Pull: true})
}

// enqueuePullsOf enqueues the pull mirrors that name the source obj of
// cluster: for the member agent those of the source's cluster, for the hub
// those of every other.
func (e *eventSource) enqueuePullsOf(cluster string, gvk schema.GroupVersionKind, obj *unstructured.Unstructured) {
	ref := desired.SourceRef(cluster, obj.GetNamespace(), obj.GetName())
	for _, c := range e.fleet.Clusters() {
		if (c.Name() == cluster) == e.crossCluster {
			continue
		}
		for _, p := range c.PullsOf(gvk, ref) {
			e.addPull(c, gvk, p, asChange)
		}
	}
}

// enqueuePulls enqueues the pull mirrors of kind gvk in c that the writer
// serves.
func (e *eventSource) enqueuePulls(c *clusters.Cluster, gvk schema.GroupVersionKind, sweep bool) {
	for _, p := range c.Pulls(gvk) {
		e.addPull(c, gvk, p, sweep)
	}
}

// enqueuePullsIn enqueues the pull mirrors the writer serves in namespace
// ns of the cluster named cluster, of every watched kind: the namespace's
// labels decide whether they may receive content.
func (e *eventSource) enqueuePullsIn(cluster, ns string) {
	c := e.fleet.Cluster(cluster)
	if c == nil {
		return
	}
	for _, gvk := range c.Watched() {
		for _, p := range c.PullsIn(gvk, ns) {
			e.addPull(c, gvk, p, asChange)
		}
	}
}

// addPull enqueues the pull mirror p of c (as part of a sweep with sweep), if the
// writer serves it.
func (e *eventSource) addPull(c *clusters.Cluster, gvk schema.GroupVersionKind, p *unstructured.Unstructured, sweep bool) {
	if ref, _ := ParsePullMirror(p); Serves(e.crossCluster, ref) {
		e.addAt(Key{Cluster: c.Name(), GVK: gvk, Namespace: p.GetNamespace(), Name: p.GetName(), Pull: true}, sweep)
	}
}

// forgetPullCluster drops the states of the pull mirrors of the cluster
// named name, whose series metrics.ForgetCluster deleted when it left.
func (r *Reconciler) forgetPullCluster(name string) {
	r.pulls.states.Range(func(k, _ any) bool {
		if k.(Key).Cluster == name {
			r.pulls.states.Delete(k)
		}
		return true
	})
}
