package member_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/controller"
)

// A new namespace is served first: with one worker, the mirrors of every
// source that targets it are written before any of those sources is
// walked whole (each walk ends with the source's status, which says one
// more namespace is synced). A namespace that no source targets changes
// nothing.
func TestNewNamespaceServedFirst(t *testing.T) {
	const sources, targets = 6, 20
	g := NewWithT(t)
	withAgent(t, "--workers=1")
	suffixes := []string{"src"}
	for i := range targets {
		suffixes = append(suffixes, fmt.Sprintf("t%02d", i))
	}
	ns := namespaces(t, "first", nil, suffixes...)
	prefix := strings.TrimSuffix(ns[1], "t00")
	var srcs []*corev1.Secret
	for i := range sources {
		s := sourceSecret(ns[0], fmt.Sprintf("s%d", i), prefix+"t*", map[string]string{"k": "v"})
		create(t, s)
		srcs = append(srcs, s)
	}
	for _, s := range srcs {
		g.Eventually(status(s), timeout, poll).Should(Equal(fmt.Sprintf("%d/%d namespaces synced", targets, targets)))
	}

	// Not a target of these sources: nothing of theirs is written (other
	// tests' sources that target every namespace may be).
	mark := len(agent.requests.detailed())
	other := prefix + "other"
	createNamespace(t, other, nil)
	consistentlyAbsent(t, other, srcs[0].Name)
	for _, r := range agent.requests.detailed()[mark:] {
		if r.Method != http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"+ns[0]+"/secrets") {
			t.Errorf("a source written for a namespace it does not target: %s %s", r.Method, r.URL.Path)
		}
	}

	// Twice: the second namespace comes after the status writes of the
	// first, which must not turn the fast pass off.
	for round, name := range []string{"tnew", "tnext"} {
		mark = len(agent.requests.detailed())
		fresh := prefix + name
		createNamespace(t, fresh, nil)
		for _, s := range srcs {
			eventuallySecret(t, fresh, s.Name, nil)
		}
		n := targets + 1 + round
		for _, s := range srcs {
			g.Eventually(status(s), timeout, poll).Should(Equal(fmt.Sprintf("%d/%d namespaces synced", n, n)))
			// The whole reconcile reports what the fast pass wrote.
			eventuallyEvent(t, ns[0], s.Name, controller.ReasonMirrorsSynced,
				fmt.Sprintf("Created 1, updated 0, replaced 0, deleted 0 mirrors; %d/%d namespaces synced", n, n))
		}
		var writes []string
		for _, r := range agent.requests.detailed()[mark:] {
			if r.Method != http.MethodGet {
				writes = append(writes, r.Method+" "+r.URL.Path)
			}
		}
		lastMirror := -1
		firstStatus := slices.IndexFunc(writes, func(w string) bool {
			return strings.Contains(w, "/namespaces/"+ns[0]+"/secrets/")
		})
		for i, w := range writes {
			if strings.HasPrefix(w, http.MethodPost+" /api/v1/namespaces/"+fresh+"/secrets") {
				lastMirror = i
			}
		}
		g.Expect(firstStatus).To(BeNumerically(">=", 0), "no status written: %v", writes)
		g.Expect(lastMirror).To(BeNumerically("<", firstStatus), "%s: the new namespace's mirrors wait for the sources' walks:\n%s", fresh, strings.Join(writes, "\n"))
	}
}
