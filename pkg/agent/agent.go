// Package agent holds what the member agent and the hub share around the
// mirroring pipeline: the flags common to both, the REST config, the
// controller-runtime manager (metrics, probes, leader election) and the
// controller that runs the pipeline's work queue.
package agent

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fmcontroller "github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Options are the settings both binaries share; each is a flag.
type Options struct {
	// RESTConfig, when set, is used instead of loading Kubeconfig (for
	// programs that embed an agent). QPS and Burst are applied to a copy.
	RESTConfig              *rest.Config
	Kubeconfig              string
	ClusterName             string
	Namespace               string
	ResourceTypes           []schema.GroupVersionKind
	ExcludedNamespaces      glob.List
	IncludedNamespaces      glob.List
	MaxTargets              int
	StripKeys               glob.List
	Workers                 int
	WriteParallelism        int
	QPS                     float64
	Burst                   int
	ResyncPeriod            time.Duration
	StatusAnnotation        bool
	VerifySourceFreshness   bool
	CallTimeout             time.Duration
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader
	// election. A follower counts the lease from when it last saw it
	// renewed, which it checks every RetryPeriod, so it takes over at most
	// LeaseDuration plus two RetryPeriods (and jitter) after the leader died.
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	MetricsBindAddress      string
	HealthProbeBindAddress  string
	PprofBindAddress        string
	GracefulShutdownTimeout time.Duration
	// Kind watches (see clusters.KindOptions).
	LazyWatchers        bool
	LazyProbeInterval   time.Duration
	DiscoveryInterval   time.Duration
	WatchIdleTimeout    time.Duration
	DenyKinds           []schema.GroupKind
	AllowPrivilegeKinds bool
	// Circuit breaker per source.
	BreakerThreshold int
	BreakerBaseDelay time.Duration
	BreakerMaxDelay  time.Duration
}

