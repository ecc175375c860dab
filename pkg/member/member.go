// Package member is the member agent: the mirroring pipeline with the
// agent's own cluster as the whole fleet, mirroring sources into other
// namespaces of that cluster.
package member

import (
	"context"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// FieldManager names the member's writes in managedFields.
const FieldManager = "fleetmirror-member"

// Finalizer is the finalizer earlier member agents held on sources that had
// mirrors; this one holds none and takes it off.
const Finalizer = annotations.Prefix + "member-cleanup"

// Identity marks the member agent's mirrors and writes.
var Identity = controller.Identity{ManagedBy: annotations.ManagedByMember, FieldManager: FieldManager, Finalizer: Finalizer}

// Probes of the agent's own API server; while it does not answer, every
// clusters.DownProbeInterval.
const (
	probeInterval = 10 * time.Second
	probeTimeout  = 3 * time.Second
)

// Run runs the member agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	return agent.Run(ctx, o.Options, agent.Writer{
		Name:     "member",
		Identity: Identity,
		Scope:    controller.ScopeLocal,
		Provider: func(own *rest.Config) (fleet.Provider, error) {
			return fleet.Local{Spec: fleet.Spec{Name: o.ClusterName, Config: own}}, nil
		},
		ProbeInterval: probeInterval,
		ProbeTimeout:  probeTimeout,
		Metrics:       fleet.Metrics{Up: metrics.ClusterUp},
		// The hub reads it to watch only the kinds used here.
		KindsObject: true,
		Policies:    true,
	})
}
