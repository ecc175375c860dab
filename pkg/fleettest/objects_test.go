package fleettest_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// TestObjectHelpers walks a Secret through the helpers every suite uses:
// namespaces created twice without error, a source read back, a change, a
// status, events of nothing, and the wait for its deletion.
func TestObjectHelpers(t *testing.T) {
	skipIfShort(t)
	g := NewWithT(t)
	ctx := context.Background()
	w := fleettest.Wait{Timeout: 10 * time.Second, Poll: 50 * time.Millisecond}
	hub, member := fleet.Hub, fleet.Members[0]
	fleettest.CreateNamespaces(t, "helpers", map[string]string{"team": "a"}, hub, member)
	fleettest.CreateNamespaces(t, "helpers", nil, hub) // exists: no error

	missing, err := fleettest.Lookup(member, fleettest.Secret("helpers", "src"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(missing).To(BeNil())

	src := &corev1.Secret{ObjectMeta: fleettest.SourceMeta("helpers", "src", "a, b"), StringData: map[string]string{"k": "v1"}}
	g.Expect(hub.Client.Create(ctx, src)).To(Succeed())
	t.Cleanup(func() { _ = hub.Client.Delete(context.Background(), src) })

	into := fleettest.Secret("helpers", "src")
	got := fleettest.EventuallyExists(t, w, hub, into, func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelEnabled, "true"))
		g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationTargetNamespaces, "a, b"))
		g.Expect(s.Data).To(HaveKeyWithValue("k", []byte("v1")))
	})
	g.Expect(into.UID).To(Equal(got.UID), "EventuallyExists leaves the object read in its argument")

	fleettest.Change(t, w, hub, src, func(s *corev1.Secret) {
		s.Annotations[annotations.AnnotationStatus] = "by hand"
	})
	g.Expect(fleettest.Status(hub, src)()).To(Equal("by hand"))
	g.Expect(fleettest.Events(hub, "helpers", "src", "NoSuchReason")).To(BeEmpty())

	g.Expect(hub.Client.Delete(ctx, src)).To(Succeed())
	fleettest.EventuallyGone(t, w, hub, fleettest.Secret("helpers", "src"))
	g.Expect(fleettest.Status(hub, src)()).To(ContainSubstring("not found"))
}
