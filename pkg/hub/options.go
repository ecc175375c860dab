package hub

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// Cluster providers of the hub (--cluster-provider).
const (
	ProviderKubeconfigSecrets = "kubeconfig-secrets" //nolint:gosec // the name of a provider, not a credential
	ProviderKubeconfigDir     = "kubeconfig-dir"
)

// Options are the hub's settings: the shared ones and the hub's own, all
// flags.
type Options struct {
	agent.Options
	Hub
}

// Hub are the options only the hub has.
type Hub struct {
	// ClusterProvider is where registered clusters come from:
	// ProviderKubeconfigSecrets or ProviderKubeconfigDir.
	ClusterProvider string
	// ClusterSecretsNamespace holds the kubeconfig Secrets (default:
	// --namespace). It is never a target in the hub's own cluster.
	ClusterSecretsNamespace string
	// KubeconfigDir holds one kubeconfig file per cluster, for
	// ProviderKubeconfigDir.
	KubeconfigDir string
	// AllowKubeconfigPlugins lets kubeconfigs run exec/auth-provider plugins.
	AllowKubeconfigPlugins bool
	// AllowedSourceClusters and AllowedSourceNamespaces (globs) limit the
	// sources whose CLUSTER/NS entries the hub serves; empty allows all.
	AllowedSourceClusters   glob.List
	AllowedSourceNamespaces glob.List
	// RemoteCleanupTimeout is read and ignored: nothing holds a deleted
	// source any more (no finalizer), and mirrors in a cluster that was
	// unreachable are removed when it returns. Kept so that a chart or
	// command line of an older release still starts the hub.
	RemoteCleanupTimeout time.Duration
	// DeleteMirrorsOfUnregistered removes the remote mirrors of sources
	// whose cluster is unregistered; by default they are kept and logged.
	DeleteMirrorsOfUnregistered bool
	// ProbeInterval and ProbeTimeout govern cluster health probes.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// MemberKinds reads each cluster's member kinds object (written by its
	// member agent) and, while it is valid and renewed, keeps no presence
	// watches for the kinds it names as unused there.
	MemberKinds bool
	// Sharding divides the registered clusters among the hub's replicas.
	Sharding

	// secretsNamespace is ClusterSecretsNamespace as a pattern.
	secretsNamespace glob.Glob
	// The flag values Complete parses.
	raw struct{ clusters, namespaces, orphans string }
}

// Sharding are the options of a sharded hub (pkg/shard).
type Sharding struct {
	// Shards is ShardsOff (one replica serves every cluster) or ShardsAuto
	// (the replicas that run divide the registered clusters).
	Shards string
	// ShardGroup names the replicas that share the clusters: the label
	// value and name prefix of their Leases in --namespace.
	ShardGroup string
	// ShardID names this replica in its group (default: $POD_NAME, else
	// the host name).
	ShardID string
	// ShardLeaseDuration is how long a replica's shard Lease holds without
	// renewal; a dead replica's clusters are served again within about two.
	ShardLeaseDuration time.Duration
}

// Values of --shards.
const (
	ShardsOff  = "off"
	ShardsAuto = "auto"
)

// Sharded reports whether the replicas divide the clusters.
func (s Sharding) Sharded() bool { return s.Shards == ShardsAuto }

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	o.Options.AddFlags(fs, agent.Binary{Name: "fleetmirror-hub", Cluster: "hub"})
	fs.StringVar(&o.ClusterProvider, "cluster-provider", ProviderKubeconfigSecrets, "Where registered clusters come from: kubeconfig-secrets (Secrets in --cluster-secrets-namespace, Cluster API's <cluster>-kubeconfig or labelled fleetmirror.io/cluster-name) or kubeconfig-dir (one kubeconfig file per cluster in --kubeconfig-dir, named after the cluster).")
	fs.StringVar(&o.ClusterSecretsNamespace, "cluster-secrets-namespace", "", "Namespace of the kubeconfig Secrets that register clusters (default: --namespace).")
	fs.StringVar(&o.KubeconfigDir, "kubeconfig-dir", "", "Directory of kubeconfig files, one per cluster, with --cluster-provider=kubeconfig-dir; read again every 2s.")
	fs.BoolVar(&o.AllowKubeconfigPlugins, "allow-kubeconfig-plugins", false, "Accept kubeconfigs with exec or auth-provider plugins. DANGEROUS: whoever writes a registration Secret runs programs on the hub.")
	fs.StringVar(&o.raw.clusters, "allowed-source-clusters", "", "Comma-separated cluster globs whose sources may target other clusters; empty allows all.")
	fs.StringVar(&o.raw.namespaces, "allowed-source-namespaces", "", "Comma-separated namespace globs whose sources may target other clusters; empty allows all.")
	fs.DurationVar(&o.RemoteCleanupTimeout, "remote-cleanup-timeout", 5*time.Minute, "Deprecated, ignored: a deleted source is no longer held (the agents put no finalizer on it); mirrors in a cluster that is unreachable are removed when it returns.")
	fs.StringVar(&o.raw.orphans, "unregistered-source-mirrors", "keep", "What happens to remote mirrors of sources whose cluster is unregistered: keep (and log) or delete.")
	fs.BoolVar(&o.MemberKinds, "member-kinds", true, "With --lazy-watchers: in a cluster whose member agent keeps its kinds object (ConfigMap fleetmirror-member-kinds, renewed every minute), watch only that object and the kinds it names as used, instead of two idle watches per kind; in discovery mode, of a kind the fleet mirrors that the object rules out, watch only the hub's own mirrors there. Without a valid, unique object renewed within 3 minutes, every kind is watched as in a cluster without a member agent.")
	fs.DurationVar(&o.ProbeInterval, "cluster-probe-interval", 10*time.Second, "How often each registered cluster is probed.")
	fs.StringVar(&o.Shards, "shards", ShardsOff, "off: one replica serves every registered cluster (with several replicas, under --leader-elect). auto: every replica runs and they divide the registered clusters among themselves through Leases in --namespace (docs/federation.md); --leader-elect is then ignored.")
	fs.StringVar(&o.ShardGroup, "shard-group", "fleetmirror-hub", "With --shards=auto: the name of the replicas that share the clusters, prefix of their Leases' names; one per hub installation in a namespace.")
	fs.StringVar(&o.ShardID, "shard-id", "", "With --shards=auto: this replica's name in its group, unique and stable while it runs (default: $POD_NAME, else the host name).")
	fs.DurationVar(&o.ShardLeaseDuration, "shard-lease-duration", 15*time.Second, "With --shards=auto: how long a replica's shard Lease holds without renewal. It renews every 1/8 of it and stops serving after 2/3 without renewal; the others serve a dead replica's clusters after one to two of it.")
	fs.DurationVar(&o.ProbeTimeout, "cluster-probe-timeout", 3*time.Second, "Deadline of one cluster probe. A cluster that misses it is marked unreachable: calls to it fail at once until a probe succeeds. A call to a cluster still running after 1s (or this, if shorter) has the cluster probed at once.")
}

