package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// Registry holds every series the agents export: ours, the Go runtime's
// and the process's, client-go's requests, the work queue's, the
// controller's and leader election's.
//
// Ours rather than controller-runtime's: its metrics package imports
// client-go's leader election, and through it every built-in API type
// (about 7 MB of the member's binary, and its pages in memory). The
// series it registered keep their names and labels here, so that
// dashboards, alerts and recording rules written for controller-runtime
// agents (and ours) go on working.
var Registry = prometheus.NewRegistry()

// The series controller-runtime's controllers and manager export, under
// the same names and labels.
var (
	// ReconcileTotal counts reconciles by controller and result (success,
	// error, requeue, requeue_after).
	ReconcileTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_total",
		Help: "Total number of reconciliations per controller",
	}, []string{"controller", "result"})

	// ReconcileErrors counts reconciles that returned an error.
	ReconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_errors_total",
		Help: "Total number of reconciliation errors per controller",
	}, []string{"controller"})

	// ReconcilePanics counts reconciles that panicked (and were recovered).
	ReconcilePanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_reconcile_panics_total",
		Help: "Total number of reconciliation panics per controller",
	}, []string{"controller"})

	// ReconcileTime measures reconciles.
	ReconcileTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "controller_runtime_reconcile_time_seconds",
		Help: "Length of time per reconciliation per controller",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
			1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60},
	}, []string{"controller"})

	// MaxWorkers is the number of workers of a controller.
	MaxWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "controller_runtime_max_concurrent_reconciles",
		Help: "Maximum number of concurrent reconciles per controller",
	}, []string{"controller"})

	// ActiveWorkers is the number of workers reconciling now.
	ActiveWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "controller_runtime_active_workers",
		Help: "Number of currently used workers per controller",
	}, []string{"controller"})

	// Leader is 1 while this replica holds the lease name.
	Leader = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})

	// requests counts client-go's requests by status code, method and host.
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})
)

// The work queue's series, labelled with the queue's name twice (name
// and controller), as controller-runtime labels them.
var (
	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "depth",
		Help: "Current depth of workqueue by workqueue and priority",
	}, []string{"name", "controller", "priority"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total",
		Help: "Total number of adds handled by workqueue",
	}, []string{"name", "controller"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help:    "How long in seconds an item stays in workqueue before being requested",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name", "controller"})
	queueWork = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "work_duration_seconds",
		Help:    "How long in seconds processing an item from workqueue takes.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
	}, []string{"name", "controller"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
			"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
	}, []string{"name", "controller"})
	queueLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name", "controller"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total",
		Help: "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
	}, []string{"name", "controller"})
)

func init() {
	Registry.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)),
		ReconcileTotal, ReconcileErrors, ReconcilePanics, ReconcileTime, MaxWorkers, ActiveWorkers, Leader, requests,
		queueDepth, queueAdds, queueLatency, queueWork, queueUnfinished, queueLongest, queueRetries,
	)
	// client-go takes the first registration only; a program that also
	// links controller-runtime's metrics (a test) counts there instead.
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestCounter{}})
}

// requestCounter counts client-go's requests.
type requestCounter struct{}

func (requestCounter) Increment(_ context.Context, code, method, host string) {
	requests.WithLabelValues(code, method, host).Inc()
}

// Queue is the work queue metrics provider: give it to a queue's
// TypedRateLimitingQueueConfig.MetricsProvider.
var Queue workqueue.MetricsProvider = queueMetrics{}

type queueMetrics struct{}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name, name, "")
}

func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name, name)
}

func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name, name)
}

func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWork.WithLabelValues(name, name)
}

func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name, name)
}

func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongest.WithLabelValues(name, name)
}

func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name, name)
}

// reconcileResults are the results of ReconcileTotal.
var reconcileResults = []string{"success", "error", "requeue_after"}

// StartController sets the series of controller, which runs workers
// workers, each at zero but MaxWorkers: they are exported before the
// first reconcile, as controller-runtime exports them, so that a rate or
// an alert on them has a series from the start.
func StartController(controller string, workers int) {
	MaxWorkers.WithLabelValues(controller).Set(float64(workers))
	ActiveWorkers.WithLabelValues(controller).Set(0)
	for _, r := range reconcileResults {
		ReconcileTotal.WithLabelValues(controller, r).Add(0)
	}
	ReconcileErrors.WithLabelValues(controller).Add(0)
	ReconcilePanics.WithLabelValues(controller).Add(0)
}

// ObserveReconcile records one reconcile of controller that took d and
// ended with result.
func ObserveReconcile(controller, result string, d time.Duration) {
	ReconcileTotal.WithLabelValues(controller, result).Inc()
	ReconcileTime.WithLabelValues(controller).Observe(d.Seconds())
	if result == "error" {
		ReconcileErrors.WithLabelValues(controller).Inc()
	}
}
