package hub_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
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

// --unregistered-source-mirrors=delete removes the remote mirrors of
// sources whose cluster left the fleet.
func TestUnregisteredSourceMirrorsDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hubAgent.stop()
	hubAgent = startHub("--unregistered-source-mirrors=delete")
	t.Cleanup(func() {
		_ = registerB(nil)
		hubAgent.stop()
		hubAgent = startHub()
	})

	src, shared := srcAndShared(t, memB, memA)
	s := sourceSecret(src, "leaving", "member-a/"+shared, map[string]string{"k": "v"})
	g.Expect(memB.Client.Create(ctx, s)).To(Succeed())
	eventuallySecret(t, memA, shared, "leaving", nil)

	g.Expect(fleettest.Unregister(ctx, hubC.Client, secretsNS, memB)).To(Succeed())
	eventuallyGone(t, memA, shared, "leaving")
}
