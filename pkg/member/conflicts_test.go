package member_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// The agent never conflicts with itself: its own writes to a source (the
// status, then the status again while namespaces come and go and its cache
// still shows an older version) are made from what it wrote last, so no
// PATCH of a source is answered 409.
func TestOwnSourceWritesNeverConflict(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "own", nil, "src", "a")
	var sources []*corev1.Secret
	for i := range 20 {
		s := sourceSecret(ns[0], fmt.Sprintf("s%d", i), ns[1]+", "+nsGlob(ns[0], "late-"), map[string]string{"k": "v"})
		create(t, s)
		sources = append(sources, s)
	}
	// Namespaces created meanwhile reconcile every source again, while
	// the first status writes are still reaching the cache.
	for i := range 3 {
		createNamespace(t, strings.TrimSuffix(nsGlob(ns[0], "late-"), "*")+fmt.Sprint(i), nil)
	}
	for _, s := range sources {
		g.Eventually(status(s), timeout, poll).Should(Equal("4/4 namespaces synced"))
		g.Expect(s.Finalizers).NotTo(ContainElement(member.Finalizer))
	}
	var conflicts []string
	for _, r := range agent.requests.detailed() {
		if r.Method == http.MethodPatch && r.Status == http.StatusConflict && strings.Contains(r.URL.Path, "/namespaces/"+ns[0]+"/secrets/") {
			conflicts = append(conflicts, r.URL.Path)
		}
	}
	g.Expect(conflicts).To(BeEmpty(), "409 on the agent's own writes to sources")
}
