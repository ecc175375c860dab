package controller

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// api is the test API server; nil in -short mode, where only the tests
// without one run.
var api *fleettest.Fleet

func TestMain(m *testing.M) { fleettest.Main(m, &api) }

const (
	local = "local"
	// otherFinalizer is somebody else's finalizer on a source.
	otherFinalizer = "example.com/keep"
	hubPart        = "remote: 1 cluster, 1/1 synced"
)

var (
	secrets  = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	identity = Identity{ManagedBy: annotations.ManagedByMember, FieldManager: "fleetmirror-test", Finalizer: annotations.Prefix + "test-cleanup"}
)

// unreachable engages a cluster whose API server never answers.
type unreachable struct{ name string }

func (p unreachable) Run(ctx context.Context, e fleet.Engager) error {
	if err := e.Engage(ctx, fleet.Spec{Name: p.name, Config: &rest.Config{Host: "https://127.0.0.1:1"}}); err != nil {
		return err
	}
	e.Listed()
	<-ctx.Done()
	return nil
}

// steps is a Reconciler built as Add builds it, over a running fleet whose
// local cluster is the test API server, and what it needs to call steps.
type steps struct {
	r     *Reconciler
	c     *clusters.Cluster
	calls *fleettest.Requests
}

// newSteps runs a fleet with the local cluster (and those of more) and
// returns a Reconciler over it, once the cluster's Secret caches synced.
func newSteps(t *testing.T, o Options, more ...fleet.Provider) *steps {
	t.Helper()
	return newStepsWrapped(t, o, nil, more...)
}

// newStepsWrapped is newSteps with the local cluster's transport wrapped
// by wrap too (nil: not).
func newStepsWrapped(t *testing.T, o Options, wrap transport.WrapperFunc, more ...fleet.Provider) *steps {
	t.Helper()
	if api == nil {
		t.Skip("needs an API server")
	}
	g := NewWithT(t)
	rec := &fleettest.Requests{}
	cfg := rest.CopyConfig(api.Hub.Config)
	cfg.Wrap(rec.Wrap)
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	provider := fleet.Providers(append([]fleet.Provider{fleet.Local{Spec: fleet.Spec{Name: local, Config: cfg}}}, more...)...)
	f := fleet.New(fleet.Options{
		Provider: provider, ManagedBy: identity.ManagedBy, FieldManager: identity.FieldManager, Finalizer: identity.Finalizer,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 2 * time.Second,
		Kinds: clusters.KindOptions{Explicit: []schema.GroupVersionKind{secrets}, ProbeInterval: 200 * time.Millisecond},
	})
	o.Fleet, o.Identity = f, identity
	if o.CallTimeout == 0 {
		o.CallTimeout = 10 * time.Second
	}
	r, events := newPipeline(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, events)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleet: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	g.Expect(f.WaitForLocal(wctx)).To(Succeed())
	c := f.Cluster(local)
	g.Eventually(func() bool { synced, _ := c.KindSynced(secrets); return synced }, 10*time.Second).Should(BeTrue())
	return &steps{r: r, c: c, calls: rec}
}

// namespace creates a namespace of its own for one test or case.
func namespace(g Gomega, prefix string) string {
	ns, err := fleettest.NewNamespace(api.Hub, prefix)
	g.Expect(err).NotTo(HaveOccurred())
	return ns
}

// source creates an enabled Secret source and returns its key and its
// cached version, once the cache holds it.
func (s *steps) source(g Gomega, ns, name string, annots map[string]string, finalizers ...string) (Key, *unstructured.Unstructured) {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{annotations.LabelEnabled: "true"},
			Annotations: annots, Finalizers: finalizers},
		Data: map[string][]byte{"k": []byte("v")},
	}
	g.Expect(api.Hub.Client.Create(context.Background(), sec)).To(Succeed())
	key := Key{Cluster: local, GVK: secrets, Namespace: ns, Name: name}
	return key, s.cached(g, key, sec.ResourceVersion)
}

// sourceIn creates a namespace of its own and the source db in it.
func (s *steps) sourceIn(g Gomega, prefix string, finalizers ...string) (string, Key, *unstructured.Unstructured) {
	ns := namespace(g, prefix)
	key, src := s.source(g, ns, "db", nil, finalizers...)
	return ns, key, src
}

