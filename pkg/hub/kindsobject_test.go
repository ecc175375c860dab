package hub_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fleetpkg "github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// startDiscoveryMember runs a member agent against c in discovery mode.
func startDiscoveryMember(t *testing.T, c *fleettest.Cluster) func() {
	t.Helper()
	o, err := member.ParseOptions("--cluster-name="+c.Name, "--namespace="+systemNS,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--resync-period=0", "--lazy-probe-interval=300ms")
	if err != nil {
		t.Fatal(err)
	}
	o.RESTConfig = rest.CopyConfig(c.Config)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- member.Run(ctx, o) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("member agent of %s: %v", c.Name, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// kindsObject is a member kinds object in systemNS with data.
func kindsObject(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: clusters.MemberKindsName,
		Labels: map[string]string{clusters.LabelMemberKinds: "true"}}, Data: data}
}

func TestMemberKindsObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// The suite's hub watches two kinds; this one discovers them all.
	hubAgent.stop()
	t.Cleanup(func() { hubAgent = startHub() })

	// The hub reaches member-b through a proxy that counts its open
	// watches: the API server's own metrics would count the member
	// agent's and its own informers' too, which come and go.
	proxy, err := fleettest.NewRecordingProxy(memB)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	kubeconfig, err := proxy.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(registerB(kubeconfig)).To(Succeed())
	t.Cleanup(func() { g.Expect(registerB(nil)).To(Succeed()) })
	// Earlier tests leave Secret and ConfigMap sources and mirrors in
	// member-b, and the hub rightly keeps watching what it sees there; the
	// checks count the watches of every other kind, and the kinds object's.
	hubWatches := func() []string {
		return slices.DeleteFunc(proxy.OpenWatches(), func(uri string) bool {
			path, query, _ := strings.Cut(uri, "?")
			return (strings.HasSuffix(path, "/secrets") || strings.HasSuffix(path, "/configmaps")) &&
				!strings.Contains(query, url.QueryEscape(clusters.LabelMemberKinds))
		})
	}
	count := func(m types.GomegaMatcher) types.GomegaMatcher {
		return WithTransform(func(open []string) int { return len(open) }, m)
	}
	// describe names a check and shows the watches open when it failed.
	describe := func(what string) func() string {
		return func() string { return what + "; open now:\n" + strings.Join(hubWatches(), "\n") }
	}

	stopMember := startDiscoveryMember(t, memB)
	cm := &corev1.ConfigMap{}
	g.Eventually(func() error {
		return memB.Client.Get(ctx, objKey(kindsObject(nil)), cm)
	}, timeout, poll).Should(Succeed(), "the member writes its kinds object")
	g.Expect(strings.Split(cm.Data[clusters.MemberKindsCovered], "\n")).To(ContainElements("ConfigMap.v1", "LimitRange.v1", "Secret.v1"))

	// The hub's watches in member-b: the namespaces and the kinds object;
	// none for the kinds that hold nothing of ours.
	h := startHub("--resource-types=", "--watch-idle-timeout=1s")
	t.Cleanup(h.stop)
	g.Eventually(hubWatches, timeout, poll).Should(count(BeNumerically(">=", 2)), describe("the hub watches member-b"))
	g.Consistently(hubWatches, 3*time.Second, poll).Should(count(BeNumerically("<=", 2)), describe("a cluster with a kinds object"))

	// A source of a kind the hub does not watch is mirrored within 2s.
	src, shared := srcAndShared(t, memB, memA)
	lr := &corev1.LimitRange{ObjectMeta: fleettest.SourceMeta(src, "limits", "*/"+shared),
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer}}}}
	g.Expect(memB.Client.Create(ctx, lr)).To(Succeed())
	start := time.Now()
	g.Eventually(func() error {
		return memA.Client.Get(ctx, objKey(&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: shared, Name: "limits"}}), &corev1.LimitRange{})
	}, 2*time.Second, 20*time.Millisecond).Should(Succeed(), "mirrored within 2s")
	t.Logf("A source of a newly used kind was mirrored in %s", time.Since(start).Round(time.Millisecond))
	g.Expect(memB.Client.Delete(ctx, lr)).To(Succeed())
	fleettest.EventuallyGone(t, wait, memA, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: shared, Name: "limits"}})
	fleettest.EventuallyGone(t, wait, memB, lr)

	// A member agent that stops takes its object away: every kind is
	// watched again, as in a cluster without one.
	stopMember()
	g.Eventually(func() error { return memB.Client.Get(ctx, objKey(kindsObject(nil)), &corev1.ConfigMap{}) }, timeout, poll).ShouldNot(Succeed())
	g.Eventually(hubWatches, timeout, poll).Should(count(BeNumerically(">=", 20)), describe("no kinds object: presence watches per kind"))

	// A valid object written by hand is trusted...
	valid := func(at time.Time) map[string]string {
		return map[string]string{clusters.MemberKindsCovered: cm.Data[clusters.MemberKindsCovered], clusters.MemberKindsRenewedAt: at.UTC().Format(time.RFC3339)}
	}
	obj := kindsObject(valid(time.Now()))
	g.Expect(memB.Client.Create(ctx, obj)).To(Succeed())
	t.Cleanup(func() { _ = memB.Client.Delete(context.Background(), kindsObject(nil)) })
	g.Eventually(hubWatches, timeout, poll).Should(count(BeNumerically("<=", 2)), describe("a valid kinds object written by hand, nothing used"))

	// ...but not once it is stale: a member that died without deleting it.
	change(t, memB, obj, func() { obj.Data = valid(time.Now().Add(-clusters.MemberKindsStale - time.Minute)) })
	g.Eventually(hubWatches, timeout, poll).Should(count(BeNumerically(">=", 20)), describe("a stale kinds object"))

	// An invalid object is not trusted either, and is reported.
	change(t, memB, obj, func() { obj.Data = valid(time.Now()) })
	g.Eventually(hubWatches, timeout, poll).Should(count(BeNumerically("<=", 2)), describe("a renewed kinds object, nothing used"))
	change(t, memB, obj, func() {
		obj.Data[clusters.MemberKindsUsed] = "not a kind"
	})
	g.Eventually(hubWatches, timeout, poll).Should(count(BeNumerically(">=", 20)), describe("an invalid kinds object"))
	g.Eventually(func() []string {
		return eventMessages(memB, systemNS, clusters.MemberKindsName, fleetpkg.ReasonInvalidKindsObject)
	}, timeout, poll).
		Should(ContainElement(ContainSubstring("not a kind")))

	// An oversized one too.
	change(t, memB, obj, func() {
		obj.Data = valid(time.Now())
		obj.Data[clusters.MemberKindsCovered] += strings.Repeat("\nA.v1", 70<<10/5)
	})
	g.Consistently(hubWatches, time.Second, poll).Should(count(BeNumerically(">=", 20)), describe(fmt.Sprintf("an object over %d KiB", 64)))
}
