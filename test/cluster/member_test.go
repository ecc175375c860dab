package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestMemberChart installs the member chart as it ships and checks what a
// user sees first: Ready Pods with the chart's securityContext, mirroring
// through the in-cluster config, /metrics through the chart's Service, the
// admission policy's warnings in kubectl, and helm test.
func TestMemberChart(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	const ns = "fm-member"
	release(t, memberRelease, ns, memberChart, imageValues(env.imageRepo, env.imageTag)...)

	t.Run("pods run as the chart says", func(t *testing.T) {
		RegisterTestingT(t)
		pods := agentPodList(t, cs, ns, memberRelease)
		Expect(pods).To(HaveLen(1))
		p := pods[0]
		Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		st := p.Status.ContainerStatuses[0]
		Expect(st.Ready).To(BeTrue())
		Expect(st.ImageID).NotTo(BeEmpty())
		Expect(p.Spec.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
		c := p.Spec.Containers[0]
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(Equal(ptr.To(true)))
		Expect(c.SecurityContext.AllowPrivilegeEscalation).To(Equal(ptr.To(false)))
		Expect(c.SecurityContext.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
		// The kubelet only starts a runAsNonRoot container whose user is
		// numeric and not 0: the image's USER 65532 or the chart's.
		Expect(strings.Join(c.Command, " ")).To(Equal("/usr/local/bin/fleetmirror-member"))
		// The ServiceAccount token is the projected one the kubelet writes.
		Expect(p.Spec.Volumes).To(ContainElement(HaveField("Projected", Not(BeNil()))))
	})

	t.Run("mirrors through the in-cluster config", func(t *testing.T) {
		RegisterTestingT(t)
		namespace(t, cs, "fm-src", nil)
		namespace(t, cs, "fm-a", nil)
		namespace(t, cs, "fm-b", nil)
		source(t, cs, "fm-src", "creds", "fm-a, fm-b", "one")
		mirrored(t, cs, "creds", "one", time.Minute, "fm-a", "fm-b")
		setValue(t, cs, "fm-src", "creds", "two")
		mirrored(t, cs, "creds", "two", 30*time.Second, "fm-a", "fm-b")
	})

	t.Run("metrics through the chart's Service", func(t *testing.T) {
		RegisterTestingT(t)
		// Through the API server's Service proxy: the Service, its
		// EndpointSlice and the Pod's port.
		out := kubectl(t, "get", "--raw", "/api/v1/namespaces/"+ns+"/services/"+memberRelease+"-metrics:metrics/proxy/metrics")
		Expect(out).To(ContainSubstring("fleetmirror_build_info"))
		Expect(out).To(MatchRegexp(`fleetmirror_sync_operations_total\{[^}]*result="(created|updated)"[^}]*\} [1-9]`))
	})

	t.Run("mirrors a Secret named by a MirrorPolicy", func(t *testing.T) {
		RegisterTestingT(t)
		// The chart installed the CRD and granted the agent what it needs;
		// the Secret carries none of our keys, and the agent never writes it.
		namespace(t, cs, "fm-pol", nil)
		namespace(t, cs, "fm-pol-a", nil)
		mark := markAudit(t)
		_, err := cs.CoreV1().Secrets("fm-pol").Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fm-pol", Name: "owned"}, StringData: map[string]string{"value": "one"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		out, err := applyStdin(`apiVersion: fleetmirror.io/v1alpha1
kind: MirrorPolicy
metadata: {namespace: fm-pol, name: share}
spec:
  source: {apiVersion: v1, kind: Secret, names: [owned]}
  targetNamespaces: [fm-pol-a]
`)
		Expect(err).NotTo(HaveOccurred(), out)
		mirrored(t, cs, "owned", "one", time.Minute, "fm-pol-a")
		Eventually(func() string {
			return kubectl(t, "-n", "fm-pol", "get", "mirrorpolicy", "share", "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}")
		}).WithTimeout(30 * time.Second).Should(Equal("Synced"))
		// Nothing holds the policy: it goes at once, and its mirror right
		// after it.
		kubectl(t, "-n", "fm-pol", "delete", "mirrorpolicy", "share", "--timeout=10s")
		gone(t, cs, "fm-pol-a", "owned", 30*time.Second)
		Expect(writes(t, mark, serviceAccount(ns, memberRelease), "secrets", "fm-pol")).To(BeEmpty())
	})

	t.Run("admission warnings reach kubectl", func(t *testing.T) {
		RegisterTestingT(t)
		namespace(t, cs, "fm-warn", nil)
		out := kubectl(t, "-n", "fm-warn", "create", "secret", "generic", "typo", "--from-literal=a=b", "--dry-run=client", "-o", "yaml")
		out = strings.Replace(out, "metadata:\n", "metadata:\n  annotations:\n    fleetmirror.io/target-namespace: fm-a\n", 1)
		var res string
		Eventually(func() string {
			res, _ = applyStdin(out)
			return res
		}).WithTimeout(30 * time.Second).Should(ContainSubstring("Warning:"))
		Expect(res).To(ContainSubstring("fleetmirror.io/target-namespace"))
	})

	t.Run("helm test", func(t *testing.T) {
		RegisterTestingT(t)
		out := helm(t, "test", memberRelease, "--namespace", ns, "--timeout", "3m")
		Expect(out).To(ContainSubstring("Phase:          Succeeded"))
	})
}

// applyStdin runs kubectl apply -f - with manifest and returns its output.
func applyStdin(manifest string) (string, error) {
	cmd := commandOf(env.kubectl, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
