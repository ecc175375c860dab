package member_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// ownOutage is how long the agent cannot reach its own API server: long
// enough for client-go's reflectors to wait more than recoveryBudget
// between two attempts to reconnect.
const ownOutage = 20 * time.Second

// recoveryBudget is how soon after its API server is back a change made
// during the outage must reach the mirrors.
const recoveryBudget = 5 * time.Second

// When the agent cannot reach its own API server, it says so
// (fleetmirror_cluster_up 0); changes made meanwhile reach the mirrors
// within seconds of its return, and recovering, the agent does not
// conflict with itself.
func TestOwnAPIServerOutage(t *testing.T) {
	g := NewWithT(t)
	u, err := url.Parse(fleet.Hub.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	proxy, err := fleettest.NewFaultProxy(u.Host)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	agentHost = "https://" + proxy.Addr()
	withAgent(t)
	agentHost = "" // the agents of the cleanups and the next tests connect directly

	ns := namespaces(t, "outage", nil, "src", "a")
	src := sourceSecret(ns[0], "cfg", ns[1], map[string]string{"k": "v1"})
	create(t, src)
	g.Eventually(status(src), timeout, poll).Should(Equal("1/1 namespaces synced"))
	upGauge := func() float64 { v, _ := gaugeWith("fleetmirror_cluster_up", "cluster", clusterName); return v }
	g.Eventually(upGauge, timeout, poll).Should(Equal(1.0))

	proxy.Cut()
	t.Cleanup(func() { _ = proxy.Heal() })
	g.Eventually(upGauge, timeout, poll).Should(BeZero())
	change(t, src, func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	time.Sleep(ownOutage) //nolint:forbidigo // the length of the fault, not a wait for a condition
	g.Expect(proxy.Heal()).To(Succeed())

	back := time.Now()
	g.Eventually(func() string {
		m := &corev1.Secret{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns[1], Name: "cfg"}, m); err != nil {
			return err.Error()
		}
		return string(m.Data["k"])
	}, recoveryBudget, poll).Should(Equal("v2"), "the change did not reach the mirror within %s of the API server's return", recoveryBudget)
	t.Logf("the change reached the mirror %s after the API server was back", time.Since(back).Round(10*time.Millisecond))
	g.Eventually(upGauge, timeout, poll).Should(Equal(1.0))
	g.Eventually(status(src), timeout, poll).Should(Equal("1/1 namespaces synced"))

	// Recovering, the agent did not conflict with itself on the source.
	for _, r := range agent.requests.detailed() {
		if r.Method == http.MethodPatch && r.Status == http.StatusConflict && strings.Contains(r.URL.Path, "/namespaces/"+ns[0]+"/secrets/") {
			t.Errorf("409 on the agent's own write: PATCH %s", r.URL.Path)
		}
	}
}
