package cluster_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// upgradeFrom is the earlier release the upgrade starts from: the commit
// main was at before the product first ran on a node. Its charts and its
// code are built here from a git worktree, with the image recipe of today's
// Dockerfile (that commit's base image cannot be fetched here).
const upgradeFrom = "cef27c9efbac5c71d436439bd7ab919ddef3d544"

// TestUpgrade installs the earlier release, lets it mirror, and upgrades to
// this tree's charts and image: the new Pod takes over through leader
// election, with no mirror written or deleted and none missing at any
// moment. Then helm rollback goes back, and the old release mirrors again.
func TestUpgrade(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	const ns = "fm-upgrade"
	old := oldRelease(t)

	release(t, memberRelease, ns, filepath.Join(old, memberChart), imageValues(env.imageRepo, "old")...)
	targets := []string{"fmup-a", "fmup-b", "fmup-c"}
	namespace(t, cs, "fmup-src", nil)
	for _, n := range targets {
		namespace(t, cs, n, nil)
	}
	for _, name := range []string{"one", "two", "three"} {
		source(t, cs, "fmup-src", name, "fmup-*", name+"-v1")
		mirrored(t, cs, name, name+"-v1", time.Minute, targets...)
	}
	oldPods := agentPods(t, cs, ns, memberRelease)
	Expect(oldPods).To(HaveLen(1))
	Eventually(func() string { return leaseHolder(t, cs, ns) }).WithTimeout(time.Minute).Should(HavePrefix(oldPods[0]))
	agent := serviceAccount(ns, memberRelease)

	// Helm upgrades no CRD (nor creates one on upgrade): the chart's crds/
	// go first, as charts/member/README.md says (an earlier install's Helm
	// may own the CRD's fields: --force-conflicts).
	kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", memberChart+"/crds/")
	mark := markAudit(t)
	stop := deletions(t, cs, targets...)
	install(t, memberRelease, ns, memberChart, imageValues(env.imageRepo, env.imageTag)...)
	var newPod string
	Eventually(func(g Gomega) {
		pods := agentPods(t, cs, ns, memberRelease)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0]).NotTo(Equal(oldPods[0]))
		newPod = pods[0]
		g.Expect(leaseHolder(t, cs, ns)).To(HavePrefix(newPod))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	// The new leader has reconciled every source once it counts them all.
	Eventually(func() int { return reconciled(t, ns) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 3))
	Expect(writes(t, mark, agent, "secrets", targets...)).To(BeEmpty(), "the upgrade rewrote mirrors")
	Expect(stop()).To(BeEmpty(), "mirrors went missing during the upgrade")
	for _, name := range []string{"one", "two", "three"} {
		mirrored(t, cs, name, name+"-v1", time.Second, targets...)
	}
	setValue(t, cs, "fmup-src", "one", "one-v2")
	mirrored(t, cs, "one", "one-v2", time.Minute, targets...)

	t.Run("rollback", func(t *testing.T) {
		RegisterTestingT(t)
		helm(t, "rollback", memberRelease, "1", "--namespace", ns, "--wait", "--timeout", "3m")
		Eventually(func(g Gomega) {
			pods := agentPods(t, cs, ns, memberRelease)
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0]).NotTo(Equal(newPod))
			g.Expect(leaseHolder(t, cs, ns)).To(HavePrefix(pods[0]))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
		setValue(t, cs, "fmup-src", "two", "two-v2")
		mirrored(t, cs, "two", "two-v2", time.Minute, targets...)
		mirrored(t, cs, "one", "one-v2", time.Second, targets...)
		// Back to this tree's release, whose uninstall cleans up.
		install(t, memberRelease, ns, memberChart, imageValues(env.imageRepo, env.imageTag)...)
		helm(t, "uninstall", memberRelease, "--namespace", ns, "--wait", "--timeout", "5m")
		Expect(fleetmirrorFinalizers(t, cs)).To(BeEmpty())
	})
}

// oldRelease checks out upgradeFrom in a worktree, builds its image as
// <image repository>:old and imports it into the node; it returns the
// worktree (its charts are the old release's).
func oldRelease(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "old")
	command(t, "git", "worktree", "add", "--detach", dir, upgradeFrom)
	t.Cleanup(func() { _, _ = tryCommand("git", "worktree", "remove", "--force", dir) })
	archive := filepath.Join(t.TempDir(), "old.tar")
	command(t, "go", "run", "./hack/image", "-src", dir, "-tag", env.imageRepo+":old",
		"-version", "old-"+upgradeFrom[:7], "-revision", upgradeFrom, "-o", archive)
	command(t, "ctr", "--address", env.sock, "-n", "k8s.io", "images", "import", archive)
	if _, err := os.Stat(filepath.Join(dir, memberChart, "Chart.yaml")); err != nil {
		t.Fatal(err)
	}
	return dir
}

var reconcileTotal = regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{[^}]*result="success"[^}]*\} ([0-9]+)`)

// reconciled is the number of successful reconciles the release's agent
// reports through its metrics Service.
func reconciled(t testing.TB, ns string) int {
	t.Helper()
	out, err := tryCommand(env.kubectl, "get", "--raw", "/api/v1/namespaces/"+ns+"/services/"+memberRelease+"-metrics:metrics/proxy/metrics")
	if err != nil {
		return 0
	}
	n := 0
	for _, m := range reconcileTotal.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}
