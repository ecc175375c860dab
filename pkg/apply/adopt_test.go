package apply_test

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// reflected is the copy kubernetes-reflector makes of app/db in ns: no
// labels, its four annotations, the source's type and data.
func reflected(ns, reflects string) *unstructured.Unstructured {
	u := foreign(nil, ns)
	u.SetAnnotations(map[string]string{
		peers.ReflectorAutoReflects:     "True",
		peers.ReflectorReflects:         reflects,
		peers.ReflectorReflectedVersion: "9",
		peers.ReflectorReflectedAt:      "2026-05-01T10:00:00.0000000+00:00",
	})
	return u
}

// kyvernoClone is the copy a Kyverno generate rule with clone makes of
// the source app/db whose UID is uid: the source's labels and Kyverno's
// (peers.kyvernoProof), no annotation.
func kyvernoClone(ns, uid string) *unstructured.Unstructured {
	u := foreign(nil, ns)
	u.SetLabels(map[string]string{
		"team":                            "a",
		peers.KyvernoManagedByLabel:       peers.KyvernoManagedByValue,
		peers.KyvernoPolicyName:           "sync-secrets",
		"generate.kyverno.io/rule-name":   "sync-db",
		"generate.kyverno.io/source-kind": "Secret",
		peers.KyvernoSourceNamespace:      "app",
		peers.KyvernoSourceUID:            uid,
	})
	return u
}

// released is what is left of our mirror of ref (a source reference) with
// uid once released as a plain object (apply.OrphanPatch).
func released(ns, ref, uid string) *unstructured.Unstructured {
	u := foreign(nil, ns)
	u.SetAnnotations(map[string]string{annotations.AnnotationReleasedFrom: ref, annotations.AnnotationReleasedFromUID: uid})
	return u
}

