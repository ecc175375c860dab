package cli_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
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

// status reads a policy's spec.adopt and keepAdditions as the agent does:
// a Kyverno copy of the source is Drifted (the agent adopts it) only when
// the policy lists kyverno, and a mirror with a key another writer added
// is in sync only with keepAdditions. No agent runs: nothing is written.
func TestStatusReadsPolicyAdoptAndAdditions(t *testing.T) {
	k8s := setup(t)
	ctx := context.Background()
	g := NewWithT(t)
	_, err := fleettest.InstallPolicyCRD(api.Hub.Config)
	g.Expect(err).NotTo(HaveOccurred())
	nss := newNamespaces(t, "src", "a")
	src, a := nss[0], nss[1]
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db"}, StringData: map[string]string{"v": "1"}}
	g.Expect(k8s.Create(ctx, s)).To(Succeed())
	made := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "db", Labels: map[string]string{
		"app.kubernetes.io/managed-by":         "kyverno",
		"generate.kyverno.io/policy-name":      "sync",
		"generate.kyverno.io/source-namespace": src,
		"generate.kyverno.io/source-uid":       string(s.UID),
	}}, StringData: map[string]string{"v": "1"}}
	g.Expect(k8s.Create(ctx, made)).To(Succeed())
	p := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "p"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db"}},
		TargetNamespaces: []string{a},
	}}
	g.Expect(k8s.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(ctx, p) })

	r := status(g, src, "secret/db")
	g.Expect(states(r)).To(HaveKeyWithValue(a, cli.Conflict))
	fleettest.Change(t, wait, api.Hub, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.Adopt = []string{"kyverno"} })
	r = status(g, src, "secret/db")
	g.Expect(states(r)).To(HaveKeyWithValue(a, cli.Drifted))
	g.Expect(reasonIn(r, a)).To(ContainSubstring("made by kyverno"))

	// Our mirror, as the agent would have written it, plus a key added
	// by hand.
	g.Expect(k8s.Delete(ctx, made)).To(Succeed())
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Secret"})
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), u)).To(Succeed())
	// The agent the plugin reads is agentArgs' (cluster test).
	want, _, err := desired.Build(u, desired.Target{Cluster: "test", Namespace: a},
		desired.Options{SourceCluster: "test", ManagedBy: annotations.ManagedByMember}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	want.SetResourceVersion("")
	g.Expect(k8s.Create(ctx, want, client.FieldOwner(member.FieldManager))).To(Succeed())
	fleettest.Change(t, wait, api.Hub, fleettest.Secret(a, "db"), func(m *corev1.Secret) { m.Data["mine"] = []byte("x") })
	g.Expect(states(status(g, src, "secret/db"))).To(HaveKeyWithValue(a, cli.Drifted))
	fleettest.Change(t, wait, api.Hub, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.KeepAdditions = true })
	g.Eventually(func(g Gomega) {
		g.Expect(states(status(g, src, "secret/db"))).To(HaveKeyWithValue(a, cli.InSync))
	}, wait.Timeout, wait.Poll).Should(Succeed())
}
