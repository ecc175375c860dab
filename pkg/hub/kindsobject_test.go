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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fleetpkg "github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// startDiscoveryMember runs a member agent against c in discovery mode.
func startDiscoveryMember(t *testing.T, c *fleettest.Cluster, extraArgs ...string) func() {
	t.Helper()
	o, err := member.ParseOptions(append([]string{"--cluster-name=" + c.Name, "--namespace=" + systemNS,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--resync-period=0", "--lazy-probe-interval=300ms"}, extraArgs...)...)
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

// hubThroughProxy stops the suite's hub (it watches two kinds; the caller
// starts one that discovers them all) and registers member-b through a
// proxy that lists the watches the hub opens there: the API server's own
// metrics would count the member agent's and its own informers' too, which
// come and go. The suite's hub and registration are back after the test.
func hubThroughProxy(t *testing.T) *fleettest.RecordingProxy {
	t.Helper()
	g := NewWithT(t)
	hubAgent.stop()
	t.Cleanup(func() { hubAgent = startHub() })
	proxy, err := fleettest.NewRecordingProxy(memB)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	kubeconfig, err := proxy.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(registerB(kubeconfig)).To(Succeed())
	t.Cleanup(func() { g.Expect(registerB(nil)).To(Succeed()) })
	return proxy
}

// count matches a list of watches by its length.
func count(m types.GomegaMatcher) types.GomegaMatcher {
	return WithTransform(func(open []string) int { return len(open) }, m)
}

// describing names a check and shows the watches that list lists when it
// failed.
func describing(list func() []string) func(what string) func() string {
	return func(what string) func() string {
		return func() string { return what + "; open now:\n" + strings.Join(list(), "\n") }
	}
}

func TestMemberKindsObject(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	proxy := hubThroughProxy(t)
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
	describe := describing(hubWatches)

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

// TestMirrorsOnlyWatch: in a cluster whose member agent rules a kind out,
// the hub watches only its own mirrors of a kind the fleet mirrors, and
// widens the watch when the cluster gets a source of it, or when a mirror
// elsewhere refers to a source there whatever the kinds object says.
func TestMirrorsOnlyWatch(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	proxy := hubThroughProxy(t)
	// The hub's watches of LimitRanges in member-b, a kind no other test
	// uses.
	limitRanges := func() []string {
		return slices.DeleteFunc(proxy.OpenWatches(), func(uri string) bool {
			path, _, _ := strings.Cut(uri, "?")
			return !strings.HasSuffix(path, "/limitranges")
		})
	}
	describe := describing(limitRanges)
	mirrorsOnly := And(count(Equal(1)), ContainElement(ContainSubstring(url.QueryEscape(annotations.LabelMirror+"=true"))))
	stopMember := startDiscoveryMember(t, memB, "--watch-idle-timeout=1s")
	g.Eventually(func() error { return memB.Client.Get(ctx, objKey(kindsObject(nil)), &corev1.ConfigMap{}) }, timeout, poll).
		Should(Succeed(), "the member writes its kinds object")
	h := startHub("--resource-types=", "--watch-idle-timeout=1s")
	t.Cleanup(func() { h.stop() })

	// A LimitRange of member-a mirrored into member-b: member-b gets the
	// mirrors' watch alone.
	limits := func(ns, name, targets string, max string) *corev1.LimitRange {
		return &corev1.LimitRange{ObjectMeta: fleettest.SourceMeta(ns, name, targets),
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
				Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(max)}}}}}
	}
	maxOf := func(c *fleettest.Cluster, ns, name string) func() (string, error) {
		return func() (string, error) {
			lr := &corev1.LimitRange{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, lr); err != nil {
				return "", err
			}
			if len(lr.Spec.Limits) == 0 {
				return "", nil // a pull mirror not filled yet
			}
			return lr.Spec.Limits[0].Max.Memory().String(), nil
		}
	}
	srcA, sharedB := srcAndShared(t, memA, memB)
	fromA := limits(srcA, "from-a", memB.Name+"/"+sharedB, "1Gi")
	g.Expect(memA.Client.Create(ctx, fromA)).To(Succeed())
	g.Eventually(maxOf(memB, sharedB, "from-a"), timeout, poll).Should(Equal("1Gi"))
	g.Eventually(limitRanges, timeout, poll).Should(mirrorsOnly, describe("member-b holds only mirrors of LimitRanges"))
	g.Consistently(limitRanges, 2*time.Second, poll).Should(mirrorsOnly, describe("member-b holds only mirrors of LimitRanges"))

	// The mirrors' watch is enough to correct drift.
	mirror := &corev1.LimitRange{}
	g.Expect(memB.Client.Get(ctx, client.ObjectKey{Namespace: sharedB, Name: "from-a"}, mirror)).To(Succeed())
	change(t, memB, mirror, func() { mirror.Spec.Limits[0].Max[corev1.ResourceMemory] = resource.MustParse("5Gi") })
	g.Eventually(maxOf(memB, sharedB, "from-a"), timeout, poll).Should(Equal("1Gi"), "drift corrected")

	// A source in member-b: its member names the kind as used, the hub
	// widens the watch and mirrors it within 2s.
	srcB, sharedA := srcAndShared(t, memB, memA)
	fromB := limits(srcB, "from-b", memA.Name+"/"+sharedA, "2Gi")
	g.Expect(memB.Client.Create(ctx, fromB)).To(Succeed())
	start := time.Now()
	g.Eventually(maxOf(memA, sharedA, "from-b"), 2*time.Second, 20*time.Millisecond).Should(Equal("2Gi"), "mirrored within 2s")
	t.Logf("A source of a kind watched for mirrors only was mirrored in %s", time.Since(start).Round(time.Millisecond))
	g.Eventually(limitRanges, timeout, poll).Should(count(Equal(3)), describe("member-b has a source: sources, mirrors and pull mirrors watched"))

	// It goes: the member rules the kind out again, and the hub narrows.
	g.Expect(memB.Client.Delete(ctx, fromB)).To(Succeed())
	fleettest.EventuallyGone(t, wait, memA, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: sharedA, Name: "from-b"}})
	g.Eventually(limitRanges, timeout, poll).Should(mirrorsOnly, describe("member-b's source gone"))

	// A kinds object that lies: it rules LimitRanges out while member-b
	// holds a source mirrored into member-a. A hub started afresh keeps
	// watching member-b's sources, because member-a's mirror refers to
	// one, and serves it: an update is mirrored.
	fromB = limits(srcB, "from-b", memA.Name+"/"+sharedA, "3Gi")
	g.Expect(memB.Client.Create(ctx, fromB)).To(Succeed())
	g.Eventually(maxOf(memA, sharedA, "from-b"), timeout, poll).Should(Equal("3Gi"))
	cm := &corev1.ConfigMap{}
	g.Expect(memB.Client.Get(ctx, objKey(kindsObject(nil)), cm)).To(Succeed())
	stopMember()
	g.Eventually(func() error { return memB.Client.Get(ctx, objKey(kindsObject(nil)), &corev1.ConfigMap{}) }, timeout, poll).ShouldNot(Succeed())
	h.stop()
	lie := kindsObject(map[string]string{clusters.MemberKindsCovered: cm.Data[clusters.MemberKindsCovered],
		clusters.MemberKindsRenewedAt: time.Now().UTC().Format(time.RFC3339)})
	g.Expect(strings.Split(lie.Data[clusters.MemberKindsCovered], "\n")).To(ContainElement("LimitRange.v1"))
	g.Expect(memB.Client.Create(ctx, lie)).To(Succeed())
	t.Cleanup(func() { _ = memB.Client.Delete(context.Background(), kindsObject(nil)) })
	// With reviews a minute apart, the widening must not wait for one.
	h = startHub("--resource-types=", "--watch-idle-timeout=1s", "--lazy-probe-interval=1m")
	change(t, memB, fromB, func() { fromB.Spec.Limits[0].Max[corev1.ResourceMemory] = resource.MustParse("4Gi") })
	g.Eventually(maxOf(memA, sharedA, "from-b"), timeout, poll).Should(Equal("4Gi"), "a source a mirror refers to is served")
	g.Consistently(limitRanges, 2*time.Second, poll).Should(count(Equal(3)), describe("a source a mirror refers to is watched"))
	g.Expect(maxOf(memA, sharedA, "from-b")()).To(Equal("4Gi"), "the mirror is kept")
	g.Expect(memB.Client.Delete(ctx, fromB)).To(Succeed())
	g.Expect(memA.Client.Delete(ctx, fromA)).To(Succeed())
	fleettest.EventuallyGone(t, wait, memA, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: sharedA, Name: "from-b"}})
	fleettest.EventuallyGone(t, wait, memB, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: sharedB, Name: "from-a"}})

	// The same lie, and no mirror left that refers to member-b: a pull
	// mirror in member-a that asks for a source in member-b keeps that
	// source watched and served as well, by a hub started afresh.
	h.stop()
	pulled := limits(srcB, "pulled", "", "6Gi")
	pulled.Annotations = map[string]string{annotations.AnnotationAllowPullInto: memA.Name + "/" + sharedA}
	g.Expect(memB.Client.Create(ctx, pulled)).To(Succeed())
	pull := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: sharedA, Name: "pulled",
		Labels:      map[string]string{annotations.LabelPull: "true"},
		Annotations: map[string]string{annotations.AnnotationMirrorFrom: memB.Name + "/" + srcB + "/pulled"}}}
	g.Expect(memA.Client.Create(ctx, pull)).To(Succeed())
	h = startHub("--resource-types=", "--watch-idle-timeout=1s", "--lazy-probe-interval=1m")
	g.Eventually(maxOf(memA, sharedA, "pulled"), timeout, poll).Should(Equal("6Gi"), "a source a pull mirror refers to is served")
	change(t, memB, pulled, func() { pulled.Spec.Limits[0].Max[corev1.ResourceMemory] = resource.MustParse("7Gi") })
	g.Eventually(maxOf(memA, sharedA, "pulled"), timeout, poll).Should(Equal("7Gi"), "a change of a source a pull mirror refers to is served")
	g.Consistently(limitRanges, 2*time.Second, poll).Should(count(Equal(3)), describe("a source a pull mirror refers to is watched"))
	g.Expect(memA.Client.Delete(ctx, pull)).To(Succeed())
	g.Expect(memB.Client.Delete(ctx, pulled)).To(Succeed())
}
