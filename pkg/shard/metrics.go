package shard

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// The series of a sharded hub replica. Each replica publishes its own; the
// pod label that Prometheus adds tells them apart.
var (
	servedClusters = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleetmirror_hub_shard_clusters",
		Help: "Registered clusters this hub replica serves (writes mirrors into), the hub's own cluster included when it holds it.",
	})
	liveReplicas = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleetmirror_hub_shard_replicas",
		Help: "Live hub replicas this replica divides the clusters among (those live for a quarter of a lease duration), itself included while its Lease is fresh.",
	})
	reassignments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_hub_shard_reassignments_total",
		Help: "Clusters this hub replica started (acquired) or stopped (released) serving.",
	}, []string{"direction"})
	leaseFresh = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleetmirror_hub_shard_lease_fresh",
		Help: "1 while this hub replica may serve clusters: always without sharding; with --shards=auto, while its shard Lease is renewed in time (it serves clusters only then), else 0.",
	})
)

func init() {
	metrics.Registry.MustRegister(servedClusters, liveReplicas, reassignments, leaseFresh)
	leaseFresh.Set(1) // a hub without sharding is never fenced
	// Both directions exist from the start, at 0, so that increase() sees
	// the first reassignment and a hub without sharding exports them too.
	for _, d := range []string{"acquired", "released"} {
		reassignments.WithLabelValues(d)
	}
}
