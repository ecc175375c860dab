// Package member wires the mirroring pipeline for one cluster: the member
// agent that mirrors sources into other namespaces of its own cluster.
package member

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fmcontroller "github.com/fleetmirror/fleetmirror/pkg/controller"
)

// FieldManager names the member's writes in managedFields.
const FieldManager = "fleetmirror-member"

// Finalizer is held by the member on sources that have mirrors.
const Finalizer = annotations.Prefix + "member-cleanup"

// Run runs the member agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	mgr, err := o.NewManager(cfg)
	if err != nil {
		return err
	}
	recorder, stopRecorder, err := agent.NewRecorder(cfg, nil, FieldManager)
	if err != nil {
		return err
	}
	defer stopRecorder()
	scope := &fmcontroller.LocalScope{Events: recorder, Policy: o.Targets()}
	r := o.NewReconciler(scope, FieldManager, annotations.ManagedByMember, Finalizer)
	events := &fmcontroller.Events{Reconciler: r}
	cluster, err := clusters.New(cfg, clusters.Options{
		Name: o.ClusterName, ManagedBy: annotations.ManagedByMember, Resync: o.ResyncPeriod, Handler: events,
	})
	if err != nil {
		return err
	}
	scope.Local = cluster
	list := func() []*clusters.Cluster { return []*clusters.Cluster{cluster} }
	events.Clusters = list
	events.Required = list()
	kinds := o.Kinds(annotations.ManagedByMember, events.KindSynced)
	if err := mgr.Add(agent.Runnable(func(ctx context.Context) error {
		cluster.Start(ctx)
		go kinds.Run(ctx, list)
		go agent.ReportMirrors(ctx, list)
		<-ctx.Done()
		return nil
	})); err != nil {
		return err
	}
	if err := o.AddController(mgr, "member", r, events, cluster.HasSynced); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Starting member agent", "cluster", o.ClusterName, "kinds", fmt.Sprint(o.ResourceTypes))
	return mgr.Start(ctx)
}
