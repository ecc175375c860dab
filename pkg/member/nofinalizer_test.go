package member_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// policyFinalizer is the finalizer older member agents held on policies.
const policyFinalizer = annotations.Prefix + "policy-cleanup"

// finalizersOf returns the finalizers obj has now (nil once it is gone).
func finalizersOf(obj client.Object) func() []string {
	return func() []string {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return nil
		}
		return obj.GetFinalizers()
	}
}

// An upgrade cleans up: the finalizers an older agent held on a source and
// on a policy are taken off, whether the object lives on or is being
// deleted (then it goes, and its mirrors after it); somebody else's
// finalizer stays.
func TestOlderFinalizersTakenOff(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "oldfin", nil, "src", "a")

	kept := sourceSecret(ns[0], "kept", ns[1], map[string]string{"k": "v"})
	kept.Finalizers = []string{member.Finalizer, "example.com/keep"}
	create(t, kept)
	eventuallySecret(t, ns[1], "kept", nil)
	g.Eventually(finalizersOf(kept), timeout, poll).Should(Equal([]string{"example.com/keep"}))
	g.Eventually(status(kept), timeout, poll).Should(Equal("1/1 namespaces synced"))
	change(t, kept, func(s *corev1.Secret) { s.Finalizers = nil })

	// Invalid transform rules stop all writes of mirrors, not the removal
	// of a finalizer that was ours.
	broken := sourceSecret(ns[0], "broken", ns[1], map[string]string{"k": "v"})
	broken.Annotations[annotations.AnnotationTransform] = "this is not a rule"
	broken.Finalizers = []string{member.Finalizer}
	create(t, broken)
	eventuallyEvent(t, ns[0], "broken", "InvalidTransform", "")
	g.Eventually(finalizersOf(broken), timeout, poll).Should(BeEmpty())

	// Deleted while the older agent ran: held only by its finalizer.
	deleting := sourceSecret(ns[0], "deleting", ns[1], map[string]string{"k": "v"})
	deleting.Finalizers = []string{member.Finalizer}
	create(t, deleting)
	eventuallySecret(t, ns[1], "deleting", nil)
	g.Expect(k8s.Delete(context.Background(), deleting)).To(Succeed())
	eventuallyGone(t, deleting)
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "deleting"}})

	owned := ownedSecret(ns[0], "owned", nil, map[string]string{"k": "v"})
	create(t, owned)
	p := secretPolicy(ns[0], "older", []string{"owned"}, ns[1])
	p.Finalizers = []string{policyFinalizer, "example.com/keep"}
	create(t, p)
	eventuallySecret(t, ns[1], "owned", mirrorOf(ns[0], "owned", nil))
	g.Eventually(finalizersOf(p), timeout, poll).Should(Equal([]string{"example.com/keep"}))

	// Deleted while another finalizer holds it: as good as gone, its
	// mirrors go at once.
	g.Expect(k8s.Delete(context.Background(), p)).To(Succeed())
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "owned"}})
	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Finalizers = nil })
	eventuallyGone(t, p)

	// A policy an older agent held, deleted: it goes, then its mirrors.
	legacy := secretPolicy(ns[0], "legacy", []string{"owned"}, ns[1])
	legacy.Finalizers = []string{policyFinalizer}
	create(t, legacy)
	eventuallySecret(t, ns[1], "owned", mirrorOf(ns[0], "owned", nil))
	g.Expect(k8s.Delete(context.Background(), legacy)).To(Succeed())
	eventuallyGone(t, legacy)
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "owned"}})
	untouchedBut(t, owned)
}

// untouchedBut expects the source to carry nothing of ours: no finalizer,
// no status.
func untouchedBut(t *testing.T, src *corev1.Secret) {
	t.Helper()
	got := &corev1.Secret{}
	NewWithT(t).Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(src), got)).To(Succeed())
	NewWithT(t).Expect(got.Finalizers).To(BeEmpty())
	NewWithT(t).Expect(got.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
}

