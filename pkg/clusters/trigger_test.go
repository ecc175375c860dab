package clusters_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// A policy's trigger counts a change only when the namespaces that hold
// one of its objects change: a second object where one is, an object
// changed, the first of two deleted, change nothing that would reconcile
// the policy's sources again; the first object of a namespace and the last
// one going (or ceasing to match) do. A trigger the agent may not list is
// refused at once, while the policy's sources are watched all the same.
func TestPolicyTriggerChanges(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	k8s := fleet.Hub.Client
	c, _ := countedCluster(ctx, t, rest.CopyConfig(fleet.Hub.Config), "trigger", annotations.ManagedByMember)
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	for _, ns := range []string{"trig-a", "trig-b"} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	yes := map[string]string{"create-secret": "true"}
	cm := func(ns, name string, lbls map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
	}
	first := cm("trig-a", "first", yes)
	g.Expect(k8s.Create(ctx, first)).To(Succeed())

	const id = "default/on-configmaps"
	spec := clusters.PolicySources{GVK: secrets, Namespace: "default", Names: []string{"db"},
		Trigger: &clusters.PolicyTrigger{GVK: configMaps, Selector: labels.SelectorFromSet(yes)}}
	_, err := c.WatchPolicySources(ctx, id, spec)
	g.Expect(err).NotTo(HaveOccurred())
	state := func() (sets.Set[string], uint64) {
		within, ok, changes := c.PolicyTriggers(id)
		g.Expect(ok).To(BeTrue())
		return within, changes
	}
	g.Eventually(func() bool { _, ok, _ := c.PolicyTriggers(id); return ok }, "10s", "20ms").Should(BeTrue())
	within, changes := state()
	g.Expect(within.UnsortedList()).To(ConsistOf("trig-a"), "the first list")
	g.Expect(changes).To(BeZero())

	// A second object beside the first, and a change to it: nothing. A
	// marker created after them shows that their events were handled.
	second := cm("trig-a", "second", yes)
	g.Expect(k8s.Create(ctx, second)).To(Succeed())
	second.Data = map[string]string{"k": "v"}
	g.Expect(k8s.Update(ctx, second)).To(Succeed())
	g.Expect(k8s.Create(ctx, cm("trig-b", "marker", yes))).To(Succeed())
	g.Eventually(func() bool { w, n := state(); return w.Has("trig-b") && n > 0 }, "10s", "20ms").Should(BeTrue())
	_, changes = state()
	g.Expect(changes).To(Equal(uint64(1)), "only trig-b's first object")

	// The first of trig-a's two goes: nothing; the second stops matching:
	// trig-a holds none any more.
	g.Expect(k8s.Delete(ctx, first)).To(Succeed())
	second.Labels = map[string]string{"create-secret": "false"}
	g.Expect(k8s.Update(ctx, second)).To(Succeed())
	g.Eventually(func() []string { w, _ := state(); return w.UnsortedList() }, "10s", "20ms").Should(ConsistOf("trig-b"))
	_, changes = state()
	g.Expect(changes).To(Equal(uint64(2)), "a deletion that left one, then the last one gone")

	// May not list ConfigMaps: the trigger is refused at once, the
	// sources are watched, and the trigger's namespaces are not known.
	cfg, _, err := fleet.Hub.AddUser("no-configmaps", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secrets-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "secrets-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secrets-only"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "no-configmaps"}}})).To(Succeed())
	limited, _ := countedCluster(ctx, t, cfg, "limited", annotations.ManagedByMember)
	_, err = limited.WatchPolicySources(ctx, id, spec)
	g.Expect(err).To(MatchError(clusters.ErrTriggerRefused))
	g.Expect(err.Error()).To(ContainSubstring("cannot list configmaps"))
	g.Eventually(func() bool { _, synced, _ := limited.PolicySourcesOf(id); return synced }, "10s", "20ms").Should(BeTrue(),
		"the sources of a policy whose trigger is refused are watched, so that nothing else waits for them")
	_, ok, _ := limited.PolicyTriggers(id)
	g.Expect(ok).To(BeFalse())
	_, err = limited.WatchPolicySources(ctx, id, spec)
	g.Expect(err).To(MatchError(clusters.ErrTriggerRefused), "the refusal is kept until it is tried again")
}
