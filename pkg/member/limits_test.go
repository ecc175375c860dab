package member_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
)

// Item 10: over fleetmirror.io/max-targets the first namespaces in sort
// order win, a warning says how many were skipped, and the choice does not
// change while nothing changes, even as other namespaces come and go.
func TestMaxTargets(t *testing.T) {
	g := NewWithT(t)
	// Created out of order: creation order must not matter.
	ns := namespaces(t, "limit", nil, "src", "t-d", "t-b", "t-c", "t-a")
	src, tD, tB, tC, tA := ns[0], ns[1], ns[2], ns[3], ns[4]
	candidates := ns[1:]
	s := sourceSecret(src, "capped", nsGlob(tA, "t-"), map[string]string{"k": "v"})
	s.Annotations[annotations.AnnotationMaxTargets] = "2"
	create(t, s)

	g.Eventually(func() []string { return secretsIn("capped", candidates...) }, timeout, poll).
		Should(ConsistOf(tA, tB))
	g.Eventually(status(s), timeout, poll).Should(Equal("2/2 namespaces synced; 2 over limit"))
	eventuallyEventWith(t, src, "capped", controller.ReasonTargetsOverLimit, "2 matching", "skipped", "limit of 2", tC)
	ev := eventsFor(src, "capped", controller.ReasonTargetsOverLimit)
	g.Expect(ev).To(HaveLen(1))
	g.Expect(ev[0].Type).To(Equal("Warning"))

	// Namespace events re-reconcile every source; the choice stays.
	mirrors := func() []string {
		return []string{secretState(tA, "capped")(), secretState(tB, "capped")(),
			secretState(tC, "capped")(), secretState(tD, "capped")()}
	}
	before := mirrors()
	namespaces(t, "limitchurn", nil, "x", "y")
	overLimit := func() []int32 {
		n, r := eventSummary(src, "capped", controller.ReasonTargetsOverLimit)
		return []int32{int32(n), r}
	}
	g.Consistently(mirrors, settle, poll).Should(Equal(before))
	g.Expect(overLimit()).To(Equal([]int32{1, 1}), "no repeated warning")

	// A namespace that sorts first takes a place; the last one loses it.
	t0 := tA[:len(tA)-1] + "0"
	createNamespace(t, t0, nil)
	g.Eventually(func() []string { return secretsIn("capped", append(candidates, t0)...) }, timeout, poll).
		Should(ConsistOf(t0, tA))
	eventuallyEventWith(t, src, "capped", controller.ReasonTargetsOverLimit, "3 matching", "skipped", "limit of 2", tB)
}