// A policy deleted while no agent runs goes at once (nothing of ours
// holds it, nor its namespace); the agent's next start removes its
// mirrors.
func TestPolicyDeletedWhileAgentDown(t *testing.T) {
	ns := namespaces(t, "poldown", nil, "src", "a", "b")
	src := ownedSecret(ns[0], "cfg", nil, map[string]string{"k": "v"})
	create(t, src)
	p := secretPolicy(ns[0], "gone", []string{"cfg"}, ns[1], ns[2])
	create(t, p)
	eventuallySecret(t, ns[1], "cfg", mirrorOf(ns[0], "cfg", nil))
	eventuallySecret(t, ns[2], "cfg", mirrorOf(ns[0], "cfg", nil))
	eventuallyPolicy(t, p, synced(1, 2))

	start := stopAgent(t)
	NewWithT(t).Expect(k8s.Delete(context.Background(), p)).To(Succeed())
	eventuallyGone(t, p)
	start()

	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "cfg"}})
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[2], Name: "cfg"}})
	untouched(t, src)
}

// A claim that moves leaves nothing of the old one behind: annotations to
// a policy (the status and the older agent's finalizer go, the mirrors
// follow the policy), one policy to another (the mirrors follow the new
// one, the old one's status no longer counts the source), and a policy
// deleted after the source's own annotations took over.
func TestClaimMoves(t *testing.T) {
	ns := namespaces(t, "claimmove", nil, "src", "a", "b", "c")

	t.Run("annotations to policy", func(t *testing.T) {
		g := NewWithT(t)
		src := sourceSecret(ns[0], "moving", ns[1], map[string]string{"k": "v"})
		src.Finalizers = []string{member.Finalizer} // as an older agent left it
		create(t, src)
		eventuallySecret(t, ns[1], "moving", nil)
		g.Eventually(status(src), timeout, poll).Should(Equal("1/1 namespaces synced"))
		p := secretPolicy(ns[0], "takes-over", []string{"moving"}, ns[2])
		create(t, p)
		eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
			condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "SourceClaimed")
		})

		// The owner stops annotating it: the policy serves it from now on.
		change(t, src, func(s *corev1.Secret) {
			delete(s.Labels, annotations.LabelEnabled)
			delete(s.Annotations, annotations.AnnotationSync)
			delete(s.Annotations, annotations.AnnotationTargetNamespaces)
		})
		eventuallySecret(t, ns[2], "moving", mirrorOf(ns[0], "moving", nil))
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "moving"}})
		eventuallyPolicy(t, p, synced(1, 1))
		g.Eventually(func(g Gomega) {
			got := &corev1.Secret{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(src), got)).To(Succeed())
			g.Expect(got.Finalizers).To(BeEmpty())
			g.Expect(got.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
		}, timeout, poll).Should(Succeed())
	})

	t.Run("policy to policy", func(t *testing.T) {
		g := NewWithT(t)
		src := ownedSecret(ns[0], "shared", nil, map[string]string{"k": "v"})
		create(t, src)
		first := secretPolicy(ns[0], "first", []string{"shared"}, ns[1])
		create(t, first)
		eventuallySecret(t, ns[1], "shared", mirrorOf(ns[0], "shared", nil))
		eventuallyPolicy(t, first, synced(1, 1))
		second := secretPolicy(ns[0], "second", []string{"shared"}, ns[3])
		create(t, second)
		eventuallyPolicy(t, second, func(g Gomega, p *v1alpha1.MirrorPolicy) {
			condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "SourceClaimed")
		})

		// The first stops naming it: the second serves it, and the first
		// counts it no more.
		change(t, first, func(p *v1alpha1.MirrorPolicy) { p.Spec.Source.Names = []string{"something-else"} })
		eventuallySecret(t, ns[3], "shared", mirrorOf(ns[0], "shared", nil))
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "shared"}})
		eventuallyPolicy(t, second, synced(1, 1))
		eventuallyPolicy(t, first, func(g Gomega, p *v1alpha1.MirrorPolicy) {
			g.Expect(p.Status.Sources).To(BeZero())
			g.Expect(p.Status.TargetsSynced).To(BeZero())
			condition(g, p, v1alpha1.ConditionReady, metav1.ConditionTrue, "NoSources")
		})
		untouched(t, src)
		g.Expect(k8s.Delete(context.Background(), second)).To(Succeed())
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[3], Name: "shared"}})
	})

	t.Run("policy deleted, annotations serve", func(t *testing.T) {
		g := NewWithT(t)
		src := ownedSecret(ns[0], "adopted", nil, map[string]string{"k": "v"})
		create(t, src)
		p := secretPolicy(ns[0], "before", []string{"adopted"}, ns[1])
		create(t, p)
		eventuallySecret(t, ns[1], "adopted", mirrorOf(ns[0], "adopted", nil))

		// The owner annotates it itself, then the policy goes.
		change(t, src, func(s *corev1.Secret) {
			s.Labels = map[string]string{annotations.LabelEnabled: "true"}
			s.Annotations = map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: ns[2]}
		})
		eventuallySecret(t, ns[2], "adopted", mirrorOf(ns[0], "adopted", nil))
		g.Expect(k8s.Delete(context.Background(), p)).To(Succeed())
		eventuallyGone(t, p)
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "adopted"}})
		g.Eventually(status(src), timeout, poll).Should(Equal("1/1 namespaces synced"))
		g.Expect(finalizersOf(src)()).To(BeEmpty())
	})
}

