package hub_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/providers"
)

// identityRead is the one request a refused registration sends: the
// metadata GET of its cluster's identity.
const identityRead = "GET /api/v1/namespaces/kube-system 200"

// duplicates reads the registrations refused as duplicates of a cluster.
func duplicates() float64 {
	return testutil.ToFloat64(metrics.RegistrationErrors.WithLabelValues(providers.MetricDuplicateCluster))
}

// registerThroughProxy registers cluster c a second time, as cluster name
// by Secret name, through a recording proxy; the Secret is deleted and
// the proxy closed when the test ends.
func registerThroughProxy(t *testing.T, c *fleettest.Cluster, name string) (*fleettest.RecordingProxy, *corev1.Secret) {
	t.Helper()
	g := NewWithT(t)
	proxy, err := fleettest.NewRecordingProxy(c)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	kc, err := proxy.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	sec, err := fleettest.RegisterAs(context.Background(), hubC.Client, secretsNS, name, name, kc)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { deleteSecret(t, sec) })
	return proxy, sec
}

func deleteSecret(t *testing.T, s *corev1.Secret) {
	t.Helper()
	if err := hubC.Client.Delete(context.Background(), s); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// restartHubWhenDone restarts the suite's hub with its usual flags once
// the test's own cleanups have run (t.Cleanup runs last in, first out), so
// that nothing the test registered is served by the hubs of later tests.
func restartHubWhenDone(t *testing.T) {
	t.Cleanup(func() {
		hubAgent.stop()
		hubAgent = startHub()
	})
}

// TestDuplicateRegistration: a second Secret for a cluster already
// registered is refused until the first goes away; through it the hub reads
// the cluster's identity and nothing else. Then it serves the cluster.
func TestDuplicateRegistration(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restartHubWhenDone(t)
	t.Cleanup(func() { g.Expect(registerB(nil)).To(Succeed()) })

	src, shared := srcAndShared(t, hubC, memA, memB)
	s := sourceSecret(src, "dup", "*/"+shared, map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())
	mirror := eventuallySecret(t, memB, shared, "dup", nil)
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))

	before := duplicates()
	proxy, dup := registerThroughProxy(t, memB, "member-b-again")
	g.Eventually(func() []string { return eventMessages(hubC, secretsNS, dup.Name, providers.ReasonDuplicateCluster) }, timeout, poll).
		Should(ContainElement(ContainSubstring("registered already as member-b")))
	g.Expect(duplicates()).To(Equal(before + 1))

	// member-b is served as before; the duplicate is no target: the source
	// changes, the mirror is updated in place, and nothing but the
	// identity read ever went through the duplicate.
	change(t, hubC, s, func() { s.Data["k"] = []byte("v2") })
	eventuallySecret(t, memB, shared, "dup", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
		g.Expect(m.UID).To(Equal(mirror.UID), "the mirror was deleted and created again")
	})
	g.Consistently(proxy.List, 3*time.Second, poll).Should(ConsistOf(identityRead))
	g.Expect(status(hubC, s)()).To(Equal("remote: 2 clusters, 2/2 synced"))
	g.Expect(duplicates()).To(Equal(before+1), "refused once")

	// member-b's Secret goes: the duplicate serves the cluster at once,
	// without a restart, and keeps the mirror.
	g.Expect(fleettest.Unregister(ctx, hubC.Client, secretsNS, memB)).To(Succeed())
	g.Eventually(func() int { return proxy.Count("GET", "/namespaces", 200) }, timeout, poll).ShouldNot(BeZero())
	change(t, hubC, s, func() { s.Data["k"] = []byte("v3") })
	eventuallySecret(t, memB, shared, "dup", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v3")))
		g.Expect(m.UID).To(Equal(mirror.UID))
	})
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
}

