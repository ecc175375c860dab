package member_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
)

// systemNamespaces are excluded by the test agent's flags (the defaults plus
// its own namespace).
var systemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", agentNS}

// Item 9: neither `all` nor a glob reaches an excluded namespace (defaults,
// the agent's own namespace, an operator glob), nor the source's own
// namespace; an excluded namespace named explicitly is reported, not written.
func TestExcludedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "excl", nil, "src", "ok")
	n := nsCounter.Load()
	excluded := fmt.Sprintf("fm-excluded-%d", n)
	createNamespace(t, excluded, nil)
	never := append([]string{excluded}, systemNamespaces...)

	all := sourceSecret(ns[0], fmt.Sprintf("everywhere-%d", n), annotations.KeywordAll, map[string]string{"k": "v"})
	create(t, all)
	t.Cleanup(func() { deleteAndWait(t, all) })
	globs := sourceSecret(ns[0], "globs", "kube-*, fm-excluded-*, fleetmirror-*, ex?l*-src, "+ns[1], map[string]string{"k": "v"})
	create(t, globs)
	named := sourceSecret(ns[0], "named", "kube-system, "+agentNS+", "+excluded+", "+ns[1], map[string]string{"k": "v"})
	create(t, named)

	eventuallySecret(t, ns[1], all.Name, nil)
	eventuallySecret(t, "default", all.Name, nil)
	eventuallySecret(t, ns[1], "globs", nil)
	eventuallySecret(t, ns[1], "named", nil)
	g.Eventually(status(named), timeout, poll).Should(Equal("1/1 namespaces synced; 3 refused"))
	eventuallyEvent(t, ns[0], "named", controller.ReasonNamespaceRefused, agentNS+", "+excluded+", kube-system")
	// The source's own namespace matches a glob, yet is no target: the
	// source itself would be a conflict there.
	g.Eventually(status(globs), timeout, poll).Should(Equal("1/1 namespaces synced"))
	g.Expect(status(all)()).NotTo(ContainSubstring("conflict"))
	g.Consistently(func() []string {
		return append(append(secretsIn(all.Name, never...), secretsIn("globs", never...)...), secretsIn("named", never...)...)
	}, settle, poll).Should(BeEmpty())
}

// Item 9: with --included-namespaces only matching namespaces are targeted,
// by keywords and globs; others named explicitly are refused.
func TestIncludedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "incl", nil, "src", "in-a", "out-b")
	withAgent(t, "--included-namespaces="+nsGlob(ns[1], "in-"))

	all := sourceSecret(ns[0], "inc-all", annotations.KeywordAll+", "+ns[2], map[string]string{"k": "v"})
	create(t, all)
	t.Cleanup(func() { deleteAndWait(t, all) })
	eventuallySecret(t, ns[1], "inc-all", nil)
	g.Eventually(status(all), timeout, poll).Should(Equal("1/1 namespaces synced; 1 refused"))
	eventuallyEvent(t, ns[0], "inc-all", controller.ReasonNamespaceRefused, ns[2])
	g.Consistently(func() []string {
		return secretsIn("inc-all", append([]string{ns[2], "default"}, systemNamespaces...)...)
	},
		settle, poll).Should(BeEmpty())
}
