package hub

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// Options are the hub's settings; each is a flag.
type Options struct {
	agent.Options
	// ClusterSecretsNamespace holds the kubeconfig Secrets (default: --namespace).
	ClusterSecretsNamespace string
	// AllowKubeconfigPlugins lets kubeconfigs run exec/auth-provider plugins.
	AllowKubeconfigPlugins bool
	// AllowedSourceClusters and AllowedSourceNamespaces (globs) limit the
	// sources whose CLUSTER/NS entries the hub serves; empty allows all.
	AllowedSourceClusters   glob.List
	AllowedSourceNamespaces glob.List
	// RemoteCleanupTimeout bounds how long a deleted source is held while
	// clusters with its mirrors are unreachable.
	RemoteCleanupTimeout time.Duration
	// DeleteMirrorsOfUnregistered removes the remote mirrors of sources
	// whose cluster is unregistered; by default they are kept and logged.
	DeleteMirrorsOfUnregistered bool
	// ProbeInterval and ProbeTimeout govern cluster health probes.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration

	// secretsNamespace is ClusterSecretsNamespace as a pattern: it is
	// never a target in the hub's own cluster.
	secretsNamespace glob.Glob
}

// BindFlags registers every option on fs and returns a function that
// finishes parsing once fs.Parse has run.
func (o *Options) BindFlags(fs *flag.FlagSet) func() error {
	finish := o.Options.BindFlags(fs, "fleetmirror-hub", "hub")
	var clustersFlag, namespacesFlag, orphans string
	fs.StringVar(&o.ClusterSecretsNamespace, "cluster-secrets-namespace", "", "Namespace of the kubeconfig Secrets that register clusters (default: --namespace).")
	fs.BoolVar(&o.AllowKubeconfigPlugins, "allow-kubeconfig-plugins", false, "Accept kubeconfigs with exec or auth-provider plugins. DANGEROUS: whoever writes a registration Secret runs programs on the hub.")
	fs.StringVar(&clustersFlag, "allowed-source-clusters", "", "Comma-separated cluster globs whose sources may target other clusters; empty allows all.")
	fs.StringVar(&namespacesFlag, "allowed-source-namespaces", "", "Comma-separated namespace globs whose sources may target other clusters; empty allows all.")
	fs.DurationVar(&o.RemoteCleanupTimeout, "remote-cleanup-timeout", 5*time.Minute, "How long a deleted source is held while clusters with its mirrors are unreachable; the orphan sweep removes those mirrors when they return.")
	fs.StringVar(&orphans, "unregistered-source-mirrors", "keep", "What happens to remote mirrors of sources whose cluster is unregistered: keep (and log) or delete.")
	fs.DurationVar(&o.ProbeInterval, "cluster-probe-interval", 10*time.Second, "How often each registered cluster is probed.")
	fs.DurationVar(&o.ProbeTimeout, "cluster-probe-timeout", 3*time.Second, "Deadline of one cluster probe. A cluster that misses it is marked unreachable: calls to it fail at once until a probe succeeds. A call to a cluster still running after 1s (or this, if shorter) has the cluster probed at once.")
	return func() error {
		if err := finish(); err != nil {
			return err
		}
		if o.ClusterSecretsNamespace == "" {
			o.ClusterSecretsNamespace = o.Namespace
		}
		var err error
		if o.AllowedSourceClusters, err = agent.ParseNamespaceGlobs("allowed-source-clusters", clustersFlag); err != nil {
			return err
		}
		if o.AllowedSourceNamespaces, err = agent.ParseNamespaceGlobs("allowed-source-namespaces", namespacesFlag); err != nil {
			return err
		}
		if errs := validation.IsDNS1123Label(o.ClusterSecretsNamespace); len(errs) > 0 {
			return fmt.Errorf("--cluster-secrets-namespace: %q is not a namespace name: %s", o.ClusterSecretsNamespace, strings.Join(errs, "; "))
		}
		o.secretsNamespace = glob.MustParse(o.ClusterSecretsNamespace) // a name is a valid pattern
		switch orphans {
		case "keep":
		case "delete":
			o.DeleteMirrorsOfUnregistered = true
		default:
			return fmt.Errorf("--unregistered-source-mirrors must be keep or delete, not %q", orphans)
		}
		if o.ProbeInterval <= 0 || o.ProbeTimeout <= 0 {
			return fmt.Errorf("--cluster-probe-interval and --cluster-probe-timeout must be positive")
		}
		return nil
	}
}

// ParseOptions returns the options given by command-line style args, with
// every default applied.
func ParseOptions(args ...string) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("fleetmirror-hub", flag.ContinueOnError)
	finish := o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, finish()
}
