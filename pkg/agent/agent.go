// Package agent holds what the member agent and the hub share around the
// mirroring pipeline: the options common to both, the REST config, the
// agent's endpoints (metrics, probes, pprof), leader election, and Run,
// which starts the pipeline from one complete description of the writer.
package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
	"github.com/fleetmirror/fleetmirror/pkg/version"
)

// Writer is what makes an agent the member agent or the hub: all of it
// data, given whole to Run.
type Writer struct {
	// Name names the controller in logs and metrics ("member", "hub").
	Name string
	// Identity marks the writer's mirrors and writes.
	Identity controller.Identity
	// Scope is where the writer's mirrors go.
	Scope controller.Scope
	// Provider tells which clusters there are. It is given the agent's own
	// cluster's REST config, rate limits applied.
	Provider func(own *rest.Config) (fleet.Provider, error)
	// ProbeInterval and ProbeTimeout govern cluster health probes.
	ProbeInterval, ProbeTimeout time.Duration
	// Metrics are the per-cluster series the writer publishes.
	Metrics fleet.Metrics
	// Identities serves each cluster through one registration only: see
	// fleet.Options.
	Identities bool
	// AllowedSourceClusters and AllowedSourceNamespaces limit the sources
	// whose entries the writer serves; empty allows all.
	AllowedSourceClusters, AllowedSourceNamespaces glob.List
	// DeleteOrphansOfUnregistered deletes the mirrors of sources whose
	// cluster left the fleet; otherwise they are kept and logged.
	DeleteOrphansOfUnregistered bool
	// AwaitOthers, when set, waits in the uninstall mode until no replica
	// of the writer that the leader election Lease does not cover can
	// write any more (the replicas of a sharded hub hold Leases of their
	// own); its error ends the uninstall. The uninstall calls forget, when
	// not nil, once it is done, to delete what those replicas left to
	// coordinate (their Leases).
	AwaitOthers func(ctx context.Context, own *rest.Config) (forget func(context.Context) error, err error)
	// KindsObject keeps, while leading, the member's kinds object in
	// --namespace (kindsobject.go), and deletes it on uninstall.
	KindsObject bool
	// Policies serves the MirrorPolicies of the writer's clusters.
	Policies bool
	// MemberKinds reads the member kinds object of every cluster and
	// watches there only the kinds it names as used (clusters.KindOptions).
	MemberKinds bool

	// uninstalled is done last by the uninstall mode.
	uninstalled func(ctx context.Context) error
}

// Run runs the pipeline for w with the shared options o until ctx ends;
// with o.Uninstall it takes back what w put into the fleet instead, and
// returns when that is done or o.UninstallTimeout has passed (see
// uninstall).
func Run(ctx context.Context, o Options, w Writer) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	if err := checkResourceTypes(ctx, cfg, o.ResourceTypes, o.CallTimeout); err != nil {
		return err
	}
	provider, err := w.Provider(cfg)
	if err != nil {
		return err
	}
	f := fleet.New(fleet.Options{
		Provider:         provider,
		ManagedBy:        w.Identity.ManagedBy,
		FieldManager:     w.Identity.FieldManager,
		Finalizer:        w.Identity.Finalizer,
		Resync:           o.ResyncPeriod,
		ProbeInterval:    w.ProbeInterval,
		ProbeTimeout:     w.ProbeTimeout,
		Limit:            o.Limited,
		MaxCallsInFlight: o.MaxCallsInFlight,
		Kinds:            o.kindOptions(w),
		Metrics:          w.Metrics,
		Identities:       w.Identities,
	})
	co := controller.Options{
		Name:                        w.Name,
		Fleet:                       f,
		Identity:                    w.Identity,
		Scope:                       w.Scope,
		Policy:                      targets.Policy{Included: o.IncludedNamespaces, Excluded: o.ExcludedNamespaces, MaxTargets: o.MaxTargets},
		AllowedSourceClusters:       w.AllowedSourceClusters,
		AllowedSourceNamespaces:     w.AllowedSourceNamespaces,
		Strip:                       o.StripKeys,
		WriteStatus:                 o.StatusAnnotation,
		VerifySourceFreshness:       o.VerifySourceFreshness,
		Workers:                     o.Workers,
		Parallelism:                 o.WriteParallelism,
		CallTimeout:                 o.CallTimeout,
		DeleteOrphansOfUnregistered: w.DeleteOrphansOfUnregistered,
		BreakerThreshold:            o.BreakerThreshold,
		BreakerBase:                 o.BreakerBaseDelay,
		BreakerMax:                  o.BreakerMaxDelay,
	}
	p := controller.New(co)
	var lead func(context.Context)
	if w.KindsObject {
		ko, err := o.newKindsObject(cfg, f)
		if err != nil {
			return err
		}
		lead = ko.run
		w.uninstalled = ko.delete
	}
	if o.Uninstall {
		return o.uninstall(ctx, cfg, p, w)
	}
	logf.FromContext(ctx).Info("Starting", "writer", w.Name, "cluster", o.ClusterName, "kinds", fmt.Sprint(o.ResourceTypes),
		"version", version.Version, "revision", version.Revision)
	return o.run(ctx, cfg, p, lead)
}

// kindOptions is the kind policy of the options, as w reads kinds.
func (o *Options) kindOptions(w Writer) clusters.KindOptions {
	ko := o.KindOptions()
	ko.MemberKinds = w.MemberKinds
	ko.Policies = w.Policies
	return ko
}

// KindOptions is the kind policy of the options.
func (o *Options) KindOptions() clusters.KindOptions {
	deny := append(slices.Clone(clusters.DeniedKinds), o.DenyKinds...)
	if o.AllowPrivilegeKinds {
		deny = slices.DeleteFunc(deny, func(gk schema.GroupKind) bool { return slices.Contains(clusters.PrivilegeKinds, gk) })
	}
	return clusters.KindOptions{
		Explicit:          o.ResourceTypes,
		Deny:              deny,
		Lazy:              o.LazyWatchers,
		ProbeInterval:     o.LazyProbeInterval,
		DiscoveryInterval: o.DiscoveryInterval,
		IdleTimeout:       o.WatchIdleTimeout,
	}
}

// Config returns the REST config of the agent's own cluster, rate limits applied.
func (o *Options) Config() (*rest.Config, error) {
	cfg := o.RESTConfig
	if cfg == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.Kubeconfig
		var err error
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig(); err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
	}
	return o.Limited(cfg), nil
}

// Limited returns a copy of cfg with the client-side rate limit of the
// options. As controller-runtime's own default, no limit is the default:
// the API server's Priority and Fairness queues what it cannot take, and
// the bounded number of workers and writes bounds what is in flight.
func (o Options) Limited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	if o.QPS <= 0 {
		cfg.QPS = -1 // client-go takes 0 for its default of 5 per second
	}
	return cfg
}
