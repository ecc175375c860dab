package hub_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

func TestUnreachableMemberConvergesWhenBack(t *testing.T) {
	g := NewWithT(t)
	src, shared := srcAndShared(t, hubC, memA, memB)
	s := sourceSecret(src, "down", "*/"+shared, map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	eventuallySecret(t, memA, shared, "down", nil)

	partA.Cut()
	t.Cleanup(func() { _ = partA.Heal() })
	change(t, hubC, s, func() { s.Data["k"] = []byte("v2") })
	// member-b is updated at once; member-a is reported, not retried hot.
	eventuallySecret(t, memB, shared, "down", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
	})
	g.Eventually(status(hubC, s), timeout, poll).Should(ContainSubstring("member-a unreachable"))
	g.Eventually(func() []string { return eventMessages(hubC, src, "down", "ClusterUnreachable") }, timeout, poll).
		ShouldNot(BeEmpty())

	g.Expect(partA.Heal()).To(Succeed())
	eventuallySecret(t, memA, shared, "down", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
	})
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))

	// A source deleted while a member is down goes at once (nothing of
	// ours holds it); the mirror left behind is swept on return.
	partA.Cut()
	g.Eventually(status(hubC, s), timeout, poll).Should(ContainSubstring("member-a unreachable"))
	g.Expect(hubC.Client.Delete(context.Background(), s)).To(Succeed())
	eventuallyGone(t, memB, shared, "down")
	eventuallyGone(t, hubC, src, "down")
	g.Expect(partA.Heal()).To(Succeed())
	eventuallyGone(t, memA, shared, "down")
}

func TestKubeconfigRotation(t *testing.T) {
	g := NewWithT(t)
	src, shared := srcAndShared(t, hubC, memA, memB)
	s := sourceSecret(src, "rot", "member-b/"+shared, map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	eventuallySecret(t, memB, shared, "rot", nil)
	t.Cleanup(func() { _ = registerB(nil) })

	// Credentials that point nowhere: the hub notices within seconds.
	good, err := memB.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	kc, err := clientcmd.Load(good)
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range kc.Clusters {
		c.Server = "https://127.0.0.1:1"
	}
	dead, err := clientcmd.Write(*kc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(registerB(dead)).To(Succeed())
	g.Eventually(status(hubC, s), timeout, poll).Should(ContainSubstring("member-b unreachable"))

	// A new identity (rotated credentials) works at once.
	_, rotated, err := memB.AddUser("hub-rotated", []string{"system:masters"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(registerB(rotated)).To(Succeed())
	change(t, hubC, s, func() { s.Data["k"] = []byte("v2") })
	eventuallySecret(t, memB, shared, "rot", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
	})
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
}

func TestRefusedRegistrations(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	good, err := memA.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	kc, err := clientcmd.Load(good)
	g.Expect(err).NotTo(HaveOccurred())
	for _, a := range kc.AuthInfos {
		a.Exec = &clientcmdapiExecConfig
	}
	withExec, err := clientcmd.Write(*kc)
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		secret, cluster string
		data            []byte
		reason, message string
	}{
		{"exec-plugin", "plugged", withExec, "InvalidKubeconfig", "exec or auth-provider plugin"},
		{"garbage", "garbage", []byte("not: [a kubeconfig"), "InvalidKubeconfig", "does not parse"},
		// The provider keeps the oldest Secret of a name and breaks ties of
		// creation time (one-second resolution) by name: this one sorts
		// after the suite's member-a-kubeconfig, so it loses even when run
		// alone, in the second the suite registered member-a.
		{"member-a-second", "member-a", good, "DuplicateClusterName", "already registered"},
		{"own-name", "hub", good, "DuplicateClusterName", "hub's own name"},
	} {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: secretsNS, Name: tc.secret,
				Labels: map[string]string{annotations.LabelClusterName: tc.cluster}},
			Data: map[string][]byte{"value": tc.data},
		}
		g.Expect(hubC.Client.Create(ctx, sec)).To(Succeed())
		t.Cleanup(func() { _ = hubC.Client.Delete(ctx, sec) })
		g.Eventually(func() []string { return eventMessages(hubC, secretsNS, tc.secret, tc.reason) }, timeout, poll).
			Should(ContainElement(ContainSubstring(tc.message)), "secret %s", tc.secret)
	}

	// member-a still works: the duplicate did not take its name.
	src, shared := srcAndShared(t, hubC, memA)
	s := sourceSecret(src, "still", "member-a/"+shared, map[string]string{"k": "v"})
	g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())
	eventuallySecret(t, memA, shared, "still", nil)
}

// hubSeries reports whether the hub exports a series of metric for cluster.
func hubSeries(metric, cluster string) bool {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return false
	}
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == cluster {
					return true
				}
			}
		}
	}
	return false
}

func TestUnregisterAndChurnLeaveNothingBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, shared := uniq("src"), uniq("shared")
	mkNamespaces(t, src, hubC, memB)
	mkNamespaces(t, shared, memA, memB)
	onHub := sourceSecret(src, "churn", "*/"+shared, map[string]string{"k": "v"})
	g.Expect(hubC.Client.Create(ctx, onHub)).To(Succeed())
	onB := sourceSecret(src, "from-b", "member-a/"+shared, map[string]string{"k": "v"})
	g.Expect(memB.Client.Create(ctx, onB)).To(Succeed())
	eventuallySecret(t, memA, shared, "from-b", nil)
	g.Eventually(status(hubC, onHub), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	g.Eventually(func() bool { return hubSeries("fleetmirror_hub_cluster_up", "member-b") }, timeout, poll).Should(BeTrue())

	settle := func() int {
		var n int
		g.Eventually(func() bool {
			before := runtime.NumGoroutine()
			time.Sleep(200 * time.Millisecond) //nolint:forbidigo // sampling, not waiting for a condition
			n = runtime.NumGoroutine()
			return n <= before
		}, timeout, 10*time.Millisecond).Should(BeTrue())
		return n
	}
	baseline := settle()
	// A hundred cycles: a leak of even one goroutine per cycle shows.
	for range 100 {
		g.Expect(fleettest.Unregister(ctx, hubC.Client, secretsNS, memB)).To(Succeed())
		g.Eventually(status(hubC, onHub), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
		g.Eventually(func() bool { return hubSeries("fleetmirror_hub_cluster_up", "member-b") }, timeout, poll).Should(BeFalse())
		g.Expect(registerB(nil)).To(Succeed())
		g.Eventually(status(hubC, onHub), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	}
	g.Eventually(func() int { return runtime.NumGoroutine() }, timeout, poll).Should(BeNumerically("<=", baseline+10),
		"goroutines leaked over register/unregister cycles")

	// Unregistered for good: the mirror of member-b's source in member-a is
	// kept (the default), and the hub's mirror in member-b stays too.
	g.Expect(fleettest.Unregister(ctx, hubC.Client, secretsNS, memB)).To(Succeed())
	t.Cleanup(func() { _ = registerB(nil) })
	g.Eventually(status(hubC, onHub), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
	g.Consistently(func() (*corev1.Secret, error) { return getSecret(memA, shared, "from-b") }, 2*time.Second, poll).ShouldNot(BeNil())
}

func TestMemberAndHubSideBySide(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stopHubMember := startMember(t, hubC)
	defer stopHubMember()
	stopAMember := startMember(t, memA)
	defer stopAMember()

	src, local, shared := uniq("src"), uniq("local"), uniq("shared")
	mkNamespaces(t, src, hubC)
	mkNamespaces(t, local, hubC)
	mkNamespaces(t, shared, hubC, memA, memB)
	s := sourceSecret(src, "both", local+", */"+shared, map[string]string{"k": "v"})
	g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())

	byMember := eventuallySecret(t, hubC, local, "both", nil)
	g.Expect(byMember.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByMember))
	for _, c := range fleet.Members {
		m := eventuallySecret(t, c, shared, "both", nil)
		g.Expect(m.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByHub))
	}
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("1/1 namespaces synced | remote: 2 clusters, 2/2 synced"))
	got, err := getSecret(hubC, shared, "both")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeNil(), "neither writer serves an unqualified entry it was not given")

	// No fighting: nothing is rewritten once both are done.
	g.Expect(hubC.Client.Get(ctx, objKey(s), s)).To(Succeed())
	rv := s.ResourceVersion
	mirrorRV := byMember.ResourceVersion
	g.Consistently(func() string {
		_ = hubC.Client.Get(ctx, objKey(s), s)
		m, _ := getSecret(hubC, local, "both")
		return s.ResourceVersion + "/" + m.ResourceVersion
	}, 3*time.Second, 200*time.Millisecond).Should(Equal(rv + "/" + mirrorRV))

	// Neither holds the source: deleted, it goes at once, and every mirror
	// after it.
	g.Expect(s.Finalizers).To(BeEmpty())
	g.Expect(hubC.Client.Delete(ctx, s)).To(Succeed())
	eventuallyGone(t, hubC, local, "both")
	for _, c := range fleet.Members {
		eventuallyGone(t, c, shared, "both")
	}
	eventuallyGone(t, hubC, src, "both")
}

// startMember runs a member agent against cluster c in this process.
func startMember(t *testing.T, c *fleettest.Cluster) func() {
	t.Helper()
	o, err := member.ParseOptions("--cluster-name="+c.Name, "--namespace="+systemNS,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--resync-period=0",
		"--resource-types=Secret.v1,ConfigMap.v1", "--lazy-probe-interval=300ms")
	if err != nil {
		t.Fatal(err)
	}
	o.RESTConfig = rest.CopyConfig(c.Config)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- member.Run(ctx, o) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("member agent of %s: %v", c.Name, err)
		}
	}
}
