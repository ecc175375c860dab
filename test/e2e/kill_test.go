package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// An agent killed with SIGKILL in the middle of writing a source's mirrors
// leaves a partial set behind; the agent started again completes it, never
// touches the object in its way that it does not own, and when the source
// goes, removes every mirror, those of the killed run included.
func TestKilledMidPropagation(t *testing.T) {
	g := NewWithT(t)
	const targets = 150
	dir, c := singleCluster(t, "fleetmirror-kill-", systemNS, "src")
	ctx := context.Background()
	for i := range targets {
		g.Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%03d", i)}})).To(Succeed())
	}
	theirs := secret("t000", "bulk")
	theirs.StringData = map[string]string{"owner": "someone else"}
	g.Expect(c.Client.Create(ctx, theirs)).To(Succeed())

	var procs []*agent
	stopAtCleanupAlive(t, &procs)
	start := func(name string) *agent {
		a, err := startAgentOn(c, filepath.Join(dir, "logs"), name, "--namespace", systemNS,
			"--max-targets", "200", "--write-parallelism", "2", "--lazy-probe-interval", lazyProbeInterval)
		g.Expect(err).NotTo(HaveOccurred())
		procs = append(procs, a)
		readyCtx, cancel := context.WithTimeout(ctx, startTimeout)
		defer cancel()
		g.Expect(a.waitReady(readyCtx)).To(Succeed())
		return a
	}
	mirrors := func() int {
		var list corev1.SecretList
		if err := c.Client.List(ctx, &list, client.MatchingLabels{annotations.LabelMirror: "true"}); err != nil {
			return -1
		}
		return len(list.Items)
	}

	first := start("first")
	src := secret("src", "bulk")
	src.ObjectMeta = sourceMeta("src", "bulk", "t*")
	src.StringData = map[string]string{"k": "v1"}
	g.Expect(c.Client.Create(ctx, src)).To(Succeed())
	g.Eventually(mirrors, timeout, poll/10).Should(BeNumerically(">", 0))
	g.Expect(syscall.Kill(-first.cmd.Process.Pid, syscall.SIGKILL)).To(Succeed())
	<-first.exited
	partial := mirrors()
	t.Logf("killed with %d of %d mirrors written", partial, targets-1)
	g.Expect(partial).To(BeNumerically("<", targets-1), "the agent finished before it was killed; the test proves nothing")

	start("second")
	g.Eventually(status(c, src), timeout, poll).Should(Equal(fmt.Sprintf("%d/%d namespaces synced; 1 conflict", targets-1, targets)))
	g.Expect(mirrors()).To(Equal(targets - 1))
	still := secret("t000", "bulk")
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(still), still)).To(Succeed())
	g.Expect(still.ResourceVersion).To(Equal(theirs.ResourceVersion), "the object in the way was written")

	g.Expect(c.Client.Delete(ctx, src)).To(Succeed())
	g.Eventually(mirrors, timeout, poll).Should(BeZero(), "mirrors left behind")
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(still), still)).To(Succeed())
	g.Expect(still.ResourceVersion).To(Equal(theirs.ResourceVersion))
}
