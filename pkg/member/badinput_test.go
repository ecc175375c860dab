package member_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
)

// requestsFor lists the requests of the running agent about one object.
func requestsFor(ns, resource, name string) func() []string {
	path := "/api/v1/namespaces/" + ns + "/" + resource + "/" + name
	return func() []string {
		var out []string
		for _, r := range agent.requests.detailed() {
			if r.URL.Path == path {
				out = append(out, fmt.Sprintf("%s %s %d", r.Method, r.URL.RequestURI(), r.Status))
			}
		}
		return out
	}
}

// Item 11: invalid entries are reported once in a warning naming each of
// them, valid entries beside them still work, and a re-reconcile neither
// repeats the warning nor retries hot.
func TestInvalidAnnotation(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "bad", nil, "src", "good")
	lateGlob := nsGlob(ns[1], "late-")
	s := sourceSecret(ns[0], "mixed", ns[1]+", Bad_NS, /x, all-labelled, team-[, "+lateGlob, map[string]string{"k": "v"})
	create(t, s)
	eventuallySecret(t, ns[1], "mixed", nil)
	g.Eventually(status(s), timeout, poll).Should(Equal("1/1 namespaces synced"))
	for _, problem := range []string{`"Bad_NS"`, `"/x"`, `"all-labelled"`, `did you mean "all-labeled"`, "empty cluster or namespace", `entry "team-["`} {
		eventuallyEvent(t, ns[0], "mixed", controller.ReasonInvalidAnnotation, problem)
	}
	warned := func() []int32 {
		n, r := eventSummary(ns[0], "mixed", controller.ReasonInvalidAnnotation)
		return []int32{int32(n), r}
	}
	g.Expect(warned()).To(Equal([]int32{1, 1}))
	g.Expect(eventsFor(ns[0], "mixed", controller.ReasonInvalidAnnotation)[0].Type).To(Equal("Warning"))

	// A new namespace re-reconciles every source; this one gets a mirror
	// there, which proves the source was reconciled again.
	late := strings.TrimSuffix(lateGlob, "*") + "1"
	createNamespace(t, late, nil)
	eventuallySecret(t, late, "mixed", nil)
	g.Eventually(status(s), timeout, poll).Should(Equal("2/2 namespaces synced"))
	requests := requestsFor(ns[0], "secrets", "mixed")
	seen := len(requests())
	g.Consistently(warned, settle, poll).Should(Equal([]int32{1, 1}), "the warning is not repeated")
	g.Expect(requests()[seen:]).To(BeEmpty(), "no retry loop on the source")
}

// Item 11: more kinds of bad input. An invalid glob, CLUSTER/NS entries
// with an empty part and a bad max-targets are named; the valid entry works.
func TestMoreInvalidInput(t *testing.T) {
	ns := namespaces(t, "bad", nil, "src", "good")
	weird := sourceSecret(ns[0], "weird", "app-[, prod/, */, "+ns[1]+", remote-*/apps", map[string]string{"k": "v"})
	weird.Annotations[annotations.AnnotationMaxTargets] = "many"
	create(t, weird)

	eventuallySecret(t, ns[1], "weird", nil)
	for _, problem := range []string{`"app-["`, `"prod/"`, `"*/"`, `max-targets: "many"`} {
		eventuallyEvent(t, ns[0], "weird", controller.ReasonInvalidAnnotation, problem)
	}
	for _, e := range eventsFor(ns[0], "weird", controller.ReasonInvalidAnnotation) {
		NewWithT(t).Expect(e.Message).NotTo(ContainSubstring("remote-*/apps"), "a valid remote entry is not a problem")
	}
}

// Item 11: a source whose target annotation holds nothing valid still gets
// a warning naming the problem: silence would leave its owner guessing.
func TestOnlyInvalidEntries(t *testing.T) {
	ns := namespaces(t, "bad", nil, "src", "a")
	long := sourceSecret(ns[0], "huge", strings.Repeat(ns[1]+",", annotations.MaxAnnotationLength/len(ns[1])+1), map[string]string{"k": "v"})
	create(t, long)
	bad := sourceSecret(ns[0], "nothing-valid", "Bad_NS, all-labelled", map[string]string{"k": "v"})
	create(t, bad)
	// A valid source beside them proves the agent works on this namespace.
	create(t, sourceSecret(ns[0], "valid", ns[1], map[string]string{"k": "v"}))
	eventuallySecret(t, ns[1], "valid", nil)

	eventuallyEvent(t, ns[0], "huge", controller.ReasonInvalidAnnotation, "over the limit")
	eventuallyEvent(t, ns[0], "nothing-valid", controller.ReasonInvalidAnnotation, `"Bad_NS"`)
	eventuallyEvent(t, ns[0], "nothing-valid", controller.ReasonInvalidAnnotation, `"all-labelled"`)
	NewWithT(t).Expect(secretsIn("huge", ns[1])).To(BeEmpty())

	// Fixing the annotation mirrors the source.
	change(t, long, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationTargetNamespaces] = ns[1] })
	eventuallySecret(t, ns[1], "huge", nil)
}
