package hub_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// Hub policy: sources outside --allowed-source-namespaces are not served
// remotely, and say why.
func TestAllowedSourcePolicy(t *testing.T) {
	g := NewWithT(t)
	hubAgent.stop()
	hubAgent = startHub("--allowed-source-namespaces=allowed-*", "--allowed-source-clusters=hub,member-?")
	t.Cleanup(func() { hubAgent.stop(); hubAgent = startHub() })

	allowed, denied, shared := uniq("allowed-"), uniq("denied-"), uniq("shared")
	mkNamespaces(t, allowed, hubC)
	mkNamespaces(t, denied, hubC)
	mkNamespaces(t, shared, memA)
	ok := sourceSecret(allowed, "ok", "member-a/"+shared, map[string]string{"k": "v"})
	no := sourceSecret(denied, "no", "member-a/"+shared, map[string]string{"k": "v"})
	g.Expect(hubC.Client.Create(context.Background(), ok)).To(Succeed())
	g.Expect(hubC.Client.Create(context.Background(), no)).To(Succeed())

	eventuallySecret(t, memA, shared, "ok", nil)
	g.Eventually(func() []string { return eventMessages(hubC, denied, "no", "SourceRefused") }, timeout, poll).
		Should(ContainElement(ContainSubstring("--allowed-source-namespaces")))
	got, err := getSecret(memA, shared, "no")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeNil())
	g.Expect(no.Finalizers).To(BeEmpty())
}
