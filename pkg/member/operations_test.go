package member_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Item 14 (and the flags of items 12 and 13): an agent with leader election,
// fixed probe address, no status annotation and source verification.
// /healthz and /readyz answer 200 once it runs, it holds a Lease in the
// namespace named by flag, it mirrors without writing a status, it reads
// sources from the API server before writing, and cancelling its context
// makes Run return promptly and release the Lease.
func TestOperations(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "ops", nil, "src", "a", "lease")
	port := freePort(t)
	stopAgent(t) // the default agent comes back at cleanup
	custom := startAgent(
		"--health-probe-bind-address=127.0.0.1:"+port,
		"--leader-elect", "--leader-election-namespace="+ns[2], "--leader-election-id=fm-ops-test",
		"--status-annotation=false",
		"--verify-source-freshness",
	)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			pastLogs = append(pastLogs, custom.requests)
			custom.stop()
		}
	})

	probe := func(path string) func() int {
		return func() int {
			resp, err := http.Get("http://127.0.0.1:" + port + path)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
	}
	g.Eventually(probe("/healthz"), timeout, poll).Should(Equal(http.StatusOK))
	g.Eventually(probe("/readyz"), timeout, poll).Should(Equal(http.StatusOK))

	lease := &coordinationv1.Lease{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(t.Context(), client.ObjectKey{Namespace: ns[2], Name: "fm-ops-test"}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())))
	}, timeout, poll).Should(Succeed())

	s := sourceSecret(ns[0], "ops", ns[1], map[string]string{"k": "v"})
	create(t, s)
	eventuallySecret(t, ns[1], "ops", nil)
	g.Consistently(status(s), settle, poll).Should(BeEmpty(), "--status-annotation=false writes no status")

	// --verify-source-freshness: the source was read whole from the API
	// server (not only its metadata).
	var fullReads int
	for _, r := range custom.requests.detailed() {
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/"+ns[0]+"/secrets/ops" &&
			!strings.Contains(r.Accept, "PartialObjectMetadata") {
			fullReads++
		}
	}
	g.Expect(fullReads).To(BeNumerically(">", 0), "the source is read from the API server before writing")

	// Graceful shutdown.
	custom.cancel()
	select {
	case err := <-custom.done:
		g.Expect(err).NotTo(HaveOccurred())
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of cancelling its context")
	}
	stopped = true
	pastLogs = append(pastLogs, custom.requests)
	g.Eventually(func() string {
		_ = k8s.Get(t.Context(), client.ObjectKey{Namespace: ns[2], Name: "fm-ops-test"}, lease)
		if lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}, timeout, poll).Should(BeEmpty(), "the Lease is released on shutdown")
	g.Expect(probe("/healthz")()).To(Equal(0), "the probe server is closed")

	// The mirror stays; mirrors are not cleaned up on shutdown.
	g.Expect(secretsIn("ops", ns[1])).To(Equal([]string{ns[1]}))
}

// An agent whose Lease is taken by another holder stops leading and Run
// returns an error that says so: the process exits and comes back as a
// candidate, as with controller-runtime's manager. It does not write the
// Lease back: the other holder keeps it.
func TestLeadershipLost(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "lost", nil, "lease")
	stopAgent(t) // the default agent comes back at cleanup
	a := startAgent(
		"--leader-elect", "--leader-election-namespace="+ns[0], "--leader-election-id=fm-lost-test",
		"--leader-election-lease-duration=2s", "--leader-election-renew-deadline=1500ms", "--leader-election-retry-period=200ms",
	)
	returned := false
	t.Cleanup(func() {
		pastLogs = append(pastLogs, a.requests)
		if !returned {
			a.stop()
		}
	})

	key := client.ObjectKey{Namespace: ns[0], Name: "fm-lost-test"}
	lease := &coordinationv1.Lease{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(t.Context(), key, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())))
	}, timeout, poll).Should(Succeed())

	g.Eventually(func() error {
		if err := k8s.Get(t.Context(), key, lease); err != nil {
			return err
		}
		lease.Spec.HolderIdentity = ptr.To("intruder")
		return k8s.Update(t.Context(), lease)
	}, timeout, poll).Should(Succeed())

	select {
	case err := <-a.done:
		returned = true
		g.Expect(err).To(MatchError(ContainSubstring("leadership lost")))
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of losing its Lease")
	}
	g.Expect(k8s.Get(t.Context(), key, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal("intruder")), "the Lease was written back")
}

// An endpoint whose address is taken fails the start, naming it.
func TestEndpointAddressTaken(t *testing.T) {
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer ln.Close()
	a := startAgent("--metrics-bind-address=" + ln.Addr().String())
	select {
	case err := <-a.done:
		g.Expect(err).To(MatchError(ContainSubstring("serving metrics on " + ln.Addr().String())))
	case <-time.After(15 * time.Second):
		a.stop()
		t.Fatal("Run did not fail within 15s")
	}
}
