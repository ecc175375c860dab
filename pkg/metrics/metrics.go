// Package metrics is the last stage of the mirroring pipeline, beside status
// and events: the Prometheus series both binaries export, on Registry.
// Labels are bounded (cluster, kind, result); never a namespace or an
// object name.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmirror/fleetmirror/pkg/version"
)

var (
	// SyncOperations counts what was done to mirrors, by result.
	SyncOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_sync_operations_total",
		Help: "Operations on mirrors by kind, target cluster and result (created, updated, replaced, deleted, unchanged, conflict, skipped, error).",
	}, []string{"kind", "cluster", "result"})

	// Conflicts counts targets refused because the name is taken by an object we do not own.
	Conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_conflicts_total",
		Help: "Targets whose name is held by an object fleetmirror does not own, by kind and target cluster.",
	}, []string{"kind", "cluster"})

	// InvalidAnnotations counts reconciles of sources with invalid annotations.
	InvalidAnnotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_invalid_annotations_total",
		Help: "Changes of sources whose fleetmirror annotations hold an invalid part, by kind.",
	}, []string{"kind"})

	// PropagationSeconds measures from a source change seen to the mirror write acknowledged.
	PropagationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fleetmirror_propagation_seconds",
		Help:    "Seconds from a source change observed to a mirror write acknowledged, by kind, source cluster and target cluster.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"kind", "source_cluster", "cluster"})

	// WatchEvents counts what the watches of sources and mirrors delivered.
	WatchEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_watch_events_total",
		Help: "Objects delivered by the watches of sources and of mirrors (the initial list, then adds, updates and deletes), by kind, cluster and cache (sources, mirrors). The watches select on fleetmirror's labels, so objects without them never count.",
	}, []string{"kind", "cluster", "cache"})

	// WatchedKinds is 1 for each kind whose sources and mirrors are watched
	// in a cluster; lazy watches come and go with the sources.
	WatchedKinds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_watched_kinds",
		Help: "1 for each kind (group/version/kind) watched in a cluster.",
	}, []string{"cluster", "kind"})

	// TransformErrors counts transform rules that failed or did not parse.
	TransformErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_transform_errors_total",
		Help: "Transform rules that failed for a target or did not parse, by kind (counted when reported).",
	}, []string{"kind"})

	// CircuitOpen counts the sources whose circuit breaker is open.
	CircuitOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_circuit_breaker_open",
		Help: "Sources whose retries are spaced out after repeated failures, by kind.",
	}, []string{"kind"})

	// CallsInFlight counts the pipeline's calls to a cluster that have not
	// returned: how much work waits on that cluster.
	CallsInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_cluster_calls_in_flight",
		Help: "Calls of the mirroring pipeline (writes and reads) to a cluster that have not returned yet.",
	}, []string{"cluster"})

	// SweepPending counts the sources a sweep (a start, a cluster up or
	// down, a kind newly synced) has yet to hand to the work queue, which
	// takes them only while it holds fewer items than there are workers:
	// with workqueue_depth, the work that waits.
	SweepPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_sweep_pending",
		Help: "Sources a sweep has yet to hand to the work queue, which serves changes first.",
	}, []string{"controller"})

	// Throttled counts the 429 Too Many Requests answers of a cluster: a
	// busy API server, which is backed off, never marked unreachable.
	Throttled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_cluster_throttled_total",
		Help: "Answers 429 Too Many Requests from a cluster's API server; each holds the cluster's requests for its Retry-After.",
	}, []string{"cluster"})

	// ClusterUp says whether the member agent's own API server answers.
	ClusterUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_cluster_up",
		Help: "1 while the agent's own API server answers its readiness probe, else 0.",
	}, []string{"cluster"})

	// RegistrationErrors counts the registrations of clusters the hub's
	// providers refused.
	RegistrationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_hub_registration_errors_total",
		Help: "Kubeconfig Secrets (or files) refused, by reason (invalid, duplicate, duplicate-cluster, plugin, mirror).",
	}, []string{"reason"})

	// Mirrors counts the mirrors this agent manages, from its cache.
	Mirrors = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_mirrors",
		Help: "Mirrors managed by this agent, by kind and target cluster.",
	}, []string{"kind", "cluster"})

	// BuildInfo is 1, labelled with the build that runs, so that a query
	// can tell which versions a fleet runs and join them onto other series.
	BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_build_info",
		Help: "1, labelled with the version, the git revision and the Go version of the running binary.",
	}, []string{"version", "revision", "goversion"})
)

func init() {
	Registry.MustRegister(SyncOperations, Conflicts, InvalidAnnotations, PropagationSeconds, Mirrors, WatchedKinds, WatchEvents, CircuitOpen, TransformErrors, CallsInFlight, Throttled, SweepPending, ClusterUp, RegistrationErrors, BuildInfo)
	BuildInfo.WithLabelValues(version.Version, version.Revision, version.GoVersion).Set(1)
}

// maxPropagation caps observations: a longer figure means the agent was
// down or a clock jumped, and would drown every bucket that matters.
const maxPropagation = 10 * time.Minute

// ObservePropagation records one propagation latency. Negative durations,
// from clock skew between clusters, count as zero.
func ObservePropagation(kind, sourceCluster, cluster string, d time.Duration) {
	d = min(max(d, 0), maxPropagation)
	PropagationSeconds.WithLabelValues(kind, sourceCluster, cluster).Observe(d.Seconds())
}

// ForgetCluster deletes every series of a cluster that left the fleet.
func ForgetCluster(cluster string) {
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{SyncOperations, Conflicts, Mirrors, WatchedKinds, WatchEvents, CallsInFlight, Throttled, PullOperations, PullMirrors} {
		v.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	}
	PropagationSeconds.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	PropagationSeconds.DeletePartialMatch(prometheus.Labels{"source_cluster": cluster})
}
