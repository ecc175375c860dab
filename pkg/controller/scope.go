package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Scope is what differs between the member agent and the hub: which
// clusters hold sources, where a source's mirrors go, and where mirrors of
// it may already exist. Everything else in a reconcile is shared.
type Scope interface {
	// Cluster returns the cluster named name, or nil if it is not known.
	Cluster(name string) *clusters.Cluster
	// Recorder returns the event recorder for objects of cluster c.
	Recorder(c *clusters.Cluster) Recorder
	// Plan resolves the targets of a source in cluster c.
	Plan(c *clusters.Cluster, src *unstructured.Unstructured, req annotations.Request) Plan
	// MirrorClusters lists the clusters where mirrors of sources of the
	// cluster named source may exist: those that can be reached now, and
	// the names of those that cannot.
	MirrorClusters(source string) (reachable []*clusters.Cluster, unreachable []string)
}

// Recorder records Events about objects; client-go's record.EventRecorder
// is one. The core/v1 recorder is used on purpose: it tells events apart by
// message, where the events.k8s.io one folds a changed warning into the
// previous one of the same reason and drops the new message.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Target is one place a mirror goes.
type Target struct {
	Cluster   *clusters.Cluster
	Namespace string
}

// Plan is where one source's mirrors go, and what could not be targeted.
type Plan struct {
	// Relevant is false when the source asks nothing of this writer (a
	// member seeing only CLUSTER/NS entries, a hub seeing only local ones).
	Relevant bool
	Targets  []Target
	// Skipped, Refused and Missing are as in targets.Result; for the hub
	// each entry reads cluster/namespace.
	Skipped, Refused, Missing []string
	// Unreachable names target clusters that cannot be written now. Their
	// mirrors are neither written nor deleted until they are back.
	Unreachable []string
	// UnreachableSince says since when each of Unreachable is, where known.
	UnreachableSince map[string]time.Time
	// Ignored explains why a relevant request is not acted on (hub policy).
	Ignored string
	// Clusters counts the target clusters (hub status).
	Clusters int
	// Pending counts target clusters not ready yet (first connection, or
	// caches filling); the source is reconciled again when they are, and
	// its status is not written meanwhile, so it does not flap at start.
	Pending int
	// Covered are the clusters whose targets were resolved completely;
	// mirrors of the source there that are not in Targets are removed.
	Covered []*clusters.Cluster
}

// LocalScope is the member agent's scope: one cluster, sources and
// targets in it.
type LocalScope struct {
	Local  *clusters.Cluster
	Events Recorder
	Policy targets.Policy
}

// Cluster returns the local cluster when name is its name.
func (s *LocalScope) Cluster(name string) *clusters.Cluster {
	if name == s.Local.Name() {
		return s.Local
	}
	return nil
}

// Recorder returns the one recorder.
func (s *LocalScope) Recorder(*clusters.Cluster) Recorder { return s.Events }

// Plan resolves the unqualified entries in the source's own cluster.
func (s *LocalScope) Plan(c *clusters.Cluster, src *unstructured.Unstructured, req annotations.Request) Plan {
	res := targets.Resolve(req.Local, src.GetNamespace(), Namespaces(c), s.Policy, s.Policy.Limit(req.MaxTargets))
	p := Plan{Relevant: len(req.Local) > 0, Skipped: res.Skipped, Refused: res.Refused, Missing: res.Missing,
		Covered: []*clusters.Cluster{c}}
	for _, ns := range res.Namespaces {
		p.Targets = append(p.Targets, Target{Cluster: c, Namespace: ns})
	}
	return p
}

// MirrorClusters is the local cluster.
func (s *LocalScope) MirrorClusters(string) ([]*clusters.Cluster, []string) {
	return []*clusters.Cluster{s.Local}, nil
}

// Namespaces lists the cached namespaces of c for target resolution.
func Namespaces(c *clusters.Cluster) []targets.Namespace {
	cached := c.Namespaces()
	out := make([]targets.Namespace, 0, len(cached))
	for _, ns := range cached {
		out = append(out, targets.Namespace{Name: ns.Name, Labels: ns.Labels, Terminating: ns.DeletionTimestamp != nil})
	}
	return out
}