// cached waits until the cache holds the source of key at resourceVersion
// rv or later, and returns it.
func (s *steps) cached(g Gomega, key Key, rv string) *unstructured.Unstructured {
	var src *unstructured.Unstructured
	g.Eventually(func() bool {
		var ok bool
		src, ok = s.c.Source(key.GVK, key.Namespace, key.Name)
		return ok && !olderThan(src.GetResourceVersion(), rv)
	}, 10*time.Second).Should(BeTrue())
	return src
}

// mirror writes our mirror of src into namespace ns and waits until the
// cache holds it.
func (s *steps) mirror(g Gomega, src *unstructured.Unstructured, ns string) {
	want, _, err := desired.Build(src, desired.Target{Cluster: local, Namespace: ns}, desired.Options{SourceCluster: local, ManagedBy: identity.ManagedBy}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.r.Applier.Ensure(context.Background(), s.c, secrets, want, true)).To(Equal(apply.Created))
	g.Eventually(func() bool { _, ok := s.c.Mirror(secrets, ns, src.GetName()); return ok }, 10*time.Second).Should(BeTrue())
}

// live reads a Secret from the API server; nil when there is none.
func live(g Gomega, ns, name string) *corev1.Secret {
	sec := &corev1.Secret{}
	err := api.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sec)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return sec
}

// TestPatchSourceFinalizer: the finalizer older versions held is taken
// off by the first write and never put back; a write that changes
// nothing is not sent, also from a cache behind our last write; somebody
// else's finalizer stays.
func TestPatchSourceFinalizer(t *testing.T) {
	s := newSteps(t, Options{})
	g := NewWithT(t)
	ctx := context.Background()
	ns, key, src := s.sourceIn(g, "finalizer", otherFinalizer, identity.Finalizer)
	var meta metav1.Object = src
	for _, step := range []struct {
		name string
		part *string
		// fromCache starts from the cached source, which may be behind
		// our last write, instead of what the last step wrote.
		fromCache bool
		wantWrite bool
	}{
		{"let go", nil, false, true},
		{"let go again", nil, false, false},
		{"let go again, from the cache", nil, true, false},
		{"status, from the cache", new("1/1 namespaces synced"), true, true},
		{"same status", new("1/1 namespaces synced"), false, false},
	} {
		before := live(g, ns, "db").ResourceVersion
		from := meta
		if step.fromCache {
			from = src
		}
		written, err := s.r.patchSource(ctx, s.c, key, from, step.part)
		g.Expect(err).NotTo(HaveOccurred(), step.name)
		meta = written
		after := live(g, ns, "db")
		g.Expect(after.Finalizers).To(Equal([]string{otherFinalizer}), step.name)
		g.Expect(after.ResourceVersion != before).To(Equal(step.wantWrite), "%s: written", step.name)
		g.Expect(meta.GetResourceVersion()).To(Equal(after.ResourceVersion), "%s: returned metadata", step.name)
	}
}

// TestPatchSourceStatus: each writer sets and clears only its own part of
// the status annotation; the other writer's part stays.
func TestPatchSourceStatus(t *testing.T) {
	s := newSteps(t, Options{})
	g := NewWithT(t)
	ns := namespace(g, "status")
	tests := []struct {
		name    string
		scope   Scope
		current string
		part    *string // nil: leave the status
		want    string  // "": no status annotation
	}{
		{"member sets its part, the hub's stays", ScopeLocal, hubPart, new("2/2 namespaces synced"), "2/2 namespaces synced | " + hubPart},
		{"member replaces its part", ScopeLocal, "1/2 namespaces synced | " + hubPart, new("2/2 namespaces synced"), "2/2 namespaces synced | " + hubPart},
		{"member clears its part", ScopeLocal, "2/2 namespaces synced | " + hubPart, new(""), hubPart},
		{"member clears the only part", ScopeLocal, "2/2 namespaces synced", new(""), ""},
		{"hub sets its part, the member's stays", ScopeRemote, "2/2 namespaces synced", new("remote: 2 clusters, 2/2 synced"), "2/2 namespaces synced | remote: 2 clusters, 2/2 synced"},
		{"hub clears its part", ScopeRemote, "2/2 namespaces synced | " + hubPart, new(""), "2/2 namespaces synced"},
		{"no part: status left as it is", ScopeLocal, "2/2 namespaces synced | " + hubPart, nil, "2/2 namespaces synced | " + hubPart},
	}
	for i, tt := range tests {
		name := fmt.Sprintf("src-%d", i)
		key, src := s.source(g, ns, name, map[string]string{annotations.AnnotationStatus: tt.current})
		s.r.opts.Scope = tt.scope
		_, err := s.r.patchSource(context.Background(), s.c, key, src, tt.part)
		g.Expect(err).NotTo(HaveOccurred(), tt.name)
		after := live(g, ns, name)
		if tt.want == "" {
			g.Expect(after.Annotations).NotTo(HaveKey(annotations.AnnotationStatus), tt.name)
		} else {
			g.Expect(after.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, tt.want), tt.name)
		}
		g.Expect(after.Finalizers).To(BeEmpty(), tt.name)
	}
}

