package member_test

import (
	"context"
	"fmt"
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

// ownOutage is how long the agent cannot reach its own API server: longer
// than the leader election's renew deadline (6s, the charts'), and long
// enough for watches on a back-off of their own to wait far more than
// recoveryBudget between two attempts to reconnect.
const ownOutage = 20 * time.Second

// recoveryBudget is how soon after its API server answers again a change
// made during the outage, and a namespace that appeared meanwhile, must
// have reached the mirrors.
const recoveryBudget = 5 * time.Second

// watchesPerAgent is how many watches the test agent keeps: namespaces,
// and the sources, mirrors and pull mirrors of Secrets and ConfigMaps. A
// return costs at most one list per watch, and only when the API server
// can no longer resume it (a restarted API server's new watch cache).
const watchesPerAgent = 7

// straggler is how long after the cluster was seen marked down a watch may
// still dial once: one that checked the cluster's health just before the
// mark. The back-off this test guards against dials again and again
// through the whole outage.
const straggler = time.Second

// When the agent cannot reach its own API server, it says so
// (fleetmirror_cluster_up 0) and asks it nothing but its probe. A source
// changed and a matching namespace created while it was away reach the
// mirrors within recoveryBudget of its return, in both kinds of outage: a
// partition (connections cut, new ones refused) and the API server process
// stopped and started again on its etcd. The agent runs with leader
// election on, as the charts run it: it loses its Lease during the outage
// and leads again in the same process. Recovering, it neither conflicts
// with itself nor lists everything again.
//
// Before watches followed the cluster's health, the namespace watch kept
// its own back-off and noticed a new namespace up to 25s late, and a
// leader that lost its Lease exited: this test then failed on the
// namespace, where the earlier one, which created none and had no leader
// election, passed.
func TestOwnAPIServerOutage(t *testing.T) {
	g := NewWithT(t)
	u, err := url.Parse(fleet.Hub.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	proxy, err := fleettest.NewFaultProxy(u.Host)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(proxy.Close)
	ns := namespaces(t, "outage", nil, "src", "a0")
	prefix := strings.TrimSuffix(ns[1], "0")
	agentHost = "https://" + proxy.Addr()
	withAgent(t, "--leader-elect", "--leader-election-namespace="+agentNS, "--leader-election-id=fm-"+ns[0])
	agentHost = "" // the agents of the cleanups and the next tests connect directly

	src := sourceSecret(ns[0], "cfg", prefix+"*", map[string]string{"k": "v0"})
	create(t, src)
	g.Eventually(status(src), timeout, poll).Should(Equal("1/1 namespaces synced"))
	upGauge := func() float64 { v, _ := gaugeWith("fleetmirror_cluster_up", "cluster", clusterName); return v }
	g.Eventually(upGauge, timeout, poll).Should(Equal(1.0))

	// landed reports whether every mirror has the source's data k and
	// the namespaces up to prefix+n have theirs.
	landed := func(k string, n int) func() error {
		return func() error {
			for i := 0; i <= n; i++ {
				m := &corev1.Secret{}
				if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: fmt.Sprintf("%s%d", prefix, i), Name: "cfg"}, m); err != nil {
					return err
				}
				if got := string(m.Data["k"]); got != k {
					return fmt.Errorf("mirror in %s has %q, want %q", m.Namespace, got, k)
				}
			}
			return nil
		}
	}

	for i, outage := range []struct {
		name string
		// cut makes the API server unreachable; heal makes it answer
		// again and returns once it does.
		cut, heal func()
		// changesAfterReturn: the API server being gone, nobody can change
		// anything meanwhile; the changes are made as soon as it answers,
		// before the agent's next probe.
		changesAfterReturn bool
	}{
		{name: "partition", cut: proxy.Cut, heal: func() { g.Expect(proxy.Heal()).To(Succeed()) }},
		{
			name: "API server restarted",
			cut: func() {
				t.Cleanup(func() { _ = fleet.Hub.Restart() })
				g.Expect(fleet.Hub.Stop()).To(Succeed())
			},
			heal:               func() { g.Expect(fleet.Hub.Restart()).To(Succeed()) },
			changesAfterReturn: true,
		},
	} {
		n := i + 1
		data := fmt.Sprintf("v%d", n)
		changes := func() {
			change(t, src, func(s *corev1.Secret) { s.Data["k"] = []byte(data) })
			createNamespace(t, fmt.Sprintf("%s%d", prefix, n), nil)
		}

		outage.cut()
		g.Eventually(upGauge, timeout, poll).Should(BeZero(), "%s: the agent did not notice", outage.name)
		down := time.Now() // the agent has marked its cluster down
		if !outage.changesAfterReturn {
			changes()
		}
		time.Sleep(ownOutage) //nolint:forbidigo // the length of the fault, not a wait for a condition
		outage.heal()
		back := time.Now()
		if outage.changesAfterReturn {
			changes()
		}

		g.Eventually(landed(data, n), recoveryBudget, poll).Should(Succeed(),
			"%s: the change and the new namespace did not reach the mirrors within %s of the API server's return", outage.name, recoveryBudget)
		t.Logf("%s: caught up %s after the API server answered again", outage.name, time.Since(back).Round(10*time.Millisecond))
		g.Eventually(upGauge, timeout, poll).Should(Equal(1.0))
		g.Eventually(status(src), timeout, poll).Should(Equal(fmt.Sprintf("%d/%d namespaces synced", n+1, n+1)))

		// answered is when the agent could first know its API server was
		// back: the first of its probes after the mark that was answered.
		// That can be before heal returned: a restarted API server is
		// ready before envtest's own readiness poll notices.
		requests := agent.requests.detailed()
		answered := back
		for _, r := range requests {
			if r.URL.Path == "/readyz" && r.Status == http.StatusOK && r.Sent.After(down) && r.Sent.Before(answered) {
				answered = r.Sent
			}
		}
		t.Logf("%s: the agent's probe was answered %s before the heal returned", outage.name, back.Sub(answered).Round(10*time.Millisecond))
		var watchesWhileDown, lists []string
		for _, r := range requests {
			switch {
			case r.Sent.Before(down.Add(straggler)):
			case r.Sent.Before(answered):
				if r.URL.Query().Get("watch") == "true" {
					watchesWhileDown = append(watchesWhileDown, fmt.Sprintf("%s after the mark, %s before the answer: %s", r.Sent.Sub(down).Round(10*time.Millisecond), answered.Sub(r.Sent).Round(10*time.Millisecond), r.URL.RequestURI()))
				}
			case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "" && isCollection(r.URL.Path):
				lists = append(lists, r.URL.RequestURI())
			}
		}
		t.Logf("%s: %d lists after the return", outage.name, len(lists))
		g.Expect(watchesWhileDown).To(BeEmpty(), "%s: watches opened while the cluster was marked down", outage.name)
		g.Expect(len(lists)).To(BeNumerically("<=", watchesPerAgent), "%s: lists after the return: %v", outage.name, lists)
	}

	select {
	case err := <-agent.done:
		t.Fatalf("the agent stopped: %v", err)
	default:
	}
	// Recovering, the agent did not conflict with itself on any object of
	// this test. Events are not among them: the recorder (as client-go's) sends an
	// Event again when its first POST got no answer, and one that the
	// API server stored before it stopped is answered 409 AlreadyExists,
	// which ends the recorder's retries (seen once in make test).
	for _, r := range agent.requests.detailed() {
		if strings.HasSuffix(r.URL.Path, "/events") {
			continue
		}
		if r.Status == http.StatusConflict && strings.Contains(r.URL.Path, "/namespaces/"+strings.TrimSuffix(ns[0], "src")) {
			t.Errorf("409 on the agent's own write: %s %s", r.Method, r.URL.Path)
		}
	}
}

// isCollection reports whether path is a LIST's: of Secrets, ConfigMaps or
// Namespaces, in one namespace or all.
func isCollection(path string) bool {
	for _, suffix := range []string{"/secrets", "/configmaps", "/api/v1/namespaces"} {
		if strings.HasSuffix(path, suffix) {
			return true
		}
	}
	return false
}
