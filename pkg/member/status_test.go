package member_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
)

// Item 12: the status annotation sums up the targets, MirrorsSynced is
// emitted once per change and not on a re-reconcile without changes, and
// writing the status does not make the source change again and again.
func TestStatusAndEventsOncePerChange(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "status", nil, "src", "a", "b", "c")
	s := sourceSecret(ns[0], "summary", ns[1]+","+ns[2]+","+ns[3], map[string]string{"k": "v1"})
	create(t, s)
	g.Eventually(status(s), timeout, poll).Should(Equal("3/3 namespaces synced"))
	eventuallyEvent(t, ns[0], "summary", controller.ReasonMirrorsSynced, "Created 3, updated 0, replaced 0, deleted 0 mirrors; 3/3 namespaces synced")

	// A sibling source targeting a glob proves that a new namespace was
	// handled: every source of the cluster is reconciled again then.
	probe := sourceSecret(ns[0], "probe", nsGlob(ns[1], "late-"), map[string]string{"k": "v"})
	create(t, probe)
	g.Eventually(status(probe), timeout, poll).Should(Equal("0/0 namespaces synced"))

	synced := func() []int32 {
		n, r := eventSummary(ns[0], "summary", controller.ReasonMirrorsSynced)
		return []int32{int32(n), r}
	}
	before := synced()
	g.Expect(before).To(Equal([]int32{1, 1}))
	rv := func() string {
		_ = k8s.Get(t.Context(), objectKey(s), s)
		return s.ResourceVersion
	}
	sourceRV := rv()
	late := strings.TrimSuffix(nsGlob(ns[1], "late-"), "*") + "1"
	createNamespace(t, late, nil)
	eventuallySecret(t, late, "probe", nil)
	g.Consistently(synced, settle, poll).Should(Equal(before), "no MirrorsSynced without a change")
	g.Expect(rv()).To(Equal(sourceRV), "the source is not written when nothing changed")
	g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "3/3 namespaces synced"))

	// One change, one event.
	change(t, s, func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	eventuallyEvent(t, ns[0], "summary", controller.ReasonMirrorsSynced, "Created 0, updated 3, replaced 0, deleted 0 mirrors")
	for _, target := range ns[1:] {
		eventuallySecret(t, target, "summary", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
		})
	}
	sourceRV = rv()
	g.Consistently(rv, settle, poll).Should(Equal(sourceRV), "the status write settles")
	g.Expect(synced()).To(Equal([]int32{2, 1}))
}

// Item 12: each change of a warning reaches people, even when the source was
// not written in between (here the status annotation is off, so the source
// keeps its resourceVersion): the third over-limit warning must not vanish
// into the series of the second.
func TestChangedWarningIsShown(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "warnchg", nil, "src", "t-a", "t-b")
	withAgent(t, "--status-annotation=false")
	s := sourceSecret(ns[0], "capped", nsGlob(ns[1], "t-"), map[string]string{"k": "v"})
	s.Annotations[annotations.AnnotationMaxTargets] = "1"
	create(t, s)
	eventuallySecret(t, ns[1], "capped", nil)
	eventuallyEventWith(t, ns[0], "capped", controller.ReasonTargetsOverLimit, "1 matching", ns[2])
	prefix := ns[1][:len(ns[1])-1]
	createNamespace(t, prefix+"c", nil)
	eventuallyEventWith(t, ns[0], "capped", controller.ReasonTargetsOverLimit, "2 matching", ns[2])
	createNamespace(t, prefix+"d", nil)
	eventuallyEventWith(t, ns[0], "capped", controller.ReasonTargetsOverLimit, "3 matching", ns[2])
	g.Expect(status(s)()).To(BeEmpty())
}
