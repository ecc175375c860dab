package member_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// An agent whose Lease is taken by another holder stops leading but keeps
// running, its watches with it: it never takes the Lease back while the
// other holder renews it, and takes it, and mirrors again, once the holder
// stops renewing.
func TestLeadershipLost(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "lost", nil, "lease", "src", "dst")
	withAgent(t,
		"--leader-elect", "--leader-election-namespace="+ns[0], "--leader-election-id=fm-lost-test",
		"--leader-election-lease-duration=2s", "--leader-election-renew-deadline=1500ms", "--leader-election-retry-period=200ms",
	)
	leading := func() float64 { v, _ := gaugeWith("leader_election_master_status", "name", "fm-lost-test"); return v }

	key := client.ObjectKey{Namespace: ns[0], Name: "fm-lost-test"}
	holder := func() string {
		lease := &coordinationv1.Lease{}
		if err := k8s.Get(t.Context(), key, lease); err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	g.Eventually(holder, timeout, poll).ShouldNot(BeEmpty())
	ours := holder()
	g.Eventually(leading, timeout, poll).Should(Equal(1.0))

	// The intruder takes the Lease and renews it every 300ms.
	renew := func() error {
		lease := &coordinationv1.Lease{}
		if err := k8s.Get(t.Context(), key, lease); err != nil {
			return err
		}
		now := metav1.NowMicro()
		lease.Spec.HolderIdentity, lease.Spec.RenewTime = ptr.To("intruder"), &now
		return k8s.Update(t.Context(), lease)
	}
	g.Eventually(renew, timeout, poll).Should(Succeed())
	renewing, stopRenewing := context.WithCancel(t.Context())
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			select {
			case <-renewing.Done():
				return
			case <-time.After(300 * time.Millisecond):
				_ = renew() // a conflict with the agent's try is retried at the next tick
			}
		}
	}()
	t.Cleanup(func() { stopRenewing(); <-renewed })
	g.Eventually(leading, timeout, poll).Should(BeZero(), "still leading")
	// Not leading, it writes nothing: a source made now waits.
	src := sourceSecret(ns[1], "cfg", ns[2], map[string]string{"k": "v"})
	create(t, src)
	g.Consistently(holder, 4*time.Second, poll).Should(Equal("intruder"), "the Lease was taken back while its holder renewed it")
	g.Expect(secretsIn("cfg", ns[2])).To(BeEmpty(), "a replica that does not lead wrote a mirror")
	select {
	case err := <-agent.done:
		t.Fatalf("the agent stopped: %v", err)
	default:
	}

	stopRenewing()
	<-renewed
	g.Eventually(holder, timeout, poll).Should(Equal(ours), "the Lease was not taken once its holder stopped")
	g.Eventually(leading, timeout, poll).Should(Equal(1.0))
	eventuallySecret(t, ns[2], "cfg", nil)
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
