package targets

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// State is whether a writer can reach a cluster now.
type State int

// Cluster states. The zero value is Pending: a cluster nobody has looked
// at yet is neither written to nor cleaned up.
const (
	// Pending: the cluster is being connected to for the first time.
	Pending State = iota
	// Ready: the cluster answers.
	Ready
	// Unreachable: the cluster has answered before, or has been tried for
	// long enough, and does not answer now.
	Unreachable
	// Elsewhere: the cluster is registered, but another replica of a
	// sharded hub serves it; this writer neither writes nor removes
	// mirrors there.
	Elsewhere
)

// Cluster is what target resolution needs to know of one cluster.
type Cluster struct {
	Name string
	// Labels are the cluster's registration labels, for the request's
	// cluster selector.
	Labels map[string]string
	State  State
	// UnreachableSince is when an Unreachable cluster stopped answering;
	// zero when not known.
	UnreachableSince time.Time
	// KindSynced says whether the caches of the source's kind in this
	// cluster have synced; until they have, its mirrors are not known.
	KindSynced bool
	// Namespaces are the cluster's namespaces, in any order.
	Namespaces []Namespace
	// Excluded namespaces (globs) are never targeted in this cluster, on top
	// of the Policy; ExcludedBecause says why, in plain words, for Decisions.
	Excluded        glob.List
	ExcludedBecause string
	// Within, when not nil, narrows the targets to these namespaces: those
	// that hold an object of a policy's trigger. WithinBecause names the
	// trigger for Decisions ("no ConfigMap named x"). The other namespaces
	// are not refused, only not (yet) targets.
	Within        sets.Set[string]
	WithinBecause string
}

// holds reports whether namespace holds an object of the trigger that
// narrows c's targets (Within), or no trigger narrows them.
func (c *Cluster) holds(namespace string) bool {
	return c.Within == nil || c.Within.Has(namespace)
}

// Fleet is a snapshot of the clusters a writer can target.
type Fleet struct {
	// Clusters, sorted by name.
	Clusters []Cluster
	// Loading is true while the clusters are not all known yet (the hub is
	// still reading its registrations): a Remote plan waits for them.
	Loading bool
}

// Source is where the object being mirrored lives.
type Source struct {
	Cluster   string
	Namespace string
	// Renamed: the copies have another name than the source, so that a
	// copy beside it, in its own namespace, would not replace it; that
	// namespace is then a candidate like any other.
	Renamed bool
}

// Scope is which entries of a request a writer acts on, and where.
type Scope struct {
	// Remote is the hub's scope: the CLUSTER/NAMESPACE entries, and the
	// namespace selector when the request has a cluster selector too, in
	// every cluster but the source's. Otherwise the scope is the member
	// agent's: the unqualified entries and the namespace selector, in the
	// source's own cluster.
	Remote bool
	// AllowedSourceClusters and AllowedSourceNamespaces (Remote only) are
	// the hub's --allowed-source-clusters and --allowed-source-namespaces:
	// when not empty, only sources they match reach other clusters.
	AllowedSourceClusters, AllowedSourceNamespaces glob.List
	// Explain records a Decision for every namespace and cluster dropped,
	// not only for those the request names or that cannot be reached. It
	// costs a Decision per namespace; nothing else in the Outcome changes.
	Explain bool
}

// Target is one place a mirror goes.
type Target struct {
	Cluster, Namespace string
}

// Outcome is where one source's mirrors go, and what could not be targeted.
type Outcome struct {
	// Relevant is false when the source asks nothing of this scope (Local
	// seeing only CLUSTER/NS entries, Remote seeing only local ones).
	Relevant bool
	// Targets are sorted by cluster, then namespace.
	Targets []Target
	// Skipped, Refused and Missing are as in Result; in the Remote scope
	// each entry reads cluster/namespace.
	Skipped, Refused, Missing []string
	// Unreachable names target clusters that cannot be written now. Their
	// mirrors are neither written nor deleted until they are back.
	Unreachable []string
	// UnreachableSince says since when each of Unreachable is, where known.
	UnreachableSince map[string]time.Time
	// Ignored explains why a relevant request is not acted on (hub policy).
	Ignored string
	// Clusters counts the target clusters resolved in (Remote).
	Clusters int
	// Pending counts target clusters not ready yet; the source is reconciled
	// again when they are.
	Pending int
	// Elsewhere names the target clusters another replica of a sharded hub
	// serves; this writer leaves their mirrors alone.
	Elsewhere []string
	// Covered names the clusters whose targets were resolved completely;
	// mirrors of the source there that are not in Targets are removed.
	Covered []string
	// Decisions say why each candidate was dropped, sorted by cluster, then
	// namespace. Without Scope.Explain, only the namespaces the request
	// names or its namespace selector selects, those over the limit, and
	// the clusters that cannot be resolved in or the policy refuses have one.
	Decisions []Decision
}

// Plan resolves the targets of a request from the source src over fleet.
func Plan(req annotations.Request, src Source, fleet Fleet, policy Policy, scope Scope) Outcome {
	rec := &recorder{remote: scope.Remote, explain: scope.Explain}
	// The source's own exclusions weigh as the operator's do: a namespace
	// they match is no target, named or not.
	policy.SourceExcluded = req.ExcludeNamespaces
	var out Outcome
	if scope.Remote {
		out = planRemote(req, src, fleet, policy, scope, rec)
	} else {
		out = planLocal(req, src, fleet, policy, rec)
	}
	out.Decisions = rec.sorted()
	return out
}