// A policy's status tells the truth: what the parser finds wrong in its
// spec is on the policy (Degraded, InvalidPolicy, naming the field, and a
// Warning Event there, not on the source), the valid entries are still
// served; invalid transform rules leave it not Ready.
func TestPolicyStatusTellsTheTruth(t *testing.T) {
	ns := namespaces(t, "poltruth", nil, "src", "a")
	src := ownedSecret(ns[0], "cfg", nil, map[string]string{"k": "v"})
	create(t, src)

	p := secretPolicy(ns[0], "half-bad", []string{"cfg"}, ns[1], "Not_A_Namespace")
	p.Spec.TargetNamespaceSelector = new("team in (")
	create(t, p)
	eventuallySecret(t, ns[1], "cfg", mirrorOf(ns[0], "cfg", nil))
	eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		msg := condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "InvalidPolicy")
		g.Expect(msg).To(ContainSubstring("spec.targetNamespaces"))
		g.Expect(msg).To(ContainSubstring("Not_A_Namespace"))
		g.Expect(msg).To(ContainSubstring("spec.targetNamespaceSelector"))
		g.Expect(p.Status.TargetsSynced).To(Equal(int32(1)))
		condition(g, p, v1alpha1.ConditionReady, metav1.ConditionTrue, "Synced")
	})
	eventuallyEvent(t, ns[0], "half-bad", "InvalidPolicy", "spec.targetNamespaces")
	NewWithT(t).Expect(eventsFor(ns[0], "cfg", "InvalidAnnotation")).To(BeEmpty(), "the policy's problems said on its source")

	// Fixed: nothing wrong any more.
	change(t, p, func(p *v1alpha1.MirrorPolicy) {
		p.Spec.TargetNamespaces = []string{ns[1]}
		p.Spec.TargetNamespaceSelector = nil
	})
	eventuallyPolicy(t, p, synced(1, 1))

	// Invalid rules and no mirror: not Ready, and nothing written.
	other := ownedSecret(ns[0], "other", nil, map[string]string{"k": "v"})
	create(t, other)
	bad := secretPolicy(ns[0], "bad-rules", []string{"other"}, ns[1])
	bad.Spec.Transform = "this is not a rule"
	create(t, bad)
	eventuallyPolicy(t, bad, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(condition(g, p, v1alpha1.ConditionReady, metav1.ConditionFalse, "InvalidPolicy")).To(ContainSubstring("spec.transform"))
		g.Expect(condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "InvalidPolicy")).To(ContainSubstring("spec.transform"))
	})
	eventuallyEvent(t, ns[0], "bad-rules", "InvalidPolicy", "spec.transform")
	consistentlyAbsent(t, ns[1], "other")
	untouched(t, other)
}
