package agent

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Options are the settings both binaries share, in groups. Every field is
// a flag (docs/flags.md lists them), except RESTConfig. Bind them with
// AddFlags, parse the flag set, then call Complete.
type Options struct {
	Access
	Pipeline
	Kinds
	LeaderElection
	Observability
	Uninstalling
	Process

	// The flag values Complete parses.
	raw struct{ types, deny, excluded, included, strip string }
}

// Access is how the agent reaches its own cluster.
type Access struct {
	// RESTConfig, when set, is used instead of loading Kubeconfig (for
	// programs that embed an agent). QPS and Burst are applied to a copy.
	RESTConfig *rest.Config
	// Kubeconfig is the path of a kubeconfig; empty uses $KUBECONFIG,
	// ~/.kube/config or the in-cluster service account.
	Kubeconfig string
	// ClusterName names this cluster in source references; it must be the
	// name the hub knows the cluster by.
	ClusterName string
	// Namespace is the namespace the agent runs in; it is never a target.
	Namespace string
	// QPS and Burst are the client-side rate limit per cluster; QPS of 0
	// or less sets none.
	QPS   float64
	Burst int
	// CallTimeout is the deadline of every call the pipeline makes.
	CallTimeout time.Duration
	// MaxCallsInFlight bounds the pipeline's calls in flight to one
	// cluster; zero bounds nothing.
	MaxCallsInFlight int
}

// Pipeline is how sources are turned into mirrors.
type Pipeline struct {
	// ExcludedNamespaces are never targeted; Namespace is always added.
	ExcludedNamespaces glob.List
	// IncludedNamespaces, when not empty, are the only namespaces targeted.
	IncludedNamespaces glob.List
	// MaxTargets bounds the targets of one source.
	MaxTargets int
	// StripKeys are label and annotation keys never copied onto mirrors.
	StripKeys glob.List
	// Workers is how many sources are reconciled at once.
	Workers int
	// WriteParallelism bounds the concurrent mirror writes of one source.
	WriteParallelism int
	// ResyncPeriod is how often every source is reconciled without a
	// change; zero disables it.
	ResyncPeriod time.Duration
	// StatusAnnotation writes the fleetmirror.io/status summary on sources.
	StatusAnnotation bool
	// VerifySourceFreshness reads each source from the API server before
	// writing its mirrors.
	VerifySourceFreshness bool
	// BreakerThreshold failed reconciles in a row space out a source's
	// retries, from BreakerBaseDelay doubling up to BreakerMaxDelay; 0
	// disables the breaker.
	BreakerThreshold int
	BreakerBaseDelay time.Duration
	BreakerMaxDelay  time.Duration
}

// Kinds is which kinds are mirrored and how they are watched.
type Kinds struct {
	// ResourceTypes are the kinds mirrored; empty discovers them.
	ResourceTypes []schema.GroupVersionKind
	// DenyKinds are never discovered, on top of clusters.DeniedKinds.
	DenyKinds []schema.GroupKind
	// AllowPrivilegeKinds allows Role, RoleBinding and ServiceAccount.
	AllowPrivilegeKinds bool
	// LazyWatchers watches a kind only while a source or mirror of it
	// exists, found by probes every LazyProbeInterval.
	LazyWatchers      bool
	LazyProbeInterval time.Duration
	// DiscoveryInterval is how often kinds are discovered again.
	DiscoveryInterval time.Duration
	// WatchIdleTimeout is how long a lazily watched kind stays watched
	// after its last source and mirror are gone.
	WatchIdleTimeout time.Duration
}