// TestPatchSourceKeepsConcurrentChange: a finalizer somebody adds between
// our read and our write is not lost; our write is computed again, and
// adds no finalizer of ours.
func TestPatchSourceKeepsConcurrentChange(t *testing.T) {
	s := newSteps(t, Options{})
	g := NewWithT(t)
	ctx := context.Background()
	ns, key, src := s.sourceIn(g, "concurrent")

	sec := live(g, ns, "db")
	sec.Finalizers = append(sec.Finalizers, otherFinalizer)
	g.Expect(api.Hub.Client.Update(ctx, sec)).To(Succeed())

	_, err := s.r.patchSource(ctx, s.c, key, src, new("1/1 namespaces synced"))
	g.Expect(err).NotTo(HaveOccurred())
	after := live(g, ns, "db")
	g.Expect(after.Finalizers).To(ConsistOf(otherFinalizer))
	g.Expect(after.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "1/1 namespaces synced"))
}

// TestPatchSourceNoSelfConflict: a second write right after the first,
// from a cache that does not show the first yet, is not refused with a
// conflict against our own write.
func TestPatchSourceNoSelfConflict(t *testing.T) {
	s := newSteps(t, Options{})
	g := NewWithT(t)
	ctx := context.Background()
	ns, key, src := s.sourceIn(g, "selfconflict")

	for _, part := range []string{"0/1 namespaces synced", "1/1 namespaces synced", "1/1 namespaces synced; 1 missing"} {
		_, err := s.r.patchSource(ctx, s.c, key, src, &part)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(live(g, ns, "db").Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, part))
	}
	g.Expect(s.calls.Count(http.MethodPatch, "/namespaces/"+ns+"/secrets/db", http.StatusConflict)).To(BeZero(), "conflicts with our own writes")
	g.Expect(s.calls.Count(http.MethodPatch, "/namespaces/"+ns+"/secrets/db", http.StatusOK)).To(Equal(3))
}

// TestDeleteUntargeted: our mirrors of the source outside keep are
// deleted; those in keep, and objects of the same name that are not
// ours, stay; nothing happens in a cluster whose kind has not synced.
func TestDeleteUntargeted(t *testing.T) {
	s := newSteps(t, Options{})
	g := NewWithT(t)
	ctx := context.Background()
	srcNS, key, src := s.sourceIn(g, "untargeted")
	ref := desired.SourceRef(local, srcNS, "db")
	kept, gone1, gone2, plain, hubs := namespace(g, "kept"), namespace(g, "gone"), namespace(g, "gone"), namespace(g, "plain"), namespace(g, "hubs")
	for _, ns := range []string{kept, gone1, gone2} {
		s.mirror(g, src, ns)
	}
	g.Expect(api.Hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: plain, Name: "db"}})).To(Succeed())
	g.Expect(api.Hub.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hubs, Name: "db",
		Labels:      map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByHub},
		Annotations: map[string]string{annotations.AnnotationSource: ref}}})).To(Succeed())
	notOurs := map[string]string{plain: live(g, plain, "db").ResourceVersion, hubs: live(g, hubs, "db").ResourceVersion}

	// A cluster whose Secret watch was added but has not synced (not
	// started): nothing is looked up there, nothing deleted.
	cfg := rest.CopyConfig(api.Hub.Config)
	unsynced, err := clusters.New(cfg, clusters.Options{Name: local, ManagedBy: identity.ManagedBy, Handler: &eventSource{reconciler: s.r, fleet: s.r.fleet}})
	g.Expect(err).NotTo(HaveOccurred())
	defer unsynced.Close()
	g.Expect(unsynced.Watch(secrets)).To(Succeed())
	sum := s.r.deleteUntargeted(ctx, key, ref, nil, "", []*clusters.Cluster{unsynced}, desired.SourceGone)
	g.Expect(sum.deleted).To(BeZero())
	g.Expect(sum.err()).NotTo(HaveOccurred())
	for _, ns := range []string{kept, gone1, gone2} {
		g.Expect(live(g, ns, "db")).NotTo(BeNil(), "mirror in %s deleted by a cluster not synced", ns)
	}

	sum = s.r.deleteUntargeted(ctx, key, ref, []Target{{Cluster: s.c, Namespace: kept}}, "", nil, desired.Untargeted)
	g.Expect(sum.err()).NotTo(HaveOccurred())
	g.Expect(sum.deleted).To(Equal(2))
	g.Expect(live(g, kept, "db")).NotTo(BeNil(), "mirror in keep deleted")
	g.Expect(live(g, gone1, "db")).To(BeNil())
	g.Expect(live(g, gone2, "db")).To(BeNil())
	for ns, rv := range notOurs {
		after := live(g, ns, "db")
		g.Expect(after).NotTo(BeNil(), "object in %s deleted", ns)
		g.Expect(after.ResourceVersion).To(Equal(rv), "object in %s touched", ns)
	}
}

