package cluster_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// upgradeFrom is the release the upgrade starts from: main before issue 37,
// whose member chart installed the MirrorPolicy CRD from its crds/ and
// whose agents held finalizers on sources and policies. Its charts and its
// code are built here from a git worktree, with the image recipe of
// today's Dockerfile (that commit's base image cannot be fetched here).
// test/charts keeps a copy of its charts' values.yaml for its
// --reuse-values tests (testdata/previous-release), checked here.
const upgradeFrom = "c138e63ff25a6b3896219684c2da6e55f1dcf98b"

// upgradeValues are the values the user installed the earlier release
// with, besides the image.
var upgradeValues = []string{"--set", "config.log.level=debug", "--set", "config.resyncPeriod=5m"}

// TestUpgrade upgrades the earlier release, mirroring annotated sources
// and a MirrorPolicy, to this tree's chart and image as users run it, as
// charts/member/README.md says ("Upgrading"): once with plain helm upgrade
// and the user's values, once with --reuse-values. Each time the new Pod
// takes over through leader election, with no mirror written or deleted
// and none missing at any moment; the CRD the earlier chart's crds/
// created is the release's now (never deleted: same UID, the policy still
// served); the release's objects are a fresh install's with the same
// values; and no fleetmirror.io/ finalizer is left. After the first, helm
// rollback goes back, and the old release mirrors again.
func TestUpgrade(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	old := oldRelease(t)
	for _, chart := range []string{"member", "hub"} {
		previous, err := os.ReadFile(filepath.Join(old, "charts", chart, "values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		copied, err := os.ReadFile(filepath.Join(env.root, "test", "charts", "testdata", "previous-release", chart+"-values.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(bytes.Equal(copied, previous)).To(BeTrue(),
			"test/charts/testdata/previous-release/%s-values.yaml is not charts/%s/values.yaml of %s: copy it again", chart, chart, upgradeFrom)
	}

	t.Run("helm upgrade", func(t *testing.T) {
		RegisterTestingT(t)
		u := startUpgrade(t, cs, old, "fm-upgrade", "fmup")
		// Once, from a release whose chart installed the CRD from crds/:
		// the README's two commands hand the CRD over to the release.
		handOverCRD(t, memberRelease, u.ns)
		helm(t, slices.Concat([]string{"upgrade", memberRelease, memberChart, "--namespace", u.ns, "--wait", "--timeout", "3m"},
			imageValues(env.imageRepo, env.imageTag), upgradeValues)...)
		u.check(t)

		t.Run("rollback", func(t *testing.T) {
			RegisterTestingT(t)
			helm(t, "rollback", memberRelease, "1", "--namespace", u.ns, "--wait", "--timeout", "3m")
			Eventually(func(g Gomega) {
				pods := agentPods(t, cs, u.ns, memberRelease)
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0]).NotTo(Equal(u.newPod))
				g.Expect(leaseHolder(t, cs, u.ns)).To(HavePrefix(pods[0]))
			}).WithTimeout(2 * time.Minute).Should(Succeed())
			// The earlier chart has no CRD among its templates: Helm keeps
			// it (crds.keep), and with it the policy.
			Expect(crdUID(t)).To(Equal(u.crd))
			setValue(t, cs, u.src, "two", "two-v2")
			mirrored(t, cs, "two", "two-v2", time.Minute, u.targets...)
			mirrored(t, cs, "one", "one-v2", time.Second, u.targets...)
			setValue(t, cs, u.policyNS, "owned", "owned-v2")
			mirrored(t, cs, "owned", "owned-v2", time.Minute, u.policyTarget)
			// Back to this tree's release.
			helm(t, slices.Concat([]string{"upgrade", memberRelease, memberChart, "--namespace", u.ns, "--wait", "--timeout", "3m"},
				imageValues(env.imageRepo, env.imageTag), upgradeValues)...)
		})
		u.finish(t)
	})

	t.Run("helm upgrade --reuse-values", func(t *testing.T) {
		RegisterTestingT(t)
		u := startUpgrade(t, cs, old, "fm-upgrade-reuse", "fmur")
		// Helm 3.17 and later take the CRD over in the upgrade itself.
		helm(t, "upgrade", memberRelease, memberChart, "--namespace", u.ns, "--reuse-values", "--take-ownership",
			"--set", "image.tag="+env.imageTag, "--wait", "--timeout", "3m")
		u.check(t)
		u.finish(t)
	})
}

