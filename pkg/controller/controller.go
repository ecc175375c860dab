package controller

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Identity is who writes: what marks the writer's mirrors and writes. The
// member agent and the hub have one each, so that each owns only its own.
type Identity struct {
	// ManagedBy is the LabelManagedBy value of the writer's mirrors.
	ManagedBy string
	// FieldManager names the writer's writes in managedFields, and is the
	// component of its Events.
	FieldManager string
	// Finalizer is held on sources that have mirrors, for prompt cleanup.
	Finalizer string
}

// Scope says which entries of a source the writer serves, and where.
type Scope int

const (
	// ScopeLocal serves the unqualified entries, in the source's own
	// cluster: the member agent.
	ScopeLocal Scope = iota
	// ScopeRemote serves the CLUSTER/NS entries, in every other cluster
	// of the fleet: the hub.
	ScopeRemote
)

// Options are everything the pipeline's controller needs; the member agent
// and the hub differ only by them.
type Options struct {
	// Name names the controller in logs and metrics.
	Name string
	// Fleet holds the clusters; the controller runs it.
	Fleet *fleet.Fleet
	// Identity of the writer.
	Identity Identity
	// Scope of the writer.
	Scope Scope
	// Policy is the operator's namespace policy.
	Policy targets.Policy
	// AllowedSourceClusters and AllowedSourceNamespaces limit the sources
	// whose entries ScopeRemote serves; empty allows all.
	AllowedSourceClusters, AllowedSourceNamespaces glob.List
	// Strip lists label and annotation keys never copied onto mirrors.
	Strip glob.List
	// WriteStatus enables AnnotationStatus on sources.
	WriteStatus bool
	// VerifySourceFreshness reads a source from the API server before
	// writing mirrors from it.
	VerifySourceFreshness bool
	// Workers is how many sources are reconciled at once; Parallelism
	// bounds the concurrent writes for one source.
	Workers, Parallelism int
	// CallTimeout bounds every call to a cluster.
	CallTimeout time.Duration
	// CleanupTimeout bounds how long a deleted source is held while
	// clusters with its mirrors are unreachable; zero waits forever.
	CleanupTimeout time.Duration
	// DeleteOrphansOfUnregistered deletes the mirrors of sources whose
	// cluster left the fleet; otherwise they are kept and logged.
	DeleteOrphansOfUnregistered bool
	// BreakerThreshold failed reconciles in a row space out a source's
	// retries, from BreakerBase doubling up to BreakerMax; 0 disables it.
	BreakerThreshold        int
	BreakerBase, BreakerMax time.Duration
}

// Add adds the pipeline to mgr: the fleet (on every replica, so that a new
// leader starts with warm caches), the controller fed by the fleet's
// events (on the leader), and a readiness check that passes once the
// agent's own cluster has its caches.
func Add(mgr manager.Manager, o Options) error {
	r, events := newPipeline(o)
	if err := mgr.Add(fleetRunnable{o.Fleet, events}); err != nil {
		return err
	}
	skip, priority := true, false
	c, err := controller.NewTyped[Key](o.Name, mgr, controller.TypedOptions[Key]{
		Reconciler:              r,
		MaxConcurrentReconciles: o.Workers,
		// Programs that embed agents (tests, the local fleet) run several
		// managers in one process; names stay unique per binary.
		SkipNameValidation: &skip,
		// The priority queue of controller-runtime v0.24 can deadlock on
		// shutdown (kubernetes-sigs/controller-runtime#3538, fixed in v0.25,
		// which needs k8s.io v0.37); the classic queue serves us as well.
		UsePriorityQueue: &priority,
	})
	if err != nil {
		return err
	}
	if err := c.Watch(events); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("caches", func(*http.Request) error {
		if !o.Fleet.LocalSynced() {
			return fmt.Errorf("caches not synced")
		}
		return nil
	})
}

// newPipeline returns the reconciler of o and the event source that feeds
// it.
func newPipeline(o Options) (*Reconciler, *eventSource) {
	r := &Reconciler{
		opts:    o,
		fleet:   o.Fleet,
		Applier: &apply.Applier{FieldManager: o.Identity.FieldManager, ManagedBy: o.Identity.ManagedBy},
		build:   desired.Options{ManagedBy: o.Identity.ManagedBy, Strip: o.Strip},
		breaker: breaker{threshold: o.BreakerThreshold, base: o.BreakerBase, max: o.BreakerMax},
	}
	return r, &eventSource{reconciler: r, fleet: o.Fleet, crossCluster: o.Scope == ScopeRemote}
}

// fleetRunnable runs the fleet, telling the controller's event source.
type fleetRunnable struct {
	fleet  *fleet.Fleet
	events *eventSource
}

func (f fleetRunnable) Start(ctx context.Context) error { return f.fleet.Run(ctx, f.events) }

// NeedLeaderElection is false: watches run on every replica.
func (f fleetRunnable) NeedLeaderElection() bool { return false }
