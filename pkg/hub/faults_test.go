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
// answers slowly (every response 5s late), is down, or answers 503,
// 401, 403 or cut-off responses never holds the work for the others, with the hub's default deadlines: the hub notices within two
// probe deadlines, aborts what waits on it and fails further calls at
// once, so updates keep reaching the healthy member within seconds, also
// for sources that never target the sick one; the status says since when
// the member is unreachable, and it catches up once it answers again.
func TestSickMemberDoesNotHoldTheOthers(t *testing.T) {
	withDefaultDeadlines(t)
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
	proxy := registerAThroughHTTPProxy(t)
	for _, fault := range []struct {
		name   string
		inject func()
	}{
		{"503 service unavailable", func() { proxy.Fail(http.StatusServiceUnavailable) }},
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
	both := sourcesInBoth(t, src, shared)
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

// A member whose API server answers 429 Too Many Requests is busy, not
// gone. The hub never marks it unreachable for that alone, and honours its
// Retry-After for the cluster as a whole: after a 429 it sends it nothing
// but the probe until the time asked for, instead of each call sleeping
// and retrying on its own (and a worker waiting out a 30s deadline). The
// other member is served meanwhile, and the throttled one catches up
// within seconds of answering again, without a failure back-off grown
// while it was throttled.
func TestThrottledMemberIsAliveNotDead(t *testing.T) {
	g := NewWithT(t)
	withDefaultDeadlines(t)
	proxy := registerAThroughHTTPProxy(t)

	src, shared := srcAndShared(t, hubC, memA, memB)
	both := sourcesInBoth(t, src, shared)
	for _, s := range both {
		eventuallySecret(t, memA, shared, s.Name, nil)
		g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	}
	throttledBefore := hubGauge("fleetmirror_cluster_throttled_total", memA.Name)

	// API Priority and Fairness's answer: 429, Retry-After 1.
	proxy.Throttle(http.StatusTooManyRequests, "1")
	t.Cleanup(func() { _ = proxy.Heal() })
	throttledAt := time.Now()
	for round := 2; round <= 4; round++ {
		v := fmt.Sprintf("v%d", round)
		for _, s := range both {
			change(t, hubC, s, func() { s.Data["k"] = []byte(v) })
		}
		start := time.Now()
		for _, s := range both {
			eventuallySecretWithin(t, memB, shared, s.Name, 5*time.Second, func(g Gomega, m *corev1.Secret) {
				g.Expect(m.Data).To(HaveKeyWithValue("k", []byte(v)))
			})
		}
		t.Logf("round %d reached member-b after %s", round, time.Since(start).Round(10*time.Millisecond))
	}
	g.Expect(hubGauge("fleetmirror_cluster_throttled_total", memA.Name)).To(BeNumerically(">", throttledBefore))
	// Alive all along: never marked unreachable, never said to be.
	g.Consistently(func(g Gomega) {
		g.Expect(hubGauge("fleetmirror_hub_cluster_up", memA.Name)).To(Equal(1.0))
		for _, s := range both {
			g.Expect(status(hubC, s)()).NotTo(ContainSubstring("unreachable"))
		}
	}, 3*time.Second, poll).Should(Succeed())
	t.Logf("status while throttled: %q", status(hubC, both[0])())

	// The Retry-After held the cluster, not one call: the requests it got
	// came in bursts at least a second apart (each burst: the calls that
	// waited for the back-off to end), never in between. The probe is
	// always sent.
	var last time.Time
	n := 0
	for _, a := range proxy.Answered() {
		if a.Path == "/readyz" || a.At.Before(throttledAt) {
			continue
		}
		n++
		if gap := a.At.Sub(last); !last.IsZero() && gap > 300*time.Millisecond && gap < 700*time.Millisecond {
			t.Errorf("request %s %s after the one before: neither of its burst nor after the Retry-After", a.Path, gap.Round(time.Millisecond))
		}
		last = a.At
	}
	t.Logf("%d requests answered 429 in %s", n, time.Since(throttledAt).Round(time.Second))

	// It catches up within seconds once it answers again.
	g.Expect(proxy.Heal()).To(Succeed())
	healed := time.Now()
	for _, s := range both {
		eventuallySecretWithin(t, memA, shared, s.Name, 10*time.Second, func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v4")))
		})
	}
	t.Logf("member-a caught up %s after it answered again", time.Since(healed).Round(10*time.Millisecond))
	g.Expect(time.Since(healed)).To(BeNumerically("<", 5*time.Second))
	for _, s := range both {
		g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	}
}

// A member whose API server answers its readiness probe with 500 once or
// twice (kube-apiserver's etcd-readiness check fails when etcd is slow
// under load; kcp's does at a thousand logical clusters) answered: it is
// alive, and marking it unreachable would abort every call in flight to it
// and hold its updates until it is found up again. Only one that keeps
// answering so is marked down, after three probes in a row.
func TestNotReadyOnceIsNotDown(t *testing.T) {
	g := NewWithT(t)
	proxy, s, _ := sourceOnAThroughHTTPProxy(t, "blip")
	up := func() float64 { return hubGauge("fleetmirror_hub_cluster_up", memA.Name) }
	proxy.FailPath("/readyz", http.StatusInternalServerError, 2)
	// The hub probes every 300ms here: both answers are given within a
	// second, and the probes after them pass.
	g.Consistently(up, 2*time.Second, 20*time.Millisecond).Should(Equal(1.0), "marked down for two not-ready answers")
	g.Expect(proxy.Answered()).To(HaveLen(2), "the probes that were answered 500")
	g.Expect(status(hubC, s)()).NotTo(ContainSubstring("unreachable"))

	// Not ready for good: down after the third answer in a row, and up
	// again once it is ready.
	proxy.FailPath("/readyz", http.StatusInternalServerError, -1)
	g.Eventually(up, timeout, poll).Should(Equal(0.0))
	g.Eventually(status(hubC, s), timeout, poll).Should(MatchRegexp(`member-a unreachable since \d\d:\d\d:\d\dZ$`))
	g.Expect(len(proxy.Answered())).To(BeNumerically(">=", 2+3))
	g.Expect(proxy.Heal()).To(Succeed())
	g.Eventually(up, timeout, poll).Should(Equal(1.0))
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
}

// A member whose readiness answer is late (kube-apiserver's checks of
// etcd under load, kcp's at a thousand logical clusters) while it answers
// everything else in time serves: it stays up while the hub's calls to it
// are answered in time, and its updates keep arriving; idle, it stays up
// too, as it answers the hub's question for its version, asked when the
// readiness answer is late. Only a member that answers nothing in time is
// marked down.
func TestLateReadinessIsNotDown(t *testing.T) {
	g := NewWithT(t)
	proxy, s, shared := sourceOnAThroughHTTPProxy(t, "late")
	up := func() float64 { return hubGauge("fleetmirror_hub_cluster_up", memA.Name) }
	failures := func() float64 { return hubGauge("fleetmirror_hub_cluster_probe_failures_total", memA.Name) }
	failedBefore := failures()
	// Later than the probe's 2s deadline: every probe fails.
	proxy.SlowPaths(5*time.Second, "/readyz")
	late := time.Now()
	for i := 2; time.Since(late) < 8*time.Second; i++ {
		v := fmt.Sprintf("v%d", i)
		change(t, hubC, s, func() { s.Data["k"] = []byte(v) })
		eventuallySecretWithin(t, memA, shared, s.Name, 5*time.Second, func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte(v)))
		})
		g.Expect(up()).To(Equal(1.0), "marked down after update %d, %s after the probes became late", i, time.Since(late).Round(time.Millisecond))
		g.Expect(status(hubC, s)()).NotTo(ContainSubstring("unreachable"))
	}
	// Not vacuous: the probes did fail meanwhile.
	g.Expect(failures()-failedBefore).To(BeNumerically(">=", 2), "late probes")

	// Idle: up all along, its probes late.
	failedBefore = failures()
	g.Consistently(up, 6*time.Second, 20*time.Millisecond).Should(Equal(1.0), "idle, marked down")
	g.Expect(failures()-failedBefore).To(BeNumerically(">=", 2), "late probes while idle")
	g.Expect(status(hubC, s)()).NotTo(ContainSubstring("unreachable"))

	// Its version late too, nothing answers in time: down, and up again
	// once the probe is answered in time.
	proxy.SlowPaths(5*time.Second, "/readyz", "/version")
	g.Eventually(up, 20*time.Second, poll).Should(Equal(0.0))
	g.Eventually(status(hubC, s), timeout, poll).Should(MatchRegexp(`member-a unreachable since \d\d:\d\d:\d\dZ$`))
	g.Expect(proxy.Heal()).To(Succeed())
	g.Eventually(up, timeout, poll).Should(Equal(1.0))
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
}

