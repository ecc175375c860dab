// Package member wires the mirroring pipeline for one cluster: the member
// agent that mirrors sources into other namespaces of its own cluster.
package member

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fmcontroller "github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// FieldManager names the member's writes in managedFields.
const FieldManager = "fleetmirror-member"

// callTimeout bounds every write the agent makes.
const callTimeout = 30 * time.Second

// Finalizer is held by the member on sources that have mirrors.
const Finalizer = annotations.Prefix + "member-cleanup"

// LoadConfig returns the REST config for path (see --kubeconfig).
func LoadConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// Run runs the member agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	cfg := o.RESTConfig
	if cfg == nil {
		var err error
		if cfg, err = LoadConfig(o.Kubeconfig); err != nil {
			return err
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		PprofBindAddress:              o.PprofBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.GracefulShutdownTimeout,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	scope := &fmcontroller.LocalScope{
		Events: mgr.GetEventRecorder(FieldManager),
		Policy: targets.Policy{
			Included:   o.IncludedNamespaces,
			Excluded:   o.ExcludedNamespaces,
			MaxTargets: o.MaxTargets,
		},
	}
	r := &fmcontroller.Reconciler{
		Scope:   scope,
		Applier: &apply.Applier{FieldManager: FieldManager, ManagedBy: annotations.ManagedByMember},
		Build: desired.Options{
			ManagedBy: annotations.ManagedByMember,
			Strip:     o.StripKeys,
		},
		Finalizer:             Finalizer,
		CallTimeout:           callTimeout,
		WriteStatus:           o.StatusAnnotation,
		VerifySourceFreshness: o.VerifySourceFreshness,
		Parallelism:           o.WriteParallelism,
	}
	events := &fmcontroller.Events{Reconciler: r}
	cluster, err := clusters.New(cfg, clusters.Options{
		Name: o.ClusterName, ManagedBy: annotations.ManagedByMember, Resync: o.ResyncPeriod, Handler: events,
	})
	if err != nil {
		return err
	}
	scope.Local = cluster
	events.Clusters = func() []*clusters.Cluster { return []*clusters.Cluster{cluster} }
	events.Required = []*clusters.Cluster{cluster}
	for _, gvk := range o.ResourceTypes {
		if err := cluster.Watch(gvk); err != nil {
			return err
		}
	}

	// The watches run on every replica, leader or not, so that a new leader
	// starts with warm caches.
	if err := mgr.Add(watchRunnable(func(ctx context.Context) error {
		cluster.Start(ctx)
		go reportMirrors(ctx, cluster)
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	c, err := controller.NewTyped[fmcontroller.Key]("mirror", mgr, controller.TypedOptions[fmcontroller.Key]{
		Reconciler:              r,
		MaxConcurrentReconciles: o.Workers,
	})
	if err != nil {
		return err
	}
	if err := c.Watch(events); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("caches", func(*http.Request) error {
		if !cluster.HasSynced() {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Starting member agent", "cluster", o.ClusterName, "kinds", fmt.Sprint(o.ResourceTypes))
	return mgr.Start(ctx)
}

// watchRunnable is a manager runnable that needs no leadership.
type watchRunnable func(ctx context.Context) error

func (w watchRunnable) Start(ctx context.Context) error { return w(ctx) }
func (w watchRunnable) NeedLeaderElection() bool        { return false }

// reportMirrors keeps the mirrors gauge equal to the cache's count.
func reportMirrors(ctx context.Context, c *clusters.Cluster) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		for _, gvk := range c.Watched() {
			metrics.Mirrors.WithLabelValues(gvk.Kind, c.Name()).Set(float64(len(c.AllMirrors(gvk))))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