// TestEnsureAdopts runs Ensure with tools to adopt against objects in the
// way: a proven copy becomes our mirror in one write; anything else stays
// a conflict, untouched, with the reason it was not adopted.
func TestEnsureAdopts(t *testing.T) {
	c, w := startCluster(t)
	v1 := source("app", "10", data(one))
	all := peers.Tools
	tests := []struct {
		name     string
		existing func(g Gomega, ns string) *unstructured.Unstructured
		tools    []peers.Tool
		// cluster is the source's cluster; "" for the cluster written to.
		cluster string
		outcome apply.Outcome
		// notAdopted is part of ConflictError.NotAdopted.
		notAdopted string
		// replaced: the copy is deleted and created again.
		replaced bool
	}{
		{name: "reflector's copy of the source: adopted", existing: func(g Gomega, ns string) *unstructured.Unstructured { return reflected(ns, "app/db") }, tools: all, outcome: apply.Adopted},
		{
			name: "immutable copy: adopted by replacing it",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				u := reflected(ns, "app/db")
				u.Object["immutable"] = true
				return u
			},
			tools: all, outcome: apply.Adopted, replaced: true,
		},
		{
			name:     "reflector's copy, reflector not listed: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return reflected(ns, "app/db") }, tools: []peers.Tool{peers.Kubemirror},
			outcome: apply.Conflict, notAdopted: "kubemirror: no kubemirror mirror labels",
		},
		{
			name:     "adoption not asked for: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return reflected(ns, "app/db") },
			outcome:  apply.Conflict,
		},
		{
			name:     "copy of another source: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return reflected(ns, "other/db") }, tools: all,
			outcome: apply.Conflict, notAdopted: `reflector: it reflects "other/db", not app/db`,
		},
		{
			name:     "unproven object of the same name: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return foreign(g, ns) }, tools: all,
			outcome: apply.Conflict, notAdopted: "reflector: no " + peers.ReflectorReflects,
		},
		{
			name:     "source in another cluster: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return reflected(ns, "app/db") }, tools: all, cluster: "elsewhere",
			outcome: apply.Conflict, notAdopted: "the source is in cluster elsewhere",
		},
		{
			name:     "Kyverno's clone of the source: adopted",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return kyvernoClone(ns, "source-uid") }, tools: []peers.Tool{peers.Kyverno},
			outcome: apply.Adopted,
		},
		{
			name:     "Kyverno's clone of an earlier source: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return kyvernoClone(ns, "other-uid") }, tools: all,
			outcome: apply.Conflict, notAdopted: "kyverno: it is a clone of another object",
		},
		{
			name:     "Kyverno's clone, source in another cluster: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured { return kyvernoClone(ns, "source-uid") }, tools: []peers.Tool{peers.Kyverno}, cluster: "elsewhere",
			outcome: apply.Conflict, notAdopted: "the source is in cluster elsewhere",
		},
		{
			name: "a mirror of the source we released: adopted",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return released(ns, cluster+"/app/db", "source-uid")
			}, tools: []peers.Tool{peers.Fleetmirror},
			outcome: apply.Adopted,
		},
		{
			name: "a mirror of the source in another cluster we released: adopted",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return released(ns, "elsewhere/app/db", "source-uid")
			}, tools: all, cluster: "elsewhere",
			outcome: apply.Adopted,
		},
		{
			name: "a mirror we released of an earlier source of that name: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return released(ns, cluster+"/app/db", "old-uid")
			}, tools: all,
			outcome: apply.Conflict, notAdopted: "fleetmirror: it was a mirror of an earlier object",
		},
		{
			name: "a mirror we released, fleetmirror not listed: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				return released(ns, cluster+"/app/db", "source-uid")
			}, tools: []peers.Tool{peers.Kyverno},
			outcome: apply.Conflict, notAdopted: "kyverno: no Kyverno generate labels",
		},
		{
			name: "proven copy with another controller's finalizer: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				u := reflected(ns, "app/db")
				u.SetFinalizers([]string{"example.com/keep"})
				return u
			},
			tools: all, outcome: apply.Conflict, notAdopted: "finalizers (example.com/keep)",
		},
		{
			name: "proven copy that is a fleetmirror source itself: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				u := reflected(ns, "app/db")
				u.SetLabels(map[string]string{annotations.LabelEnabled: "true"})
				a := u.GetAnnotations()
				a[annotations.AnnotationSync] = "true"
				u.SetAnnotations(a)
				return u
			},
			tools: all, outcome: apply.Conflict, notAdopted: "a fleetmirror source itself",
		},
		{
			name: "our mirror of another source, with a copy's marks: conflict",
			existing: func(g Gomega, ns string) *unstructured.Unstructured {
				u := mirror(g, source("elsewhere", "3", data(two)), ns, managedBy)
				a := u.GetAnnotations()
				a[peers.ReflectorReflects] = "app/db"
				u.SetAnnotations(a)
				return u
			},
			tools: all, outcome: apply.Conflict,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ns := namespace(g, "adopt")
			before := create(g, c, tt.existing(g, ns))
			src := tt.cluster
			if src == "" {
				src = cluster
			}
			want, _, err := desired.Build(v1, desired.Target{Cluster: cluster, Namespace: ns}, desired.Options{SourceCluster: src, ManagedBy: managedBy}, nil)
			g.Expect(err).NotTo(HaveOccurred())
			a := &apply.Applier{FieldManager: "fleetmirror-test", ManagedBy: managedBy}
			written := w.Writes()

			outcome, err := a.Ensure(context.Background(), c, secrets, want, false, tt.tools...)

			g.Expect(outcome).To(Equal(tt.outcome))
			live, gerr := get(ns, "db")
			g.Expect(gerr).NotTo(HaveOccurred())
			if tt.outcome == apply.Conflict {
				var ce *apply.ConflictError
				g.Expect(errors.As(err, &ce)).To(BeTrue(), "error %v", err)
				if tt.notAdopted == "" {
					g.Expect(ce.NotAdopted).To(BeEmpty())
				} else {
					g.Expect(ce.NotAdopted).To(ContainSubstring(tt.notAdopted))
					g.Expect(ce.Error()).To(And(ContainSubstring("; not adopted: "), ContainSubstring(tt.notAdopted)))
				}
				g.Expect(w.Writes()).To(Equal(written), "Ensure wrote")
				g.Expect(live.GetResourceVersion()).To(Equal(before.GetResourceVersion()), "object touched")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w.Writes()-written).To(Equal(map[bool]int{false: 1, true: 2}[tt.replaced]), "writes")
			g.Expect(live.GetUID() == before.GetUID()).To(Equal(!tt.replaced), "same object")
			g.Expect(desired.Owned(live.GetLabels(), live.GetAnnotations(), managedBy, desired.SourceRef(src, "app", "db"))).To(BeTrue(), "not our mirror: %v", live.GetLabels())
			g.Expect(live.GetAnnotations()).To(Equal(want.GetAnnotations()), "the other tool's annotations are gone")
			g.Expect(live.GetLabels()).To(Equal(want.GetLabels()), "the other tool's labels are gone")
			g.Expect(live.Object["data"]).To(HaveKeyWithValue("k", one))
			for _, mf := range live.GetManagedFields() {
				g.Expect(mf.Manager).To(Equal("fleetmirror-test"), "managedFields of the copy's earlier writers")
			}

			// Ours now: the next Ensure, even with nothing to adopt,
			// finds it in sync and writes nothing.
			cachedAt(g, c, live)
			written = w.Writes()
			g.Expect(a.Ensure(context.Background(), c, secrets, want, false)).To(Equal(apply.Unchanged))
			g.Expect(w.Writes()).To(Equal(written))
		})
	}
}

