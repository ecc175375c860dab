package member_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
)

// Item 4: editing target-namespaces removes the mirrors no longer targeted
// and leaves the others alone.
func TestTargetListEdited(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "edit", nil, "src", "a", "b", "c")
	src := sourceSecret(ns[0], "edited", ns[1]+","+ns[2], map[string]string{"k": "v"})
	create(t, src)
	keep := eventuallySecret(t, ns[1], "edited", nil)
	eventuallySecret(t, ns[2], "edited", nil)

	change(t, src, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationTargetNamespaces] = ns[1] + ", " + ns[3] })
	eventuallySecret(t, ns[3], "edited", nil)
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[2], Name: "edited"}})
	g.Eventually(status(src), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Expect(secretState(ns[1], "edited")()).To(Equal(string(keep.UID)+"@"+keep.ResourceVersion),
		"a mirror still targeted is not rewritten")
	eventuallyEvent(t, ns[0], "edited", controller.ReasonMirrorsSynced, "deleted 1")
}

// Item 4: a namespace created later that matches a glob gets its mirror; one
// that does not match gets none.
func TestGlobReachesNewNamespace(t *testing.T) {
	ns := namespaces(t, "glob", nil, "src", "app-1", "other")
	glob := nsGlob(ns[1], "app-")
	src := sourceSecret(ns[0], "globbed", glob, map[string]string{"k": "v"})
	create(t, src)
	eventuallySecret(t, ns[1], "globbed", nil)

	late := ns[1][:len(ns[1])-1] + "2" // <prefix>-app-2
	lateOther := ns[2] + "-2"          // does not match
	createNamespace(t, lateOther, nil)
	createNamespace(t, late, nil)
	eventuallySecret(t, late, "globbed", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v")))
	})
	NewWithT(t).Eventually(status(src), timeout, poll).Should(Equal("2/2 namespaces synced"))
	consistentlyAbsent(t, lateOther, "globbed")
	NewWithT(t).Expect(secretsIn("globbed", ns[2])).To(BeEmpty())
}

// Item 4: all-labeled follows the allow-mirrors label of namespaces as it is
// added and removed.
func TestAllLabeledFollowsNamespaceLabels(t *testing.T) {
	g := NewWithT(t)
	allow := map[string]string{annotations.LabelAllowMirrors: "true"}
	ns := namespaces(t, "labeled", nil, "src", "plain")
	in := namespaces(t, "labeled", allow, "in")[0]
	name := fmt.Sprintf("labeled-%d", nsCounter.Load())
	src := sourceSecret(ns[0], name, annotations.KeywordAllLabeled, map[string]string{"k": "v"})
	create(t, src)
	t.Cleanup(func() { deleteAndWait(t, src) })
	eventuallySecret(t, in, name, nil)
	g.Expect(secretsIn(name, ns[1])).To(BeEmpty(), "an unlabelled namespace gets no mirror")

	// Labelling a namespace adds it.
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns[1]}}
	change(t, plain, func(n *corev1.Namespace) { n.Labels = map[string]string{annotations.LabelAllowMirrors: "true"} })
	eventuallySecret(t, ns[1], name, nil)

	// Removing the label removes the mirror.
	inNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in}}
	change(t, inNS, func(n *corev1.Namespace) { delete(n.Labels, annotations.LabelAllowMirrors) })
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: in, Name: name}})

	// Changing it to anything but "true" is not an opt-in either.
	change(t, plain, func(n *corev1.Namespace) { n.Labels[annotations.LabelAllowMirrors] = "yes" })
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: name}})
	g.Eventually(status(src), timeout, poll).Should(Equal("0/0 namespaces synced"))
}

// Item 4: allow-mirrors=false opts a namespace out of explicit names and of
// all; a mirror already there is removed.
func TestOptOutLabel(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "optout", nil, "src", "a", "out")
	out := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns[2]}}

	named := sourceSecret(ns[0], "named", ns[1]+","+ns[2], map[string]string{"k": "v"})
	create(t, named)
	eventuallySecret(t, ns[2], "named", nil)
	eventuallySecret(t, ns[1], "named", nil)

	change(t, out, func(n *corev1.Namespace) { n.Labels = map[string]string{annotations.LabelAllowMirrors: "false"} })
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[2], Name: "named"}})
	eventuallyEvent(t, ns[0], "named", controller.ReasonNamespaceRefused, ns[2])
	g.Eventually(status(named), timeout, poll).Should(Equal("1/1 namespaces synced; 1 refused"))
	g.Expect(secretsIn("named", ns[1])).To(Equal([]string{ns[1]}), "the other target keeps its mirror")

	// `all` does not reach it either. Every namespace of the suite is a
	// target of it: with the default --max-targets (100) this test's
	// namespaces would be served or skipped by how many earlier tests made
	// before them in sorted order.
	withAgent(t, "--max-targets=1000")
	name := fmt.Sprintf("optout-all-%d", nsCounter.Load())
	all := sourceSecret(ns[0], name, annotations.KeywordAll, map[string]string{"k": "v"})
	create(t, all)
	t.Cleanup(func() { deleteAndWait(t, all) })
	eventuallySecret(t, ns[1], name, nil)
	consistentlyAbsent(t, ns[2], name)

	// Opting in again brings both mirrors back.
	change(t, out, func(n *corev1.Namespace) { delete(n.Labels, annotations.LabelAllowMirrors) })
	eventuallySecret(t, ns[2], "named", nil)
	eventuallySecret(t, ns[2], name, nil)
}
