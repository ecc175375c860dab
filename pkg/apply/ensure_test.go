package apply_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// api is the test API server; nil in -short mode, where only the tests
// without one run.
var api *fleettest.Fleet

func TestMain(m *testing.M) { fleettest.Main(m, &api) }

const (
	cluster   = "local"
	managedBy = annotations.ManagedByMember
	// one and two are base64 Secret data.
	one = "b25l"
	two = "dHdv"
)

var secrets = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

type ignoreEvents struct{}

func (ignoreEvents) Source(string, schema.GroupVersionKind, *unstructured.Unstructured, bool) {}
func (ignoreEvents) Mirror(string, schema.GroupVersionKind, *clusters.Mirror, bool)           {}
func (ignoreEvents) Namespace(string, *metav1.PartialObjectMetadata)                          {}
func (ignoreEvents) Policy(string, *v1alpha1.MirrorPolicy, bool)                              {}

// startCluster connects to the test API server as the apply stage sees
// it: a clusters.Cluster whose Secret watch runs and has synced. It
// returns the requests sent through it.
func startCluster(t *testing.T) (*clusters.Cluster, *fleettest.Requests) {
	t.Helper()
	if api == nil {
		t.Skip("needs an API server")
	}
	g := NewWithT(t)
	w := &fleettest.Requests{}
	cfg := rest.CopyConfig(api.Hub.Config)
	cfg.Wrap(w.Wrap)
	c, err := clusters.New(cfg, clusters.Options{Name: cluster, ManagedBy: managedBy, Handler: ignoreEvents{}})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		c.Close()
	})
	c.Start(ctx)
	g.Expect(c.Watch(secrets)).To(Succeed())
	g.Eventually(func() bool { synced, _ := c.KindSynced(secrets); return synced }, 10*time.Second).Should(BeTrue())
	return c, w
}

// namespace creates a namespace of its own for one case.
func namespace(g Gomega, prefix string) string {
	ns, err := fleettest.NewNamespace(api.Hub, prefix)
	g.Expect(err).NotTo(HaveOccurred())
	return ns
}

// source is a Secret source app/db at resourceVersion rv; it needs not
// exist, the mirror is built from it.
func source(namespace, rv string, fields map[string]any) *unstructured.Unstructured {
	// The type is set, as the API server sets it on every Secret.
	src := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "Opaque"}}
	for k, v := range fields {
		src.Object[k] = v
	}
	src.SetNamespace(namespace)
	src.SetName("db")
	src.SetUID("source-uid")
	src.SetResourceVersion(rv)
	src.SetLabels(map[string]string{annotations.LabelEnabled: "true", "team": "a"})
	return src
}

// foreign is a Secret named like the mirror in ns that is not a mirror.
func foreign(_ Gomega, ns string) *unstructured.Unstructured {
	u := source(ns, "", data(two))
	u.SetUID("")
	u.SetLabels(nil)
	return u
}

func data(v string) map[string]any { return map[string]any{"data": map[string]any{"k": v}} }

// mirror builds the mirror of src in ns as the reconciler does.
func mirror(g Gomega, src *unstructured.Unstructured, ns, writer string) *unstructured.Unstructured {
	m, ruleErrs, err := desired.Build(src, desired.Target{Cluster: cluster, Namespace: ns}, desired.Options{SourceCluster: cluster, ManagedBy: writer}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ruleErrs).To(BeEmpty())
	return m
}

var sourceRef = desired.SourceRef(cluster, "app", "db")

// create writes obj as somebody else would, and waits until the cache of
// c holds it when it is one of our mirrors.
func create(g Gomega, c *clusters.Cluster, obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	g.Expect(api.Hub.Client.Create(context.Background(), obj)).To(Succeed())
	if obj.GetLabels()[annotations.LabelManagedBy] == managedBy {
		cachedAt(g, c, obj)
	}
	return obj
}

// cachedAt waits until c's cache holds the mirror obj at obj's
// resourceVersion.
func cachedAt(g Gomega, c *clusters.Cluster, obj *unstructured.Unstructured) {
	g.Eventually(func() string {
		m, _ := c.Mirror(secrets, obj.GetNamespace(), obj.GetName())
		if m == nil {
			return ""
		}
		return m.GetResourceVersion()
	}, 10*time.Second).Should(Equal(obj.GetResourceVersion()))
}

