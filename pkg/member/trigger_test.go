package member_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// triggerObject is a ConfigMap of the kind the tests' triggers select.
func triggerObject(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// A policy's trigger (Kyverno's generate rules triggered by an object that
// is not a Namespace): a namespace its entries reach gets its copy once an
// object the trigger selects is there, its own namespace too when the copy
// has another name, and loses it once the last such object is gone or no
// longer matches. Copies made once stay when their trigger goes.
func TestPolicyTrigger(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespaces(t, "trig", nil, "src", "a", "b", "c")
	src := ownedSecret(ns[0], "source-secret", nil, map[string]string{"foo": "bar"})
	create(t, src)
	p := secretPolicy(ns[0], "on-configmap", []string{"source-secret"}, "all")
	p.Spec.TargetName = "downstream-secret"
	p.Spec.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"test-org"},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"create-secret": "true"}}}
	create(t, p)
	// No trigger anywhere yet: the policy serves its source, with no copy.
	eventuallyPolicy(t, p, synced(1, 0))
	g.Expect(secretsIn("downstream-secret", ns...)).To(BeEmpty())

	// A trigger in a: a's copy. One of another name (b) and one without
	// the label (c) are no triggers.
	yes := map[string]string{"create-secret": "true"}
	inA := triggerObject(ns[1], "test-org", yes)
	create(t, inA)
	create(t, triggerObject(ns[2], "other-name", yes))
	create(t, triggerObject(ns[3], "test-org", map[string]string{"create-secret": "false"}))
	eventuallySecret(t, ns[1], "downstream-secret", mirrorOf(ns[0], "source-secret", map[string]string{"foo": "bar"}))
	eventuallyPolicy(t, p, synced(1, 1))

	// A trigger beside the source: a renamed copy beside it, the source
	// untouched.
	inSrc := triggerObject(ns[0], "test-org", yes)
	create(t, inSrc)
	eventuallySecret(t, ns[0], "downstream-secret", mirrorOf(ns[0], "source-secret", map[string]string{"foo": "bar"}))
	eventuallyPolicy(t, p, synced(1, 2))
	g.Expect(secretsIn("downstream-secret", ns[2], ns[3])).To(BeEmpty())

	// The source changes: every copy follows.
	change(t, src, func(s *corev1.Secret) { s.StringData = map[string]string{"foo": "baz"} })
	for _, target := range ns[:2] {
		eventuallySecret(t, target, "downstream-secret", mirrorOf(ns[0], "source-secret", map[string]string{"foo": "baz"}))
	}

	// c's object starts to match: c's copy. a's stops: a's copy goes.
	change(t, triggerObject(ns[3], "test-org", nil), func(cm *corev1.ConfigMap) { cm.Labels = yes })
	eventuallySecret(t, ns[3], "downstream-secret", mirrorOf(ns[0], "source-secret", map[string]string{"foo": "baz"}))
	change(t, inA, func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"create-secret": "false"} })
	eventuallyGone(t, secretRef(ns[1], "downstream-secret"))

	// The trigger beside the source is deleted: its copy goes, the source
	// stays.
	g.Expect(k8s.Delete(ctx, inSrc)).To(Succeed())
	eventuallyGone(t, secretRef(ns[0], "downstream-secret"))
	eventuallyPolicy(t, p, synced(1, 1))
	eventuallySecret(t, ns[0], "source-secret", func(g Gomega, s *corev1.Secret) {
		g.Expect(string(s.Data["foo"])).To(Equal("baz"))
	})

	// A restart, with a trigger gone while the agent was away: the copy
	// that still has its trigger is never touched (the same object, the
	// same version), and the other goes.
	inB := triggerObject(ns[2], "test-org", yes)
	create(t, inB)
	before := eventuallySecret(t, ns[2], "downstream-secret", mirrorOf(ns[0], "source-secret", map[string]string{"foo": "baz"}))
	kept := mustSecret(t, ns[0], "source-secret")
	start := stopAgent(t)
	g.Expect(k8s.Delete(ctx, triggerObject(ns[3], "test-org", nil))).To(Succeed())
	start()
	eventuallyGone(t, secretRef(ns[3], "downstream-secret"))
	eventuallyPolicy(t, p, synced(1, 1))
	after := mustSecret(t, ns[2], "downstream-secret")
	g.Expect(after.UID).To(Equal(before.UID), "a copy whose trigger stayed was made again after the restart")
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "a copy whose trigger stayed was written after the restart")
	untouched(t, kept)
	g.Expect(k8s.Delete(ctx, inB)).To(Succeed())
	eventuallyGone(t, secretRef(ns[2], "downstream-secret"))
	create(t, triggerObject(ns[3], "test-org", yes))
	eventuallySecret(t, ns[3], "downstream-secret", mirrorOf(ns[0], "source-secret", map[string]string{"foo": "baz"}))

	// Copy once: made when the trigger appears, kept, as a plain object,
	// when it goes.
	once := ownedSecret(ns[0], "once-secret", nil, map[string]string{"v": "1"})
	create(t, once)
	po := secretPolicy(ns[0], "once-on-configmap", []string{"once-secret"}, "all")
	po.Spec.CopyOnce = true
	po.Spec.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"want-once"}}
	create(t, po)
	want := triggerObject(ns[2], "want-once", nil)
	create(t, want)
	eventuallySecret(t, ns[2], "once-secret", mirrorOf(ns[0], "once-secret", map[string]string{"v": "1"}))
	eventuallyPolicy(t, po, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.Copied).To(ConsistOf(ns[2] + "/once-secret"))
	})
	g.Expect(k8s.Delete(ctx, want)).To(Succeed())
	eventuallySecret(t, ns[2], "once-secret", plainCopy(map[string]string{"v": "1"}))

	// A trigger of a kind the cluster does not serve: the policy says so,
	// and mirrors nothing.
	bad := secretPolicy(ns[0], "on-nothing", []string{"once-secret"}, "all")
	bad.Spec.Trigger = &v1alpha1.PolicyTrigger{APIVersion: "example.com/v1", Kind: "NoSuchKind"}
	create(t, bad)
	eventuallyPolicy(t, bad, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(condition(g, p, v1alpha1.ConditionReady, metav1.ConditionFalse, "KindNotMirrored")).To(ContainSubstring("spec.trigger"))
	})

	// The trigger's own policy deleted: its copies go with it.
	g.Expect(k8s.Delete(ctx, p)).To(Succeed())
	eventuallyGone(t, secretRef(ns[3], "downstream-secret"))
}