// upgrade is one upgrade of TestUpgrade under way.
type upgrade struct {
	cs                    kubernetes.Interface
	ns                    string   // the release's
	src, policyNS         string   // the annotated sources', the policy's and its source's
	targets               []string // the annotated sources'
	policyTarget          string
	crd                   string // the CRD's UID
	oldPod, newPod        string
	mark                  auditMark
	stopWatchingDeletions func() []string
}

// startUpgrade installs the earlier release from old in ns on a node
// where that release's chart creates the CRD (as it did where no earlier
// release was installed), mirrors three annotated Secrets and one named
// by a MirrorPolicy, all in namespaces named after prefix, and starts
// counting the mirrors' writes and deletions.
func startUpgrade(t *testing.T, cs kubernetes.Interface, old, ns, prefix string) *upgrade {
	t.Helper()
	u := &upgrade{cs: cs, ns: ns, src: prefix + "-src", policyNS: prefix + "-pol", policyTarget: prefix + "-p",
		targets: []string{prefix + "-a", prefix + "-b", prefix + "-c"}}
	deleteCRD(t)
	release(t, memberRelease, ns, filepath.Join(old, memberChart), slices.Concat(imageValues(env.imageRepo, "old"), upgradeValues)...)
	Expect(crdExists(t)).To(BeTrue(), "the earlier chart did not create the CRD")
	u.crd = crdUID(t)
	for _, n := range slices.Concat([]string{u.src, u.policyNS, u.policyTarget}, u.targets) {
		namespace(t, cs, n, nil)
	}
	for _, name := range []string{"one", "two", "three"} {
		source(t, cs, u.src, name, strings.Join(u.targets, ", "), name+"-v1")
		mirrored(t, cs, name, name+"-v1", time.Minute, u.targets...)
	}
	// A policy's source carries none of our keys.
	kubectl(t, "-n", u.policyNS, "create", "secret", "generic", "owned", "--from-literal=value=owned-v1")
	out, err := applyStdin(fmt.Sprintf(`apiVersion: fleetmirror.io/v1alpha1
kind: MirrorPolicy
metadata: {namespace: %s, name: share}
spec:
  source: {apiVersion: v1, kind: Secret, names: [owned]}
  targetNamespaces: [%s]
`, u.policyNS, u.policyTarget))
	Expect(err).NotTo(HaveOccurred(), out)
	mirrored(t, cs, "owned", "owned-v1", time.Minute, u.policyTarget)
	oldPods := agentPods(t, cs, ns, memberRelease)
	Expect(oldPods).To(HaveLen(1))
	u.oldPod = oldPods[0]
	Eventually(func() string { return leaseHolder(t, cs, ns) }).WithTimeout(time.Minute).Should(HavePrefix(u.oldPod))
	u.mark = markAudit(t)
	u.stopWatchingDeletions = deletions(t, cs, append(u.targets, u.policyTarget)...)
	return u
}

