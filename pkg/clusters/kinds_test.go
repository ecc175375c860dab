package clusters_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

type ignoreEvents struct{}

func (ignoreEvents) Source(string, schema.GroupVersionKind, *unstructured.Unstructured, bool) {}
func (ignoreEvents) Mirror(string, schema.GroupVersionKind, *clusters.Mirror, bool)           {}
func (ignoreEvents) Namespace(string, *metav1.PartialObjectMetadata)                          {}
func (ignoreEvents) Policy(string, *v1alpha1.MirrorPolicy, bool)                              {}

// refusedAddress returns a loopback address nothing listens on.
func refusedAddress(t *testing.T) string {
	t.Helper()
	addr, err := fleettest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// A cluster that cannot answer the lazy probes decides nothing: it makes
// no kind watched in a healthy cluster, and it stops no watch there either.
func TestKindsProbeFailureChangesNothingElsewhere(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)

	opts := clusters.Options{ManagedBy: annotations.ManagedByMember, Handler: ignoreEvents{}}
	opts.Name = "healthy"
	healthy, err := clusters.New(fleet.Hub.Config, opts)
	g.Expect(err).NotTo(HaveOccurred())
	opts.Name = "broken"
	brokenCfg := rest.CopyConfig(fleet.Hub.Config)
	brokenCfg.Host = "https://" + refusedAddress(t)
	broken, err := clusters.New(brokenCfg, opts)
	g.Expect(err).NotTo(HaveOccurred())
	healthy.Start(ctx)
	broken.Start(ctx)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	kinds := clusters.NewKinds(clusters.KindOptions{
		Explicit: []schema.GroupVersionKind{configMaps}, Lazy: true, ManagedBy: annotations.ManagedByMember,
	})
	both := []*clusters.Cluster{healthy, broken}

	// No source anywhere that answers: nothing is watched. The healthy
	// cluster's caches hold all there is of ours (nothing); the broken
	// one's are not known.
	kinds.Step(ctx, both)
	g.Expect(healthy.Watched()).To(BeEmpty(), "a failing probe elsewhere started a watch")
	g.Expect(kinds.Settled(healthy)).To(BeTrue())
	g.Expect(kinds.Settled(broken)).To(BeFalse())
	// A kind the cluster does not serve has nothing there.
	widgets := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	withWidgets := clusters.NewKinds(clusters.KindOptions{
		Explicit: []schema.GroupVersionKind{configMaps, widgets}, Lazy: true, ManagedBy: annotations.ManagedByMember,
	})
	withWidgets.Step(ctx, []*clusters.Cluster{healthy})
	g.Expect(withWidgets.Settled(healthy)).To(BeTrue(), "a kind not served left the cluster unsettled")

	// A source in the healthy cluster: watched there.
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "src",
		Labels: map[string]string{annotations.LabelEnabled: "true"}}}
	g.Expect(fleet.Hub.Client.Create(ctx, src)).To(Succeed())
	// The source is noticed by a watch: the pass after it finds it.
	g.Eventually(func() []schema.GroupVersionKind {
		kinds.Step(ctx, both)
		return healthy.Watched()
	}, "5s", "50ms").Should(ConsistOf(configMaps))
	g.Eventually(func() int { return len(healthy.Sources(configMaps)) }, "10s", "50ms").Should(Equal(1))

	// The source goes: with a cluster that cannot answer, the watch stays
	// (no answer is no reason to stop); once every cluster answers, it goes
	// (no idle timeout here).
	g.Expect(fleet.Hub.Client.Delete(ctx, src)).To(Succeed())
	g.Eventually(func() int { return len(healthy.Sources(configMaps)) }, "10s", "50ms").Should(BeZero())
	kinds.Step(ctx, both)
	g.Expect(healthy.Watched()).To(ConsistOf(configMaps), "a failing probe elsewhere stopped a watch")
	kinds.Step(ctx, []*clusters.Cluster{healthy})
	g.Expect(healthy.Watched()).To(BeEmpty())
}

// A kind the agent may not list (discovery offers it, RBAC does not grant
// it) is simply not mirrored: it does not make the cluster look broken for
// the other kinds of the same pass. With several forbidden kinds probed in
// random order before the allowed one, a pass that gave up on the cluster
// at the first refusal would leave ConfigMaps unwatched almost every time.
func TestKindsForbiddenKindIsSkipped(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)

	// An identity that may use namespaces and ConfigMaps only.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
	}}
	g.Expect(fleet.Hub.Client.Create(ctx, role)).To(Succeed())
	g.Expect(fleet.Hub.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "configmaps-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "limited"}}})).To(Succeed())
	cfg, _, err := fleet.Hub.AddUser("limited", nil)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := clusters.New(cfg, clusters.Options{Name: "limited", ManagedBy: annotations.ManagedByMember, Handler: ignoreEvents{}})
	g.Expect(err).NotTo(HaveOccurred())
	c.Start(ctx)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "src",
		Labels: map[string]string{annotations.LabelEnabled: "true"}}}
	g.Expect(fleet.Hub.Client.Create(ctx, src)).To(Succeed())
	forbidden := []schema.GroupVersionKind{
		{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ReplicationController"},
		{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "batch", Version: "v1", Kind: "Job"},
	}
	for range 3 {
		kinds := clusters.NewKinds(clusters.KindOptions{
			Explicit: append(slices.Clone(forbidden), configMaps), Lazy: true, ManagedBy: annotations.ManagedByMember,
		})
		kinds.Step(ctx, []*clusters.Cluster{c})
		g.Expect(c.Watched()).To(ConsistOf(configMaps), "a forbidden kind held back an allowed one")
		g.Expect(kinds.Settled(c)).To(BeTrue(), "a forbidden kind left the cluster unsettled")
		c.Unwatch(configMaps)
	}

	// Once RBAC grants Secrets, a source Secret is found: kinds the agent
	// could not list are asked about again (every discovery interval, each
	// pass here).
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	g.Expect(fleet.Hub.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secrets-too"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}})).To(Succeed())
	g.Expect(fleet.Hub.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "secrets-too"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secrets-too"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "limited"}}})).To(Succeed())
	g.Expect(fleet.Hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "src",
		Labels: map[string]string{annotations.LabelEnabled: "true"}}})).To(Succeed())
	kinds := clusters.NewKinds(clusters.KindOptions{Explicit: []schema.GroupVersionKind{secrets}, Lazy: true, ManagedBy: annotations.ManagedByMember})
	g.Eventually(func() []schema.GroupVersionKind {
		kinds.Step(ctx, []*clusters.Cluster{c})
		return c.Watched()
	}, "10s", "100ms").Should(ContainElement(secrets))
}

