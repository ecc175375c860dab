package clusters_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

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
	c, requests := countedCluster(ctx, t, cfg, "no-policies", annotations.ManagedByMember)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	g.Expect(fleet.Hub.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}})).To(Succeed())
	g.Expect(fleet.Hub.Client.Create(ctx, configMapPolicy("db"))).To(Succeed())

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

// With explicit kinds, an agent that looked at a cluster before the
// MirrorPolicy CRD was installed there (a member chart installed after the
// hub registered the cluster, or a CRD not yet served when the agent
// started) asks about it again at its next discovery, not at every pass,
// and serves the cluster's policies from then on. Before, the answer "not
// served" was kept until the agent restarted.
func TestPoliciesCRDInstalledLater(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	c, requests := countedCluster(ctx, t, rest.CopyConfig(fleet.Hub.Config), "crd-later", annotations.ManagedByHub)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	opts := clusters.KindOptions{Explicit: []schema.GroupVersionKind{configMaps}, Lazy: true,
		Policies: true, DiscoveryInterval: 1 << 40, ManagedBy: annotations.ManagedByHub}
	kinds := clusters.NewKinds(opts)
	policiesGroup := "/apis/" + v1alpha1.GroupVersion.String()
	for range 3 {
		kinds.Step(ctx, []*clusters.Cluster{c})
	}
	g.Expect(requests.Count(http.MethodGet, policiesGroup, http.StatusNotFound)).To(Equal(1), "MirrorPolicies not served: asked once, not at every pass")

	g.Expect(fleettest.InstallPolicyCRD(fleet.Hub.Config)).Error().NotTo(HaveOccurred())
	g.Expect(fleet.Hub.Client.Create(ctx, configMapPolicy("db"))).To(Succeed())
	for range 3 {
		kinds.Step(ctx, []*clusters.Cluster{c})
	}
	g.Expect(c.Policies()).To(BeEmpty(), "asked again before the next discovery")

	// The next discovery (a Kinds that has not discovered yet: its first
	// pass is one) asks again, and the pass watches the policies.
	next := clusters.NewKinds(opts)
	g.Eventually(func() []*v1alpha1.MirrorPolicy {
		next.Step(ctx, []*clusters.Cluster{c})
		return c.Policies()
	}, "10s", "100ms").Should(HaveLen(1))
	g.Expect(c.PolicyKinds().UnsortedList()).To(ConsistOf(configMaps))
}

// The first request for a CRD's objects creates the API server's cache of
// them, which answers 429 "storage is (re)initializing" with Retry-After 1
// until it has filled: the policies of a CRD installed moments before the
// agent (helm install, the benchmark) are listed at once all the same,
// from etcd, not a second later. Before, every first start of an agent
// waited that second before it mirrored anything.
func TestPoliciesOfANewCRDListedAtOnce(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	g.Expect(fleettest.InstallPolicyCRD(fleet.Hub.Config)).Error().NotTo(HaveOccurred())
	c, requests := countedCluster(ctx, t, rest.CopyConfig(fleet.Hub.Config), "new-crd", annotations.ManagedByMember)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	kinds := clusters.NewKinds(clusters.KindOptions{Explicit: []schema.GroupVersionKind{configMaps}, Lazy: true,
		Policies: true, DiscoveryInterval: 1 << 40, ManagedBy: annotations.ManagedByMember})
	kinds.Step(ctx, []*clusters.Cluster{c})
	listed := requests.Statuses(http.MethodGet, "/mirrorpolicies")
	g.Expect(listed).NotTo(BeEmpty(), "the pass did not list the MirrorPolicies")
	g.Expect(listed[0]).To(Equal(http.StatusOK), "the first list of a new CRD's objects was refused while the API server's cache filled: %v", listed)

	// The watch that follows it catches up once the cache has filled: a
	// policy created now is served.
	g.Expect(fleet.Hub.Client.Create(ctx, configMapPolicy("db"))).To(Succeed())
	g.Eventually(c.Policies, "10s", "50ms").Should(HaveLen(1))
}

// policyLookups is a Handler that, like the reconciler, reads each policy
// it is told of from the cluster, and reports whether it was there.
type policyLookups struct {
	ignoreEvents
	c     atomic.Pointer[clusters.Cluster]
	found chan bool
}

func (h *policyLookups) Policy(_ string, p *v1alpha1.MirrorPolicy, _ bool) {
	_, ok := h.c.Load().Policy(p.Namespace, p.Name)
	h.found <- ok
}

// A policy handed on by the watch's first list can be read from the
// cluster when its handler runs: the reconcile it starts finds it. Before,
// the handler ran before the watch was the cluster's, the reconcile found
// no policy and took it for deleted, and a policy created just before the
// watch was never served (test/e2e TestChartsRBAC, now and then).
func TestPolicyEventsFindTheirPolicy(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	g.Expect(fleettest.InstallPolicyCRD(fleet.Hub.Config)).Error().NotTo(HaveOccurred())
	g.Expect(fleet.Hub.Client.Create(ctx, configMapPolicy("listed"))).To(Succeed())

	h := &policyLookups{found: make(chan bool, 10)}
	c, err := clusters.New(fleet.Hub.Config, clusters.Options{Name: "lookups", ManagedBy: annotations.ManagedByMember, Handler: h})
	g.Expect(err).NotTo(HaveOccurred())
	h.c.Store(c)
	c.Start(ctx)
	g.Expect(c.WatchPolicies(ctx)).To(BeTrue())
	g.Eventually(h.found, "10s").Should(Receive(BeTrue()), "the listed policy was not in the cluster's cache when its handler ran")

	g.Expect(fleet.Hub.Client.Create(ctx, configMapPolicy("watched"))).To(Succeed())
	g.Eventually(h.found, "10s").Should(Receive(BeTrue()), "a policy created later was not in the cache when its handler ran")
}

// configMapPolicy is a MirrorPolicy in namespace default of the ConfigMap
// db.
func configMapPolicy(name string) *v1alpha1.MirrorPolicy {
	return &v1alpha1.MirrorPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.MirrorPolicySpec{Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"db"}},
			TargetNamespaces: []string{"elsewhere"}},
	}
}

// countedCluster starts a Cluster named name through cfg, whose requests
// it counts.
func countedCluster(ctx context.Context, t *testing.T, cfg *rest.Config, name, managedBy string) (*clusters.Cluster, *fleettest.Requests) {
	t.Helper()
	requests := &fleettest.Requests{}
	cfg.Wrap(requests.Wrap)
	c, err := clusters.New(cfg, clusters.Options{Name: name, ManagedBy: managedBy, Handler: ignoreEvents{}})
	if err != nil {
		t.Fatal(err)
	}
	c.Start(ctx)
	return c, requests
}
