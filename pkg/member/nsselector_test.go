package member_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// relabelled bounds how long a namespace relabelled in or out waits for
// its mirror to come or go. The promise is about a second; the rest is
// slack for a loaded test machine, far below the suite's timeout, so that
// a namespace change that waited for a resync or a retry would fail.
var relabelled = fleettest.Wait{Timeout: 5 * time.Second, Poll: poll}

// selectorKey is a namespace label key only this test's namespaces carry,
// so that its selector reaches no other test's namespaces.
func selectorKey(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("nssel.example.com/t%d", nsCounter.Add(1))
}

// selectorSource returns an enabled, synced Secret whose targets are the
// entries (none when empty) and the namespaces selector selects.
func selectorSource(ns, name, entries, selector string) *corev1.Secret {
	s := sourceSecret(ns, name, entries, map[string]string{"k": "v"})
	if entries == "" {
		delete(s.Annotations, annotations.AnnotationTargetNamespaces)
	}
	s.Annotations[annotations.AnnotationTargetNamespaceSelector] = selector
	return s
}

// labelNamespace sets (value not empty) or removes label key of namespace
// name.
func labelNamespace(t *testing.T, name, key, value string) {
	t.Helper()
	fleettest.LabelNamespace(t, wait, fleet.Hub, name, key, value)
}

// A namespace labelled to match the selector gains the mirror at once, and
// loses it when the label goes; the source's own namespace, labelled too,
// never gets one.
func TestNamespaceSelectorFollowsLabels(t *testing.T) {
	g := NewWithT(t)
	key := selectorKey(t)
	ns := namespaces(t, "nssel", map[string]string{key: "in"}, "src", "a")
	later := namespaces(t, "nssel", nil, "b")[0]
	s := selectorSource(ns[0], "selected", "", key+"=in")
	create(t, s)
	t.Cleanup(func() { deleteAndWait(t, s) })

	eventuallySecret(t, ns[1], s.Name, func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v")))
	})
	g.Eventually(status(s), timeout, poll).Should(Equal("1/1 namespaces synced"))

	start := time.Now()
	labelNamespace(t, later, key, "in")
	fleettest.EventuallyExists(t, relabelled, fleet.Hub, fleettest.Secret(later, s.Name), nil)
	t.Logf("a namespace labelled in had its mirror after %s", time.Since(start).Round(time.Millisecond))
	g.Eventually(status(s), timeout, poll).Should(Equal("2/2 namespaces synced"))

	start = time.Now()
	labelNamespace(t, ns[1], key, "")
	fleettest.EventuallyGone(t, relabelled, fleet.Hub, fleettest.Secret(ns[1], s.Name))
	t.Logf("a namespace labelled out lost its mirror after %s", time.Since(start).Round(time.Millisecond))
	labelNamespace(t, later, key, "out")
	fleettest.EventuallyGone(t, relabelled, fleet.Hub, fleettest.Secret(later, s.Name))
	g.Eventually(status(s), timeout, poll).Should(Equal("0/0 namespaces synced"))
	g.Expect(secretsIn(s.Name, ns[0], ns[1], later)).To(Equal([]string{ns[0]}), "only the source is left")
}

// Selected namespaces are under the entries' consent rules: one the agent
// excludes and one opted out are refused and reported, never written.
func TestNamespaceSelectorConsent(t *testing.T) {
	g := NewWithT(t)
	key := selectorKey(t)
	ns := namespaces(t, "nsconsent", map[string]string{key: "in"}, "src", "ok")
	optedOut := namespaces(t, "nsconsent", map[string]string{key: "in", annotations.LabelAllowMirrors: "false"}, "optout")[0]
	excluded := fmt.Sprintf("fm-excluded-%d", nsCounter.Add(1))
	createNamespace(t, excluded, map[string]string{key: "in"})
	s := selectorSource(ns[0], "consent", "", key+"=in")
	create(t, s)
	t.Cleanup(func() { deleteAndWait(t, s) })

	eventuallySecret(t, ns[1], s.Name, nil)
	g.Eventually(status(s), timeout, poll).Should(Equal("1/1 namespaces synced; 2 refused"))
	eventuallyEvent(t, ns[0], s.Name, controller.ReasonNamespaceRefused, excluded+", "+optedOut)
	g.Consistently(func() []string { return secretsIn(s.Name, optedOut, excluded) }, settle, poll).Should(BeEmpty())

	// Opting in again is a label change like any other.
	labelNamespace(t, optedOut, annotations.LabelAllowMirrors, "")
	fleettest.EventuallyExists(t, relabelled, fleet.Hub, fleettest.Secret(optedOut, s.Name), nil)
	g.Eventually(status(s), timeout, poll).Should(Equal("2/2 namespaces synced; 1 refused"))
}

