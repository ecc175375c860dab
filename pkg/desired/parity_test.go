package desired

import (
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// Target-name, copy-once and deletion-policy Orphan: the mirror's name,
// the markers it carries (in the hash: switching them updates the
// mirror) and the name stamp that keeps a renamed mirror ours.
func TestBuildParity(t *testing.T) {
	plain, _, err := Build(source(), Target{Namespace: "a"}, Options{SourceCluster: "c", ManagedBy: "member"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		o          Options
		wantName   string
		wantAnnots map[string]string
		sameHash   bool
	}{
		{name: "plain", wantName: "db", sameHash: true},
		{name: "renamed", o: Options{Name: "regcred"}, wantName: "regcred",
			wantAnnots: map[string]string{annotations.AnnotationTargetName: "regcred"}, sameHash: true},
		{name: "renamed to its own name", o: Options{Name: "db"}, wantName: "db", sameHash: true},
		{name: "copy once", o: Options{CopyOnce: true}, wantName: "db",
			wantAnnots: map[string]string{annotations.AnnotationCopyOnce: "true"}},
		{name: "orphan", o: Options{Orphan: true}, wantName: "db",
			wantAnnots: map[string]string{annotations.AnnotationDeletionPolicy: "Orphan"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.SourceCluster, tt.o.ManagedBy = "c", "member"
			m, _, err := Build(source(), Target{Namespace: "a"}, tt.o, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.GetName() != tt.wantName {
				t.Errorf("name %q, want %q", m.GetName(), tt.wantName)
			}
			for k, v := range tt.wantAnnots {
				if got := m.GetAnnotations()[k]; got != v {
					t.Errorf("annotation %s = %q, want %q", k, got, v)
				}
			}
			if _, stamped := m.GetAnnotations()[annotations.AnnotationTargetName]; stamped != (tt.wantName != "db") {
				t.Errorf("target-name stamped: %v", stamped)
			}
			if same := m.GetAnnotations()[annotations.AnnotationContentHash] == plain.GetAnnotations()[annotations.AnnotationContentHash]; same != tt.sameHash {
				t.Errorf("same hash as a plain mirror: %v, want %v", same, tt.sameHash)
			}
			if got := Hash(m); got != m.GetAnnotations()[annotations.AnnotationContentHash] {
				t.Errorf("Hash of the built mirror %s differs from its stamp", got)
			}
			if !NamedAsBuilt(m.GetName(), m.GetAnnotations()) {
				t.Error("a mirror as built is not NamedAsBuilt")
			}
			if NamedAsBuilt("copied-by-hand", m.GetAnnotations()) {
				t.Error("a copy under another name is NamedAsBuilt")
			}
		})
	}
}

func TestKept(t *testing.T) {
	once := map[string]string{annotations.AnnotationCopyOnce: "true"}
	orphan := map[string]string{annotations.AnnotationDeletionPolicy: "Orphan"}
	deletes := map[string]string{annotations.AnnotationDeletionPolicy: "Delete"}
	for _, tt := range []struct {
		annots map[string]string
		why    Release
		want   bool
	}{
		{nil, Untargeted, false}, {nil, ClaimEnded, false}, {nil, SourceGone, false},
		{once, Untargeted, true}, {once, ClaimEnded, true}, {once, SourceGone, true},
		{orphan, Untargeted, false}, {orphan, ClaimEnded, true}, {orphan, SourceGone, false},
		{deletes, ClaimEnded, false},
	} {
		if got := Kept(tt.annots, tt.why); got != tt.want {
			t.Errorf("Kept(%v, %d) = %v, want %v", tt.annots, tt.why, got, tt.want)
		}
	}
}
