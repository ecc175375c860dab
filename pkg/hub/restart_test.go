package hub_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// A hub that restarts finds every mirror and the source's status current
// and writes nothing: not the mirrors, and not the status, which must not
// pass through what the hub saw while it was still reading the
// registrations (no clusters) or connecting (some clusters).
func TestRestartWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, shared := srcAndShared(t, hubC, memA, memB)
	s := sourceSecret(src, "steady", "*/"+shared, map[string]string{"k": "v"})
	g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	mirrorRV := map[string]string{}
	for _, c := range fleet.Members {
		mirrorRV[c.Name] = eventuallySecret(t, c, shared, "steady", nil).ResourceVersion
	}

	hubAgent.stop()
	wc, err := client.NewWithWatch(hubC.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &corev1.SecretList{}, client.InNamespace(src), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: s.ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	before := hubCounter("fleetmirror_sync_operations_total", "unchanged")
	hubAgent = startHub()
	restarted := time.Now()

	// The restarted hub has reconciled the sources against both members
	// and has nothing left to do.
	g.Eventually(func(g Gomega) {
		g.Expect(hubGauge("fleetmirror_hub_cluster_up", "member-a")).To(Equal(1.0), "member-a up")
		g.Expect(hubGauge("fleetmirror_hub_cluster_up", "member-b")).To(Equal(1.0), "member-b up")
		g.Expect(hubCounter("fleetmirror_sync_operations_total", "unchanged")-before).To(BeNumerically(">=", 2), "unchanged sync operations since the restart")
		g.Expect(hubGauge("workqueue_depth", "hub")).To(BeZero(), "sources queued")
	}, timeout, poll).Should(Succeed())
	t.Logf("the restarted hub settled in %v", time.Since(restarted))
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Bookmark {
				got, _ := ev.Object.(*corev1.Secret)
				t.Errorf("the restarted hub wrote the source: %s, status %q", ev.Type, got.GetAnnotations()["fleetmirror.io/status"])
			}
		default:
			done = true
		}
	}
	for _, c := range fleet.Members {
		m, err := getSecret(c, shared, "steady")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m.ResourceVersion).To(Equal(mirrorRV[c.Name]), "the restarted hub wrote the mirror in %s", c.Name)
	}
}

// hubCounter sums the series of a metric of the hub whose result label is
// result.
func hubCounter(metric, result string) float64 {
	return sumSeries(metric, "result", result)
}

// hubGauge sums the series of a metric of the hub with label cluster or
// name equal to value.
func hubGauge(metric, value string) float64 {
	return sumSeries(metric, "cluster", value) + sumSeries(metric, "name", value)
}

func sumSeries(metric, label, value string) float64 {
	var total float64
	for _, m := range seriesWith(metric, label, value) {
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

// seriesWith returns the hub's series of metric with label=value.
func seriesWith(metric, label, value string) []*dto.Metric {
	return fleettest.Gather(metrics.Registry).Series(metric, label, value)
}