func get(ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(secrets)
	err := api.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// TestEnsure runs Applier.Ensure against a real API server from prepared
// states: what it reports, and what kubectl would show afterwards.
func TestEnsure(t *testing.T) {
	c, w := startCluster(t)
	v1 := source("app", "10", data(one))
	tests := []struct {
		name string
		// existing is the object in the way before Ensure; nil: none.
		existing func(g Gomega, ns string) *unstructured.Unstructured
		want     *unstructured.Unstructured
		outcome  apply.Outcome
		// owner is ConflictError.Owner when a conflict is expected.
		owner    *string
		wantData string
		// sameObject: the existing object is kept (not replaced); write:
		// Ensure writes to the API server.
		sameObject, write bool
	}{
		{name: "missing: created", want: v1, outcome: apply.Created, wantData: one, write: true},
		{
			name:     "source changed: updated",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return mirror(g, v1, ns, managedBy) },
			want:     source("app", "11", data(two)), outcome: apply.Updated, wantData: two, sameObject: true, write: true,
		},
		{
			name: "mirror edited by hand: updated back",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				m := mirror(g, v1, ns, managedBy)
				m.Object["data"] = map[string]any{"k": two}
				return m
			},
			want: v1, outcome: apply.Updated, wantData: one, sameObject: true, write: true,
		},
		{
			name:     "unchanged: nothing written",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return mirror(g, v1, ns, managedBy) },
			want:     v1, outcome: apply.Unchanged, wantData: one, sameObject: true,
		},
		{
			name:     "name taken by an object that is not a mirror: conflict",
			existing: foreign,
			want:     v1, outcome: apply.Conflict, owner: new(""), wantData: two, sameObject: true,
		},
		{
			name: "name taken by our mirror of another source: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return mirror(g, source("elsewhere", "3", data(two)), ns, managedBy)
			},
			want: v1, outcome: apply.Conflict, owner: new(desired.SourceRef(cluster, "elsewhere", "db")), wantData: two, sameObject: true,
		},
		{
			name: "name taken by our mirror of another source with the same content: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return mirror(g, source("elsewhere", "10", data(one)), ns, managedBy)
			},
			want: v1, outcome: apply.Conflict, owner: new(desired.SourceRef(cluster, "elsewhere", "db")), wantData: one, sameObject: true,
		},
		{
			name: "name taken by the other writer's mirror of the same source: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return mirror(g, source("app", "10", data(two)), ns, annotations.ManagedByHub)
			},
			want: v1, outcome: apply.Conflict, owner: new(sourceRef), wantData: two, sameObject: true,
		},
		{
			name:     "Secret type changed: replaced",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return mirror(g, v1, ns, managedBy) },
			want: source("app", "11", map[string]any{"type": "kubernetes.io/tls",
				"data": map[string]any{"k": two, "tls.crt": one, "tls.key": one}}),
			outcome: apply.Replaced, wantData: two, write: true,
		},
		{
			name: "immutable mirror changed: replaced",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return mirror(g, source("app", "10", map[string]any{"immutable": true, "data": map[string]any{"k": one}}), ns, managedBy)
			},
			want:    source("app", "11", map[string]any{"immutable": true, "data": map[string]any{"k": two}}),
			outcome: apply.Replaced, wantData: two, write: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(g, "ensure")
			var before *unstructured.Unstructured
			if tt.existing != nil {
				before = create(g, c, tt.existing(g, ns))
			}
			want := mirror(g, tt.want, ns, managedBy)
			a := &apply.Applier{FieldManager: "fleetmirror-test", ManagedBy: managedBy}
			written := w.Writes()
			hash := want.GetAnnotations()[annotations.AnnotationContentHash]
			inPlace := func() bool { return a.InPlace(c, secrets, ns, want.GetName(), sourceRef, hash) }
			wasInPlace := inPlace()

			outcome, err := a.Ensure(context.Background(), c, secrets, want, false)

			g.Expect(outcome).To(Equal(tt.outcome))
			// The reconciler skips Ensure where InPlace says so: they
			// must agree in every case.
			g.Expect(wasInPlace).To(Equal(tt.outcome == apply.Unchanged), "InPlace before Ensure")
			if tt.owner == nil {
				g.Eventually(inPlace, 10*time.Second).Should(BeTrue(), "InPlace after Ensure")
				// Once the cache holds the write, its memo is gone, even
				// with no Seen from the watch (ignoreEvents): kept, it
				// would cost the heap a memo per mirror.
				live, err := get(ns, "db")
				g.Expect(err).NotTo(HaveOccurred())
				cachedAt(g, c, live)
				g.Expect(a.Ensure(context.Background(), c, secrets, want, false)).To(Equal(apply.Unchanged))
				g.Expect(a.Remembers(cluster, secrets, ns, "db")).To(BeFalse(), "the memo of a write the cache holds")
			} else {
				g.Expect(inPlace()).To(BeFalse(), "InPlace of a conflict")
			}
			if tt.owner != nil {
				var ce *apply.ConflictError
				g.Expect(errors.As(err, &ce)).To(BeTrue(), "error %v", err)
				g.Expect(ce.Owner).To(Equal(*tt.owner))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			if tt.write {
				g.Expect(w.Writes()).To(BeNumerically(">", written))
			} else {
				g.Expect(w.Writes()).To(Equal(written), "Ensure wrote")
			}
			live, err := get(ns, "db")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(live.Object["data"]).To(HaveKeyWithValue("k", tt.wantData))
			if before != nil {
				g.Expect(live.GetUID() == before.GetUID()).To(Equal(tt.sameObject), "same object")
				if !tt.write {
					g.Expect(live.GetResourceVersion()).To(Equal(before.GetResourceVersion()), "object touched")
				}
			}
			if tt.owner == nil {
				g.Expect(desired.Owned(live.GetLabels(), live.GetAnnotations(), managedBy, sourceRef)).To(BeTrue(), "not our mirror: %v", live.GetLabels())
				g.Expect(live.GetAnnotations()).To(HaveKeyWithValue(annotations.AnnotationContentHash, want.GetAnnotations()[annotations.AnnotationContentHash]))
			}
		})
	}
}

