package cli_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// status and why read target-name and copy-once as the agent does: a
// renamed mirror is found under its name, and a copy-once copy edited in
// its namespace is in sync (the agent never writes to it again), not
// drifted.
func TestStatusOfRenamedCopyOnce(t *testing.T) {
	k8s := setup(t)
	ctx := context.Background()
	nss := newNamespaces(t, "src", "a", "b")
	src, a, b := nss[0], nss[1], nss[2]
	startAgent(t)
	renamed := &corev1.Secret{ObjectMeta: fleettest.SourceMeta(src, "app-token", a), StringData: map[string]string{"v": "1"}}
	renamed.Annotations[annotations.AnnotationTargetName] = "regcred"
	once := &corev1.Secret{ObjectMeta: fleettest.SourceMeta(src, "once", b), StringData: map[string]string{"v": "1"}}
	once.Annotations[annotations.AnnotationCopyOnce] = "true"
	g := NewWithT(t)
	for _, s := range []*corev1.Secret{renamed, once} {
		g.Expect(k8s.Create(ctx, s)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(states(status(g, src, "secret/app-token"))).To(HaveKeyWithValue(a, cli.InSync))
		g.Expect(states(status(g, src, "secret/once"))).To(HaveKeyWithValue(b, cli.InSync))
	}, wait.Timeout, wait.Poll).Should(Succeed())

	copy := fleettest.Secret(b, "once")
	fleettest.Change(t, wait, api.Hub, copy, func(s *corev1.Secret) { s.StringData = map[string]string{"v": "edited"} })
	r := status(g, src, "secret/once")
	g.Expect(states(r)).To(HaveKeyWithValue(b, cli.InSync))
	g.Expect(reasonIn(r, b)).To(ContainSubstring("copy-once"))

	out, err := run("why", "secret/app-token", "-n", src, "--in", a)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("InSync"))
}
