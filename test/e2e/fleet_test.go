package e2e

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// A Secret on the hub reaches a namespace of the hub through the hub's
// member agent and namespaces of both members through the hub; updates
// reach every mirror; deleting the source removes every mirror, then the
// source.
func TestHubSecretAcrossTheFleet(t *testing.T) {
	hubSecretScenario(t, hubC, memA, memB)
}

// hubSecretScenario is TestHubSecretAcrossTheFleet in a fleet of a hub and
// two members (this suite's, or the one the charts install).
func hubSecretScenario(t *testing.T, hub, ma, mb *fleettest.Cluster) {
	g := NewWithT(t)
	ctx := context.Background()
	mkNamespaces(t, "platform", hub)
	mkNamespaces(t, "team-a", hub)
	mkNamespaces(t, "shared", hub, ma, mb)

	src := &corev1.Secret{
		ObjectMeta: sourceMeta("platform", "db-credentials", "team-a, */shared"),
		StringData: map[string]string{"password": "v1"},
	}
	g.Expect(hub.Client.Create(ctx, src)).To(Succeed())

	mirrors := []struct {
		cluster   *fleettest.Cluster
		namespace string
		managedBy string
	}{
		{hub, "team-a", annotations.ManagedByMember},
		{ma, "shared", annotations.ManagedByHub},
		{mb, "shared", annotations.ManagedByHub},
	}
	for _, m := range mirrors {
		eventuallyExists(t, m.cluster, secret(m.namespace, src.Name), func(g Gomega, s *corev1.Secret) {
			expectMirror(g, s, m.managedBy, "hub/platform/db-credentials")
			g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("v1")))
		})
	}
	g.Eventually(status(hub, src), timeout, poll).Should(Equal("1/1 namespaces synced | remote: 2 clusters, 2/2 synced"))
	// Neither agent writes hub/shared: the member was not asked to (no
	// unqualified entry), and the hub never writes into the source's cluster.
	expectAbsent(t, hub, secret("shared", src.Name))

	t.Log("Updating the source's data")
	change(t, hub, src, func(s *corev1.Secret) { s.Data["password"] = []byte("v2") })
	for _, m := range mirrors {
		eventuallyExists(t, m.cluster, secret(m.namespace, src.Name), func(g Gomega, s *corev1.Secret) {
			g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("v2")))
		})
	}

	t.Log("Deleting the source")
	g.Expect(hub.Client.Delete(ctx, src)).To(Succeed())
	for _, m := range mirrors {
		eventuallyGone(t, m.cluster, secret(m.namespace, src.Name))
	}
	eventuallyGone(t, hub, src)
}

// A ConfigMap on a member reaches the namespaces of another member that a
// CLUSTER/NS glob names, and nothing else.
func TestMemberConfigMapReachesAnotherMember(t *testing.T) {
	memberConfigMapScenario(t, hubC, memA, memB, "app-1", "app-2")
}

// memberConfigMapScenario has the hub read a source in member ma and write
// its mirrors into the namespaces of member mb that member-b/app-* names:
// apps, created in mb; the first of them is created in ma and the hub too,
// and must get no mirror there.
func memberConfigMapScenario(t *testing.T, hub, ma, mb *fleettest.Cluster, apps ...string) {
	g := NewWithT(t)
	ctx := context.Background()
	mkNamespaces(t, "config", ma)
	mkNamespaces(t, apps[0], ma, mb, hub)
	for _, ns := range apps[1:] {
		mkNamespaces(t, ns, mb)
	}

	src := &corev1.ConfigMap{
		ObjectMeta: sourceMeta("config", "feature-flags", "member-b/app-*"),
		Data:       map[string]string{"dark-mode": "on"},
	}
	g.Expect(ma.Client.Create(ctx, src)).To(Succeed())

	for _, ns := range apps {
		eventuallyExists(t, mb, configMap(ns, src.Name), func(g Gomega, cm *corev1.ConfigMap) {
			expectMirror(g, cm, annotations.ManagedByHub, "member-a/config/feature-flags")
			g.Expect(cm.Data).To(Equal(map[string]string{"dark-mode": "on"}))
		})
	}
	g.Eventually(status(ma, src), timeout, poll).Should(Equal(fmt.Sprintf("remote: 1 cluster, %d/%d synced", len(apps), len(apps))))
	expectAbsent(t, ma, configMap(apps[0], src.Name))
	expectAbsent(t, hub, configMap(apps[0], src.Name))

	t.Log("Deleting the source")
	g.Expect(ma.Client.Delete(ctx, src)).To(Succeed())
	for _, ns := range apps {
		eventuallyGone(t, mb, configMap(ns, src.Name))
	}
	eventuallyGone(t, ma, src)
}

// An object the hub does not own keeps its name: the hub reports a conflict
// and counts it, and never writes or deletes the object.
func TestRemoteConflictLeavesUnmanagedSecretAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mkNamespaces(t, "platform", hubC)
	mkNamespaces(t, "shared", memA, memB)

	theirs := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "api-token"},
		StringData: map[string]string{"owner": "someone else"},
	}
	createUnmanaged(t, memB, theirs)
	rv := theirs.ResourceVersion
	conflictsBefore, err := hubConflicts(memB.Name)
	g.Expect(err).NotTo(HaveOccurred())

	src := &corev1.Secret{
		ObjectMeta: sourceMeta("platform", "api-token", "*/shared"),
		StringData: map[string]string{"token": "ours"},
	}
	g.Expect(hubC.Client.Create(ctx, src)).To(Succeed())
	eventuallyExists(t, memA, secret("shared", src.Name), func(g Gomega, s *corev1.Secret) {
		expectMirror(g, s, annotations.ManagedByHub, "hub/platform/api-token")
	})
	g.Eventually(status(hubC, src), timeout, poll).Should(Equal("remote: 2 clusters, 1/2 synced; 1 conflict"))
	g.Eventually(func() (float64, error) { return hubConflicts(memB.Name) }, timeout, poll).Should(BeNumerically(">", conflictsBefore))
	expectUntouched := func() {
		t.Helper()
		still := secret("shared", "api-token")
		g.Expect(memB.Client.Get(ctx, client.ObjectKeyFromObject(still), still)).To(Succeed())
		g.Expect(still.ResourceVersion).To(Equal(rv), "the unmanaged Secret was written")
		g.Expect(still.Labels).NotTo(HaveKey(annotations.LabelManagedBy))
	}
	expectUntouched()

	t.Log("Deleting the source")
	g.Expect(hubC.Client.Delete(ctx, src)).To(Succeed())
	eventuallyGone(t, memA, secret("shared", src.Name))
	eventuallyGone(t, hubC, src)
	expectUntouched()
}

// hubConflicts is the hub's count of conflicts over Secrets in cluster.
func hubConflicts(cluster string) (float64, error) {
	families, err := hubAgent.scrape()
	v, _ := value(families, "fleetmirror_conflicts_total", "kind", "Secret", "cluster", cluster)
	return v, err
}