// LeaderElection is how replicas agree on the one that writes.
type LeaderElection struct {
	// LeaderElect elects a leader among replicas.
	LeaderElect bool
	// LeaderElectionNamespace and LeaderElectionID name the Lease.
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader
	// election. A follower counts the lease from when it last saw it
	// renewed, which it checks every RetryPeriod, so it takes over at most
	// LeaseDuration plus two RetryPeriods (and jitter) after the leader died.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Observability is what the agent serves besides its work.
type Observability struct {
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables them.
	HealthProbeBindAddress string
	// PprofBindAddress serves pprof; empty disables it.
	PprofBindAddress string
	// GracefulShutdownTimeout is how long running reconciles may take to
	// finish on shutdown.
	GracefulShutdownTimeout time.Duration
}

// Uninstalling is the agent's uninstall mode, which the charts' post-delete
// hook runs: instead of mirroring, the agent takes back what its writer put
// into the fleet, and exits (see Run).
type Uninstalling struct {
	// Uninstall runs the uninstall mode.
	Uninstall bool
	// UninstallKeepMirrors leaves the mirrors in place; only the writer's
	// finalizers and status are removed.
	UninstallKeepMirrors bool
	// UninstallTimeout bounds the whole uninstall: waiting for the agent's
	// replicas to stop, for the caches and for unreachable clusters.
	UninstallTimeout time.Duration
}

// Process is how much of the machine the agent's process takes.
type Process struct {
	// MaxProcs caps GOMAXPROCS, the CPUs that run the agent's Go code at
	// once, unless the GOMAXPROCS environment variable is set; 0 leaves
	// the Go runtime's default (the node's CPUs, or the container's CPU
	// limit rounded up, at least 2).
	MaxProcs int
}

// Binary is what a binary's flags default to.
type Binary struct {
	// Name of the binary, the default Lease name.
	Name string
	// Cluster is the default --cluster-name.
	Cluster string
	// MaxProcs is the default --max-procs.
	MaxProcs int
}

// AddFlags registers the shared options on fs with the defaults of b.
func (o *Options) AddFlags(fs *flag.FlagSet, b Binary) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "fleetmirror-system"
	}
	// Access.
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG, ~/.kube/config or the in-cluster service account.")
	fs.StringVar(&o.ClusterName, "cluster-name", b.Cluster, "Name of this cluster in source references (fleetmirror.io/source = cluster/namespace/name); it must be the name the hub knows the cluster by.")
	fs.StringVar(&o.Namespace, "namespace", ns, "Namespace the agent runs in (default $POD_NAMESPACE); it is excluded from targets.")
	fs.Float64Var(&o.QPS, "kube-api-qps", -1, "Client-side limit of API requests per second, per cluster; 0 or less: none, as the API server protects itself with API Priority and Fairness and --cluster-max-in-flight bounds the requests in flight. Set it for API servers without Priority and Fairness.")
	fs.IntVar(&o.Burst, "kube-api-burst", 2000, "Client-side burst of API requests, per cluster, when --kube-api-qps is set.")
	fs.DurationVar(&o.CallTimeout, "api-call-timeout", 30*time.Second, "Deadline of every write and read the pipeline sends to a cluster.")
	fs.IntVar(&o.MaxCallsInFlight, "cluster-max-in-flight", 64, "Most writes and reads of the pipeline in flight to one cluster at once, however many --workers write to it; a call waits for a free slot within --api-call-timeout. The default is what --workers x --write-parallelism allows at their defaults: raise --workers to serve more clusters side by side without asking more of each. 0: no bound.")
	// Kinds.
	fs.StringVar(&o.raw.types, "resource-types", "", "Comma-separated kinds to mirror, as Kind.version[.group], e.g. Secret.v1,ConfigMap.v1,Ingress.v1.networking.k8s.io. Empty: every namespaced kind that supports get/list/watch/create/update/patch/delete, minus the deny list, discovered again every --discovery-interval.")
	fs.StringVar(&o.raw.deny, "deny-kinds", "", "Comma-separated extra kinds never discovered, as Kind[.group] (added to the built-in deny list of Pods, Events, Endpoints, Leases, RBAC and the like).")
	fs.BoolVar(&o.AllowPrivilegeKinds, "allow-privilege-kinds", false, "DANGEROUS: allow mirroring Role, RoleBinding and ServiceAccount. Whoever can annotate a source would hand out the privileges they carry in every target namespace.")
	fs.BoolVar(&o.LazyWatchers, "lazy-watchers", true, "Watch a kind only while a source or mirror of it exists. A kind not watched is LISTed once (label-selected, limit=1), then followed by label-selected, metadata-only watches that match nothing while idle: a new source is noticed within a second, with no request meanwhile.")
	fs.DurationVar(&o.LazyProbeInterval, "lazy-probe-interval", 10*time.Second, "How often the lazily watched kinds are reviewed: a kind whose last source and mirror went is unwatched after --watch-idle-timeout. New sources are noticed by watches, not by this interval.")
	fs.DurationVar(&o.DiscoveryInterval, "discovery-interval", 5*time.Minute, "How often kinds are discovered again when --resource-types is empty (new CRDs are picked up, removed ones stop); also how often kinds the agent may not list, and kinds not served (a CRD installed since: --resource-types, MirrorPolicies), are asked about again.")
	fs.DurationVar(&o.WatchIdleTimeout, "watch-idle-timeout", time.Minute, "How long a lazily watched kind stays watched after its last source and mirror are gone.")
	// Pipeline.
	fs.StringVar(&o.raw.excluded, "excluded-namespaces", strings.Join(targets.DefaultExcludedNamespaces, ","), "Comma-separated namespace globs never targeted (the agent's own namespace is always added).")
	fs.StringVar(&o.raw.included, "included-namespaces", "", "Comma-separated namespace globs; when set, only these namespaces are targeted.")
	fs.IntVar(&o.MaxTargets, "max-targets", 100, "Most targets per source; the annotation fleetmirror.io/max-targets can only lower it.")
	fs.StringVar(&o.raw.strip, "strip-keys", strings.Join(desired.DefaultStrip, ","), "Comma-separated label and annotation key globs never copied onto mirrors.")
	fs.IntVar(&o.Workers, "workers", 4, "Sources reconciled concurrently.")
	fs.IntVar(&o.WriteParallelism, "write-parallelism", 16, "Concurrent mirror writes for one source, in each target cluster (the hub writes to its clusters side by side).")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", 10*time.Minute, "How often every source is reconciled again even without changes (0 disables).")
	fs.BoolVar(&o.StatusAnnotation, "status-annotation", true, "Write the fleetmirror.io/status summary onto sources.")
	fs.BoolVar(&o.VerifySourceFreshness, "verify-source-freshness", false, "Read each source from the API server before writing its mirrors, instead of trusting the cache.")
	fs.IntVar(&o.BreakerThreshold, "circuit-breaker-failures", 5, "Failed reconciles in a row after which a source's retries are spaced out (--circuit-breaker-base-delay, doubling up to --circuit-breaker-max-delay); 0 disables the breaker.")
	fs.DurationVar(&o.BreakerBaseDelay, "circuit-breaker-base-delay", 30*time.Second, "First wait between retries of a source whose circuit breaker opened.")
	fs.DurationVar(&o.BreakerMaxDelay, "circuit-breaker-max-delay", 10*time.Minute, "Longest wait between retries of a source whose circuit breaker is open.")
	// Leader election.
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader, so that several replicas can run with one active.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: --namespace); needed out of cluster.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", b.Name, "Name of the leader election Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 8*time.Second, "How long a leader's Lease holds without renewal; a replica takes over at most this plus twice --leader-election-retry-period after the leader died.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 6*time.Second, "How long the leader retries renewing its Lease before it gives up leadership (and exits); less than --leader-election-lease-duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", time.Second, "How often replicas try to acquire or renew the Lease.")
	// Observability.
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables them.")
	fs.StringVar(&o.PprofBindAddress, pprofFlag, "", "Address of the pprof endpoints; empty disables them, and the heap profiler too.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long running reconciles may take to finish on shutdown.")
	// Uninstall mode.
	fs.BoolVar(&o.Uninstall, "uninstall", false, "Mirror nothing: take back what this agent put into its clusters, and exit. Once the agent's replicas have stopped (it waits for the leader election Lease with --leader-elect, for the shard Leases with --shards=auto), it deletes its mirrors, takes its part of fleetmirror.io/status off the sources (and the finalizers earlier versions held off sources and MirrorPolicies) and its status off the pull mirrors it serves, in every cluster it reaches, then deletes those Leases; it exits 1 naming the clusters it could not finish. The charts' post-delete hook runs it.")
	fs.BoolVar(&o.UninstallKeepMirrors, "uninstall-keep-mirrors", false, "With --uninstall: leave the mirrors in place (nothing updates them any more); only statuses (and earlier versions' finalizers) are removed.")
	fs.DurationVar(&o.UninstallTimeout, "uninstall-timeout", 2*time.Minute, "With --uninstall: how long it may take in all, waiting for the replicas to stop and for unreachable clusters; then it exits 1 naming what is left where.")
	// Process.
	fs.IntVar(&o.MaxProcs, maxProcsFlag, b.MaxProcs, "Most CPUs that run the agent's Go code at once (GOMAXPROCS), unless the GOMAXPROCS environment variable is set; it only ever lowers the Go runtime's default (the node's CPUs, or the container's CPU limit rounded up, at least 2). Each one costs memory and CPU even when idle: the member's benchmark with 16 took 2.3 MiB and half as much CPU again as with 2. 0: the runtime's default.")
}

