package hub_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// TestReceiveOnlyCluster: member-b, which runs no member agent, registered
// receive-only. The hub, discovering every kind, looks for nothing there:
// no watch per kind for sources or pull mirrors, no kinds object, no
// MirrorPolicies; it watches only its own mirrors of the kinds the fleet
// mirrors, pushes into member-b and corrects drift there. A source in
// member-b is not served until the label goes; then it is, and when the
// label comes back the source, whose mirror refers to it, keeps being
// served until it goes.
func TestReceiveOnlyCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	proxy := hubThroughProxy(t)
	register := func(receiveOnly bool) {
		t.Helper()
		labels := map[string]string{"env": "prod"}
		if receiveOnly {
			labels[annotations.LabelReceiveOnly] = "true"
		}
		kubeconfig, err := proxy.Kubeconfig()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fleettest.RegisterPlain(ctx, hubC.Client, secretsNS, memB, kubeconfig, labels)).To(Succeed())
	}
	// The hub's watches in member-b that look for sources, pull mirrors,
	// MirrorPolicies or a kinds object. Earlier tests leave Secret and
	// ConfigMap sources in member-b whose mirrors elsewhere refer to them:
	// those two kinds are rightly watched whole, and left out here.
	looking := func() []string {
		return slices.DeleteFunc(proxy.OpenWatches(), func(uri string) bool {
			path, query, _ := strings.Cut(uri, "?")
			if strings.HasSuffix(path, "/secrets") || strings.HasSuffix(path, "/configmaps") {
				return true
			}
			return strings.HasSuffix(path, "/namespaces") ||
				strings.Contains(query, url.QueryEscape(annotations.LabelMirror+"=true")) // our mirrors
		})
	}
	// The hub's watches of ResourceQuotas in member-b, a kind no other
	// test uses.
	quotas := func() []string {
		return slices.DeleteFunc(proxy.OpenWatches(), func(uri string) bool {
			path, _, _ := strings.Cut(uri, "?")
			return !strings.HasSuffix(path, "/resourcequotas")
		})
	}
	mirrorsOnly := And(count(Equal(1)), ContainElement(ContainSubstring(url.QueryEscape(annotations.LabelMirror+"=true"))))
	quota := func(ns, name, targets, pods string) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{ObjectMeta: fleettest.SourceMeta(ns, name, targets),
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(pods)}}}
	}
	podsOf := func(c *fleettest.Cluster, ns, name string) func() (string, error) {
		return func() (string, error) {
			q := &corev1.ResourceQuota{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, q); err != nil {
				return "", err
			}
			return q.Spec.Hard.Pods().String(), nil
		}
	}

	register(true)
	h := startHub("--resource-types=", "--watch-idle-timeout=1s")
	t.Cleanup(func() { h.stop() })

	// Pushed into member-b, and drift there corrected, through the
	// mirrors' watch alone.
	srcA, sharedB := srcAndShared(t, memA, memB)
	toB := quota(srcA, "to-b", memB.Name+"/"+sharedB, "10")
	g.Expect(memA.Client.Create(ctx, toB)).To(Succeed())
	g.Eventually(podsOf(memB, sharedB, "to-b"), timeout, poll).Should(Equal("10"))
	g.Eventually(quotas, timeout, poll).Should(mirrorsOnly, describing(quotas)("member-b: our ResourceQuota mirrors only"))
	g.Consistently(looking, 2*time.Second, poll).Should(BeEmpty(), describing(looking)("a receive-only cluster: nothing looked for"))
	mirror := &corev1.ResourceQuota{}
	g.Expect(memB.Client.Get(ctx, client.ObjectKey{Namespace: sharedB, Name: "to-b"}, mirror)).To(Succeed())
	change(t, memB, mirror, func() { mirror.Spec.Hard[corev1.ResourcePods] = resource.MustParse("99") })
	g.Eventually(podsOf(memB, sharedB, "to-b"), timeout, poll).Should(Equal("10"), "drift corrected")

	// A source in member-b is not looked for, so not served.
	srcB, sharedA := srcAndShared(t, memB, memA)
	fromB := quota(srcB, "from-b", memA.Name+"/"+sharedA, "20")
	g.Expect(memB.Client.Create(ctx, fromB)).To(Succeed())
	absent := func() bool {
		err := memA.Client.Get(ctx, client.ObjectKey{Namespace: sharedA, Name: "from-b"}, &corev1.ResourceQuota{})
		return apierrors.IsNotFound(err)
	}
	g.Consistently(absent, 2*time.Second, poll).Should(BeTrue(), "a source in a receive-only cluster was served")
	g.Expect(quotas()).To(mirrorsOnly, describing(quotas)("member-b: our ResourceQuota mirrors only"))

	// Without the label, member-b is looked at whole: its source is served.
	register(false)
	g.Eventually(podsOf(memA, sharedA, "from-b"), timeout, poll).Should(Equal("20"))
	g.Eventually(quotas, timeout, poll).Should(count(Equal(3)), describing(quotas)("member-b looked at whole: sources, mirrors, pull mirrors"))

	// With it again, the source whose mirror refers to it is still
	// served: nothing of what is mirrored is dropped.
	register(true)
	g.Eventually(looking, timeout, poll).Should(And(Not(BeEmpty()), HaveEach(ContainSubstring("/resourcequotas"))),
		describing(looking)("receive-only again: only the kind of a served source is looked for"))
	change(t, memB, fromB, func() { fromB.Spec.Hard[corev1.ResourcePods] = resource.MustParse("21") })
	g.Eventually(podsOf(memA, sharedA, "from-b"), timeout, poll).Should(Equal("21"))

	// Once it goes, its mirror goes, and the kind is narrowed again.
	g.Expect(memB.Client.Delete(ctx, fromB)).To(Succeed())
	fleettest.EventuallyGone(t, wait, memA, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: sharedA, Name: "from-b"}})
	g.Eventually(quotas, timeout, poll).Should(mirrorsOnly, describing(quotas)("member-b's source gone"))
	g.Expect(looking()).To(BeEmpty(), describing(looking)("nothing looked for"))
	g.Expect(memA.Client.Delete(ctx, toB)).To(Succeed())
	fleettest.EventuallyGone(t, wait, memB, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: sharedB, Name: "to-b"}})
}
