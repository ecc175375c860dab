package cluster_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

const nodeName = "fleetmirror-node"

// TestMemberFaults runs the member agent through what a node does to it: the
// agent's process killed, the kubelet and containerd restarted, the node
// drained at one replica and, with the chart's PodDisruptionBudget, at two.
// After each, a change made meanwhile reaches every mirror: nothing is lost.
func TestMemberFaults(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	const ns = "fm-faults"
	release(t, memberRelease, ns, memberChart, imageValues(env.imageRepo, env.imageTag)...)
	namespace(t, cs, "fmf-src", nil)
	namespace(t, cs, "fmf-a", nil)
	namespace(t, cs, "fmf-b", nil)
	source(t, cs, "fmf-src", "creds", "fmf-*", "v0")
	mirrored(t, cs, "creds", "v0", time.Minute, "fmf-a", "fmf-b")

	version := 0
	change := func(t *testing.T, timeout time.Duration) {
		t.Helper()
		version++
		v := fmt.Sprintf("v%d", version)
		setValue(t, cs, "fmf-src", "creds", v)
		mirrored(t, cs, "creds", v, timeout, "fmf-a", "fmf-b")
	}

	t.Run("agent process killed", func(t *testing.T) {
		RegisterTestingT(t)
		before := restarts(t, cs, ns)
		// SIGKILL from the host: no graceful shutdown, the Lease is not
		// released; the kubelet restarts the container.
		out, err := exec.Command("pkill", "-KILL", "-f", "^/usr/local/bin/fleetmirror-member").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Eventually(func() int32 { return restarts(t, cs, ns) }).WithTimeout(time.Minute).Should(BeNumerically(">", before))
		change(t, 2*time.Minute)
	})

	for _, daemon := range []string{"kubelet", "containerd"} {
		t.Run(daemon+" restarted", func(t *testing.T) {
			RegisterTestingT(t)
			before := restarts(t, cs, ns)
			command(t, "hack/cluster.sh", "restart", daemon)
			change(t, time.Minute)
			nodeReady(t, cs)
			Expect(restarts(t, cs, ns)).To(Equal(before), "a %s restart must not restart the agent", daemon)
		})
	}

	t.Run("drained at one replica", func(t *testing.T) {
		RegisterTestingT(t)
		t.Cleanup(func() { kubectl(t, "uncordon", nodeName) })
		kubectl(t, "drain", nodeName, "--pod-selector", "app.kubernetes.io/instance="+memberRelease, "--timeout", "90s")
		Eventually(func() []string { return agentPods(t, cs, ns, memberRelease) }).WithTimeout(time.Minute).Should(BeEmpty())
		// Without an agent the change waits; nothing else writes the mirrors.
		version++
		v := fmt.Sprintf("v%d", version)
		setValue(t, cs, "fmf-src", "creds", v)
		kubectl(t, "uncordon", nodeName)
		mirrored(t, cs, "creds", v, 2*time.Minute, "fmf-a", "fmf-b")
	})

	t.Run("drained at two replicas with the PodDisruptionBudget", func(t *testing.T) {
		RegisterTestingT(t)
		install(t, memberRelease, ns, memberChart, append(imageValues(env.imageRepo, env.imageTag),
			"--set", "replicaCount=2", "--set", "podDisruptionBudget.enabled=true")...)
		Eventually(func() []string { return agentPods(t, cs, ns, memberRelease) }).WithTimeout(2 * time.Minute).Should(HaveLen(2))
		t.Cleanup(func() { kubectl(t, "uncordon", nodeName) })
		// One node: the evicted replica cannot come back while the node is
		// cordoned, so the budget (minAvailable 1) keeps the other running
		// and the drain cannot finish.
		out, err := tryCommand(env.kubectl, "drain", nodeName, "--pod-selector", "app.kubernetes.io/instance="+memberRelease, "--timeout", "30s")
		Expect(err).To(HaveOccurred(), "the drain must be held by the PodDisruptionBudget:\n%s", out)
		Expect(out).To(ContainSubstring("disruption budget"))
		Expect(agentPods(t, cs, ns, memberRelease)).To(HaveLen(1))
		change(t, time.Minute) // the replica left mirrors meanwhile
		kubectl(t, "uncordon", nodeName)
		Eventually(func() []string { return agentPods(t, cs, ns, memberRelease) }).WithTimeout(2 * time.Minute).Should(HaveLen(2))
		change(t, time.Minute)
	})
}