// TestRenamedCluster: a cluster registered under a new name (new Secret,
// the old one deleted later) keeps its mirrors elsewhere: each is taken
// over in place with one update, never deleted, even where the mirrors of
// unregistered clusters are deleted.
func TestRenamedCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubAgent.stop()
	hubAgent = startHub("--unregistered-source-mirrors=delete")
	restartHubWhenDone(t)
	t.Cleanup(func() { g.Expect(registerB(nil)).To(Succeed()) })

	src, shared := srcAndShared(t, memB, memA)
	s := sourceSecret(src, "moving", "member-a/"+shared, map[string]string{"k": "v"})
	g.Expect(memB.Client.Create(ctx, s)).To(Succeed())
	mirror := eventuallySecret(t, memA, shared, "moving", nil)
	g.Expect(mirror.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, "member-b/"+src+"/moving"))

	// Every change of the mirror from now on, as member-a's API server
	// reports it.
	kube, err := kubernetes.NewForConfig(memA.Config)
	g.Expect(err).NotTo(HaveOccurred())
	w, err := kube.CoreV1().Secrets(shared).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=moving", ResourceVersion: mirror.ResourceVersion})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	kc, err := memB.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	renamed, err := fleettest.RegisterAs(ctx, hubC.Client, secretsNS, "member-b-renamed", "member-b-renamed", kc)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { deleteSecret(t, renamed) })
	g.Eventually(func() []string { return eventMessages(hubC, secretsNS, renamed.Name, providers.ReasonDuplicateCluster) }, timeout, poll).
		ShouldNot(BeEmpty())

	g.Expect(fleettest.Unregister(ctx, hubC.Client, secretsNS, memB)).To(Succeed())
	eventuallySecret(t, memA, shared, "moving", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, "member-b-renamed/"+src+"/moving"))
		g.Expect(m.UID).To(Equal(mirror.UID))
	})
	// A little longer: a delete after the takeover would show too.
	var events []watch.EventType
	g.Consistently(func() []watch.EventType {
		for {
			select {
			case e := <-w.ResultChan():
				events = append(events, e.Type)
				continue
			default:
			}
			return events
		}
	}, 3*time.Second, poll).Should(Equal([]watch.EventType{watch.Modified}), "one update, no delete")
	g.Expect(memB.Client.Get(ctx, objKey(s), s)).To(Succeed())
	g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, ContainSubstring("remote:")), "the source was released by the old name")
}

// TestHubRegisteredAsMember: the hub's own cluster registered as a member
// is refused, whatever the Secret's age; nothing but the identity read
// goes through it, and it is no target.
func TestHubRegisteredAsMember(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restartHubWhenDone(t)

	before := duplicates()
	proxy, sec := registerThroughProxy(t, hubC, "hub-again")
	g.Eventually(func() []string { return eventMessages(hubC, secretsNS, sec.Name, providers.ReasonDuplicateCluster) }, timeout, poll).
		Should(ContainElement(ContainSubstring("registered already as hub")))
	g.Expect(duplicates()).To(Equal(before + 1))

	src, shared := srcAndShared(t, memA, hubC, memB)
	s := sourceSecret(src, "everywhere", "*/"+shared, map[string]string{"k": "v"})
	g.Expect(memA.Client.Create(ctx, s)).To(Succeed())
	eventuallySecret(t, hubC, shared, "everywhere", nil)
	eventuallySecret(t, memB, shared, "everywhere", nil)
	g.Eventually(status(memA, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))

	// After a restart too: the hub's own cluster comes first.
	hubAgent.stop()
	hubAgent = startHub()
	g.Eventually(func() int { return proxy.Count("GET", "/api/v1/namespaces/kube-system", 200) }, timeout, poll).Should(Equal(2))
	change(t, memA, s, func() { s.Data["k"] = []byte("v2") })
	eventuallySecret(t, hubC, shared, "everywhere", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
	})
	g.Consistently(proxy.List, 2*time.Second, poll).Should(ConsistOf(identityRead, identityRead))
}
