package clusters_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

type ignoreEvents struct{}

func (ignoreEvents) Source(string, schema.GroupVersionKind, *unstructured.Unstructured, bool) {}
func (ignoreEvents) Mirror(string, schema.GroupVersionKind, *clusters.Mirror, bool)           {}
func (ignoreEvents) Namespace(string, *metav1.PartialObjectMetadata)                          {}

// refusedAddress returns a loopback address nothing listens on.
func refusedAddress(t *testing.T) string {
	t.Helper()
	addr, err := fleettest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// A cluster that cannot answer the lazy probes decides nothing: it makes
// no kind watched in a healthy cluster, and it stops no watch there either.
func TestKindsProbeFailureChangesNothingElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	g := NewWithT(t)
	fleet, err := fleettest.Start("")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(fleet.Stop()).To(Succeed()) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	opts := clusters.Options{ManagedBy: annotations.ManagedByMember, Handler: ignoreEvents{}}
	opts.Name = "healthy"
	healthy, err := clusters.New(fleet.Hub.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())
	opts.Name = "broken"
	brokenCfg := rest.CopyConfig(fleet.Hub.Config)
	brokenCfg.Host = "https://" + refusedAddress(t)
	broken, err := clusters.New(brokenCfg, opts)
	g.Expect(err).NotTo(HaveOccurred())
	healthy.Start(ctx)
	broken.Start(ctx)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	kinds := clusters.NewKinds(clusters.KindOptions{
		Explicit: []schema.GroupVersionKind{configMaps}, Lazy: true, ManagedBy: annotations.ManagedByMember,
	})
	both := []*clusters.Cluster{healthy, broken}

	// No source anywhere that answers: nothing is watched.
	kinds.Step(ctx, both)
	g.Expect(healthy.Watched()).To(BeEmpty(), "a failing probe elsewhere started a watch")

	// A source in the healthy cluster: watched there.
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "src",
		Labels: map[string]string{annotations.LabelEnabled: "true"}}}
	g.Expect(fleet.Hub.Client.Create(ctx, src)).To(Succeed())
	kinds.Step(ctx, both)
	g.Expect(healthy.Watched()).To(ConsistOf(configMaps))
	g.Eventually(func() int { return len(healthy.Sources(configMaps)) }, "10s", "50ms").Should(Equal(1))

	// The source goes: with a cluster that cannot answer, the watch stays
	// (no answer is no reason to stop); once every cluster answers, it goes
	// (no idle timeout here).
	g.Expect(fleet.Hub.Client.Delete(ctx, src)).To(Succeed())
	g.Eventually(func() int { return len(healthy.Sources(configMaps)) }, "10s", "50ms").Should(BeZero())
	kinds.Step(ctx, both)
	g.Expect(healthy.Watched()).To(ConsistOf(configMaps), "a failing probe elsewhere stopped a watch")
	kinds.Step(ctx, []*clusters.Cluster{healthy})
	g.Expect(healthy.Watched()).To(BeEmpty())
}
