package clusters_test

import (
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// events records what a Cluster's watches report, by watch and name.
type events struct {
	mu  sync.Mutex
	got map[string][]string
}

func (e *events) add(watch, name string, deleted bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if deleted {
		name = "-" + name
	}
	e.got[watch] = append(e.got[watch], name)
}

func (e *events) of(watch string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got[watch]...)
}

func (e *events) Source(_ string, _ schema.GroupVersionKind, o *unstructured.Unstructured, deleted bool) {
	e.add("sources", o.GetName(), deleted)
}

func (e *events) Mirror(_ string, _ schema.GroupVersionKind, o *clusters.Mirror, deleted bool) {
	e.add("mirrors", o.GetName(), deleted)
}

func (e *events) Namespace(_ string, ns *metav1.PartialObjectMetadata) {
	e.add("namespaces", ns.GetName(), false)
}
func (*events) Policy(string, *v1alpha1.MirrorPolicy, bool) {}

func (e *events) Pull(_ string, _ schema.GroupVersionKind, o *unstructured.Unstructured, deleted bool) {
	e.add("pulls", o.GetName(), deleted)
}

// A Cluster's watches on a real API server: each selects its objects by
// label, caches them transformed, and reports every change once, in order.
// Kinds that are not namespaced or not served cannot be watched.
func TestClusterWatches(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	k8s := fleet.Hub.Client
	ev := &events{got: map[string][]string{}}
	c, err := clusters.New(fleet.Hub.Config, clusters.Options{Name: "one", ManagedBy: annotations.ManagedByMember, Handler: ev})
	g.Expect(err).NotTo(HaveOccurred())
	c.Start(ctx)
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	g.Expect(c.Watch(secrets)).To(Succeed())
	g.Eventually(c.HasSynced, "10s", "20ms").Should(BeTrue())
	g.Expect(ev.of("namespaces")).To(ContainElement("default"))

	secret := func(name string, labels map[string]string, annots map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels, Annotations: annots},
			StringData: map[string]string{"k": "v"}}
	}
	src := secret("src", map[string]string{annotations.LabelEnabled: "true"}, nil)
	mirror := secret("mirror", map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByMember},
		map[string]string{annotations.AnnotationSource: "one/app/src"})
	othersMirror := secret("others-mirror", map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: "someone-else"}, nil)
	pull := secret("pull", map[string]string{annotations.LabelPull: "true"}, map[string]string{annotations.AnnotationMirrorFrom: "app/src"})
	plain := secret("plain", nil, nil)
	for _, s := range []*corev1.Secret{src, mirror, othersMirror, pull, plain} {
		g.Expect(k8s.Create(ctx, s)).To(Succeed())
	}
	g.Eventually(func() []string { return ev.of("pulls") }, "10s", "20ms").Should(Equal([]string{"pull"}))
	g.Eventually(func() []string { return ev.of("sources") }, "10s", "20ms").Should(Equal([]string{"src"}))
	g.Eventually(func() []string { return ev.of("mirrors") }, "10s", "20ms").Should(Equal([]string{"mirror"}))

	cached, ok := c.Source(secrets, "default", "src")
	g.Expect(ok).To(BeTrue())
	g.Expect(cached.GetManagedFields()).To(BeEmpty(), "managed fields are cached")
	g.Expect(c.MirrorsOf(secrets, "one/app/src")).To(HaveLen(1))
	g.Expect(c.PullsOf(secrets, "one/app/src")).To(HaveLen(1))
	g.Expect(c.PullsIn(secrets, "default")).To(HaveLen(1))

	g.Expect(k8s.Delete(ctx, mirror)).To(Succeed())
	g.Eventually(func() []string { return ev.of("mirrors") }, "10s", "20ms").Should(Equal([]string{"mirror", "-mirror"}))
	g.Expect(c.AllMirrors(secrets)).To(BeEmpty())

	src.Labels["changed"] = "yes"
	g.Expect(k8s.Update(ctx, src)).To(Succeed())
	g.Eventually(func() []string { return ev.of("sources") }, "10s", "20ms").Should(Equal([]string{"src", "src"}))

	g.Expect(c.Watch(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})).To(MatchError(ContainSubstring("not namespaced")))
	err = c.Watch(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue(), "%v", err)
	err = c.Watch(schema.GroupVersionKind{Version: "v1", Kind: "Widget"})
	g.Expect(meta.IsNoMatchError(err)).To(BeTrue(), "%v", err)
	g.Expect(c.Watched()).To(ConsistOf(secrets))
}