// planLocal resolves the unqualified entries and the namespace selector in
// the source's own cluster. A fleet without that cluster is pending.
func planLocal(req annotations.Request, src Source, fleet Fleet, policy Policy, rec *recorder) Outcome {
	out := Outcome{Relevant: len(req.Local) > 0 || req.NamespaceSelector != nil}
	i := slices.IndexFunc(fleet.Clusters, func(c Cluster) bool { return c.Name == src.Cluster })
	if i < 0 {
		out.Pending++
		rec.add(src.Cluster, "", ClusterPending, "cluster %s is not known yet", src.Cluster)
		return out
	}
	c := &fleet.Clusters[i]
	own := src.Namespace
	if src.Renamed {
		own = ""
	}
	res := resolveIn(c, req.Local, req.NamespaceSelector, own, policy, policy.Limit(req.MaxTargets), rec)
	out.Skipped, out.Refused, out.Missing = res.Skipped, res.Refused, res.Missing
	out.Covered = []string{c.Name}
	for _, ns := range res.Namespaces {
		out.Targets = append(out.Targets, Target{Cluster: c.Name, Namespace: ns})
	}
	return out
}

// planRemote resolves the CLUSTER/NS entries over the other clusters, and
// the namespace selector in the clusters the cluster selector selects when
// the request has both. The limit counts targets over all clusters; the
// first in (cluster, namespace) order win.
func planRemote(req annotations.Request, src Source, fleet Fleet, policy Policy, scope Scope, rec *recorder) Outcome {
	nsSel := req.RemoteNamespaceSelector()
	out := Outcome{Relevant: len(req.Remote) > 0 || nsSel != nil}
	if !out.Relevant {
		return out
	}
	if !allowed(scope.AllowedSourceClusters, src.Cluster) || !allowed(scope.AllowedSourceNamespaces, src.Namespace) {
		out.Ignored = fmt.Sprintf("The hub does not mirror sources of cluster %s, namespace %s to other clusters (--allowed-source-clusters, --allowed-source-namespaces)",
			src.Cluster, src.Namespace)
		rec.add("", "", HubPolicy, "sources of cluster %s, namespace %s may not target other clusters: the hub's --allowed-source-clusters or --allowed-source-namespaces leave them out",
			src.Cluster, src.Namespace)
		return out
	}
	if fleet.Loading {
		// A plan of no cluster would say so in the status.
		out.Pending++
		rec.add("", "", ClusterPending, "the hub is still reading its cluster registrations")
		return out
	}
	clusters := fleet.Clusters
	byName := func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(clusters, byName) {
		clusters = slices.Clone(clusters)
		slices.SortFunc(clusters, byName)
	}
	for i := range clusters {
		c := &clusters[i]
		if c.Name == src.Cluster {
			if rec.explain {
				rec.sourceCluster(c.Name)
			}
			continue
		}
		ready := c.State == Ready && c.KindSynced
		if ready {
			out.Covered = append(out.Covered, c.Name)
		}
		var patterns []annotations.Pattern
		for _, t := range req.Remote {
			if t.Cluster.Match(c.Name) {
				patterns = append(patterns, t.Namespace)
			}
		}
		matched := len(patterns) > 0 || nsSel != nil
		if !matched || req.ClusterSelector != nil && !req.ClusterSelector.Matches(labels.Set(c.Labels)) {
			if rec.explain {
				rec.notSelected(c, matched, req)
			}
			continue
		}
		if c.State == Elsewhere {
			rec.elsewhere(c.Name)
			out.Elsewhere = append(out.Elsewhere, c.Name)
			continue
		}
		if !ready {
			rec.notReady(c)
			if c.State != Unreachable {
				out.Pending++
				continue
			}
			out.Unreachable = append(out.Unreachable, c.Name)
			if !c.UnreachableSince.IsZero() {
				if out.UnreachableSince == nil {
					out.UnreachableSince = map[string]time.Time{}
				}
				out.UnreachableSince[c.Name] = c.UnreachableSince
			}
			continue
		}
		out.Clusters++
		res := resolveIn(c, patterns, nsSel, "", policy, 0, rec)
		for _, ns := range res.Namespaces {
			out.Targets = append(out.Targets, Target{Cluster: c.Name, Namespace: ns})
		}
		out.Refused = append(out.Refused, qualify(c.Name, res.Refused)...)
		out.Missing = append(out.Missing, qualify(c.Name, res.Missing)...)
	}
	slices.SortFunc(out.Targets, func(a, b Target) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace))
	})
	if limit := policy.Limit(req.MaxTargets); limit > 0 && len(out.Targets) > limit {
		for _, t := range out.Targets[limit:] {
			out.Skipped = append(out.Skipped, t.Cluster+"/"+t.Namespace)
			rec.overLimit(t.Cluster, t.Namespace, limit)
		}
		out.Targets = out.Targets[:limit:limit]
	}
	return out
}

func allowed(globs glob.List, name string) bool {
	return len(globs) == 0 || globs.Match(name)
}

func qualify(cluster string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = cluster + "/" + n
	}
	return out
}
