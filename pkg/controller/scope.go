package controller

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Recorder records Events about objects: events.Recorder, which writes
// core/v1 Events on purpose. They are told apart by message, where an
// events.k8s.io recorder folds a changed warning into the previous one of
// the same reason and drops the new message.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Target is one place a mirror goes.
type Target struct {
	Cluster   *clusters.Cluster
	Namespace string
}

// Plan is where one source's mirrors go, and what could not be targeted:
// the Outcome of target resolution, with its target and covered clusters
// resolved from names to the fleet's clusters. Its status is not written
// while Pending is not zero, so it does not flap at start.
type Plan struct {
	targets.Outcome
	// Targets are Outcome.Targets, each with its cluster.
	Targets []Target
	// Covered are the clusters of Outcome.Covered: their targets were
	// resolved completely, and mirrors of the source there that are not
	// in Targets are removed.
	Covered []*clusters.Cluster
	// ReadEverywhere: the source's cluster is the hub's own, which every
	// replica of a sharded hub reads, so that the targets of
	// Outcome.Elsewhere are served by their replicas. Otherwise they are
	// not served at all.
	ReadEverywhere bool
}

// plan resolves the targets of a source in cluster c for the writer's
// scope: targets.Plan over a snapshot of the fleet, its names mapped back
// to the clusters.
func (r *Reconciler) plan(c *clusters.Cluster, src *unstructured.Unstructured, req annotations.Request, trig trigger) Plan {
	remote := r.opts.Scope == ScopeRemote
	var snap targets.Fleet
	if remote {
		snap = r.remoteSnapshot(src.GroupVersionKind(), req)
	} else {
		snap.Clusters = []targets.Cluster{{Name: c.Name(), State: targets.Ready, KindSynced: true, Namespaces: r.namespaces(c),
			Within: trig.within, WithinBecause: trig.because}}
	}
	out := targets.Plan(req, sourceOf(c, src, &req), snap, r.opts.Policy, targets.Scope{
		Remote: remote, AllowedSourceClusters: r.opts.AllowedSourceClusters, AllowedSourceNamespaces: r.opts.AllowedSourceNamespaces,
	})
	p := Plan{Outcome: out}
	if m, ok := r.fleet.Member(c.Name()); ok && m.Local {
		p.ReadEverywhere = true
	}
	for _, t := range out.Targets {
		if tc := r.cluster(c, t.Cluster); tc != nil {
			p.Targets = append(p.Targets, Target{Cluster: tc, Namespace: t.Namespace})
		}
	}
	for _, name := range out.Covered {
		if cc := r.cluster(c, name); cc != nil {
			p.Covered = append(p.Covered, cc)
		}
	}
	return p
}

// trigger is what a policy's trigger leaves of the source's cluster: the
// namespaces that hold one of its objects (within; nil without a
// trigger), and what the others lack, for Decisions.
type trigger struct {
	within  sets.Set[string]
	because string
}

// sourceOf is where src, of cluster c, is for target resolution.
func sourceOf(c *clusters.Cluster, src *unstructured.Unstructured, req *annotations.Request) targets.Source {
	return targets.Source{Cluster: c.Name(), Namespace: src.GetNamespace(), Renamed: req.Renames(src.GetName())}
}

// cluster returns the cluster named name: c, or another of the fleet.
func (r *Reconciler) cluster(c *clusters.Cluster, name string) *clusters.Cluster {
	if c.Name() == name {
		return c
	}
	return r.fleet.Cluster(name)
}