// TestNamespaceDeletion deletes namespaces the way users do, with the real
// namespace controller: a target namespace, a source's namespace (its
// finalizer must not hold the namespace), and the agent's own namespace.
func TestNamespaceDeletion(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	const ns = "fm-nsdel"
	release(t, memberRelease, ns, memberChart, imageValues(env.imageRepo, env.imageTag)...)
	namespace(t, cs, "fmn-src", nil)
	namespace(t, cs, "fmn-src2", nil)
	namespace(t, cs, "fmn-a", nil)
	namespace(t, cs, "fmn-b", nil)
	source(t, cs, "fmn-src", "creds", "fmn-a, fmn-b", "one")
	source(t, cs, "fmn-src2", "other", "fmn-a", "two")
	mirrored(t, cs, "creds", "one", time.Minute, "fmn-a", "fmn-b")
	mirrored(t, cs, "other", "two", time.Minute, "fmn-a")

	t.Run("target namespace", func(t *testing.T) {
		RegisterTestingT(t)
		deleteNamespace(t, cs, "fmn-b")
		namespaceGone(t, cs, "fmn-b", 2*time.Minute)
		setValue(t, cs, "fmn-src", "creds", "one-b")
		mirrored(t, cs, "creds", "one-b", time.Minute, "fmn-a")
		// Created again, it receives its mirror again.
		namespace(t, cs, "fmn-b", nil)
		mirrored(t, cs, "creds", "one-b", time.Minute, "fmn-b")
	})

	t.Run("source namespace", func(t *testing.T) {
		RegisterTestingT(t)
		deleteNamespace(t, cs, "fmn-src")
		namespaceGone(t, cs, "fmn-src", 2*time.Minute)
		gone(t, cs, "fmn-a", "creds", time.Minute)
		gone(t, cs, "fmn-b", "creds", time.Minute)
	})

	t.Run("agent namespace", func(t *testing.T) {
		RegisterTestingT(t)
		deleteNamespace(t, cs, ns)
		namespaceGone(t, cs, ns, 3*time.Minute)
		sweep(t, memberRelease)
		// The agent went without helm uninstall (as with --no-hooks): it
		// held nothing on the sources it served, so their deletion, and
		// their namespace's, waits for nothing. TestExits takes this way
		// out and every other, with policies, pulls and a hub.
		Expect(fleetmirrorFinalizers(t, cs)).To(BeEmpty())
		deleteNamespace(t, cs, "fmn-src2")
		namespaceGone(t, cs, "fmn-src2", deleteWithin)
	})
}

// TestMemberUninstall checks that helm uninstall leaves no finalizer and,
// by default, no mirror, and that a source namespace can be deleted after;
// the CRD the chart installed is left.
func TestMemberUninstall(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	const ns = "fm-uninstall"
	install(t, memberRelease, ns, memberChart, imageValues(env.imageRepo, env.imageTag)...)
	namespace(t, cs, "fmu-src", nil)
	namespace(t, cs, "fmu-a", nil)
	namespace(t, cs, "fmu-b", nil)
	source(t, cs, "fmu-src", "creds", "fmu-a, fmu-b", "one")
	mirrored(t, cs, "creds", "one", time.Minute, "fmu-a", "fmu-b")
	Expect(fleetmirrorFinalizers(t, cs)).To(ContainElement("secret/fmu-src/creds"))

	out := helm(t, "uninstall", memberRelease, "--namespace", ns, "--wait", "--timeout", "5m")
	Expect(fleetmirrorFinalizers(t, cs)).To(BeEmpty(), out)
	Expect(mirrors(t, cs)).To(BeEmpty(), out)
	Expect(hookLeftovers(t, cs, ns)).To(BeEmpty())
	// The MirrorPolicy CRD stays, by Helm's rule for a chart's crds/:
	// deleting it would delete every MirrorPolicy of the cluster with it.
	kubectl(t, "get", "customresourcedefinition", "mirrorpolicies.fleetmirror.io")
	deleteNamespace(t, cs, "fmu-src")
	namespaceGone(t, cs, "fmu-src", 2*time.Minute)
}

// hookLeftovers lists what the uninstall hook left in ns and cluster-wide:
// its Job and RBAC, and the Lease it deletes once it no longer needs it.
func hookLeftovers(t testing.TB, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	var left []string
	jobs, err := cs.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		left = append(left, "job/"+j.Name)
	}
	leases, err := cs.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		left = append(left, "lease/"+l.Name)
	}
	crs, err := cs.RbacV1().ClusterRoles().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range crs.Items {
		if strings.HasPrefix(r.Name, memberRelease) || strings.HasPrefix(r.Name, hubRelease) {
			left = append(left, "clusterrole/"+r.Name)
		}
	}
	return left
}

func deleteNamespace(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	if err := cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restarts sums the restart counts of the release's agent containers.
func restarts(t testing.TB, cs kubernetes.Interface, ns string) int32 {
	t.Helper()
	var n int32
	for _, p := range agentPodList(t, cs, ns, memberRelease) {
		for _, c := range p.Status.ContainerStatuses {
			n += c.RestartCount
		}
	}
	return n
}

func nodeReady(t testing.TB, cs kubernetes.Interface) {
	t.Helper()
	Eventually(func(g Gomega) {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, c := range n.Status.Conditions {
			if c.Type == "Ready" {
				g.Expect(string(c.Status)).To(Equal("True"))
				return
			}
		}
		g.Expect("no Ready condition").To(BeEmpty())
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}

// TestNodeSaysItsRelease: the node's binaries, built from source by
// hack/cluster.sh and hack/envtest.sh, say the Kubernetes release they are
// (hack/kube-ldflags.sh), as a real cluster's do: the API server's
// /version, which the charts' kubeVersion is checked against, and the
// kubelet's version in the Node's status.
func TestNodeSaysItsRelease(t *testing.T) {
	RegisterTestingT(t)
	pinned, err := fleettest.PinnedKubeVersion()
	Expect(err).NotTo(HaveOccurred())
	cs := node(t)
	v, err := cs.Discovery().ServerVersion()
	Expect(err).NotTo(HaveOccurred())
	Expect(v.GitVersion).To(Equal("v"+pinned), "/version: %+v", *v)
	n, err := cs.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v"+pinned), "kubeletVersion")
	Expect(kubectl(t, "version", "--client", "-o", "json")).To(ContainSubstring(`"gitVersion": "v`+pinned+`"`), "kubectl")
}
