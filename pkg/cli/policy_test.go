package cli_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// status and why on an object named by MirrorPolicies: its request is the
// first policy's spec, the others are named as not mirroring it, and the
// fixes edit the policy, not annotations the object's owner would take
// away.
func TestStatusAndWhyOfPolicySource(t *testing.T) {
	k8s := setup(t)
	g := NewWithT(t)
	g.Expect(fleettest.InstallPolicyCRD(api.Hub.Config)).Error().NotTo(HaveOccurred())
	ns := newNamespaces(t, "polsrc", "pola", "polb")
	src, a, b := ns[0], ns[1], ns[2]
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db"}})).To(Succeed())
	for _, p := range []struct{ name, target string }{{"first", a}, {"second", b}} {
		g.Expect(k8s.Create(ctx, &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: p.name}, Spec: v1alpha1.MirrorPolicySpec{
			Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db"}},
			TargetNamespaces: []string{p.target},
		}})).To(Succeed())
	}

	r := status(g, src, "secret/db")
	g.Expect(r.Source.Policy).To(Equal("first"))
	g.Expect(r.Source.OtherPolicies).To(Equal([]string{"second"}))
	g.Expect(r.Source.Entries).To(Equal([]string{a}))
	g.Expect(states(r)[a]).To(BeElementOf(cli.Pending, cli.Missing))
	g.Expect(states(r)[b]).To(Equal(cli.Excluded))

	out, err := run("status", "secret/db", "-n", src)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Policy:      MirrorPolicy first"))
	g.Expect(out).To(ContainSubstring("Also named:  MirrorPolicy second"))

	out, err = run("why", "secret/db", "-n", src, "--in", b)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Named by MirrorPolicy first"))
	g.Expect(out).To(ContainSubstring("MirrorPolicy second names it too and does not mirror it"))
	g.Expect(out).To(ContainSubstring("Fix: add " + b + " to spec.targetNamespaces of mirrorpolicy/first -n " + src))

	// On the policies themselves: each source, as status and why see it.
	out, err = run("status", "mirrorpolicy/second", "-n", src)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("MirrorPolicy: " + src + "/second"))
	g.Expect(out).To(ContainSubstring("Names:        Secret db"))
	g.Expect(out).To(ContainSubstring("Source:      Secret " + src + "/db"))
	out, err = run("status", "mirrorpolicy/first", "-n", src, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var pr cli.PolicyReport
	g.Expect(json.Unmarshal([]byte(out), &pr)).To(Succeed(), out)
	g.Expect(pr.Sources).To(HaveLen(1))
	g.Expect(pr.Sources[0].Source.Policy).To(Equal("first"))
	out, err = run("why", "mirrorpolicy/first", "-n", src, "--in", b)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HavePrefix("secret/db -n " + src + ": Named by MirrorPolicy first"))
	g.Expect(out).To(ContainSubstring("Fix: add " + b + " to spec.targetNamespaces of mirrorpolicy/first"))
}

// status and why follow a policy's trigger as the agent does: a namespace
// that holds a matching object is a target, its own namespace too when the
// copies are renamed, and one without is NotTriggered, saying what it
// lacks.
func TestStatusOfTriggeredPolicySource(t *testing.T) {
	k8s := setup(t)
	g := NewWithT(t)
	g.Expect(fleettest.InstallPolicyCRD(api.Hub.Config)).Error().NotTo(HaveOccurred())
	ns := newNamespaces(t, "trgsrc", "trga", "trgb")
	src, a, b := ns[0], ns[1], ns[2]
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "source-secret"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "on-configmap"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"source-secret"}},
		TargetNamespaces: []string{src, a, b},
		TargetName:       "downstream-secret",
		Trigger: &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"test-org"},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"create-secret": "true"}}},
	}})).To(Succeed())
	for _, n := range []string{src, a} {
		g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "test-org",
			Labels: map[string]string{"create-secret": "true"}}})).To(Succeed())
	}

	r := status(g, src, "secret/source-secret")
	g.Expect(r.Source.Policy).To(Equal("on-configmap"))
	got := states(r)
	g.Expect(got[src]).To(BeElementOf(cli.Pending, cli.Missing), "the renamed copy's place beside its source")
	g.Expect(got[a]).To(BeElementOf(cli.Pending, cli.Missing))
	g.Expect(got[b]).To(Equal(cli.Excluded))
	g.Expect(reasonIn(r, b)).To(ContainSubstring("NotTriggered"))
	g.Expect(reasonIn(r, b)).To(ContainSubstring("no ConfigMap named test-org labelled create-secret=true"))
}