// withDefaultDeadlines runs the hub with the defaults that matter to a
// sick member for the rest of t: a 30s call deadline, probes every 10s.
func withDefaultDeadlines(t *testing.T) {
	hubAgent.stop()
	hubAgent = startHub("--api-call-timeout=30s", "--cluster-probe-interval=10s", "--cluster-probe-timeout=2s")
	t.Cleanup(func() {
		hubAgent.stop()
		hubAgent = startHub()
	})
}

// registerAThroughHTTPProxy registers member-a through an HTTPS proxy that
// answers in its API server's place when told to, for the rest of t.
func registerAThroughHTTPProxy(t *testing.T) *fleettest.HTTPFaultProxy {
	g := NewWithT(t)
	proxy, err := fleettest.NewHTTPFaultProxy(memA.Config)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	kc, err := proxy.Kubeconfig(memA.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fleettest.RegisterCAPI(context.Background(), hubC.Client, secretsNS, memA, kc)).To(Succeed())
	t.Cleanup(func() { g.Expect(registerA()).To(Succeed()) })
	return proxy
}

// sourceOnAThroughHTTPProxy registers member-a through an HTTPS fault
// proxy (healed at the end of t) and creates a source named name in the
// hub that targets a namespace there, shared, once it is mirrored.
func sourceOnAThroughHTTPProxy(t *testing.T, name string) (*fleettest.HTTPFaultProxy, *corev1.Secret, string) {
	g := NewWithT(t)
	proxy := registerAThroughHTTPProxy(t)
	src, shared := srcAndShared(t, hubC, memA)
	s := sourceSecret(src, name, "member-a/"+shared, map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	eventuallySecret(t, memA, shared, s.Name, nil)
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
	t.Cleanup(func() { _ = proxy.Heal() })
	return proxy, s, shared
}

// sourcesInBoth creates six sources in src of the hub that target shared
// in every member.
func sourcesInBoth(t *testing.T, src, shared string) []*corev1.Secret {
	g := NewWithT(t)
	var both []*corev1.Secret
	for i := range 6 {
		s := sourceSecret(src, fmt.Sprintf("both%d", i), "*/"+shared, map[string]string{"k": "v1"})
		g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
		both = append(both, s)
	}
	return both
}
