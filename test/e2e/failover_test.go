package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// failoverBudget is the most a takeover may take with the charts' default
// lease settings (8s lease, 1s retry period: about 10.5s at worst, and the
// new leader's caches are warm).
const failoverBudget = 15 * time.Second

// Two replicas of the member agent with leader election and the charts'
// default lease settings: when the leader is killed (kill -9, so its Lease
// is not released), the other replica takes over within failoverBudget. A
// change made right after the kill is written exactly once, and a mirror
// whose source did not change is not written at all.
func TestLeaderFailover(t *testing.T) {
	g := NewWithT(t)
	dir, c := singleCluster(t, "fleetmirror-failover-", systemNS, "src", "dst")
	ctx := context.Background()

	var procs []*agent
	stopAtCleanupAlive(t, &procs)
	for i := range 2 {
		a, err := startAgentOn(c, filepath.Join(dir, "logs"), fmt.Sprintf("replica-%d", i),
			"--namespace", systemNS, "--leader-elect", "--lazy-probe-interval", lazyProbeInterval)
		g.Expect(err).NotTo(HaveOccurred())
		procs = append(procs, a)
	}
	readyCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for _, a := range procs {
		g.Expect(a.waitReady(readyCtx)).To(Succeed())
	}

	changing := secret("src", "changing")
	steady := secret("src", "steady")
	for _, s := range []*corev1.Secret{changing, steady} {
		s.ObjectMeta = sourceMeta("src", s.Name, "dst")
		s.StringData = map[string]string{"k": "v1"}
		g.Expect(c.Client.Create(ctx, s)).To(Succeed())
	}
	mirrors := map[string]*corev1.Secret{}
	for _, name := range []string{"changing", "steady"} {
		m := secret("dst", name)
		eventuallyExists(t, c, m, nil)
		mirrors[name] = m
	}

	var leader *agent
	g.Eventually(func() *agent {
		leader = nil
		for _, a := range procs {
			if families, err := a.scrape(); err == nil && sample(families, "leader_election_master_status") == 1 {
				leader = a
			}
		}
		return leader
	}, timeout, poll).ShouldNot(BeNil(), "no replica leads")

	// Watch the mirrors from their current versions: every write shows.
	wc, err := client.NewWithWatch(c.Config, client.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &corev1.SecretList{}, client.InNamespace("dst"),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: mirrors["steady"].ResourceVersion}})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var mu sync.Mutex
	writes := map[string]int{}
	go func() {
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*corev1.Secret); ok && ev.Type != watch.Bookmark && s.ResourceVersion != mirrors[s.Name].ResourceVersion {
				mu.Lock()
				writes[s.Name]++
				mu.Unlock()
			}
		}
	}()
	writesSeen := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(writes)
	}

	g.Expect(syscall.Kill(-leader.cmd.Process.Pid, syscall.SIGKILL)).To(Succeed())
	killed := time.Now()
	change(t, c, changing, func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	g.Eventually(func() string {
		m := secret("dst", "changing")
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err.Error()
		}
		return string(m.Data["k"])
	}, failoverBudget, poll).Should(Equal("v2"), "the change did not land within %s of the leader's death", failoverBudget)
	t.Logf("takeover: the change landed %s after the leader was killed", time.Since(killed).Round(10*time.Millisecond))

	// The new leader has swept every source (the steady one found
	// current) and has nothing left to do: nothing else was written.
	for _, a := range procs {
		if a != leader {
			g.Eventually(func(g Gomega) {
				families, err := a.scrape()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(sample(families, "fleetmirror_sync_operations_total", "result", "unchanged")).To(BeNumerically(">=", 1))
				g.Expect(sample(families, "workqueue_depth", "name", "member")).To(BeZero())
			}, timeout, poll).Should(Succeed())
		}
	}
	g.Eventually(writesSeen, timeout, poll).Should(HaveKey("changing"))
	g.Expect(writesSeen()).To(Equal(map[string]int{"changing": 1}), "mirror writes after the takeover")
}

// startAgentOn starts the member binary against cluster c of another fleet
// than the suite's, under name.
func startAgentOn(c *fleettest.Cluster, logDir, name string, extra ...string) (*agent, error) {
	a, err := newAgentAt(name, filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig", c.KubeconfigPath, "--cluster-name", c.Name,
		"--metrics-bind-address", a.metricsAddr, "--health-probe-bind-address", a.probeAddr}, extra...)
	return a, startProcess(a, memberBin, args...)
}

// singleCluster starts an API server of its own for one test, with the
// namespaces given, and returns the test's work directory (kept when the
// test fails) and the cluster.
func singleCluster(t *testing.T, pattern string, namespaces ...string) (string, *fleettest.Cluster) {
	t.Helper()
	g := NewWithT(t)
	dir := keepDirOnFailure(t, pattern)
	f, err := fleettest.Start(dir)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(f.Stop()).To(Succeed()) })
	for _, ns := range namespaces {
		g.Expect(f.Hub.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	return dir, f.Hub
}

// stopAtCleanupAlive stops the processes still running when the test ends;
// one that was killed on purpose is not an error.
func stopAtCleanupAlive(t *testing.T, procs *[]*agent) {
	t.Cleanup(func() {
		for _, p := range *procs {
			select {
			case <-p.exited:
				continue
			default:
			}
			if err := p.stop(); err != nil {
				t.Errorf("%s: %v", p.name, err)
			}
		}
	})
}