// Complete parses what AddFlags bound, once the flag set was parsed,
// applies the defaults that depend on other options and validates them.
// Its errors name the flag.
func (o *Options) Complete() error {
	if err := o.checkValues(); err != nil {
		return err
	}
	var err error
	if o.raw.types != "" {
		if o.ResourceTypes, err = ParseResourceTypes(o.raw.types); err != nil {
			return err
		}
	}
	if o.DenyKinds, err = parseGroupKinds(o.raw.deny); err != nil {
		return err
	}
	if !o.AllowPrivilegeKinds {
		for _, gvk := range o.ResourceTypes {
			if slices.Contains(clusters.PrivilegeKinds, gvk.GroupKind()) {
				return fmt.Errorf("--resource-types: %s hands out privileges; mirroring it needs --allow-privilege-kinds", gvk.Kind)
			}
		}
	}
	if o.ExcludedNamespaces, err = ParseNamespaceGlobs("excluded-namespaces", o.raw.excluded); err != nil {
		return err
	}
	own, err := glob.Parse(o.Namespace)
	if err != nil {
		return fmt.Errorf("--namespace: %w", err)
	}
	o.ExcludedNamespaces = append(o.ExcludedNamespaces, own)
	if o.IncludedNamespaces, err = ParseNamespaceGlobs("included-namespaces", o.raw.included); err != nil {
		return err
	}
	if o.StripKeys, err = glob.ParseList(SplitList(o.raw.strip)); err != nil {
		return fmt.Errorf("--strip-keys: %w", err)
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = o.Namespace
	}
	// client-go's own rule: the renewal must fit in the lease, with
	// room for a jittered retry.
	if o.LeaseDuration <= o.RenewDeadline || float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) || o.RetryPeriod <= 0 {
		return fmt.Errorf("leader election timing: need --leader-election-lease-duration (%s) > --leader-election-renew-deadline (%s) > 1.2 x --leader-election-retry-period (%s) > 0",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
	return nil
}

// checkValues refuses flag values that are out of range, naming the flag
// and the value: a zero worker count or interval would not fail, it would
// hang or spin.
func (o *Options) checkValues() error {
	if err := dnsLabel("cluster-name", o.ClusterName); err != nil {
		return err
	}
	if err := dnsLabel("namespace", o.Namespace); err != nil {
		return err
	}
	type duration struct {
		flag string
		d    time.Duration
	}
	positive := []duration{
		{"api-call-timeout", o.CallTimeout},
		{"lazy-probe-interval", o.LazyProbeInterval},
		{"discovery-interval", o.DiscoveryInterval},
		{"uninstall-timeout", o.UninstallTimeout},
	}
	if o.BreakerThreshold > 0 {
		positive = append(positive, duration{"circuit-breaker-base-delay", o.BreakerBaseDelay}, duration{"circuit-breaker-max-delay", o.BreakerMaxDelay})
	}
	for _, p := range positive {
		if p.d <= 0 {
			return fmt.Errorf("--%s must be positive, got %s", p.flag, p.d)
		}
	}
	for _, n := range []duration{
		{"graceful-shutdown-timeout", o.GracefulShutdownTimeout},
		{"resync-period", o.ResyncPeriod},
		{"watch-idle-timeout", o.WatchIdleTimeout},
	} {
		if n.d < 0 {
			return fmt.Errorf("--%s must not be negative, got %s", n.flag, n.d)
		}
	}
	for _, n := range []struct {
		flag string
		v    int
	}{
		{"workers", o.Workers},
		{"write-parallelism", o.WriteParallelism},
		{"max-targets", o.MaxTargets},
	} {
		if n.v < 1 {
			return fmt.Errorf("--%s must be at least 1, got %d", n.flag, n.v)
		}
	}
	if o.MaxProcs < 0 {
		return fmt.Errorf("--max-procs must not be negative (0: the Go runtime's default), got %d", o.MaxProcs)
	}
	if o.MaxCallsInFlight < 0 {
		return fmt.Errorf("--cluster-max-in-flight must not be negative (0: no bound), got %d", o.MaxCallsInFlight)
	}
	if o.QPS > 0 && o.Burst < 1 {
		return fmt.Errorf("--kube-api-burst must be at least 1 when --kube-api-qps is set, got %d", o.Burst)
	}
	if o.BreakerThreshold < 0 {
		return fmt.Errorf("--circuit-breaker-failures must not be negative (0 disables the breaker), got %d", o.BreakerThreshold)
	}
	if o.UninstallKeepMirrors && !o.Uninstall {
		return fmt.Errorf("--uninstall-keep-mirrors needs --uninstall")
	}
	if o.BreakerThreshold > 0 && o.BreakerMaxDelay < o.BreakerBaseDelay {
		return fmt.Errorf("--circuit-breaker-max-delay (%s) must not be less than --circuit-breaker-base-delay (%s)", o.BreakerMaxDelay, o.BreakerBaseDelay)
	}
	return nil
}

// dnsLabel refuses a value of flag that is not a DNS-1123 label, the form
// of namespace names and of cluster names in source references.
func dnsLabel(flag, value string) error {
	if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
		return fmt.Errorf("--%s: %q is not a DNS-1123 label: %s", flag, value, strings.Join(errs, "; "))
	}
	return nil
}

