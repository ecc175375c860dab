// Package member wires the mirroring pipeline for one cluster: the member
// agent that mirrors sources into other namespaces of its own cluster.
package member

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fmcontroller "github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
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
		go watchOwnCluster(ctx, cluster)
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

// Probes of the agent's own API server; while it does not answer, every
// clusters.DownProbeInterval.
const (
	ownProbeInterval = 10 * time.Second
	ownProbeTimeout  = 3 * time.Second
)

// watchOwnCluster probes the agent's own API server until ctx ends and
// keeps fleetmirror_cluster_up current. When the server answers again after
// it did not, the kind watches are started afresh: client-go's reflectors
// wait up to 30s between attempts while a server is down, and changes made
// right after its return would wait for them.
func watchOwnCluster(ctx context.Context, c *clusters.Cluster) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", c.Name())
	up := metrics.ClusterUp.WithLabelValues(c.Name())
	defer metrics.ClusterUp.DeleteLabelValues(c.Name())
	down := false
	for {
		probeCtx, cancel := context.WithTimeout(ctx, ownProbeTimeout)
		err := c.Ping(probeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && !down:
			log.Info("The API server does not answer", "error", err.Error())
			down = true
		case err == nil && down:
			log.Info("The API server answers again; restarting the watches")
			down = false
			if err := c.RestartWatches(ctx); err != nil && ctx.Err() == nil {
				log.Error(err, "Restarting the watches")
			}
		}
		wait := ownProbeInterval
		if down {
			up.Set(0)
			wait = clusters.DownProbeInterval
		} else {
			up.Set(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
