package clusters

import (
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

func mirrorObject(kind string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetNamespace("team-a")
	u.SetName("db")
	u.SetUID("u-1")
	u.SetResourceVersion("42")
	u.SetLabels(map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: "fleetmirror-member"})
	u.SetAnnotations(map[string]string{
		annotations.AnnotationSource: "local/app/db",
		lastApplied:                  `{"a":"huge"}`,
	})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "fleetmirror"}})
	u.SetFinalizers([]string{"x"})
	return u
}

func TestSummarizeMirror(t *testing.T) {
	deleting := metav1.Now()
	tests := []struct {
		name       string
		in         *unstructured.Unstructured
		secretType string
		immutable  bool
		deleting   bool
	}{
		{"secret keeps its type", mirrorObject("Secret", map[string]any{"type": "kubernetes.io/tls", "data": map[string]any{"tls.crt": "AAAA"}}), "kubernetes.io/tls", false, false},
		{"immutable configmap", mirrorObject("ConfigMap", map[string]any{"immutable": true, "data": map[string]any{"k": "v"}}), "", true, false},
		{"being deleted", func() *unstructured.Unstructured {
			u := mirrorObject("ConfigMap", nil)
			u.SetDeletionTimestamp(&deleting)
			return u
		}(), "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hash := desired.Hash(tt.in)
			got, err := summarizeMirror(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			m, ok := got.(*Mirror)
			if !ok {
				t.Fatalf("summary is %T, want *Mirror", got)
			}
			if gvk := m.GetObjectKind().GroupVersionKind(); gvk.Kind != tt.in.GetKind() || gvk.Version != "v1" || gvk.Group != "" ||
				m.GetNamespace() != "team-a" || m.GetName() != "db" || m.GetUID() != "u-1" || m.GetResourceVersion() != "42" {
				t.Errorf("identity lost: %+v", m.mirrorMeta)
			}
			if secretType, immutable := m.Traits(); secretType != tt.secretType || immutable != tt.immutable {
				t.Errorf("traits = (%q, %v), want (%q, %v)", secretType, immutable, tt.secretType, tt.immutable)
			}
			if (m.GetDeletionTimestamp() != nil) != tt.deleting {
				t.Errorf("deletionTimestamp = %v, want set: %v", m.GetDeletionTimestamp(), tt.deleting)
			}
			if m.ObservedHash != hash {
				t.Errorf("ObservedHash = %q, want the hash of the live object %q", m.ObservedHash, hash)
			}
			if !maps.Equal(m.GetLabels(), tt.in.GetLabels()) {
				t.Errorf("labels = %v, want %v", m.GetLabels(), tt.in.GetLabels())
			}
			if want := map[string]string{annotations.AnnotationSource: "local/app/db"}; !maps.Equal(m.GetAnnotations(), want) {
				t.Errorf("annotations = %v, want %v (kubectl's last-applied copy dropped)", m.GetAnnotations(), want)
			}
			if m.GetManagedFields() != nil || m.GetFinalizers() != nil {
				t.Errorf("kept what no stage reads: managedFields %v, finalizers %v", m.GetManagedFields(), m.GetFinalizers())
			}
			again, _ := summarizeMirror(m)
			if again != m {
				t.Errorf("a summary passed through the transform again was rebuilt")
			}
			cp := m.DeepCopyObject().(*Mirror)
			cp.GetLabels()["x"] = "y"
			if _, ok := m.GetLabels()["x"]; ok {
				t.Errorf("DeepCopyObject shares the labels map")
			}
		})
	}
}