// remoteSnapshot is the fleet as the hub's target resolution sees it. The
// namespaces of a cluster are listed only where the plan reads them: the
// cluster is ready, its kind's caches have synced and some entry of req
// names it, or req's namespace selector reaches it.
func (r *Reconciler) remoteSnapshot(gvk schema.GroupVersionKind, req annotations.Request) targets.Fleet {
	snap := targets.Fleet{Loading: !r.fleet.Known()}
	nsSel := req.RemoteNamespaceSelector()
	for _, m := range r.fleet.Members() {
		tc := targets.Cluster{Name: m.Cluster.Name(), Labels: m.Labels, Excluded: m.ExcludedNamespaces, ExcludedBecause: m.ExcludedBecause}
		tc.KindSynced, _ = m.Cluster.KindSynced(gvk)
		switch {
		case m.ReadOnly:
			tc.State = targets.Elsewhere
		case m.Up:
			tc.State = targets.Ready
		case m.Connecting:
			tc.State = targets.Pending
		default:
			tc.State = targets.Unreachable
			if down := m.Cluster.Unreachable(); down != nil {
				tc.UnreachableSince = down.Since
			}
		}
		named := slices.ContainsFunc(req.Remote, func(t annotations.RemoteTarget) bool { return t.Cluster.Match(tc.Name) })
		selected := nsSel != nil && req.ClusterSelector.Matches(labels.Set(tc.Labels))
		if tc.State == targets.Ready && tc.KindSynced && (named || selected) {
			tc.Namespaces = r.namespaces(m.Cluster)
		}
		snap.Clusters = append(snap.Clusters, tc)
	}
	for _, s := range r.fleet.Elsewhere() {
		snap.Clusters = append(snap.Clusters, targets.Cluster{Name: s.Name, Labels: s.Labels, State: targets.Elsewhere})
	}
	slices.SortFunc(snap.Clusters, func(a, b targets.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return snap
}

// mirrorClusters lists the clusters where mirrors of sources of the
// cluster named source may exist: those that can be reached now, and the
// names of those that cannot. For ScopeLocal that is the source's own
// cluster; for ScopeRemote every other one.
func (r *Reconciler) mirrorClusters(source string) (reachable []*clusters.Cluster, unreachable []string) {
	if r.opts.Scope == ScopeLocal {
		if c := r.fleet.Cluster(source); c != nil {
			reachable = append(reachable, c)
		}
		return reachable, nil
	}
	for _, m := range r.fleet.Members() {
		switch name := m.Cluster.Name(); {
		case !r.opts.Scope.mirrorsIn(source, name), m.ReadOnly: // another replica serves a read-only cluster
		case m.Up:
			reachable = append(reachable, m.Cluster)
		default:
			unreachable = append(unreachable, name)
		}
	}
	return reachable, unreachable
}

// mirrorsIn reports whether the writer of scope s puts the mirrors of a
// source of the cluster named source into the cluster named cluster: the
// source's own for ScopeLocal, every other one for ScopeRemote.
func (s Scope) mirrorsIn(source, cluster string) bool {
	return (source == cluster) == (s == ScopeLocal)
}

// readOnly reports whether the writer writes nothing into c: another
// replica of a sharded hub serves it (fleet.Spec.ReadOnly).
func (r *Reconciler) readOnly(c *clusters.Cluster) bool {
	m, ok := r.fleet.Member(c.Name())
	return ok && m.ReadOnly
}

// recorder returns the Event recorder for objects of c; one that drops
// the Events when c has none.
func (r *Reconciler) recorder(c *clusters.Cluster) Recorder {
	if rec := r.fleet.Recorder(c); rec != nil {
		return rec
	}
	return discard{}
}

type discard struct{}

func (discard) Eventf(runtime.Object, string, string, string, ...any) {}

// Namespaces lists the cached namespaces of c for target resolution,
// sorted by name.
func Namespaces(c *clusters.Cluster) []targets.Namespace {
	cached := c.Namespaces()
	out := make([]targets.Namespace, 0, len(cached))
	for _, ns := range cached {
		out = append(out, targets.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: ns.DeletionTimestamp != nil})
	}
	slices.SortFunc(out, func(a, b targets.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// namespaces is a snapshot of Namespaces(c), read by every reconcile until
// c's namespaces change: a namespace event reconciles every source, each
// over every namespace, and would otherwise copy and sort them each time.
// Shared: never modify it.
type namespaces struct {
	cluster *clusters.Cluster
	gen     uint64
	list    []targets.Namespace
}

// namespaces returns the snapshot of c's namespaces, made again when they
// changed since (the generation is read before the cache is).
func (r *Reconciler) namespaces(c *clusters.Cluster) []targets.Namespace {
	gen := c.NamespacesGeneration()
	if v, ok := r.snapshots.Load(c.Name()); ok {
		if s := v.(*namespaces); s.cluster == c && s.gen == gen {
			return s.list
		}
	}
	s := &namespaces{cluster: c, gen: gen, list: Namespaces(c)}
	r.snapshots.Store(c.Name(), s)
	return s.list
}
