package hub_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// memberOutage is how long the hub cannot reach member-a; recoveryBudget is
// how soon after member-a answers again what changed meanwhile must land
// there.
const (
	memberOutage   = 20 * time.Second
	recoveryBudget = 5 * time.Second
)

// A member the hub cannot reach for 20s, partitioned away (connections cut
// and refused) and, separately, with its API server restarted on its etcd:
// a hub source changed meanwhile, and a namespace of the member that
// matches it, have their mirrors there within recoveryBudget of the
// member's return, with the hub's default probe settings. While the member
// is marked unreachable the hub's watches of it wait for its probe
// (clusters.TestWatchesFollowHealth shows they send nothing); marked up,
// they resume at once.
func TestMemberOutage(t *testing.T) {
	g := NewWithT(t)
	hubAgent.stop()
	hubAgent = startHub("--cluster-probe-interval=10s", "--cluster-probe-timeout=3s")
	t.Cleanup(func() {
		hubAgent.stop()
		hubAgent = startHub()
	})
	src, shared := srcAndShared(t, hubC, memA, memB)
	s := sourceSecret(src, "outage", "*/"+shared+"*", map[string]string{"k": "v0"})
	g.Expect(hubC.Client.Create(t.Context(), s)).To(Succeed())
	eventuallySecret(t, memA, shared, "outage", nil)
	eventuallySecret(t, memB, shared, "outage", nil)

	for i, outage := range []struct {
		name      string
		cut, heal func()
		// nsAfterReturn: the member's API server being gone, its new
		// namespace is created as soon as it answers again.
		nsAfterReturn bool
		// countsAttempts: the proxy in front of member-a still accepts
		// connections (and closes them, unable to reach the API server),
		// so every attempt of the hub to reach it is counted.
		countsAttempts bool
	}{
		{name: "partition", cut: partA.Cut, heal: func() { g.Expect(partA.Heal()).To(Succeed()) }},
		{
			name: "API server restarted",
			cut: func() {
				t.Cleanup(func() { _ = memA.Restart() })
				g.Expect(memA.Stop()).To(Succeed())
			},
			heal:           func() { g.Expect(memA.Restart()).To(Succeed()) },
			nsAfterReturn:  true,
			countsAttempts: true,
		},
	} {
		data, ns := fmt.Sprintf("v%d", i+1), fmt.Sprintf("%s-%d", shared, i+1)
		outage.cut()
		g.Eventually(status(hubC, s), timeout, poll).Should(ContainSubstring("member-a unreachable"), outage.name)
		down := partA.Accepted()
		change(t, hubC, s, func() { s.Data["k"] = []byte(data) })
		if !outage.nsAfterReturn {
			mkNamespaces(t, ns, memA)
		}
		time.Sleep(memberOutage) //nolint:forbidigo // the length of the fault, not a wait for a condition
		if attempts := partA.Accepted() - down; outage.countsAttempts {
			// The probe, once a second, and nothing else: no watch dials
			// a cluster marked unreachable.
			probes := int(memberOutage / clusters.DownProbeInterval)
			t.Logf("%s: %d connections to member-a while it was marked unreachable, for %d probes", outage.name, attempts, probes)
			g.Expect(attempts).To(BeNumerically("<=", probes+3), "%s: connections to member-a while it was marked unreachable", outage.name)
		}
		outage.heal()
		back := time.Now()
		if outage.nsAfterReturn {
			mkNamespaces(t, ns, memA)
		}
		for _, in := range []string{shared, ns} {
			eventuallySecretWithin(t, memA, in, "outage", recoveryBudget, func(g Gomega, m *corev1.Secret) {
				g.Expect(m.Data).To(HaveKeyWithValue("k", []byte(data)))
			})
		}
		t.Logf("%s: caught up %s after member-a answered again", outage.name, time.Since(back).Round(10*time.Millisecond))
		g.Eventually(status(hubC, s), timeout, poll).Should(Equal(fmt.Sprintf("remote: 2 clusters, %d/%d synced", i+3, i+3)))
	}
}