// A kind watched for our mirrors only: the mirrors' watch alone runs and
// reports; Watch widens it, with the mirrors' watch kept and the sources'
// and pull mirrors' added; WatchMirrors narrows it back only once neither
// a source nor a pull mirror is cached.
func TestWatchMirrorsOnly(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	k8s := fleet.Hub.Client
	ev := &events{got: map[string][]string{}}
	c, err := clusters.New(fleet.Hub.Config, clusters.Options{Name: "one", ManagedBy: annotations.ManagedByHub, Handler: ev})
	g.Expect(err).NotTo(HaveOccurred())
	c.Start(ctx)
	cms := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMap := func(name string, labels map[string]string, annots map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels, Annotations: annots}}
	}
	src := configMap("src", map[string]string{annotations.LabelEnabled: "true"}, nil)
	mirror := configMap("mirror", map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByHub},
		map[string]string{annotations.AnnotationSource: "two/app/src"})
	pull := configMap("pull", map[string]string{annotations.LabelPull: "true"}, map[string]string{annotations.AnnotationMirrorFrom: "two/app/src"})
	for _, o := range []*corev1.ConfigMap{src, mirror, pull} {
		g.Expect(k8s.Create(ctx, o)).To(Succeed())
	}

	narrow, err := c.WatchMirrors(cms)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(narrow).To(BeTrue())
	g.Expect(c.MirrorsOnly(cms)).To(BeTrue())
	g.Eventually(c.HasSynced, "10s", "20ms").Should(BeTrue())
	g.Eventually(func() []string { return ev.of("mirrors") }, "10s", "20ms").Should(Equal([]string{"mirror"}))
	g.Expect(c.AllMirrors(cms)).To(HaveLen(1))
	g.Expect(c.Sources(cms)).To(BeEmpty(), "sources are not watched")
	g.Expect(c.Pulls(cms)).To(BeEmpty(), "pull mirrors are not watched")
	_, ok := c.Source(cms, "default", "src")
	g.Expect(ok).To(BeFalse())
	g.Expect(ev.of("sources")).To(BeEmpty())
	g.Expect(ev.of("pulls")).To(BeEmpty())

	// Widened: sources and pull mirrors are listed and reported; the
	// mirrors' watch goes on, and does not report its objects again.
	g.Expect(c.Watch(cms)).To(Succeed())
	g.Expect(c.MirrorsOnly(cms)).To(BeFalse())
	g.Eventually(func() []string { return ev.of("sources") }, "10s", "20ms").Should(Equal([]string{"src"}))
	g.Eventually(func() []string { return ev.of("pulls") }, "10s", "20ms").Should(Equal([]string{"pull"}))
	g.Eventually(c.HasSynced, "10s", "20ms").Should(BeTrue())
	g.Expect(c.PullsOf(cms, "two/app/src")).To(HaveLen(1))
	g.Expect(ev.of("mirrors")).To(Equal([]string{"mirror"}))

	// Not narrowed while a source or a pull mirror is cached: dropping its
	// cache would make it look deleted.
	narrow, err = c.WatchMirrors(cms)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(narrow).To(BeFalse())
	g.Expect(k8s.Delete(ctx, src)).To(Succeed())
	g.Eventually(func() []string { return ev.of("sources") }, "10s", "20ms").Should(Equal([]string{"src", "-src"}))
	g.Expect(c.WatchMirrors(cms)).To(BeFalse(), "a pull mirror is cached")
	g.Expect(k8s.Delete(ctx, pull)).To(Succeed())
	g.Eventually(func() []string { return ev.of("pulls") }, "10s", "20ms").Should(Equal([]string{"pull", "-pull"}))
	g.Expect(c.WatchMirrors(cms)).To(BeTrue())
	g.Expect(c.MirrorsOnly(cms)).To(BeTrue())

	// Narrowed, the mirrors' watch still reports; new sources go unnoticed.
	g.Expect(k8s.Create(ctx, configMap("src2", map[string]string{annotations.LabelEnabled: "true"}, nil))).To(Succeed())
	g.Expect(k8s.Delete(ctx, mirror)).To(Succeed())
	g.Eventually(func() []string { return ev.of("mirrors") }, "10s", "20ms").Should(Equal([]string{"mirror", "-mirror"}))
	g.Expect(ev.of("sources")).To(Equal([]string{"src", "-src"}))
	g.Expect(c.Watched()).To(ConsistOf(cms))
	c.Unwatch(cms)
	g.Expect(c.Watched()).To(BeEmpty())
	g.Expect(c.MirrorsOnly(cms)).To(BeFalse())
}
