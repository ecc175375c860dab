package hub_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// relabelled bounds how long a namespace relabelled in or out in a member
// cluster waits for the hub's mirror to come or go: about a second is
// promised, the rest is slack for a loaded test machine.
var relabelled = fleettest.Wait{Timeout: 5 * time.Second, Poll: poll}

// selectorSource returns an enabled, synced Secret whose targets are the
// entries (none when empty), and the namespaces selector selects in the
// clusters clusterSelector selects (none: the selector is the member's).
func selectorSource(ns, name, entries, selector, clusterSelector string) *corev1.Secret {
	s := sourceSecret(ns, name, entries, map[string]string{"k": "v"})
	if entries == "" {
		delete(s.Annotations, annotations.AnnotationTargetNamespaces)
	}
	s.Annotations[annotations.AnnotationTargetNamespaceSelector] = selector
	if clusterSelector != "" {
		s.Annotations[annotations.AnnotationTargetClusterSelector] = clusterSelector
	}
	return s
}

// With target-cluster-selector, the namespace selector selects in every
// cluster the cluster selector selects but the source's: member-b (env=prod)
// only. Relabelling a namespace there adds or removes its mirror at once.
func TestNamespaceSelectorReachesSelectedClusters(t *testing.T) {
	g := NewWithT(t)
	key := "nssel.example.com/" + uniq("t")
	src, shared, later := uniq("src"), uniq("nssel"), uniq("nslater")
	mkNamespaces(t, src, hubC)
	fleettest.CreateNamespaces(t, shared, map[string]string{key: "in"}, hubC, memA, memB)
	mkNamespaces(t, later, memB)
	s := selectorSource(src, "selected", "", key+"=in", "env=prod")
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	t.Cleanup(func() { _ = hubC.Client.Delete(context.Background(), s) })

	eventuallySecret(t, memB, shared, s.Name, func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v")))
	})
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))

	fleettest.LabelNamespace(t, wait, memB, later, key, "in")
	fleettest.EventuallyExists(t, relabelled, memB, fleettest.Secret(later, s.Name), nil)
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 2/2 synced"))
	fleettest.LabelNamespace(t, wait, memB, shared, key, "")
	fleettest.EventuallyGone(t, relabelled, memB, fleettest.Secret(shared, s.Name))
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))

	// member-a has no env=prod label, and the hub never writes into the
	// source's own cluster (the member agent there serves it).
	g.Consistently(func() []*corev1.Secret {
		a, _ := getSecret(memA, shared, s.Name)
		h, _ := getSecret(hubC, shared, s.Name)
		return []*corev1.Secret{a, h}
	}, 2*time.Second, poll).Should(HaveEach(BeNil()))
}

// Without target-cluster-selector the namespace selector is the member
// agent's alone: the hub serves the CLUSTER/NS entries and nothing more,
// so no labelled namespace of another cluster gets a mirror.
func TestNamespaceSelectorWithoutClusterSelectorStaysHome(t *testing.T) {
	g := NewWithT(t)
	key := "nssel.example.com/" + uniq("t")
	src, shared, named := uniq("src"), uniq("nssel"), uniq("named")
	mkNamespaces(t, src, hubC)
	fleettest.CreateNamespaces(t, shared, map[string]string{key: "in"}, memA, memB)
	mkNamespaces(t, named, memB)
	s := selectorSource(src, "home", "member-b/"+named, key+"=in", "")
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	t.Cleanup(func() { _ = hubC.Client.Delete(context.Background(), s) })

	eventuallySecret(t, memB, named, s.Name, nil)
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
	g.Consistently(func() []*corev1.Secret {
		a, _ := getSecret(memA, shared, s.Name)
		b, _ := getSecret(memB, shared, s.Name)
		return []*corev1.Secret{a, b}
	}, 2*time.Second, poll).Should(HaveEach(BeNil()))

}
