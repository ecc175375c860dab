package member_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Items 7 and 5: changes made while the agent was down are found after a
// restart: a Secret recreated with another type and an immutable ConfigMap
// recreated with other data get their mirrors replaced; mirrors of a source
// deleted, switched off or retargeted meanwhile are swept.
func TestChangesWhileAgentDown(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "down", nil, "src", "a", "b")
	targets := ns[1] + "," + ns[2]

	retyped := sourceSecret(ns[0], "retyped", targets, map[string]string{"k": "v"})
	create(t, retyped)
	immutable := sourceConfigMap(ns[0], "frozen", targets, map[string]string{"v": "1"})
	immutable.Immutable = new(bool)
	*immutable.Immutable = true
	create(t, immutable)
	deleted := sourceSecret(ns[0], "deleted", targets, map[string]string{"k": "v"})
	create(t, deleted)
	switchedOff := sourceSecret(ns[0], "off", targets, map[string]string{"k": "v"})
	create(t, switchedOff)
	retargeted := sourceSecret(ns[0], "retargeted", targets, map[string]string{"k": "v"})
	create(t, retargeted)

	oldUID := map[string]string{}
	for _, target := range ns[1:] {
		for _, name := range []string{"retyped", "deleted", "off", "retargeted"} {
			m := eventuallySecret(t, target, name, nil)
			oldUID[target+"/"+name] = string(m.UID)
		}
		c := eventuallyConfigMap(t, target, "frozen", func(g Gomega, c *corev1.ConfigMap) {
			g.Expect(c.Immutable).To(HaveValue(BeTrue()))
		})
		oldUID[target+"/frozen"] = string(c.UID)
	}
	for _, src := range []*corev1.Secret{retyped, deleted, switchedOff, retargeted} {
		g.Eventually(status(src), timeout, poll).Should(Equal("2/2 namespaces synced"))
	}

	start := stopAgent(t)

	deleteWithoutAgent(t, retyped)
	retyped = sourceSecret(ns[0], "retyped", targets, nil)
	retyped.Type = corev1.SecretTypeTLS
	retyped.Data = map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")}
	create(t, retyped)

	deleteWithoutAgent(t, immutable)
	immutable = sourceConfigMap(ns[0], "frozen", targets, map[string]string{"v": "2"})
	immutable.Immutable = new(bool)
	*immutable.Immutable = true
	create(t, immutable)

	deleteWithoutAgent(t, deleted)
	change(t, switchedOff, func(s *corev1.Secret) {
		s.Annotations[annotations.AnnotationSync] = "false"
	})
	change(t, retargeted, func(s *corev1.Secret) {
		s.Annotations[annotations.AnnotationTargetNamespaces] = ns[1]
	})

	start()

	for _, target := range ns[1:] {
		eventuallySecret(t, target, "retyped", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Type).To(Equal(corev1.SecretTypeTLS))
			g.Expect(m.Data).To(Equal(retyped.Data))
			g.Expect(string(m.UID)).NotTo(Equal(oldUID[target+"/retyped"]))
			g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSourceUID, string(retyped.UID)))
		})
		eventuallyConfigMap(t, target, "frozen", func(g Gomega, c *corev1.ConfigMap) {
			g.Expect(c.Data).To(Equal(map[string]string{"v": "2"}))
			g.Expect(c.Immutable).To(HaveValue(BeTrue()))
			g.Expect(string(c.UID)).NotTo(Equal(oldUID[target+"/frozen"]))
		})
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "deleted"}})
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "off"}})
	}
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[2], Name: "retargeted"}})
	g.Expect(secretState(ns[1], "retargeted")()).To(HavePrefix(oldUID[ns[1]+"/retargeted"]+"@"), "still targeted, kept")
	g.Eventually(status(retyped), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Eventually(status(retargeted), timeout, poll).Should(Equal("1/1 namespaces synced"))
}

// Item 7 with the agent running: an immutable ConfigMap source that is
// deleted and created again with other data has its mirrors replaced, and a
// label change of an immutable source reaches its immutable mirrors.
func TestImmutableSourceRecreated(t *testing.T) {
	ns := namespaces(t, "immut", nil, "src", "a")
	src := sourceConfigMap(ns[0], "frozen", ns[1], map[string]string{"v": "1"})
	src.Immutable = new(bool)
	*src.Immutable = true
	create(t, src)
	old := eventuallyConfigMap(t, ns[1], "frozen", nil)

	change(t, src, func(c *corev1.ConfigMap) { c.Labels["tier"] = "gold" })
	eventuallyConfigMap(t, ns[1], "frozen", func(g Gomega, c *corev1.ConfigMap) {
		g.Expect(c.Labels).To(HaveKeyWithValue("tier", "gold"))
		g.Expect(c.Data).To(Equal(map[string]string{"v": "1"}))
		g.Expect(c.Immutable).To(HaveValue(BeTrue()))
	})

	deleteAndWait(t, src)
	eventuallyGone(t, old)
	src = sourceConfigMap(ns[0], "frozen", ns[1], map[string]string{"v": "2"})
	src.Immutable = new(bool)
	*src.Immutable = true
	create(t, src)
	eventuallyConfigMap(t, ns[1], "frozen", func(g Gomega, c *corev1.ConfigMap) {
		g.Expect(c.Data).To(Equal(map[string]string{"v": "2"}))
		g.Expect(c.UID).NotTo(Equal(old.UID))
	})
}