// A conflict found without adoption is remembered; a source that then asks
// for adoption has the object looked at again at once, not after the
// memory expires.
func TestEnsureAdoptsPastRememberedConflict(t *testing.T) {
	c, _ := startCluster(t)
	g := NewWithT(t)
	ns := namespace(g, "adopt-memo")
	create(g, c, reflected(ns, "app/db"))
	want := mirror(g, source("app", "10", data(one)), ns, managedBy)
	a := &apply.Applier{FieldManager: "fleetmirror-test", ManagedBy: managedBy}

	outcome, _ := a.Ensure(context.Background(), c, secrets, want, false)
	g.Expect(outcome).To(Equal(apply.Conflict))
	outcome, err := a.Ensure(context.Background(), c, secrets, want, false, peers.Reflector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(outcome).To(Equal(apply.Adopted))
}

// For a copy-once source, a proven copy of it made by another tool is the
// copy made once: counted (Unchanged), never written, never ours.
func TestEnsureCopyOnceCountsProvenCopies(t *testing.T) {
	c, w := startCluster(t)
	g := NewWithT(t)
	ns := namespace(g, "once")
	before := create(g, c, kyvernoClone(ns, "source-uid"))
	want, _, err := desired.Build(source("app", "10", data(one)), desired.Target{Cluster: cluster, Namespace: ns},
		desired.Options{SourceCluster: cluster, ManagedBy: managedBy, CopyOnce: true}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	a := &apply.Applier{FieldManager: "fleetmirror-test", ManagedBy: managedBy}
	written := w.Writes()

	g.Expect(a.Ensure(context.Background(), c, secrets, want, false, peers.Kyverno)).To(Equal(apply.Unchanged))
	out, err := a.Ensure(context.Background(), c, secrets, want, false)
	g.Expect(out).To(Equal(apply.Conflict), "without adopt: %v", err)

	g.Expect(w.Writes()).To(Equal(written))
	live, err := get(ns, "db")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live.GetResourceVersion()).To(Equal(before.GetResourceVersion()))
	g.Expect(desired.IsMirror(live.GetLabels())).To(BeFalse())
}
