package hub

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fmcontroller "github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// fleetScope is the hub's controller.Scope: sources in every cluster,
// targets in every other cluster.
type fleetScope struct {
	registry *Registry
	policy   targets.Policy
	opts     *Options
}

var _ fmcontroller.Scope = (*fleetScope)(nil)

func (s *fleetScope) Cluster(name string) *clusters.Cluster { return s.registry.Cluster(name) }

func (s *fleetScope) Recorder(c *clusters.Cluster) fmcontroller.Recorder {
	if m := s.registry.member(c); m != nil && m.events != nil {
		return m.events
	}
	return s.registry.recorder
}

// Plan resolves the CLUSTER/NS entries over the other clusters. The limit
// counts targets over all clusters; the first in (cluster, namespace) order
// win.
func (s *fleetScope) Plan(c *clusters.Cluster, src *unstructured.Unstructured, req annotations.Request) fmcontroller.Plan {
	p := fmcontroller.Plan{Relevant: len(req.Remote) > 0}
	if !p.Relevant {
		return p
	}
	if !allowed(s.opts.AllowedSourceClusters, c.Name()) || !allowed(s.opts.AllowedSourceNamespaces, src.GetNamespace()) {
		p.Ignored = fmt.Sprintf("The hub does not mirror sources of cluster %s, namespace %s to other clusters (--allowed-source-clusters, --allowed-source-namespaces)",
			c.Name(), src.GetNamespace())
		return p
	}
	if !s.registry.synced.Load() {
		// The registrations are still being read: the clusters are not
		// known yet, and a plan of none would say so in the status.
		p.Pending++
		return p
	}
	for _, m := range s.registry.snapshot() {
		if m.cluster == c {
			continue // the member agent serves the source's own cluster
		}
		ready := m.up.Load()
		if synced, _ := m.cluster.KindSynced(src.GroupVersionKind()); !synced {
			// The kind's watches in that cluster are starting; when they
			// have synced, this source is reconciled again (KindSynced).
			ready = false
		}
		if ready {
			p.Covered = append(p.Covered, m.cluster)
		}
		var patterns []annotations.Pattern
		for _, t := range req.Remote {
			if t.Cluster.Match(m.name) {
				patterns = append(patterns, t.Namespace)
			}
		}
		if len(patterns) == 0 || req.ClusterSelector != nil && !req.ClusterSelector.Matches(labels.Set(*m.labels.Load())) {
			continue
		}
		if !ready {
			if m.up.Load() || s.registry.connecting(m) {
				// Connecting for the first time, or its kind's caches are
				// filling: neither reachable nor known unreachable yet.
				p.Pending++
			} else {
				p.Unreachable = append(p.Unreachable, m.name)
				if down := m.cluster.Unreachable(); down != nil {
					if p.UnreachableSince == nil {
						p.UnreachableSince = map[string]time.Time{}
					}
					p.UnreachableSince[m.name] = down.Since
				}
			}
			continue
		}
		p.Clusters++
		policy := s.policy
		if m == s.registry.local {
			// The registration Secrets are read there: a mirror in that
			// namespace could register a cluster of a tenant's choosing.
			policy = policy.Excluding(s.opts.secretsNamespace)
		}
		res := targets.Resolve(patterns, "", fmcontroller.Namespaces(m.cluster), policy, 0)
		for _, ns := range res.Namespaces {
			p.Targets = append(p.Targets, fmcontroller.Target{Cluster: m.cluster, Namespace: ns})
		}
		p.Refused = append(p.Refused, qualify(m.name, res.Refused)...)
		p.Missing = append(p.Missing, qualify(m.name, res.Missing)...)
	}
	slices.SortFunc(p.Targets, func(a, b fmcontroller.Target) int {
		return cmp.Or(cmp.Compare(a.Cluster.Name(), b.Cluster.Name()), cmp.Compare(a.Namespace, b.Namespace))
	})
	if limit := s.policy.Limit(req.MaxTargets); limit > 0 && len(p.Targets) > limit {
		for _, t := range p.Targets[limit:] {
			p.Skipped = append(p.Skipped, t.Cluster.Name()+"/"+t.Namespace)
		}
		p.Targets = p.Targets[:limit:limit]
	}
	return p
}

// MirrorClusters are all clusters but the source's: the reachable ones, and
// the names of the others.
func (s *fleetScope) MirrorClusters(source string) (reachable []*clusters.Cluster, unreachable []string) {
	for _, m := range s.registry.snapshot() {
		switch {
		case m.name == source:
		case m.up.Load():
			reachable = append(reachable, m.cluster)
		default:
			unreachable = append(unreachable, m.name)
		}
	}
	return reachable, unreachable
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
