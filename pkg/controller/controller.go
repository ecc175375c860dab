package controller

import (
	"context"
	"errors"
	"time"

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
	// Finalizer is the finalizer earlier versions held on sources that
	// had mirrors. None is added any more (a finalizer outlives its agent
	// and would leave the owner's object stuck in deletion); the writer
	// takes it off wherever it finds it.
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
	// DeleteOrphansOfUnregistered deletes the mirrors of sources whose
	// cluster left the fleet; otherwise they are kept and logged.
	DeleteOrphansOfUnregistered bool
	// BreakerThreshold failed reconciles in a row space out a source's
	// retries, from BreakerBase doubling up to BreakerMax; 0 disables it.
	BreakerThreshold        int
	BreakerBase, BreakerMax time.Duration
}

// Pipeline is the mirroring pipeline of one writer: the fleet's watches
// that feed it, and the controller that reconciles one source at a time.
type Pipeline struct {
	opts   Options
	events *eventSource
	// reconcile and feed are the reconciler's and the event source's; a
	// test of the worker loop sets its own.
	reconcile func(context.Context, Key) (Result, error)
	feed      func(context.Context, queue, *sweeps) error
}

// New returns the pipeline of o.
func New(o Options) *Pipeline {
	r, events := newPipeline(o)
	return &Pipeline{opts: o, events: events, reconcile: r.Reconcile, feed: events.Start}
}

// RunFleet runs the fleet's watches until ctx ends. It runs on every
// replica, so that a new leader starts with warm caches.
func (p *Pipeline) RunFleet(ctx context.Context) error { return p.opts.Fleet.Run(ctx, p.events) }

// Ready returns an error until the agent's own cluster has its caches.
func (p *Pipeline) Ready() error {
	if !p.opts.Fleet.LocalReady() {
		return errors.New("caches not synced")
	}
	return nil
}

// newPipeline returns the reconciler of o and the event source that feeds
// it.
func newPipeline(o Options) (*Reconciler, *eventSource) {
	r := &Reconciler{
		opts:      o,
		fleet:     o.Fleet,
		Applier:   &apply.Applier{FieldManager: o.Identity.FieldManager, ManagedBy: o.Identity.ManagedBy},
		build:     desired.Options{ManagedBy: o.Identity.ManagedBy, Strip: o.Strip},
		breaker:   breaker{threshold: o.BreakerThreshold, base: o.BreakerBase, max: o.BreakerMax},
		parkRetry: parkedRetry,
	}
	if o.Scope == ScopeRemote {
		// A cluster registered again under a new name takes over the
		// mirrors of its sources written under the old one, when that
		// name is no longer registered or reaches the same cluster.
		r.Applier.Renamed = func(from, to string) bool { return !o.Fleet.Registered(from) || o.Fleet.SameCluster(from, to) }
	}
	events := &eventSource{reconciler: r, fleet: o.Fleet, crossCluster: o.Scope == ScopeRemote}
	r.enqueue, r.enqueueAfter = events.add, events.addAfter
	return r, events
}
