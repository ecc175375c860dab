package cli_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// TestStatusOfAdoptableCopies: status says which copies made by another
// tool the agent will adopt and why it will not adopt the others, and the
// agent then does exactly that.
func TestStatusOfAdoptableCopies(t *testing.T) {
	k8s := setup(t)
	ctx := context.Background()
	nss := newNamespaces(t, "src", "a", "b")
	src, a, b := nss[0], nss[1], nss[2]
	// kubernetes-reflector's copies: of this source in a, of another one in b.
	reflected := func(ns, reflects string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds", Annotations: map[string]string{
				peers.ReflectorAutoReflects: "True", peers.ReflectorReflects: reflects, peers.ReflectorReflectedVersion: "1",
			}},
			StringData: map[string]string{"password": "old"},
		}
	}
	for _, s := range []*corev1.Secret{reflected(a, src+"/creds"), reflected(b, "other/creds")} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		// Namespaces are never removed on envtest (no namespace
		// controller): a copy left behind would be counted by the
		// cluster-wide scans of the migrate test.
		t.Cleanup(func() { _ = k8s.Delete(ctx, s) })
	}
	source := &corev1.Secret{ObjectMeta: fleettest.SourceMeta(src, "creds", a+","+b), StringData: map[string]string{"password": "s3cret"}}
	source.Annotations[annotations.AnnotationAdopt] = "reflector"
	if err := k8s.Create(ctx, source); err != nil {
		t.Fatal(err)
	}

	g := NewWithT(t)
	r := status(g, src, "secret/creds")
	g.Expect(states(r)).To(And(HaveKeyWithValue(a, cli.Drifted), HaveKeyWithValue(b, cli.Conflict)))
	g.Expect(reasonIn(r, a)).To(ContainSubstring("made by reflector; the agent adopts it"))
	g.Expect(reasonIn(r, b)).To(ContainSubstring(`not adopted: reflector: it reflects "other/creds"`))

	startAgent(t)
	g.Eventually(func(g Gomega) {
		g.Expect(states(status(g, src, "secret/creds"))).To(And(HaveKeyWithValue(a, cli.InSync), HaveKeyWithValue(b, cli.Conflict)))
	}, wait.Timeout, wait.Poll).Should(Succeed())
}