// TestSummaryMemory guards what the summary is for: the cache of
// member-large holds 10,000 of them, so their size is most of the agent's
// memory. The mirrors of one source differ only in namespace, UID and
// resourceVersion; everything else is shared.
func TestSummaryMemory(t *testing.T) {
	const n = 2000
	payload := map[string]any{}
	for _, k := range []string{"a", "b", "c"} {
		payload[k] = strings.Repeat("x", 1366)
	}
	inputs := make([]*unstructured.Unstructured, n)
	for i := range inputs {
		u := mirrorObject("Secret", map[string]any{"type": "Opaque", "data": payload})
		u.SetNamespace(fmt.Sprintf("ns-%04d", i))
		u.SetUID(types.UID(fmt.Sprintf("5b0e7e0c-3c34-4b7e-9d1e-%012d", i)))
		u.SetResourceVersion(strconv.Itoa(100000 + i))
		inputs[i] = u
	}
	kept := make([]any, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, u := range inputs {
		kept[i], _ = summarizeMirror(u)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMirror := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes per cached mirror", perMirror)
	// An unstructured copy of the metadata alone took 2,100 bytes; a
	// Mirror with maps of its own, 1,050; one embedding ObjectMeta with
	// shared maps, 378; its own metadata fields, 221; with its type and
	// traits shared and a UUID in 16 bytes, about 200 (the record itself
	// is 128 bytes; the rest is its resourceVersion and this test's own
	// namespaces, which real mirrors share).
	if perMirror > 300 {
		t.Errorf("a cached mirror takes %d bytes, want at most 300", perMirror)
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(inputs)
}

// TestSharedMetaReleased checks that the sharing table forgets sets of
// labels and annotations no mirror uses any more: every source update
// makes a new set (the stamped hash changes), and an agent runs for months.
func TestSharedMetaReleased(t *testing.T) {
	count := func() int {
		n := 0
		sharedMetas.Range(func(_, _ any) bool { n++; return true })
		return n
	}
	base := count()
	kept := make([]any, 0, 100)
	for i := range 100 {
		u := mirrorObject("ConfigMap", nil)
		u.SetAnnotations(map[string]string{annotations.AnnotationSource: "local/app/db", annotations.AnnotationContentHash: strconv.Itoa(i)})
		m, _ := summarizeMirror(u)
		kept = append(kept, m)
	}
	if got := count() - base; got < 100 {
		t.Fatalf("table holds %d new sets, want 100", got)
	}
	clear(kept[1:])
	kept = kept[:1]
	deadline := time.Now().Add(10 * time.Second)
	for count()-base > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("table still holds %d sets no mirror uses", count()-base-1)
		}
		runtime.GC() // cleanups run after the collection that finds the set unreachable
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(kept)
}

// TestCompactUID: whatever the UID, a cached mirror gives back exactly
// the text it was given; only the API server's canonical UUIDs take the
// 16-byte form.
func TestCompactUID(t *testing.T) {
	for _, tt := range []struct {
		uid     types.UID
		compact bool
	}{
		{"5b0e7e0c-3c34-4b7e-9d1e-000000000042", true},
		{"", false},
		{"00000000-0000-0000-0000-000000000000", false},
		{"5B0E7E0C-3C34-4B7E-9D1E-000000000042", false}, // upper case: not the canonical text
		{"urn:uuid:5b0e7e0c-3c34-4b7e-9d1e-000000000042", false},
		{"5b0e7e0c3c344b7e9d1e000000000042", false},
		{"not-a-uuid", false},
	} {
		c := makeUID(tt.uid)
		if got := c.get(); got != tt.uid {
			t.Errorf("%q: got back %q", tt.uid, got)
		}
		if compact := c.uuid != uuid.Nil; compact != tt.compact {
			t.Errorf("%q: compact = %v, want %v", tt.uid, compact, tt.compact)
		}
	}
}

func FuzzCompactUID(f *testing.F) {
	for _, s := range []string{"", "5b0e7e0c-3c34-4b7e-9d1e-000000000042", "{5b0e7e0c-3c34-4b7e-9d1e-000000000042}", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := makeUID(types.UID(s)).get(); got != types.UID(s) {
			t.Errorf("%q: got back %q", s, got)
		}
	})
}