// TestRemoveAll: a source switched off or deleted has every mirror
// removed, then the finalizer an older version held; one switched off
// also loses our part of the status.
func TestRemoveAll(t *testing.T) {
	s := newSteps(t, Options{})
	ctx := context.Background()
	tests := []struct {
		name    string
		deleted bool
	}{
		{"switched off", false},
		{"deleted", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(g, "removeall")
			key, src := s.source(g, ns, "db", map[string]string{annotations.AnnotationStatus: "2/2 namespaces synced | " + hubPart}, identity.Finalizer)
			targetsNS := []string{namespace(g, "target"), namespace(g, "target")}
			for _, tns := range targetsNS {
				s.mirror(g, src, tns)
			}
			if tt.deleted {
				g.Expect(api.Hub.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
				g.Eventually(func() bool {
					var ok bool
					src, ok = s.c.Source(secrets, ns, "db")
					return ok && src.GetDeletionTimestamp() != nil
				}, 10*time.Second).Should(BeTrue())
			}

			res, err := s.r.removeAll(ctx, s.c, key, src, desired.SourceRef(local, ns, "db"))

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.RequeueAfter).To(BeZero())
			for _, tns := range targetsNS {
				g.Expect(live(g, tns, "db")).To(BeNil(), "mirror in %s", tns)
			}
			after := live(g, ns, "db")
			if tt.deleted {
				g.Expect(after).To(BeNil(), "deleted source still held")
				return
			}
			g.Expect(after.Finalizers).NotTo(ContainElement(identity.Finalizer))
			g.Expect(after.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, hubPart))
		})
	}
}

// TestRemoveAllHoldsNothingForUnreachable: a deleted source is let go at
// once, even while a cluster that may have its mirrors is unreachable:
// nothing of ours holds it (the finalizer an older version held is taken
// off), and the mirrors there are removed when the cluster is back (the
// sweep of Up). The unreachable cluster is one whose API server never
// answers, so no second API server is needed.
func TestRemoveAllHoldsNothingForUnreachable(t *testing.T) {
	s := newSteps(t, Options{Scope: ScopeRemote}, unreachable{"down"})
	g := NewWithT(t)
	ctx := context.Background()
	ns, key, _ := s.sourceIn(g, "unreachable", identity.Finalizer)
	g.Expect(api.Hub.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}})).To(Succeed())
	var src *unstructured.Unstructured
	g.Eventually(func() bool {
		var ok bool
		src, ok = s.c.Source(secrets, ns, "db")
		return ok && src.GetDeletionTimestamp() != nil
	}, 10*time.Second).Should(BeTrue())

	res, err := s.r.removeAll(ctx, s.c, key, src, desired.SourceRef(local, ns, "db"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeZero())
	g.Expect(live(g, ns, "db")).To(BeNil(), "deleted source still held")
}

