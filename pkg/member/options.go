package member

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Options are the member agent's settings; each is a flag.
type Options struct {
	// RESTConfig, when set, is used instead of loading Kubeconfig (for
	// programs that embed the agent). QPS and Burst are applied to a copy.
	RESTConfig              *rest.Config
	Kubeconfig              string
	ClusterName             string
	Namespace               string
	ResourceTypes           []schema.GroupVersionKind
	ExcludedNamespaces      []string
	IncludedNamespaces      []string
	MaxTargets              int
	StripKeys               []string
	Workers                 int
	WriteParallelism        int
	QPS                     float64
	Burst                   int
	ResyncPeriod            time.Duration
	StatusAnnotation        bool
	VerifySourceFreshness   bool
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	MetricsBindAddress      string
	HealthProbeBindAddress  string
	PprofBindAddress        string
	GracefulShutdownTimeout time.Duration
}

// DefaultResourceTypes are mirrored when --resource-types is not given.
const DefaultResourceTypes = "Secret.v1,ConfigMap.v1"

// BindFlags registers every option on fs and returns a function that
// finishes parsing (lists, kinds) once fs.Parse has run.
func (o *Options) BindFlags(fs *flag.FlagSet) func() error {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "fleetmirror-system"
	}
	var types, excluded, included, strip string
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG, ~/.kube/config or the in-cluster service account.")
	fs.StringVar(&o.ClusterName, "cluster-name", "local", "Name of this cluster in source references (fleetmirror.io/source = cluster/namespace/name); the hub must know the cluster by the same name.")
	fs.StringVar(&o.Namespace, "namespace", ns, "Namespace the agent runs in (default $POD_NAMESPACE); it is excluded from targets.")
	fs.StringVar(&types, "resource-types", DefaultResourceTypes, "Comma-separated kinds to mirror, as Kind.version[.group], e.g. Ingress.v1.networking.k8s.io.")
	fs.StringVar(&excluded, "excluded-namespaces", strings.Join(targets.DefaultExcludedNamespaces, ","), "Comma-separated namespace globs never targeted (the agent's own namespace is always added).")
	fs.StringVar(&included, "included-namespaces", "", "Comma-separated namespace globs; when set, only these namespaces are targeted.")
	fs.IntVar(&o.MaxTargets, "max-targets", 100, "Most target namespaces per source; the annotation fleetmirror.io/max-targets can only lower it.")
	fs.StringVar(&strip, "strip-keys", strings.Join(desired.DefaultStrip, ","), "Comma-separated label and annotation key globs never copied onto mirrors.")
	fs.IntVar(&o.Workers, "workers", 4, "Sources reconciled concurrently.")
	fs.IntVar(&o.WriteParallelism, "write-parallelism", 16, "Concurrent mirror writes for one source.")
	fs.Float64Var(&o.QPS, "kube-api-qps", 200, "Client-side limit of API requests per second.")
	fs.IntVar(&o.Burst, "kube-api-burst", 400, "Client-side burst of API requests.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", 10*time.Minute, "How often every source is reconciled again even without changes (0 disables).")
	fs.BoolVar(&o.StatusAnnotation, "status-annotation", true, "Write the fleetmirror.io/status summary onto sources.")
	fs.BoolVar(&o.VerifySourceFreshness, "verify-source-freshness", false, "Read each source from the API server before writing its mirrors, instead of trusting the cache.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader, so that several replicas can run with one active.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: --namespace); needed out of cluster.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "fleetmirror-member", "Name of the leader election Lease.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "", "Address of the pprof endpoints; empty disables them.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long running reconciles may take to finish on shutdown.")
	return func() error {
		var err error
		if o.ResourceTypes, err = ParseResourceTypes(types); err != nil {
			return err
		}
		o.ExcludedNamespaces = append(splitList(excluded), o.Namespace)
		o.IncludedNamespaces = splitList(included)
		o.StripKeys = splitList(strip)
		if o.LeaderElectionNamespace == "" {
			o.LeaderElectionNamespace = o.Namespace
		}
		if o.MaxTargets < 1 {
			return fmt.Errorf("--max-targets must be at least 1, got %d", o.MaxTargets)
		}
		return nil
	}
}

// ParseResourceTypes parses a comma-separated list of Kind.version[.group].
func ParseResourceTypes(s string) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, e := range splitList(s) {
		kind, rest, ok := strings.Cut(e, ".")
		if !ok || kind == "" || rest == "" {
			return nil, fmt.Errorf("--resource-types: %q is not Kind.version[.group]", e)
		}
		version, group, _ := strings.Cut(rest, ".")
		if version == "" || kind[0] < 'A' || kind[0] > 'Z' {
			return nil, fmt.Errorf("--resource-types: %q is not Kind.version[.group]", e)
		}
		out = append(out, schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--resource-types: no kind given")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// ParseOptions returns the options given by command-line style args, with
// every default applied.
func ParseOptions(args ...string) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("fleetmirror-member", flag.ContinueOnError)
	finish := o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, finish()
}
