package hub

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// The hub's per-cluster series, kept by its fleet (fleet.Metrics). The
// registration errors are counted by the providers.
var (
	clusterUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_hub_cluster_up",
		Help: "1 when the hub reaches the registered cluster and its caches are synced, else 0.",
	}, []string{"cluster"})
	probeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_hub_cluster_probe_failures_total",
		Help: "Failed health probes of registered clusters.",
	}, []string{"cluster"})
	registeredClusters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleetmirror_hub_registered_clusters",
		Help: "Clusters registered with the hub, its own included.",
	})
)

func init() {
	metrics.Registry.MustRegister(clusterUp, probeFailures, registeredClusters)
}