// TestDelete runs Applier.Delete against a real API server: it deletes
// our mirror, and refuses whatever is not ours, also when the cached
// object it was given is older than the live one.
func TestDelete(t *testing.T) {
	c, w := startCluster(t)
	v1 := source("app", "10", data(one))
	ours := func(g Gomega, ns string) *unstructured.Unstructured { return mirror(g, v1, ns, managedBy) }
	// cached returns a copy of the cached mirror, as the reconciler hands
	// it to Delete.
	cached := func(g Gomega, existing *unstructured.Unstructured) metav1.Object {
		m, ok := c.Mirror(secrets, existing.GetNamespace(), existing.GetName())
		g.Expect(ok).To(BeTrue())
		return m.DeepCopyObject().(*clusters.Mirror)
	}
	tests := []struct {
		name     string
		existing func(g Gomega, ns string) *unstructured.Unstructured
		// live is the object handed to Delete; meanwhile may change the
		// object after that.
		live      func(g Gomega, existing *unstructured.Unstructured) metav1.Object
		meanwhile func(g Gomega, existing *unstructured.Unstructured)
		outcome   apply.Outcome
		// kept: an object of that name is still there afterwards.
		kept bool
	}{
		{name: "our mirror: deleted", existing: ours, live: cached, outcome: apply.Deleted},
		{
			name:     "not a mirror: refused",
			existing: foreign,
			live:     func(_ Gomega, existing *unstructured.Unstructured) metav1.Object { return existing },
			outcome:  apply.Conflict, kept: true,
		},
		{
			name: "mirror of another source: refused",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return mirror(g, source("elsewhere", "3", data(one)), ns, managedBy)
			},
			live: cached, outcome: apply.Conflict, kept: true,
		},
		{
			name: "the other writer's mirror of the source: refused",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return mirror(g, v1, ns, annotations.ManagedByHub)
			},
			live:    func(_ Gomega, existing *unstructured.Unstructured) metav1.Object { return existing },
			outcome: apply.Conflict, kept: true,
		},
		{
			name: "cache stale, object since taken over: refused", existing: ours, live: cached,
			meanwhile: func(g Gomega, existing *unstructured.Unstructured) {
				u := existing.DeepCopy()
				u.SetLabels(map[string]string{"owner": "someone-else"})
				g.Expect(api.Hub.Client.Update(context.Background(), u)).To(Succeed())
			},
			outcome: apply.Conflict, kept: true,
		},
		{
			name: "cache stale, object since replaced by another: refused", existing: ours, live: cached,
			meanwhile: func(g Gomega, existing *unstructured.Unstructured) {
				g.Expect(api.Hub.Client.Delete(context.Background(), existing.DeepCopy())).To(Succeed())
				g.Expect(api.Hub.Client.Create(context.Background(), foreign(g, existing.GetNamespace()))).To(Succeed())
			},
			outcome: apply.Conflict, kept: true,
		},
		{
			name: "cache stale, still our mirror: the newer one deleted", existing: ours, live: cached,
			meanwhile: func(g Gomega, existing *unstructured.Unstructured) {
				u := existing.DeepCopy()
				u.Object["data"] = map[string]any{"k": two}
				g.Expect(api.Hub.Client.Update(context.Background(), u)).To(Succeed())
			},
			outcome: apply.Deleted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(g, "delete")
			existing := create(g, c, tt.existing(g, ns))
			live := tt.live(g, existing)
			if tt.meanwhile != nil {
				tt.meanwhile(g, existing)
			}
			before, err := get(ns, "db")
			g.Expect(err).NotTo(HaveOccurred())
			a := &apply.Applier{FieldManager: "fleetmirror-test", ManagedBy: managedBy}
			written := w.Writes()

			outcome, err := a.Delete(context.Background(), c, secrets, live, sourceRef)

			g.Expect(outcome).To(Equal(tt.outcome))
			after, gerr := get(ns, "db")
			if tt.kept {
				var ce *apply.ConflictError
				g.Expect(errors.As(err, &ce)).To(BeTrue(), "error %v", err)
				g.Expect(gerr).NotTo(HaveOccurred())
				g.Expect(after.GetResourceVersion()).To(Equal(before.GetResourceVersion()), "object touched")
				g.Expect(w.Writes()).To(Equal(written), "Delete wrote")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(apierrors.IsNotFound(gerr)).To(BeTrue(), "still there: %v", gerr)
		})
	}
}
