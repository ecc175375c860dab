package hub

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	fmcontroller "github.com/fleetmirror/fleetmirror/pkg/controller"
)

// FieldManager names the hub's writes in managedFields.
const FieldManager = "fleetmirror-hub"

// Finalizer is held by the hub on sources that have remote mirrors.
const Finalizer = annotations.Prefix + "hub-cleanup"

// Run runs the hub until ctx ends.
func Run(ctx context.Context, o Options) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	mgr, err := o.NewManager(cfg)
	if err != nil {
		return err
	}
	scope := &fleetScope{policy: o.Targets(), opts: &o}
	r := o.NewReconciler(scope, FieldManager, annotations.ManagedByHub, Finalizer)
	r.Remote = true
	r.CleanupTimeout = o.RemoteCleanupTimeout
	r.DeleteOrphansOfUnregistered = o.DeleteMirrorsOfUnregistered
	events := &fmcontroller.Events{Reconciler: r, CrossCluster: true}
	recorder, stopRecorder, err := agent.NewRecorder(cfg, nil, FieldManager)
	if err != nil {
		return err
	}
	defer stopRecorder()
	registry, err := newRegistry(cfg, o, events, recorder)
	if err != nil {
		return err
	}
	scope.registry = registry
	events.Clusters = registry.Clusters
	// events.Required stays empty: members join when they are up, and the
	// Registry announces them.
	if err := mgr.Add(registry); err != nil {
		return err
	}
	kinds := o.Kinds(annotations.ManagedByHub, events.KindSynced)
	registry.onStarted = kinds.Trigger
	registry.onStopped = r.Applier.ForgetCluster
	if err := mgr.Add(agent.Runnable(func(ctx context.Context) error {
		go kinds.Run(ctx, registry.Started)
		agent.ReportMirrors(ctx, registry.Clusters)
		return nil
	})); err != nil {
		return err
	}
	if err := o.AddController(mgr, "hub", r, events, registry.Local().HasSynced); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Starting hub", "cluster", o.ClusterName, "secretsNamespace", o.ClusterSecretsNamespace, "kinds", fmt.Sprint(o.ResourceTypes))
	return mgr.Start(ctx)
}