// Item 2 and 5: a restart with nothing changed makes no write to any source
// or mirror. A source created after the restart proves the new agent works.
func TestRestartWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "steady", nil, "src", "a", "b", "probe")
	targets := ns[1] + ", " + ns[2]
	plain := sourceSecret(ns[0], "plain", targets, map[string]string{"k": "v"})
	plain.Labels["app"] = "x"
	plain.Annotations["note"] = "y"
	plain.Annotations["meta.helm.sh/release-name"] = "stripped"
	create(t, plain)
	tls := sourceSecret(ns[0], "tls", targets, nil)
	tls.Type = corev1.SecretTypeTLS
	tls.Data = map[string][]byte{corev1.TLSCertKey: []byte("c"), corev1.TLSPrivateKeyKey: []byte("k")}
	create(t, tls)
	cm := sourceConfigMap(ns[0], "cm", targets, map[string]string{"k": "v"})
	cm.BinaryData = map[string][]byte{"b": {0, 1}}
	create(t, cm)
	frozen := sourceConfigMap(ns[0], "frozen", targets, map[string]string{"k": "v"})
	frozen.Immutable = new(bool)
	*frozen.Immutable = true
	create(t, frozen)
	g.Eventually(status(plain), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Eventually(status(tls), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Eventually(status(cm), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Eventually(status(frozen), timeout, poll).Should(Equal("2/2 namespaces synced"))

	synced := func() []int32 {
		var out []int32
		for _, name := range []string{"plain", "tls", "cm", "frozen"} {
			n, repeat := eventSummary(ns[0], name, controller.ReasonMirrorsSynced)
			out = append(out, int32(n), repeat)
		}
		return out
	}
	// Events are written in the background, after the status: wait for
	// each source's first one before counting.
	g.Eventually(func() []int32 {
		var firsts []int32
		for i, n := range synced() {
			if i%2 == 0 {
				firsts = append(firsts, n)
			}
		}
		return firsts
	}, timeout, poll).Should(HaveEach(BeNumerically(">", 0)))
	before := synced()

	start := stopAgent(t)
	start()

	// The new agent has synced and is working once this source, created
	// after it started, has its mirror; the reconciles of the old sources
	// run then or during the check window.
	probe := sourceSecret(ns[0], "probe", ns[3], map[string]string{"k": "v"})
	create(t, probe)
	eventuallySecret(t, ns[3], "probe", nil)

	// Neither writes nor reads of single sources or mirrors: the caches
	// answer everything for up-to-date mirrors.
	touching := func() []string {
		var out []string
		for _, r := range agent.requests.detailed() {
			for _, n := range ns[:3] {
				for _, kind := range []string{"secrets", "configmaps"} {
					dir := "/api/v1/namespaces/" + n + "/" + kind
					if (r.URL.Path == dir && r.Method != http.MethodGet) ||
						strings.HasPrefix(r.URL.Path, dir+"/") && lastSegment(r.URL.Path) != "probe" {
						out = append(out, r.Method+" "+r.URL.RequestURI())
					}
				}
			}
		}
		return out
	}
	g.Consistently(touching, settle, poll).Should(BeEmpty(), "requests about up-to-date sources or mirrors after a restart")
	g.Expect(synced()).To(Equal(before), "no MirrorsSynced event after a restart with nothing changed")
	g.Expect(agent.requests.writes()).NotTo(BeEmpty(), "the probe's writes are recorded, so the log works")
}

func lastSegment(path string) string {
	return path[strings.LastIndex(path, "/")+1:]
}

// A restarted agent reconciles each source once. Its sweep also looks at
// the source of every mirror, for mirrors whose source went while it was
// down; it used to enqueue the source of each mirror, so that a source a
// worker had taken already was queued and reconciled again (most sources
// of the member benchmark were, at each restart). Counted with the sync
// operations of a kind only this test mirrors: each of its mirrors is
// found unchanged once per reconcile of its source.
func TestRestartReconcilesEachSourceOnce(t *testing.T) {
	const sources, targets = 6, 60
	g := NewWithT(t)
	ctx := context.Background()
	withAgent(t, "--resource-types=LimitRange.v1")
	suffixes := []string{"src"}
	for i := range targets {
		suffixes = append(suffixes, fmt.Sprintf("t%02d", i))
	}
	ns := namespaces(t, "once", nil, suffixes...)
	glob := strings.TrimSuffix(ns[1], "t00") + "t*"
	var ranges []*corev1.LimitRange
	for i := range sources {
		lr := &corev1.LimitRange{ObjectMeta: fleettest.SourceMeta(ns[0], fmt.Sprintf("limits-%d", i), glob),
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}}}
		create(t, lr)
		ranges = append(ranges, lr)
	}
	for _, lr := range ranges {
		g.Eventually(status(lr), timeout, poll).Should(Equal(fmt.Sprintf("%d/%d namespaces synced", targets, targets)))
	}
	unchanged := metrics.SyncOperations.WithLabelValues("LimitRange", clusterName, "unchanged")
	before := testutil.ToFloat64(unchanged)

	pastLogs = append(pastLogs, agent.requests)
	agent.stop()
	agent = startAgent("--resource-types=LimitRange.v1")

	once := before + sources*targets
	g.Eventually(func() float64 { return testutil.ToFloat64(unchanged) }, timeout, poll).Should(BeNumerically(">=", once))
	g.Consistently(func() float64 { return testutil.ToFloat64(unchanged) }, 2*time.Second, poll).Should(Equal(once),
		"mirrors found unchanged after the restart: one reconcile of each source finds %d", sources*targets)

	for _, lr := range ranges {
		g.Expect(k8s.Delete(ctx, lr)).To(Succeed())
	}
	for _, n := range ns[1:] {
		for _, lr := range ranges {
			eventuallyGone(t, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: lr.Name}})
		}
	}
}
