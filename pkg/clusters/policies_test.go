package clusters_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// An agent that may not list MirrorPolicies asks once, not at every pass,
// and goes without them; once granted, it serves them from the pass after
// the next discovery. The pass that lists the policies knows at once the
// kinds they name, before any policy has been reconciled: an agent started
// (or restarted) beside a policy watches its kind from its first pass,
// though no source of it carries our label.
func TestPoliciesRefusedOnceAndTheirKindsKnownAtOnce(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	g.Expect(fleettest.InstallPolicyCRD(fleet.Hub.Config)).Error().NotTo(HaveOccurred())

	grant := func(name string, rules ...rbacv1.PolicyRule) {
		g.Expect(fleet.Hub.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})).To(Succeed())
		g.Expect(fleet.Hub.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "no-policies"}}})).To(Succeed())
	}
	grant("configmaps-and-namespaces",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}})
	cfg, _, err := fleet.Hub.AddUser("no-policies", nil)
	g.Expect(err).NotTo(HaveOccurred())
	requests := &fleettest.Requests{}
	cfg.Wrap(requests.Wrap)
	c, err := clusters.New(cfg, clusters.Options{Name: "no-policies", ManagedBy: annotations.ManagedByMember, Handler: ignoreEvents{}})
	g.Expect(err).NotTo(HaveOccurred())
	c.Start(ctx)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	g.Expect(fleet.Hub.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}})).To(Succeed())
	g.Expect(fleet.Hub.Client.Create(ctx, &v1alpha1.MirrorPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: v1alpha1.MirrorPolicySpec{Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"db"}},
			TargetNamespaces: []string{"elsewhere"}},
	})).To(Succeed())

	// Refused: asked once over three passes, and nothing of the policy's
	// kind is watched (its source is not labelled).
	kinds := clusters.NewKinds(clusters.KindOptions{Explicit: []schema.GroupVersionKind{configMaps}, Lazy: true,
		Policies: true, DiscoveryInterval: 1 << 40, ManagedBy: annotations.ManagedByMember})
	for range 3 {
		kinds.Step(ctx, []*clusters.Cluster{c})
	}
	g.Expect(requests.Count(http.MethodGet, "/mirrorpolicies", http.StatusForbidden)).To(Equal(1), "a refused list of MirrorPolicies was asked again before the next discovery")
	g.Expect(c.Policies()).To(BeEmpty())
	g.Expect(c.Watched()).To(BeEmpty())

	// Granted: after the next discovery (ResetPresence), the pass that
	// lists the policy watches the kind it names.
	grant("policies", rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"mirrorpolicies"}, Verbs: []string{"get", "list", "watch"}})
	g.Eventually(func() []*v1alpha1.MirrorPolicy {
		c.ResetPresence()
		kinds.Step(ctx, []*clusters.Cluster{c})
		return c.Policies()
	}, "10s", "100ms").Should(HaveLen(1))
	g.Expect(c.Watched()).To(ConsistOf(configMaps), "the pass that listed the policy did not watch the kind it names")
	g.Expect(c.PolicyKinds().UnsortedList()).To(ConsistOf(configMaps))
}
