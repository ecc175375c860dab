package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// A member whose API server hangs (accepts connections, never answers),
// answers slowly (every response 5s late), is down, or answers 503, 429,
// 401, 403 or cut-off responses never holds the work for the others, with the hub's default deadlines: the hub notices within two
// probe deadlines, aborts what waits on it and fails further calls at
// once, so updates keep reaching the healthy member within seconds, also
// for sources that never target the sick one; the status says since when
// the member is unreachable, and it catches up once it answers again.
func TestSickMemberDoesNotHoldTheOthers(t *testing.T) {
	// The defaults that matter: a 30s call deadline, probes every 10s.
	hubAgent.stop()
	hubAgent = startHub("--api-call-timeout=30s", "--cluster-probe-interval=10s", "--cluster-probe-timeout=2s")
	t.Cleanup(func() {
		hubAgent.stop()
		hubAgent = startHub()
	})
	for _, fault := range []struct {
		name         string
		inject, heal func() error
	}{
		{"hang", func() error { partA.Hang(); return nil }, partA.Heal},
		{"slow", func() error { partA.Delay(5 * time.Second); return nil }, partA.Heal},
		// The API server stops and starts again on the same etcd.
		{"api server down", memA.Stop, memA.Restart},
	} {
		t.Run(fault.name, func(t *testing.T) { sickMemberScenario(t, fault.inject, fault.heal) })
	}

	// HTTP-level faults: member-a registered through an HTTPS proxy that
	// answers in the API server's place.
	g := NewWithT(t)
	proxy, err := fleettest.NewHTTPFaultProxy(memA.Config)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	kc, err := proxy.Kubeconfig(memA.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fleettest.RegisterCAPI(context.Background(), hubC.Client, secretsNS, memA, kc)).To(Succeed())
	t.Cleanup(func() { g.Expect(registerA()).To(Succeed()) })
	for _, fault := range []struct {
		name   string
		inject func()
	}{
		{"503 service unavailable", func() { proxy.Fail(http.StatusServiceUnavailable) }},
		{"429 too many requests", func() { proxy.Fail(http.StatusTooManyRequests) }},
		{"401 unauthorized", func() { proxy.Fail(http.StatusUnauthorized) }},
		{"403 forbidden", func() { proxy.Fail(http.StatusForbidden) }},
		{"responses cut off", proxy.CutResponses},
	} {
		t.Run(fault.name, func(t *testing.T) {
			sickMemberScenario(t, func() error { fault.inject(); return nil }, proxy.Heal)
		})
	}
}

func sickMemberScenario(t *testing.T, inject, heal func() error) {
	g := NewWithT(t)
	ctx := context.Background()
	src, shared := srcAndShared(t, hubC, memA, memB)
	// More sources that target the hung member than the hub has workers.
	var both []*corev1.Secret
	for i := range 6 {
		s := sourceSecret(src, fmt.Sprintf("both%d", i), "*/"+shared, map[string]string{"k": "v1"})
		g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())
		both = append(both, s)
	}
	onlyB := sourceSecret(src, "only-b", "member-b/"+shared, map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(ctx, onlyB)).To(Succeed())
	for _, s := range append(both, onlyB) {
		eventuallySecret(t, memB, shared, s.Name, nil)
	}
	for _, s := range both {
		g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	}

	g.Expect(inject()).To(Succeed())
	t.Cleanup(func() { _ = heal() })
	set := func(s *corev1.Secret, v string) {
		change(t, hubC, s, func() { s.Data["k"] = []byte(v) })
	}
	reaches := func(s *corev1.Secret, v string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		eventuallySecretWithin(t, memB, shared, s.Name, within, func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte(v)))
		})
		return time.Since(start)
	}

	// Every source that targets both members is updated, twice: the first
	// reconciles find the sick member, the second updates queue behind them.
	for _, s := range both {
		set(s, "v2")
	}
	for _, s := range both {
		set(s, "v3")
	}
	set(onlyB, "v2")
	// Detection takes a probe deadline for the slow call to trigger a
	// probe and one for the probe: 4s; allow for the race detector.
	t.Logf("member-b has the second update after %s", reaches(both[0], "v3", 10*time.Second))
	t.Logf("member-b has the update of a source that does not target member-a after %s", reaches(onlyB, "v2", 10*time.Second))
	g.Eventually(status(hubC, both[0]), timeout, poll).Should(MatchRegexp(`member-a unreachable since \d\d:\d\d:\d\dZ$`))
	// Nothing waits on it any more: the calls to it were aborted.
	g.Expect(seriesWith("fleetmirror_cluster_calls_in_flight", "cluster", "member-a")).NotTo(BeEmpty())
	g.Eventually(func() float64 { return hubGauge("fleetmirror_cluster_calls_in_flight", "member-a") }, timeout, poll).Should(BeZero())

	// Marked down, the sick member costs nothing any more.
	for i := range 3 {
		v := fmt.Sprintf("v%d", 4+i)
		set(both[1], v)
		t.Logf("update %d reaches member-b after %s", i+1, reaches(both[1], v, 3*time.Second))
	}

	// It catches up within seconds once it answers again: a cluster
	// marked down is probed every 2s.
	g.Expect(heal()).To(Succeed())
	healed := time.Now()
	for _, s := range both {
		eventuallySecret(t, memA, shared, s.Name, func(g Gomega, m *corev1.Secret) {
			want := "v3"
			if s == both[1] {
				want = "v6"
			}
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte(want)))
		})
	}
	caughtUp := time.Since(healed)
	t.Logf("member-a caught up %s after it answered again", caughtUp)
	g.Expect(caughtUp).To(BeNumerically("<", 10*time.Second), "catching up (5s in the benchmark, without the race detector)")
	for _, s := range both {
		g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	}
}
