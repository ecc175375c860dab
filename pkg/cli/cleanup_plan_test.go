package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// builtMirror is the metadata of the mirror in ns that writer managedBy
// builds of the source src/db of cluster, as the agents build it.
func builtMirror(t *testing.T, managedBy, cluster, ns string) metav1.ObjectMeta {
	t.Helper()
	src := &unstructured.Unstructured{}
	src.SetAPIVersion("v1")
	src.SetKind("Secret")
	src.SetNamespace("src")
	src.SetName("db")
	src.SetUID("1234")
	src.SetLabels(map[string]string{annotations.LabelEnabled: "true", "app": "db"})
	m, _, err := desired.Build(src, desired.Target{Namespace: ns}, desired.Options{SourceCluster: cluster, ManagedBy: managedBy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), Labels: m.GetLabels(), Annotations: m.GetAnnotations()}
}

func TestPlanCleanup(t *testing.T) {
	memberOnly := []Writer{Writers["member"]}
	hubOnly := []Writer{Writers["hub"]}
	both := []Writer{Writers["member"], Writers["hub"]}
	now := metav1.NewTime(time.Now())
	const (
		local  = "2/2 namespaces synced"
		remote = "remote: 1 cluster, 1/1 synced"
	)
	with := func(m metav1.ObjectMeta, change func(*metav1.ObjectMeta)) metav1.ObjectMeta {
		m = *m.DeepCopy()
		change(&m)
		return m
	}
	meta := func(ns, name string, labels, annots map[string]string, finalizers ...string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annots, Finalizers: finalizers}
	}
	source := map[string]string{annotations.LabelEnabled: "true"}
	pull := map[string]string{annotations.LabelPull: "true"}
	memberMirror := builtMirror(t, annotations.ManagedByMember, "eu-1", "team-a")
	hubMirror := builtMirror(t, annotations.ManagedByHub, "hub", "team-a")

	for _, tt := range []struct {
		name       string
		kind       string
		obj        metav1.ObjectMeta
		writers    []Writer
		keep       bool
		delete     string // "" for no delete; else a part of the reason
		orphan     string // the same, for a mirror kept as a plain object
		finalizers []string
		newStatus  *string
	}{
		{name: "member mirror", obj: memberMirror, writers: both, delete: "mirror of eu-1/src/db (managed-by member)"},
		{name: "member mirror, kept", obj: memberMirror, writers: both, keep: true},
		{name: "member mirror, hub only", obj: memberMirror, writers: hubOnly},
		{name: "hub mirror", obj: hubMirror, writers: hubOnly, delete: "mirror of hub/src/db (managed-by hub)"},
		{name: "hub mirror, member only", obj: hubMirror, writers: memberOnly},
		{name: "mirror being deleted", obj: with(memberMirror, func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now }), writers: both},
		{name: "lookalike: another name in the source reference", writers: both,
			obj: with(memberMirror, func(m *metav1.ObjectMeta) { m.Annotations[annotations.AnnotationSource] = "eu-1/src/other" })},
		{name: "mirror under another name (target-name)", writers: both, delete: "mirror of eu-1/src/other (managed-by member)",
			obj: with(memberMirror, func(m *metav1.ObjectMeta) {
				m.Annotations[annotations.AnnotationSource] = "eu-1/src/other"
				m.Annotations[annotations.AnnotationTargetName] = m.Name
			})},
		{name: "lookalike: a renamed mirror copied under a third name", writers: both,
			obj: with(memberMirror, func(m *metav1.ObjectMeta) {
				m.Annotations[annotations.AnnotationSource] = "eu-1/src/other"
				m.Annotations[annotations.AnnotationTargetName] = "regcred"
			})},
		{name: "copy-once mirror: kept as a plain object", writers: both, orphan: "mirror of eu-1/src/db (managed-by member)",
			obj: with(memberMirror, func(m *metav1.ObjectMeta) { m.Annotations[annotations.AnnotationCopyOnce] = "true" })},
		{name: "mirror of a source with deletion-policy Orphan: kept", writers: both, orphan: "mirror of hub/src/db (managed-by hub)",
			obj: with(hubMirror, func(m *metav1.ObjectMeta) {
				m.Annotations[annotations.AnnotationDeletionPolicy] = annotations.DeletionPolicyOrphan
			})},
		{name: "copy-once mirror, kept", writers: both, keep: true,
			obj: with(memberMirror, func(m *metav1.ObjectMeta) { m.Annotations[annotations.AnnotationCopyOnce] = "true" })},
		{name: "lookalike: no source reference", writers: both,
			obj: with(memberMirror, func(m *metav1.ObjectMeta) { delete(m.Annotations, annotations.AnnotationSource) })},
		{name: "lookalike: a reference of two parts", writers: both,
			obj: with(memberMirror, func(m *metav1.ObjectMeta) { m.Annotations[annotations.AnnotationSource] = "src/db" })},
		{name: "lookalike: another writer's label", writers: both,
			obj: with(memberMirror, func(m *metav1.ObjectMeta) { m.Labels[annotations.LabelManagedBy] = "someone" })},
		{name: "lookalike: no mirror label", writers: both,
			obj: with(memberMirror, func(m *metav1.ObjectMeta) { delete(m.Labels, annotations.LabelMirror) })},
		{name: "only the name of a mirror", obj: meta("team-a", "db", nil, nil), writers: both},

		{name: "source: member's marks", writers: memberOnly,
			obj:        meta("src", "db", source, map[string]string{annotations.AnnotationStatus: local + " | " + remote}, "kubernetes.io/x", member.Finalizer, hub.Finalizer),
			finalizers: []string{member.Finalizer}, newStatus: ptr(remote)},
		{name: "source: hub's marks", writers: hubOnly,
			obj:        meta("src", "db", source, map[string]string{annotations.AnnotationStatus: local + " | " + remote}, member.Finalizer, hub.Finalizer),
			finalizers: []string{hub.Finalizer}, newStatus: ptr(local)},
		{name: "source: both", writers: both,
			obj:        meta("src", "db", source, map[string]string{annotations.AnnotationStatus: local + " | " + remote, "other": "x"}, member.Finalizer, "other.io/keep", hub.Finalizer),
			finalizers: []string{member.Finalizer, hub.Finalizer}, newStatus: ptr("")},
		{name: "source: the other writer's status only", writers: memberOnly,
			obj: meta("src", "db", source, map[string]string{annotations.AnnotationStatus: remote})},
		{name: "source being deleted", writers: memberOnly,
			obj:        with(meta("src", "db", source, nil, member.Finalizer), func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &now }),
			finalizers: []string{member.Finalizer}},
		{name: "former source: label gone, finalizer and status stay", writers: memberOnly,
			obj:        meta("src", "db", nil, map[string]string{annotations.AnnotationStatus: local}, member.Finalizer),
			finalizers: []string{member.Finalizer}, newStatus: ptr("")},
		{name: "someone else's finalizers and annotations", writers: both,
			obj: meta("src", "db", source, map[string]string{"fleetmirror.io/sync": "true"}, "kubernetes", "example.com/cleanup")},

		{name: "pull mirror served by the member", writers: memberOnly,
			obj:       meta("b", "mine", pull, map[string]string{annotations.AnnotationMirrorFrom: "src/db", annotations.AnnotationStatus: "Synced"}),
			newStatus: ptr("")},
		{name: "pull mirror served by the member, hub only", writers: hubOnly,
			obj: meta("b", "mine", pull, map[string]string{annotations.AnnotationMirrorFrom: "src/db", annotations.AnnotationStatus: "Synced"})},
		{name: "pull mirror served by the hub", writers: hubOnly,
			obj:       meta("b", "mine", pull, map[string]string{annotations.AnnotationMirrorFrom: "hub/src/db", annotations.AnnotationStatus: "Synced"}),
			newStatus: ptr("")},
		{name: "pull mirror of no form: the member's", writers: memberOnly,
			obj:       meta("b", "mine", pull, map[string]string{annotations.AnnotationMirrorFrom: "x", annotations.AnnotationStatus: "Refused"}),
			newStatus: ptr("")},
		{name: "pull label on a source: a source's status", writers: hubOnly,
			obj:       meta("b", "mine", map[string]string{annotations.LabelPull: "true", annotations.LabelEnabled: "true"}, map[string]string{annotations.AnnotationStatus: local + " | " + remote}),
			newStatus: ptr(local)},

		{name: "MirrorPolicy", kind: "MirrorPolicy", writers: memberOnly,
			obj: meta("src", "p", nil, nil, controller.PolicyFinalizer), finalizers: []string{controller.PolicyFinalizer}},
		{name: "MirrorPolicy, hub only", kind: "MirrorPolicy", writers: hubOnly, obj: meta("src", "p", nil, nil, controller.PolicyFinalizer)},

		{name: "kinds object", kind: "ConfigMap", writers: memberOnly, keep: true,
			obj: meta("fleetmirror-system", clusters.MemberKindsName, map[string]string{clusters.LabelMemberKinds: "true"}, nil), delete: "kinds object"},
		{name: "kinds object, hub only", kind: "ConfigMap", writers: hubOnly,
			obj: meta("fleetmirror-system", clusters.MemberKindsName, map[string]string{clusters.LabelMemberKinds: "true"}, nil)},
		{name: "kinds object's name only", kind: "ConfigMap", writers: memberOnly, obj: meta("fleetmirror-system", clusters.MemberKindsName, nil, nil)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kind := tt.kind
			if kind == "" {
				kind = "Secret"
			}
			obj := &metav1.PartialObjectMetadata{ObjectMeta: tt.obj}
			got, ok := PlanCleanup(kind, obj, tt.writers, tt.keep)
			wantOK := tt.delete != "" || tt.orphan != "" || len(tt.finalizers) > 0 || tt.newStatus != nil
			if ok != wantOK {
				t.Fatalf("PlanCleanup = %+v, %v; want a change: %v", got, ok, wantOK)
			}
			if (got.Delete == "") != (tt.delete == "") || !strings.Contains(got.Delete, tt.delete) {
				t.Errorf("Delete = %q, want %q", got.Delete, tt.delete)
			}
			if (got.Orphan == "") != (tt.orphan == "") || !strings.Contains(got.Orphan, tt.orphan) {
				t.Errorf("Orphan = %q, want %q", got.Orphan, tt.orphan)
			}
			if !slices.Equal(got.RemoveFinalizers, tt.finalizers) {
				t.Errorf("RemoveFinalizers = %q, want %q", got.RemoveFinalizers, tt.finalizers)
			}
			if (got.NewStatus == nil) != (tt.newStatus == nil) || (got.NewStatus != nil && *got.NewStatus != *tt.newStatus) {
				t.Errorf("NewStatus = %v, want %v", deref(got.NewStatus), deref(tt.newStatus))
			}
		})
	}
}

func TestParseWriters(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want []string
	}{
		{[]string{"member", "hub"}, []string{"member", "hub"}},
		{[]string{"hub"}, []string{"hub"}},
		{[]string{" member", "member"}, []string{"member"}},
		{[]string{"members"}, nil},
		{nil, nil},
	} {
		ws, err := ParseWriters(tt.in)
		var got []string
		for _, w := range ws {
			got = append(got, w.Name)
		}
		if (err == nil) != (tt.want != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("ParseWriters(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