// Entries and the selector together target their union, each namespace
// once, whichever of them reaches it.
func TestNamespaceSelectorWithEntries(t *testing.T) {
	g := NewWithT(t)
	key := selectorKey(t)
	ns := namespaces(t, "nsunion", nil, "src", "both", "named", "selected", "neither")
	labelNamespace(t, ns[1], key, "in")
	labelNamespace(t, ns[3], key, "in")
	s := selectorSource(ns[0], "union", ns[1]+", "+ns[2], key+"=in")
	create(t, s)
	t.Cleanup(func() { deleteAndWait(t, s) })

	g.Eventually(func() []string { return secretsIn(s.Name, ns[1:]...) }, timeout, poll).Should(Equal(ns[1:4]))
	g.Eventually(status(s), timeout, poll).Should(Equal("3/3 namespaces synced"))
	g.Expect(eventsFor(ns[0], s.Name, controller.ReasonInvalidAnnotation)).To(BeEmpty())

	// The namespace both reach keeps its mirror when only one of them does.
	labelNamespace(t, ns[1], key, "")
	g.Consistently(func() []string { return secretsIn(s.Name, ns[1:]...) }, settle, poll).Should(Equal(ns[1:4]))
}

// An invalid selector is the source owner's mistake: an InvalidAnnotation
// Warning, and it selects nothing, while the valid entries beside it still
// work. An empty one would select every namespace, so it is refused too.
func TestNamespaceSelectorInvalid(t *testing.T) {
	g := NewWithT(t)
	key := selectorKey(t)
	ns := namespaces(t, "nsbad", map[string]string{key: "in"}, "src", "labelled")
	named := namespaces(t, "nsbad", nil, "named")[0]
	bad := selectorSource(ns[0], "bad", named, key+" in (in")
	create(t, bad)
	t.Cleanup(func() { deleteAndWait(t, bad) })
	empty := selectorSource(ns[0], "empty", "", "")
	create(t, empty)
	t.Cleanup(func() { deleteAndWait(t, empty) })

	eventuallyEvent(t, ns[0], bad.Name, controller.ReasonInvalidAnnotation, annotations.AnnotationTargetNamespaceSelector+": ")
	eventuallyEvent(t, ns[0], empty.Name, controller.ReasonInvalidAnnotation,
		"empty, which would select every namespace; no namespace is selected (write fleetmirror.io/target-namespaces: all to mean every namespace)")
	eventuallySecret(t, named, bad.Name, nil)
	g.Eventually(status(bad), timeout, poll).Should(Equal("1/1 namespaces synced"))
	g.Eventually(status(empty), timeout, poll).Should(Equal("0/0 namespaces synced"))
	g.Consistently(func() []string {
		return append(secretsIn(bad.Name, ns[1]), secretsIn(empty.Name, append([]string{ns[1], named, "default"}, systemNamespaces...)...)...)
	}, settle, poll).Should(BeEmpty())

	// Fixed, it selects.
	change(t, bad, func(s *corev1.Secret) {
		s.Annotations[annotations.AnnotationTargetNamespaceSelector] = key + " in (in)"
	})
	eventuallySecret(t, ns[1], bad.Name, nil)
	g.Eventually(status(bad), timeout, poll).Should(Equal("2/2 namespaces synced"))
}
