package clusters

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Pull mirrors are the third watch of a kind, beside sources and our
// mirrors: objects their namespace's owner labelled LabelPull=true to ask
// for the content of a source. Like the others the watch selects on the
// label server side, so objects without it are never listed.

// IndexMirrorFrom indexes pull mirrors by the source they ask for, as a
// source reference (desired.SourceRef: cluster/namespace/name, the
// cluster of an NS/NAME reference being the pull mirror's own), so that a
// source's event finds the pull mirrors to update without a scan.
const IndexMirrorFrom = "fleetmirror.io/mirror-from"

// PullHandler receives the events of the pull mirror watches. It is
// optional: a Handler that implements it gets them.
type PullHandler interface {
	// Pull is called when a pull mirror is added, changed or deleted (or
	// its LabelPull removed).
	Pull(cluster string, gvk schema.GroupVersionKind, obj *unstructured.Unstructured, deleted bool)
}

// pullInformer watches the pull mirrors of a kind. They are kept whole but
// for what stripMetadata drops: the agent compares their content with
// their source's, and there are only as many as people created by hand.
func (c *Cluster) pullInformer(gvr schema.GroupVersionResource) *watch {
	sel := labels.SelectorFromSet(labels.Set{annotations.LabelPull: "true"})
	return c.watch(gvr, sel, cache.Indexers{IndexMirrorFrom: c.indexByMirrorFrom, cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, stripMetadata)
}

// indexByMirrorFrom is the IndexMirrorFrom value of a pull mirror; none
// when its AnnotationMirrorFrom does not parse.
func (c *Cluster) indexByMirrorFrom(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	ref, err := annotations.ParseMirrorFrom(m.GetAnnotations()[annotations.AnnotationMirrorFrom])
	if err != nil {
		return nil, nil
	}
	return []string{PullRef(c.opts.Name, ref)}, nil
}

// PullRef is the IndexMirrorFrom value of ref on a pull mirror in cluster.
func PullRef(cluster string, ref annotations.MirrorFrom) string {
	if ref.Remote() {
		cluster = ref.Cluster
	}
	return cluster + "/" + ref.Namespace + "/" + ref.Name
}

// handlePulls sends the events of the pull mirrors' watch w to the Handler, if
// it takes them.
func (c *Cluster) handlePulls(gvk schema.GroupVersionKind, w *watch) {
	h, ok := c.opts.Handler.(PullHandler)
	if !ok {
		return
	}
	events := metrics.WatchEvents.WithLabelValues(metrics.KindLabel(gvk), c.opts.Name, "pulls")
	w.setHandler(func(obj any, deleted bool) {
		events.Inc()
		if u, ok := obj.(*unstructured.Unstructured); ok {
			h.Pull(c.opts.Name, gvk, u, deleted)
		}
	})
}

// Pull returns the cached pull mirror namespace/name of kind gvk. Shared
// with the cache: never modify it.
func (c *Cluster) Pull(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool) {
	w := c.kind(gvk)
	if w == nil || w.mirrorsOnly() {
		return nil, false
	}
	return get[*unstructured.Unstructured](w.pulls.GetStore(), namespace+"/"+name)
}

// Pulls returns every cached pull mirror of kind gvk. Shared with the cache.
func (c *Cluster) Pulls(gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	w := c.kind(gvk)
	if w == nil || w.mirrorsOnly() {
		return nil
	}
	return typed[*unstructured.Unstructured](w.pulls.GetStore().List())
}

// PullsOf returns the cached pull mirrors of kind gvk that ask for the
// source sourceRef (cluster/namespace/name). Shared with the cache.
func (c *Cluster) PullsOf(gvk schema.GroupVersionKind, sourceRef string) []*unstructured.Unstructured {
	w := c.kind(gvk)
	if w == nil || w.mirrorsOnly() {
		return nil
	}
	objs, _ := w.pulls.GetIndexer().ByIndex(IndexMirrorFrom, sourceRef)
	return typed[*unstructured.Unstructured](objs)
}

// PullsIn returns the cached pull mirrors of kind gvk in namespace. Shared
// with the cache.
func (c *Cluster) PullsIn(gvk schema.GroupVersionKind, namespace string) []*unstructured.Unstructured {
	w := c.kind(gvk)
	if w == nil || w.mirrorsOnly() {
		return nil
	}
	objs, _ := w.pulls.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	return typed[*unstructured.Unstructured](objs)
}

// NamespaceLabels returns the labels of the cached namespace name, and
// whether it is cached. Shared with the cache.
func (c *Cluster) NamespaceLabels(name string) (map[string]string, bool) {
	ns, ok := get[*metav1.PartialObjectMetadata](c.namespaces.GetStore(), name)
	if !ok {
		return nil, false
	}
	return ns.Labels, true
}
