package apply

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

func TestSubset(t *testing.T) {
	tests := []struct {
		name       string
		want, have any
		ok         bool
	}{
		{"equal maps", map[string]any{"a": "1"}, map[string]any{"a": "1"}, true},
		{"server added a field", map[string]any{"spec": map[string]any{"a": int64(1)}}, map[string]any{"spec": map[string]any{"a": int64(1), "b": "default"}}, true},
		{"value differs", map[string]any{"a": "1"}, map[string]any{"a": "2"}, false},
		{"field missing", map[string]any{"a": "1"}, map[string]any{}, false},
		{"list element defaulted", []any{map[string]any{"name": "c"}}, []any{map[string]any{"name": "c", "pull": "IfNotPresent"}}, true},
		{"list longer", []any{"a"}, []any{"a", "b"}, false},
		{"int and float of one value", int64(2), float64(2), true},
		{"type changes", map[string]any{"a": "1"}, "x", false},
	}
	for _, tt := range tests {
		if got := subset(tt.want, tt.have); got != tt.ok {
			t.Errorf("%s: subset = %v, want %v", tt.name, got, tt.ok)
		}
	}
}

func obj(kind string, fields map[string]any, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetAnnotations(ann)
	return u
}

func TestNeedsReplace(t *testing.T) {
	tests := []struct {
		name       string
		live, want *unstructured.Unstructured
		replace    bool
	}{
		{"same type", obj("Secret", map[string]any{"type": "Opaque"}, nil), obj("Secret", map[string]any{"type": "Opaque"}, nil), false},
		{"type changed", obj("Secret", map[string]any{"type": "Opaque"}, nil), obj("Secret", map[string]any{"type": "kubernetes.io/tls"}, nil), true},
		{"immutable live", obj("ConfigMap", map[string]any{"immutable": true}, nil), obj("ConfigMap", nil, nil), true},
		{"configmap without type", obj("ConfigMap", nil, nil), obj("ConfigMap", nil, nil), false},
	}
	for _, tt := range tests {
		liveType, immutable := clusters.Traits(tt.live)
		if got := needsReplace(liveType, immutable, tt.want); got != tt.replace {
			t.Errorf("%s: needsReplace = %v, want %v", tt.name, got, tt.replace)
		}
	}
}

func TestNewer(t *testing.T) {
	rv := func(uid, v string) *unstructured.Unstructured {
		return obj("Secret", nil, map[string]string{annotations.AnnotationSourceUID: uid, annotations.AnnotationSourceResourceVersion: v})
	}
	tests := []struct {
		name       string
		live, want *unstructured.Unstructured
		newer      bool
	}{
		{"mirror older", rv("u", "5"), rv("u", "9"), false},
		{"same", rv("u", "9"), rv("u", "9"), false},
		{"mirror newer", rv("u", "10"), rv("u", "9"), true},
		{"other source object", rv("old", "10"), rv("new", "9"), false},
		{"unparsable", rv("u", "x"), rv("u", "9"), false},
	}
	for _, tt := range tests {
		if got := newer(tt.live, tt.want); got != tt.newer {
			t.Errorf("%s: newer = %v, want %v", tt.name, got, tt.newer)
		}
	}
}

func TestForgetCluster(t *testing.T) {
	a := &Applier{}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	m := obj("Secret", nil, nil)
	m.SetNamespace("ns")
	m.SetName("n")
	m.SetUID("u")
	m.SetResourceVersion("7")
	for _, c := range []string{"gone", "kept"} {
		a.remember(writtenKey(c, gvk, m), m, "h")
	}
	a.ForgetCluster("gone")
	if _, ok := a.lastWrite(writtenKey("gone", gvk, m), nil); ok {
		t.Error("the write to a forgotten cluster is still remembered")
	}
	if _, ok := a.lastWrite(writtenKey("kept", gvk, m), nil); !ok {
		t.Error("the write to another cluster was forgotten")
	}
}

func TestSeenDropsMemoOnceCached(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	cached := func(uid, rv string) *clusters.Mirror {
		m := &clusters.Mirror{}
		m.SetNamespace("team-a")
		m.SetName("db")
		m.SetUID(types.UID(uid))
		m.SetResourceVersion(rv)
		return m
	}
	tests := []struct {
		name string
		seen *clusters.Mirror
		kept bool
	}{
		{"cache older than our write", cached("u1", "9"), true},
		{"cache holds our write", cached("u1", "10"), false},
		{"cache holds a later version", cached("u1", "11"), false},
		{"another object of that name", cached("u2", "12"), true},
	}
	for _, tt := range tests {
		a := &Applier{}
		key := writtenKey("c1", gvk, tt.seen)
		a.remember(key, cached("u1", "10"), "h")
		a.Seen("c1", gvk, tt.seen)
		if _, kept := a.written.Load(key); kept != tt.kept {
			t.Errorf("%s: memo kept = %v, want %v", tt.name, kept, tt.kept)
		}
		// Asking for the last write with that cached object forgets it
		// the same way.
		a.remember(key, cached("u1", "10"), "h")
		a.lastWrite(key, tt.seen)
		if _, kept := a.written.Load(key); kept != tt.kept {
			t.Errorf("%s: lastWrite: memo kept = %v", tt.name, kept)
		}
		// The count that lets lookups skip an empty memory follows: one
		// memo or none, whatever was stored twice.
		if want := map[bool]int64{true: 1, false: 0}[tt.kept]; a.memos.Load() != want {
			t.Errorf("%s: memos = %d, want %d", tt.name, a.memos.Load(), want)
		}
		a.Forget("c1", gvk, cached("u1", "10"))
		if _, kept := a.written.Load(key); kept || a.memos.Load() != 0 {
			t.Errorf("%s: after Forget: memo kept = %v, memos = %d", tt.name, kept, a.memos.Load())
		}
	}
}