// pprofFlag is the flag of PprofBindAddress; Main reads it to turn the
// heap profiler on.
const pprofFlag = "pprof-bind-address"

// maxProcsFlag is the flag of MaxProcs; Main reads it to set GOMAXPROCS.
const maxProcsFlag = "max-procs"

// Flags are options that bind to a flag set and complete after parsing:
// agent.Options, and the member's and the hub's, which embed it.
type Flags interface {
	AddFlags(fs *flag.FlagSet)
	Complete() error
}

// Parse binds o to a flag set named binary, parses args and completes o.
func Parse(binary string, o Flags, args []string) error {
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return o.Complete()
}

// ParseResourceTypes parses a comma-separated list of Kind.version[.group].
func ParseResourceTypes(s string) ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, e := range SplitList(s) {
		kind, rest, ok := strings.Cut(e, ".")
		version, group, _ := strings.Cut(rest, ".")
		if !ok || kind == "" || version == "" || kind[0] < 'A' || kind[0] > 'Z' {
			return nil, fmt.Errorf("--resource-types: %q is not Kind.version[.group]", e)
		}
		out = append(out, schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--resource-types: no kind given")
	}
	return out, nil
}

func parseGroupKinds(s string) ([]schema.GroupKind, error) {
	var out []schema.GroupKind
	for _, e := range SplitList(s) {
		kind, group, _ := strings.Cut(e, ".")
		if kind == "" || kind[0] < 'A' || kind[0] > 'Z' {
			return nil, fmt.Errorf("--deny-kinds: %q is not Kind[.group]", e)
		}
		out = append(out, schema.GroupKind{Group: group, Kind: kind})
	}
	return out, nil
}

// ParseNamespaceGlobs parses the comma-separated value of the pattern flag
// named flag (namespace or cluster names). A malformed pattern is an error
// naming the flag and the pattern: it would otherwise match nothing, and an
// exclusion that excludes nothing fails open.
func ParseNamespaceGlobs(flag, value string) (glob.List, error) {
	l, err := glob.ParseNames(SplitList(value))
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return l, nil
}

// SplitList splits a comma-separated flag value, dropping empty entries.
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