// Complete parses what AddFlags bound, once the flag set was parsed, and
// validates it.
func (o *Options) Complete() error {
	if err := o.Options.Complete(); err != nil {
		return err
	}
	if o.ClusterSecretsNamespace == "" {
		o.ClusterSecretsNamespace = o.Namespace
	}
	var err error
	if o.AllowedSourceClusters, err = agent.ParseNamespaceGlobs("allowed-source-clusters", o.raw.clusters); err != nil {
		return err
	}
	if o.AllowedSourceNamespaces, err = agent.ParseNamespaceGlobs("allowed-source-namespaces", o.raw.namespaces); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Label(o.ClusterSecretsNamespace); len(errs) > 0 {
		return fmt.Errorf("--cluster-secrets-namespace: %q is not a namespace name: %s", o.ClusterSecretsNamespace, strings.Join(errs, "; "))
	}
	o.secretsNamespace = glob.MustParse(o.ClusterSecretsNamespace) // a name is a valid pattern
	switch o.raw.orphans {
	case "keep":
	case "delete":
		o.DeleteMirrorsOfUnregistered = true
	default:
		return fmt.Errorf("--unregistered-source-mirrors must be keep or delete, not %q", o.raw.orphans)
	}
	switch {
	case o.ClusterProvider == ProviderKubeconfigDir && o.KubeconfigDir == "":
		return fmt.Errorf("--cluster-provider=%s needs --kubeconfig-dir", ProviderKubeconfigDir)
	case o.ClusterProvider != ProviderKubeconfigDir && o.KubeconfigDir != "":
		return fmt.Errorf("--kubeconfig-dir needs --cluster-provider=%s", ProviderKubeconfigDir)
	case o.ClusterProvider != ProviderKubeconfigDir && o.ClusterProvider != ProviderKubeconfigSecrets:
		return fmt.Errorf("--cluster-provider must be %s or %s, not %q", ProviderKubeconfigSecrets, ProviderKubeconfigDir, o.ClusterProvider)
	}
	if o.ProbeInterval <= 0 {
		return fmt.Errorf("--cluster-probe-interval must be positive, got %s", o.ProbeInterval)
	}
	if o.ProbeTimeout <= 0 {
		return fmt.Errorf("--cluster-probe-timeout must be positive, got %s", o.ProbeTimeout)
	}
	return o.completeSharding()
}

// completeSharding checks the sharding options and fills in the replica's
// name.
func (o *Options) completeSharding() error {
	switch o.Shards {
	case ShardsOff:
		return nil
	case ShardsAuto:
	default:
		return fmt.Errorf("--shards must be %s or %s, not %q", ShardsOff, ShardsAuto, o.Shards)
	}
	// Every replica works, each on its share: no leader. The chart passes
	// --leader-elect as its leaderElection value says, which shared
	// templates check against replicaCount; sharding wins.
	o.LeaderElect = false
	if o.ShardID == "" {
		o.ShardID = os.Getenv("POD_NAME")
	}
	if o.ShardID == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--shard-id: none given and no host name: %w", err)
		}
		o.ShardID = host
	}
	if errs := validation.IsDNS1123Label(o.ShardGroup); len(errs) > 0 {
		return fmt.Errorf("--shard-group: %q is not a DNS label: %s", o.ShardGroup, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(o.ShardGroup + "-" + o.ShardID); len(errs) > 0 {
		return fmt.Errorf("--shard-id: %q does not make a Lease name with --shard-group: %s", o.ShardID, strings.Join(errs, "; "))
	}
	if o.ShardLeaseDuration < time.Second {
		return fmt.Errorf("--shard-lease-duration must be at least 1s, got %s", o.ShardLeaseDuration)
	}
	return nil
}

// ParseOptions returns the options given by command-line style args, with
// every default applied.
func ParseOptions(args ...string) (Options, error) {
	var o Options
	err := agent.Parse("fleetmirror-hub", &o, args)
	return o, err
}