// check checks the release once upgraded: see TestUpgrade.
func (u *upgrade) check(t *testing.T) {
	t.Helper()
	Eventually(func(g Gomega) {
		pods := agentPods(t, u.cs, u.ns, memberRelease)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0]).NotTo(Equal(u.oldPod))
		u.newPod = pods[0]
		g.Expect(leaseHolder(t, u.cs, u.ns)).To(HavePrefix(u.newPod))
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	// The new leader has reconciled every source once it counts them all.
	Eventually(func() int { return reconciled(t, u.ns) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 3))
	agent := serviceAccount(u.ns, memberRelease)
	Expect(writes(t, u.mark, agent, "secrets", append(u.targets, u.policyTarget)...)).To(BeEmpty(), "the upgrade rewrote mirrors")
	Expect(u.stopWatchingDeletions()).To(BeEmpty(), "mirrors went missing during the upgrade")
	for _, name := range []string{"one", "two", "three"} {
		mirrored(t, u.cs, name, name+"-v1", time.Second, u.targets...)
	}
	mirrored(t, u.cs, "owned", "owned-v1", time.Second, u.policyTarget)

	// The same CRD, the release's now, and kept when the release goes.
	Expect(crdUID(t)).To(Equal(u.crd), "the upgrade deleted the CRD, and every MirrorPolicy with it")
	Expect(kubectl(t, "get", policyCRD, "-o", `jsonpath={.metadata.annotations.meta\.helm\.sh/release-name}/{.metadata.annotations.meta\.helm\.sh/release-namespace} {.metadata.annotations.helm\.sh/resource-policy}`)).
		To(Equal(memberRelease + "/" + u.ns + " keep"))
	if diff := cmp.Diff(freshInstall(t, u.ns), releaseObjects(t, u.ns)); diff != "" {
		t.Errorf("the upgraded release differs from a fresh install with the same values (-fresh +upgraded):\n%s", diff)
	}
	// Every object of the release exists.
	manifest := helm(t, "get", "manifest", memberRelease, "--namespace", u.ns)
	cmd := commandOf(env.kubectl, "get", "-f", "-", "-o", "name")
	cmd.Stdin = bytes.NewBufferString(manifest)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)

	// The changes after the upgrade are mirrored.
	setValue(t, u.cs, u.src, "one", "one-v2")
	mirrored(t, u.cs, "one", "one-v2", time.Minute, u.targets...)

	t.Run("no finalizer left", func(t *testing.T) {
		RegisterTestingT(t)
		// This tree's agents hold none and take off those the earlier
		// release put on sources and policies.
		Eventually(func() []string {
			return append(fleetmirrorFinalizers(t, u.cs), policyFinalizers(t)...)
		}).WithTimeout(time.Minute).Should(BeEmpty())
	})
}

// finish deletes the policy and uninstalls the release, which keeps the
// CRD.
func (u *upgrade) finish(t *testing.T) {
	t.Helper()
	kubectl(t, "-n", u.policyNS, "delete", "mirrorpolicy", "share", "--timeout=60s")
	gone(t, u.cs, u.policyTarget, "owned", time.Minute)
	helm(t, "uninstall", memberRelease, "--namespace", u.ns, "--wait", "--timeout", "5m")
	Expect(fleetmirrorFinalizers(t, u.cs)).To(BeEmpty())
	Expect(crdUID(t)).To(Equal(u.crd), "helm uninstall deleted the CRD")
}

// releaseObjects returns the objects of the release in ns as Helm holds
// them (helm get manifest, and its hooks), by kind, namespace and name.
func releaseObjects(t testing.TB, ns string) map[string]map[string]any {
	t.Helper()
	return decodeObjects(t, helm(t, "get", "manifest", memberRelease, "--namespace", ns)+"\n---\n"+
		helm(t, "get", "hooks", memberRelease, "--namespace", ns))
}

// freshInstall returns the objects a fresh install of this tree's chart in
// ns with the user's values would create, hooks included, as
// releaseObjects does: helm template, with the node's API server for the
// capabilities, as helm install renders.
func freshInstall(t testing.TB, ns string) map[string]map[string]any {
	t.Helper()
	return decodeObjects(t, helm(t, slices.Concat([]string{"template", memberRelease, memberChart, "--namespace", ns, "--validate"},
		imageValues(env.imageRepo, env.imageTag), upgradeValues)...))
}

var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decodeObjects decodes a stream of YAML documents, by kind, namespace and
// name.
func decodeObjects(t testing.TB, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range documentSeparator.Split(stream, -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		meta, _ := m["metadata"].(map[string]any)
		key := fmt.Sprintf("%v %v/%v", m["kind"], meta["namespace"], meta["name"])
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		out[key] = m
	}
	if len(out) == 0 {
		t.Fatal("no objects")
	}
	return out
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