// TestRelease: a source gone from the cache has its mirrors removed and,
// if it still exists, the finalizer an older version held; one still
// enabled (the cache is behind) is not touched.
func TestRelease(t *testing.T) {
	s := newSteps(t, Options{})
	ctx := context.Background()
	tests := []struct {
		name string
		// change is made to the source after its mirrors exist.
		change        func(g Gomega, sec *corev1.Secret)
		mirrorsKept   bool
		wantRequeue   bool
		wantFinalizer bool
		gone          bool
	}{
		{name: "enabled label removed", change: func(g Gomega, sec *corev1.Secret) {
			delete(sec.Labels, annotations.LabelEnabled)
			g.Expect(api.Hub.Client.Update(ctx, sec)).To(Succeed())
		}},
		{name: "deleted", gone: true, change: func(g Gomega, sec *corev1.Secret) {
			sec.Finalizers = nil
			g.Expect(api.Hub.Client.Update(ctx, sec)).To(Succeed())
			g.Expect(api.Hub.Client.Delete(ctx, sec)).To(Succeed())
		}},
		{name: "still enabled: the cache is behind", change: func(Gomega, *corev1.Secret) {}, mirrorsKept: true, wantRequeue: true, wantFinalizer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(g, "release")
			key, src := s.source(g, ns, "db", nil, identity.Finalizer, otherFinalizer)
			tns := namespace(g, "target")
			s.mirror(g, src, tns)
			tt.change(g, live(g, ns, "db"))
			if !tt.mirrorsKept {
				g.Eventually(func() bool { _, ok := s.c.Source(secrets, ns, "db"); return ok }, 10*time.Second).Should(BeFalse())
			}

			res, err := s.r.release(ctx, s.c, key, desired.SourceRef(local, ns, "db"))

			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.RequeueAfter > 0).To(Equal(tt.wantRequeue))
			g.Expect(live(g, tns, "db") != nil).To(Equal(tt.mirrorsKept), "mirror kept")
			after := live(g, ns, "db")
			if tt.gone {
				g.Expect(after).To(BeNil())
				return
			}
			g.Expect(after.Finalizers).To(ContainElement(otherFinalizer))
			g.Expect(slices.Contains(after.Finalizers, identity.Finalizer)).To(Equal(tt.wantFinalizer), "our finalizer held")
		})
	}
}

// TestPlanLocal: for the member, targets are namespaces of the source's
// own cluster, within the operator's policy.
func TestPlanLocal(t *testing.T) {
	s := newSteps(t, Options{Policy: targets.Policy{Excluded: glob.MustParseList("plan-excluded-*")}})
	g := NewWithT(t)
	srcNS, ok1, ok2, excluded := namespace(g, "plan-src"), namespace(g, "plan-ok"), namespace(g, "plan-ok"), namespace(g, "plan-excluded")
	g.Eventually(func() []string {
		var names []string
		for _, ns := range s.c.Namespaces() {
			names = append(names, ns.Name)
		}
		return names
	}, 10*time.Second).Should(ContainElements(ok1, ok2, excluded))
	tests := []struct {
		name, entries string
		relevant      bool
		targets       []string
		refused       []string
		missing       []string
	}{
		{"named namespaces", ok1 + "," + ok2, true, []string{ok1, ok2}, nil, nil},
		{"excluded namespace refused", ok1 + "," + excluded, true, []string{ok1}, []string{excluded}, nil},
		{"missing namespace", ok1 + ",plan-missing", true, []string{ok1}, nil, []string{"plan-missing"}},
		{"only other clusters: not the member's", "other/" + ok1, false, nil, nil, nil},
	}
	for i, tt := range tests {
		annots := map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: tt.entries}
		_, src := s.source(g, srcNS, fmt.Sprintf("src-%d", i), annots)

		plan := s.r.plan(s.c, src, annotations.Parse(src.GetLabels(), src.GetAnnotations()), trigger{})

		g.Expect(plan.Relevant).To(Equal(tt.relevant), tt.name)
		var got []string
		for _, tg := range plan.Targets {
			g.Expect(tg.Cluster).To(BeIdenticalTo(s.c), tt.name)
			got = append(got, tg.Namespace)
		}
		g.Expect(got).To(ConsistOf(toAny(tt.targets)...), tt.name)
		g.Expect(plan.Refused).To(ConsistOf(toAny(tt.refused)...), tt.name)
		g.Expect(plan.Missing).To(ConsistOf(toAny(tt.missing)...), tt.name)
		if tt.relevant {
			g.Expect(plan.Covered).To(ConsistOf(BeIdenticalTo(s.c)), tt.name)
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
