package hub

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/events"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/providers"
	"github.com/fleetmirror/fleetmirror/pkg/shard"
)

// FieldManager names the hub's writes in managedFields.
const FieldManager = "fleetmirror-hub"

// Finalizer is the finalizer earlier hubs held on sources that had remote
// mirrors; this one holds none and takes it off.
const Finalizer = annotations.Prefix + "hub-cleanup"

// Identity marks the hub's mirrors and writes.
var Identity = controller.Identity{ManagedBy: annotations.ManagedByHub, FieldManager: FieldManager, Finalizer: Finalizer}

// Run runs the hub until ctx ends.
func Run(ctx context.Context, o Options) error {
	return agent.Run(ctx, o.Options, agent.Writer{
		Name:                        "hub",
		Identity:                    Identity,
		Scope:                       controller.ScopeRemote,
		Provider:                    o.provider,
		ProbeInterval:               o.ProbeInterval,
		ProbeTimeout:                o.ProbeTimeout,
		Metrics:                     fleet.Metrics{Up: clusterUp, ProbeFailures: probeFailures, Size: registeredClusters},
		Identities:                  true,
		AllowedSourceClusters:       o.AllowedSourceClusters,
		AllowedSourceNamespaces:     o.AllowedSourceNamespaces,
		DeleteOrphansOfUnregistered: o.DeleteMirrorsOfUnregistered,
		AwaitOthers:                 o.awaitShards,
		MemberKinds:                 o.MemberKinds,
		// The CLUSTER/NS entries of the MirrorPolicies of every cluster.
		Policies: true,
	})
}

// awaitShards waits, in the uninstall mode of a sharded hub, until no
// replica serves a cluster any more: they hold shard Leases, not the
// leader election Lease. Those Leases are deleted once the uninstall is
// done.
func (o *Options) awaitShards(ctx context.Context, own *rest.Config) (func(context.Context) error, error) {
	if !o.Sharded() {
		return nil, nil
	}
	stopped, err := shard.AwaitStopped(ctx, shard.Options{Config: own, Namespace: o.Namespace, Group: o.ShardGroup, LeaseDuration: o.ShardLeaseDuration})
	if err != nil {
		return nil, err
	}
	return stopped.Delete, nil
}

// eventScheme knows the kinds of the typed objects the hub's own cluster
// gets Events about: the registration Secrets and the MirrorPolicies.
var eventScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()

// provider is the hub's fleet: its own cluster, whose registration
// namespace is never a target, and the registered clusters.
func (o *Options) provider(own *rest.Config) (fleet.Provider, error) {
	recorder, err := fleet.NewRecorder(own, nil, events.Options{Component: FieldManager, Scheme: eventScheme, Log: logf.Log.WithName("events")})
	if err != nil {
		return nil, err
	}
	local := fleet.Local{Spec: fleet.Spec{Name: o.ClusterName, Config: own, Recorder: recorder,
		// The registration Secrets are read there: a mirror in that
		// namespace could register a cluster of a tenant's choosing.
		ExcludedNamespaces: glob.List{o.secretsNamespace}, ExcludedBecause: "it holds the hub's cluster registration Secrets"}}
	var registered fleet.Provider
	switch o.ClusterProvider {
	case ProviderKubeconfigSecrets:
		registered = &providers.KubeconfigSecrets{Config: own, Namespace: o.ClusterSecretsNamespace, Reserved: o.ClusterName,
			AllowPlugins: o.AllowKubeconfigPlugins, Recorder: recorder}
	case ProviderKubeconfigDir:
		registered = &providers.KubeconfigDir{Dir: o.KubeconfigDir, Reserved: o.ClusterName, AllowPlugins: o.AllowKubeconfigPlugins}
	default:
		return nil, fmt.Errorf("unknown cluster provider %q", o.ClusterProvider)
	}
	all := fleet.Providers(local, registered)
	if !o.Sharded() || o.Uninstall {
		return all, nil // one uninstall cleans every cluster
	}
	return &shard.Provider{Inner: all, Options: shard.Options{Config: own, Namespace: o.Namespace, Group: o.ShardGroup,
		Identity: o.ShardID, LeaseDuration: o.ShardLeaseDuration, Epsilon: shard.DefaultEpsilon}}, nil
}