// A kind nobody mirrors costs no request while idle: its presence LISTs
// once, then watches. The first source of it is noticed by that watch and
// watched within two seconds, with no pass of the probe interval (an hour
// here) in between. Then it is a pull mirror's turn, in a kind of its own.
func TestKindsNoticeNewSourcesWithoutPolling(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	var requests fleettest.Requests
	cfg := rest.CopyConfig(fleet.Hub.Config)
	cfg.Wrap(requests.Wrap)
	c, err := clusters.New(cfg, clusters.Options{Name: "one", ManagedBy: annotations.ManagedByMember, Handler: ignoreEvents{}})
	g.Expect(err).NotTo(HaveOccurred())
	c.Start(ctx)
	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	kinds := clusters.NewKinds(clusters.KindOptions{
		Explicit: []schema.GroupVersionKind{configMaps, secrets}, Lazy: true, ManagedBy: annotations.ManagedByMember,
		ProbeInterval: time.Hour, IdleTimeout: time.Hour,
	})
	go kinds.Run(ctx, func() []*clusters.Cluster { return []*clusters.Cluster{c} })

	// Three LISTs per kind, then two watches per kind (same path).
	gets := func(resource string) int { return requests.Count("GET", "/api/v1/"+resource, 200) }
	g.Eventually(func() int { return gets("configmaps") + gets("secrets") }, "10s", "50ms").Should(Equal(10))
	idle := requests.Count("GET", "", 200)
	g.Consistently(func() int { return requests.Count("GET", "", 200) }, "3s", "100ms").Should(Equal(idle),
		"requests while idle")
	g.Expect(c.Watched()).To(BeEmpty())

	start := time.Now()
	g.Expect(fleet.Hub.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "src",
		Labels: map[string]string{annotations.LabelEnabled: "true"}}})).To(Succeed())
	g.Eventually(c.Watched, "2s", "10ms").Should(ConsistOf(configMaps))
	t.Logf("a source of a kind not watched was watched after %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	g.Expect(fleet.Hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pull",
		Labels: map[string]string{annotations.LabelPull: "true"}, Annotations: map[string]string{annotations.AnnotationMirrorFrom: "app/x"}}})).To(Succeed())
	g.Eventually(c.Watched, "2s", "10ms").Should(ConsistOf(configMaps, secrets))
	t.Logf("a pull mirror of a kind not watched was watched after %s", time.Since(start).Round(time.Millisecond))
}

// slowDiscovery holds every discovery request (/api, /apis and below) for
// a while, and counts the most it held at once, over every transport it
// wraps.
type slowDiscovery struct {
	mu   sync.Mutex
	now  int
	most int
}

func (s *slowDiscovery) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Query().Get("watch") == "" && (r.URL.Path == "/api" || r.URL.Path == "/api/v1" || strings.HasPrefix(r.URL.Path, "/apis")) {
			s.mu.Lock()
			s.now++
			s.most = max(s.most, s.now)
			s.mu.Unlock()
			defer func() {
				s.mu.Lock()
				s.now--
				s.mu.Unlock()
			}()
			time.Sleep(100 * time.Millisecond)
		}
		return next.RoundTrip(r)
	})
}

// A pass looks at several clusters at once: a hub replica that takes over
// hundreds of clusters asks each for the REST mapping of every kind it
// starts to watch there, and one round trip after the other to a loaded
// API server made the last cluster wait for all the others. Eight clusters
// whose discovery answers slowly are asked side by side.
func TestKindsPassLooksAtClustersSideBySide(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	slow := &slowDiscovery{}
	cfg := rest.CopyConfig(fleet.Hub.Config)
	cfg.Wrap(slow.wrap)
	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	var cs []*clusters.Cluster
	for i := range 8 {
		c, err := clusters.New(cfg, clusters.Options{Name: fmt.Sprintf("c%d", i), ManagedBy: annotations.ManagedByMember, Handler: ignoreEvents{}})
		g.Expect(err).NotTo(HaveOccurred())
		c.Start(ctx)
		cs = append(cs, c)
	}
	kinds := clusters.NewKinds(clusters.KindOptions{Explicit: []schema.GroupVersionKind{configMaps}, ManagedBy: annotations.ManagedByMember})
	kinds.Step(ctx, cs)
	for _, c := range cs {
		g.Expect(c.Watched()).To(ConsistOf(configMaps), "cluster %s", c.Name())
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	g.Expect(slow.most).To(BeNumerically(">", 1), "the clusters were asked one after the other")
}