// BindFlags registers the shared options on fs, with defaults for the
// binary named binary (fleetmirror-member or fleetmirror-hub), and returns a
// function that finishes parsing once fs.Parse has run.
func (o *Options) BindFlags(fs *flag.FlagSet, binary, defaultCluster string) func() error {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "fleetmirror-system"
	}
	var types, excluded, included, strip string
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG, ~/.kube/config or the in-cluster service account.")
	fs.StringVar(&o.ClusterName, "cluster-name", defaultCluster, "Name of this cluster in source references (fleetmirror.io/source = cluster/namespace/name); it must be the name the hub knows the cluster by.")
	fs.StringVar(&o.Namespace, "namespace", ns, "Namespace the agent runs in (default $POD_NAMESPACE); it is excluded from targets.")
	fs.StringVar(&types, "resource-types", "", "Comma-separated kinds to mirror, as Kind.version[.group], e.g. Secret.v1,ConfigMap.v1,Ingress.v1.networking.k8s.io. Empty: every namespaced kind that supports get/list/watch/create/update/patch/delete, minus the deny list, discovered again every --discovery-interval.")
	var deny string
	fs.IntVar(&o.BreakerThreshold, "circuit-breaker-failures", 5, "Failed reconciles in a row after which a source's retries are spaced out (--circuit-breaker-base-delay, doubling up to --circuit-breaker-max-delay); 0 disables the breaker.")
	fs.DurationVar(&o.BreakerBaseDelay, "circuit-breaker-base-delay", 30*time.Second, "First wait between retries of a source whose circuit breaker opened.")
	fs.DurationVar(&o.BreakerMaxDelay, "circuit-breaker-max-delay", 10*time.Minute, "Longest wait between retries of a source whose circuit breaker is open.")
	fs.BoolVar(&o.LazyWatchers, "lazy-watchers", true, "Watch a kind only while a source or mirror of it exists, found by label-selected LISTs with limit=1 every --lazy-probe-interval.")
	fs.DurationVar(&o.LazyProbeInterval, "lazy-probe-interval", 10*time.Second, "How often kinds not watched are probed for sources (also the delay before a source of a kind not yet watched is seen).")
	fs.DurationVar(&o.DiscoveryInterval, "discovery-interval", 5*time.Minute, "How often kinds are discovered again when --resource-types is empty (new CRDs are picked up, removed ones stop).")
	fs.DurationVar(&o.WatchIdleTimeout, "watch-idle-timeout", time.Minute, "How long a lazily watched kind stays watched after its last source and mirror are gone.")
	fs.StringVar(&deny, "deny-kinds", "", "Comma-separated extra kinds never discovered, as Kind[.group] (added to the built-in deny list of Pods, Events, Endpoints, Leases, RBAC and the like).")
	fs.BoolVar(&o.AllowPrivilegeKinds, "allow-privilege-kinds", false, "DANGEROUS: allow mirroring Role, RoleBinding and ServiceAccount. Whoever can annotate a source would hand out the privileges they carry in every target namespace.")
	fs.StringVar(&excluded, "excluded-namespaces", strings.Join(targets.DefaultExcludedNamespaces, ","), "Comma-separated namespace globs never targeted (the agent's own namespace is always added).")
	fs.StringVar(&included, "included-namespaces", "", "Comma-separated namespace globs; when set, only these namespaces are targeted.")
	fs.IntVar(&o.MaxTargets, "max-targets", 100, "Most targets per source; the annotation fleetmirror.io/max-targets can only lower it.")
	fs.StringVar(&strip, "strip-keys", strings.Join(desired.DefaultStrip, ","), "Comma-separated label and annotation key globs never copied onto mirrors.")
	fs.IntVar(&o.Workers, "workers", 4, "Sources reconciled concurrently.")
	fs.IntVar(&o.WriteParallelism, "write-parallelism", 16, "Concurrent mirror writes for one source.")
	fs.Float64Var(&o.QPS, "kube-api-qps", -1, "Client-side limit of API requests per second, per cluster; 0 or less: none, as the API server protects itself with API Priority and Fairness and --workers x --write-parallelism bounds the requests in flight. Set it for API servers without Priority and Fairness.")
	fs.IntVar(&o.Burst, "kube-api-burst", 2000, "Client-side burst of API requests, per cluster, when --kube-api-qps is set.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", 10*time.Minute, "How often every source is reconciled again even without changes (0 disables).")
	fs.BoolVar(&o.StatusAnnotation, "status-annotation", true, "Write the fleetmirror.io/status summary onto sources.")
	fs.BoolVar(&o.VerifySourceFreshness, "verify-source-freshness", false, "Read each source from the API server before writing its mirrors, instead of trusting the cache.")
	fs.DurationVar(&o.CallTimeout, "api-call-timeout", 30*time.Second, "Deadline of every write and read the pipeline sends to a cluster.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader, so that several replicas can run with one active.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: --namespace); needed out of cluster.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", binary, "Name of the leader election Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 8*time.Second, "How long a leader's Lease holds without renewal; a replica takes over at most this plus twice --leader-election-retry-period after the leader died.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 6*time.Second, "How long the leader retries renewing its Lease before it gives up leadership (and exits); less than --leader-election-lease-duration.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", time.Second, "How often replicas try to acquire or renew the Lease.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables them.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "", "Address of the pprof endpoints; empty disables them.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long running reconciles may take to finish on shutdown.")
	return func() error {
		var err error
		if types != "" {
			if o.ResourceTypes, err = ParseResourceTypes(types); err != nil {
				return err
			}
		}
		if o.DenyKinds, err = parseGroupKinds(deny); err != nil {
			return err
		}
		if !o.AllowPrivilegeKinds {
			for _, gvk := range o.ResourceTypes {
				if slices.Contains(clusters.PrivilegeKinds, gvk.GroupKind()) {
					return fmt.Errorf("--resource-types: %s hands out privileges; mirroring it needs --allow-privilege-kinds", gvk.Kind)
				}
			}
		}
		if o.ExcludedNamespaces, err = ParseNamespaceGlobs("excluded-namespaces", excluded); err != nil {
			return err
		}
		own, err := glob.Parse(o.Namespace)
		if err != nil {
			return fmt.Errorf("--namespace: %w", err)
		}
		o.ExcludedNamespaces = append(o.ExcludedNamespaces, own)
		if o.IncludedNamespaces, err = ParseNamespaceGlobs("included-namespaces", included); err != nil {
			return err
		}
		if o.StripKeys, err = glob.ParseList(SplitList(strip)); err != nil {
			return fmt.Errorf("--strip-keys: %w", err)
		}
		if o.LeaderElectionNamespace == "" {
			o.LeaderElectionNamespace = o.Namespace
		}
		if o.MaxTargets < 1 {
			return fmt.Errorf("--max-targets must be at least 1, got %d", o.MaxTargets)
		}
		// client-go's own rule: the renewal must fit in the lease, with
		// room for a jittered retry.
		if o.LeaseDuration <= o.RenewDeadline || float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) || o.RetryPeriod <= 0 {
			return fmt.Errorf("leader election timing: need --leader-election-lease-duration (%s) > --leader-election-renew-deadline (%s) > 1.2 x --leader-election-retry-period (%s) > 0",
				o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
		}
		return nil
	}
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

// Kinds returns the kind policy of the options for writer managedBy.
func (o *Options) Kinds(managedBy string, synced func(*clusters.Cluster, schema.GroupVersionKind)) *clusters.Kinds {
	deny := append(slices.Clone(clusters.DeniedKinds), o.DenyKinds...)
	if o.AllowPrivilegeKinds {
		deny = slices.DeleteFunc(deny, func(gk schema.GroupKind) bool { return slices.Contains(clusters.PrivilegeKinds, gk) })
	}
	return clusters.NewKinds(clusters.KindOptions{
		Explicit:          o.ResourceTypes,
		Deny:              deny,
		Lazy:              o.LazyWatchers,
		ProbeInterval:     o.LazyProbeInterval,
		DiscoveryInterval: o.DiscoveryInterval,
		IdleTimeout:       o.WatchIdleTimeout,
		ManagedBy:         managedBy,
		Synced:            synced,
	})
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

// Targets is the namespace policy of the options.
func (o *Options) Targets() targets.Policy {
	return targets.Policy{Included: o.IncludedNamespaces, Excluded: o.ExcludedNamespaces, MaxTargets: o.MaxTargets}
}

// Config returns the REST config of the agent's own cluster, rate limits applied.
func (o *Options) Config() (*rest.Config, error) {
	cfg := o.RESTConfig
	if cfg == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.Kubeconfig
		var err error
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig(); err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
	}
	return o.Limited(cfg), nil
}

// Limited returns a copy of cfg with the client-side rate limit of the
// options. As controller-runtime's own default, no limit is the default:
// the API server's Priority and Fairness queues what it cannot take, and
// the bounded number of workers and writes bounds what is in flight.
func (o Options) Limited(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	if o.QPS <= 0 {
		cfg.QPS = -1 // client-go takes 0 for its default of 5 per second
	}
	return cfg
}

// NewManager returns a manager serving metrics and probes, electing a
// leader when asked.
func (o *Options) NewManager(cfg *rest.Config) (manager.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		PprofBindAddress:              o.PprofBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		GracefulShutdownTimeout:       &o.GracefulShutdownTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// NewReconciler returns the pipeline's reconciler for one writer, with
// every shared option applied; the caller adds what only it knows.
func (o *Options) NewReconciler(scope fmcontroller.Scope, fieldManager, managedBy, finalizer string) *fmcontroller.Reconciler {
	return &fmcontroller.Reconciler{
		Scope:                 scope,
		Applier:               &apply.Applier{FieldManager: fieldManager, ManagedBy: managedBy},
		Build:                 desired.Options{ManagedBy: managedBy, Strip: o.StripKeys},
		Finalizer:             finalizer,
		CallTimeout:           o.CallTimeout,
		WriteStatus:           o.StatusAnnotation,
		VerifySourceFreshness: o.VerifySourceFreshness,
		Parallelism:           o.WriteParallelism,
	}
}

// AddController adds the pipeline's controller fed by events, and a
// readiness check that fails until ready reports true.
func (o *Options) AddController(mgr manager.Manager, name string, r *fmcontroller.Reconciler, events *fmcontroller.Events, ready func() bool) error {
	r.SetBreaker(o.BreakerThreshold, o.BreakerBaseDelay, o.BreakerMaxDelay)
	skip, priority := true, false
	c, err := controller.NewTyped[fmcontroller.Key](name, mgr, controller.TypedOptions[fmcontroller.Key]{
		Reconciler:              r,
		MaxConcurrentReconciles: o.Workers,
		// Programs that embed agents (tests, the local fleet) run several
		// managers in one process; names stay unique per binary.
		SkipNameValidation: &skip,
		// The priority queue of controller-runtime v0.24 can deadlock on
		// shutdown (kubernetes-sigs/controller-runtime#3538, fixed in v0.25,
		// which needs k8s.io v0.37); the classic queue serves us as well.
		UsePriorityQueue: &priority,
	})
	if err != nil {
		return err
	}
	if err := c.Watch(events); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("caches", func(*http.Request) error {
		if !ready() {
			return fmt.Errorf("caches not synced")
		}
		return nil
	})
}

// NewRecorder returns a core/v1 event recorder writing to the cluster of
// cfg as component, and the function that stops it. With httpClient, it
// sends on that client's connections: those of a cluster that can go away
// are then closed with it.
func NewRecorder(cfg *rest.Config, httpClient *http.Client, component string) (record.EventRecorder, func(), error) {
	// The core/v1 group client, not the whole clientset, which would link
	// every API group's typed client into the binary.
	var core *typedcorev1.CoreV1Client
	var err error
	if httpClient != nil {
		core, err = typedcorev1.NewForConfigAndClient(cfg, httpClient)
	} else {
		core, err = typedcorev1.NewForConfig(cfg)
	}
	if err != nil {
		return nil, nil, err
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.Events("")})
	return b.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: component}), b.Shutdown, nil
}

// Runnable is a manager runnable that needs no leadership: watches run on
// every replica, so that a new leader starts with warm caches.
type Runnable func(ctx context.Context) error

// Start runs the function.
func (f Runnable) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection is false.
func (f Runnable) NeedLeaderElection() bool { return false }

// ReportMirrors keeps the mirrors gauge equal to the caches' counts until
// ctx ends. Series of kinds or clusters no longer watched are deleted.
func ReportMirrors(ctx context.Context, list func() []*clusters.Cluster) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	type series struct{ kind, cluster string }
	reported := map[series]bool{}
	for {
		now := map[series]bool{}
		for _, c := range list() {
			for _, gvk := range c.Watched() {
				s := series{gvk.Kind, c.Name()}
				now[s] = true
				metrics.Mirrors.WithLabelValues(s.kind, s.cluster).Set(float64(len(c.AllMirrors(gvk))))
			}
		}
		for s := range reported {
			if !now[s] {
				metrics.Mirrors.DeleteLabelValues(s.kind, s.cluster)
			}
		}
		reported = now
		select {
		case <-ctx.Done():
			for s := range reported {
				metrics.Mirrors.DeleteLabelValues(s.kind, s.cluster)
			}
			return
		case <-t.C:
		}
	}
}
