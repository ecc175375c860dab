package controller

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// A copy-once source (fleetmirror.io/copy-once, a policy's spec.copyOnce)
// gets a copy in each target once: the agent remembers where it made one
// (its record), never writes to a copy again and does not make one again
// where the record says it did. The record of an annotated source is the
// annotation fleetmirror.io/copied on it (NS entries by the member agent,
// CLUSTER/NS by the hub); that of a policy's source its status.copied
// (NS/SOURCE, CLUSTER/NS/SOURCE). An entry goes when its namespace does,
// so a namespace made again gets a copy again.

// copiedID is the record entry of target t of the source key: its
// namespace, with its cluster when that is not the source's.
func copiedID(key Key, t Target) string {
	if t.Cluster.Name() == key.Cluster {
		return t.Namespace
	}
	return t.Cluster.Name() + "/" + t.Namespace
}

// splitList splits a comma list, without blanks.
func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// remoteEntry reports whether a record entry of an annotated source
// (NS or CLUSTER/NS) is the hub's.
func remoteEntry(e string) bool { return strings.Contains(e, "/") }

// copiedRecord is where this writer copied the copy-once source key
// already: its entries of the record (annotation or policy status; the
// other writer's are its own to keep) and what it recorded for it since
// (the policy's outcome, until the status is written).
func (r *Reconciler) copiedRecord(key Key, src *unstructured.Unstructured, via *v1alpha1.MirrorPolicy) map[string]bool {
	remote := r.opts.Scope == ScopeRemote
	record := map[string]bool{}
	if via == nil {
		for _, e := range splitList(src.GetAnnotations()[annotations.AnnotationCopied]) {
			if remoteEntry(e) == remote {
				record[e] = true
			}
		}
		return record
	}
	for _, e := range via.Status.Copied {
		if id, ok := strings.CutSuffix(e, "/"+key.Name); ok && id != "" && remoteEntry(id) == remote {
			record[id] = true
		}
	}
	if o, ok := r.outcome(key, clusters.PolicyID(via.Namespace, via.Name)); ok {
		for _, e := range splitList(o.copied) {
			record[e] = true
		}
	}
	return record
}

// copyOnce splits the targets of a copy-once source: those to write
// (no copy there, none ever made) and, counted in sum as unchanged and
// recorded, those whose copy is in place. The others had a copy that
// somebody deleted: left alone.
func (r *Reconciler) copyOnce(key Key, ref, name string, tgts []Target, record map[string]bool, sum *summary) (write []Target) {
	for _, t := range tgts {
		id := copiedID(key, t)
		if m, ok := t.Cluster.Mirror(key.GVK, t.Namespace, name); ok && m.GetAnnotations()[annotations.AnnotationSource] == ref {
			sum.unchanged++
			sum.copied = append(sum.copied, id)
			continue
		}
		if !record[id] {
			write = append(write, t)
		}
	}
	return write
}

// recordCopies adds to sum.copied the targets where a copy was just made.
func recordCopies(key Key, tgts []Target, results []result, sum *summary) {
	for i, res := range results {
		switch res.outcome {
		case apply.Created, apply.Replaced, apply.Adopted, apply.Updated, apply.Unchanged:
			sum.copied = append(sum.copied, copiedID(key, tgts[i]))
		}
	}
}

// namespaceGone reports whether the namespace of record entry id (of a
// source of cluster source) is known to be gone: its cluster is served
// and has listed its namespaces, and it is not among them.
func (r *Reconciler) namespaceGone(source, id string) bool {
	cluster, ns, remote := strings.Cut(id, "/")
	if !remote {
		cluster, ns = source, id
	}
	c := r.fleet.Cluster(cluster)
	if c == nil || !c.NamespacesSynced() {
		return false
	}
	_, ok := c.NamespaceLabels(ns)
	return !ok
}

// copiedPart is this writer's part of the record of the annotated
// copy-once source key after a reconcile, as patchSourceRecord takes it:
// where it copied (sum.copied holds its whole record and what it just
// copied), without the namespaces that are gone; sorted.
func (r *Reconciler) copiedPart(key Key, sum summary) *string {
	all := slices.Clone(sum.copied)
	slices.Sort(all)
	mine := strings.Join(slices.DeleteFunc(slices.Compact(all), func(e string) bool { return r.namespaceGone(key.Cluster, e) }), ",")
	return &mine
}

// nextRecordValue is the record annotation to write onto cur: the other
// writer's entries as cur has them and mine, in one order whoever writes
// (no write back and forth); nil when set is false or nothing changes.
func nextRecordValue(cur metav1.Object, mine []string, set, remote bool) *string {
	if !set {
		return nil
	}
	current := cur.GetAnnotations()[annotations.AnnotationCopied]
	all := slices.Clone(mine)
	for _, e := range splitList(current) {
		if remoteEntry(e) != remote {
			all = append(all, e)
		}
	}
	slices.Sort(all)
	next := strings.Join(all, ",")
	if next == current {
		return nil
	}
	return &next
}

// policyCopied is this writer's part of the copy-once record of the
// policy id (status.copied) after its sources' last reconciles: the
// entries it holds (mine) and those its sources' outcomes add, without
// those whose namespace is gone. Entries of sources that no longer exist
// stay: a source made again under the same name is copied where its
// predecessor never was.
func (r *Reconciler) policyCopied(c *clusters.Cluster, id string, gvk schema.GroupVersionKind, sources []*unstructured.Unstructured, mine []string) []string {
	all := slices.Clone(mine)
	for _, s := range sources {
		o, ok := r.outcome(sourceKey(c, gvk, s), id)
		if !ok {
			continue
		}
		for _, e := range splitList(o.copied) {
			all = append(all, e+"/"+s.GetName())
		}
	}
	slices.Sort(all)
	return slices.DeleteFunc(slices.Compact(all), func(e string) bool {
		return r.namespaceGone(c.Name(), e[:max(strings.LastIndex(e, "/"), 0)])
	})
}
