package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The series of pull mirrors: objects their namespace's owner labelled
// fleetmirror.io/pull to receive a source's content. Labelled by kind, the
// pull mirror's cluster and a result or state, all bounded.
var (
	// PullOperations counts the reconciles of pull mirrors by result.
	PullOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleetmirror_pull_operations_total",
		Help: "Reconciles of pull mirrors by kind, the pull mirror's cluster and result (written, unchanged, refused, not_allowed, source_missing, unreachable, conflict, error, stale).",
	}, []string{"kind", "cluster", "result"})

	// PullMirrors counts the pull mirrors an agent serves, by state.
	PullMirrors = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fleetmirror_pull_mirrors",
		Help: "Pull mirrors served by this agent, by kind, the pull mirror's cluster and state (InSync, OutOfSync, Refused, NotAllowed, SourceMissing, Unreachable, Conflict, Failed).",
	}, []string{"kind", "cluster", "state"})
)

func init() {
	Registry.MustRegister(PullOperations, PullMirrors)
}
