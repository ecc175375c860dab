package hub_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capisecret "sigs.k8s.io/cluster-api/util/secret"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/providers"
)

// registrationLookalike is a source shaped like a Cluster API registration
// of cluster name, with a kubeconfig the tenant chose (here member-b's), as
// a tenant would write it to get a cluster of theirs into the fleet.
func registrationLookalike(t *testing.T, ns, name, targets string) *corev1.Secret {
	t.Helper()
	kc, err := memB.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	s := sourceSecret(ns, capisecret.Name(name, capisecret.Kubeconfig), targets, nil)
	s.Type = clusterv1.ClusterSecretType
	s.Labels[clusterv1.ClusterNameLabel] = name
	s.Data = map[string][]byte{capisecret.KubeconfigDataName: kc}
	return s
}

// A tenant of a member cluster must not be able to register a cluster with
// the hub by mirroring a kubeconfig Secret into the namespace the hub reads
// registrations from. Both ends hold on their own: the hub never targets
// that namespace in its own cluster, and a mirror that lands there anyway
// (written by a member agent that was not told to exclude it) is refused.
func TestRegistrationByMirroringIsRefused(t *testing.T) {
	t.Run("the hub never mirrors into its cluster-secrets namespace", func(t *testing.T) {
		g := NewWithT(t)
		tenant, ok := uniq("tenant"), uniq("ok")
		mkNamespaces(t, tenant, memA)
		mkNamespaces(t, ok, hubC)
		evil := registrationLookalike(t, tenant, "evil", "hub/"+secretsNS+", hub/"+ok)
		g.Expect(memA.Client.Create(context.Background(), evil)).To(Succeed())

		// The hub served the source (its other target is written) and
		// refused the cluster-secrets namespace, saying so on the source.
		eventuallySecret(t, hubC, ok, evil.Name, nil)
		g.Eventually(func() []string { return eventMessages(memA, tenant, evil.Name, controller.ReasonNamespaceRefused) }, timeout, poll).
			Should(ContainElement(ContainSubstring("hub/" + secretsNS)))
		g.Eventually(status(memA, evil), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced; 1 refused"))
		got, err := getSecret(hubC, secretsNS, evil.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(BeNil(), "no mirror in the cluster-secrets namespace")
		g.Expect(registeredClusters()).To(Equal(3.0))

		g.Expect(memA.Client.Delete(context.Background(), evil)).To(Succeed())
		eventuallyGone(t, hubC, ok, evil.Name)
	})

	t.Run("a mirror in the cluster-secrets namespace registers nothing", func(t *testing.T) {
		g := NewWithT(t)
		// A member agent on the hub cluster without the exclusion: it
		// mirrors into the cluster-secrets namespace like anywhere else.
		stop := startMember(t, hubC)
		defer stop()
		before := sumSeries("fleetmirror_hub_registration_errors_total", "reason", "mirror")
		tenant := uniq("tenant")
		mkNamespaces(t, tenant, hubC)
		evil := registrationLookalike(t, tenant, "evil2", secretsNS)
		g.Expect(hubC.Client.Create(context.Background(), evil)).To(Succeed())

		mirror := eventuallySecret(t, hubC, secretsNS, evil.Name, func(g Gomega, s *corev1.Secret) {
			g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
			g.Expect(s.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "evil2"))
		})
		g.Eventually(func() []string {
			return eventMessages(hubC, secretsNS, mirror.Name, providers.ReasonRegistrationRefused)
		}, timeout, poll).Should(ContainElement(ContainSubstring("a mirror never registers a cluster")))
		g.Expect(sumSeries("fleetmirror_hub_registration_errors_total", "reason", "mirror")).To(BeNumerically(">", before))
		g.Eventually(registeredClusters, timeout, poll).Should(Equal(3.0))
		g.Expect(hubGauge("fleetmirror_hub_cluster_up", "evil2")).To(BeZero())
		g.Expect(seriesWith("fleetmirror_hub_cluster_up", "cluster", "evil2")).To(BeEmpty(), "cluster evil2 was never probed")

		g.Expect(hubC.Client.Delete(context.Background(), evil)).To(Succeed())
		eventuallyGone(t, hubC, secretsNS, evil.Name)
	})

	t.Run("only mirror marks refuse a registration", func(t *testing.T) {
		g := NewWithT(t)
		// A genuine registration beside a lookalike that carries only a
		// source reference: the first registers, the second is refused.
		kc, err := memB.Kubeconfig()
		g.Expect(err).NotTo(HaveOccurred())
		marked := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: secretsNS, Name: "marked-fleetmirror",
				Labels:      map[string]string{annotations.LabelClusterName: "marked"},
				Annotations: map[string]string{annotations.AnnotationSource: "member-a/tenant/marked"}},
			Data: map[string][]byte{capisecret.KubeconfigDataName: kc},
		}
		g.Expect(hubC.Client.Create(context.Background(), marked)).To(Succeed())
		defer func() { g.Expect(hubC.Client.Delete(context.Background(), marked)).To(Succeed()) }()
		g.Eventually(func() []string {
			return eventMessages(hubC, secretsNS, marked.Name, providers.ReasonRegistrationRefused)
		}, timeout, poll).Should(ContainElement(ContainSubstring(annotations.AnnotationSource)))
		g.Expect(seriesWith("fleetmirror_hub_cluster_up", "cluster", "marked")).To(BeEmpty())
	})
}

// registeredClusters reads the hub's fleetmirror_hub_registered_clusters.
func registeredClusters() float64 {
	families, _ := metrics.Registry.Gather()
	for _, f := range families {
		if f.GetName() == "fleetmirror_hub_registered_clusters" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
