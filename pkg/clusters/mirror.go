package clusters

import (
	"maps"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"unique"
	"weak"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// Mirror is what the cache keeps of one of our mirrors: the metadata that
// ownership checks and writes need, the fields that decide whether it can be
// updated in place, and the hash of its content. The payload is not kept, so
// the cache's memory does not grow with the size of what is mirrored.
//
// Of ObjectMeta only Name, Namespace, UID, ResourceVersion, Labels,
// Annotations and DeletionTimestamp are set. Mirrors are shared with the
// cache: never modify one.
type Mirror struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// SecretType is the type field of a Secret; "" for other kinds.
	SecretType string
	// Immutable is the object's immutable field.
	Immutable bool
	// ObservedHash is desired.Hash of the live object, computed when the
	// cache stored it: drift shows as a difference from the content hash
	// we stamped.
	ObservedHash string

	// shared holds Labels and Annotations when other mirrors have the same
	// ones; it keeps them in the sharing table while this mirror lives.
	shared *sharedMeta
}

// DeepCopyObject implements runtime.Object.
func (m *Mirror) DeepCopyObject() runtime.Object {
	out := *m
	m.ObjectMeta.DeepCopyInto(&out.ObjectMeta) //nolint:staticcheck // named: only the metadata is deep-copied here
	out.shared = nil                           // the copy has maps of its own
	return &out
}

// Traits returns the fields of obj that decide whether it can be updated in
// place: a Secret's type and the immutable flag.
func Traits(obj *unstructured.Unstructured) (secretType string, immutable bool) {
	secretType, _, _ = unstructured.NestedString(obj.Object, "type")
	immutable, _, _ = unstructured.NestedBool(obj.Object, "immutable")
	return secretType, immutable
}

// summarizeMirror is the transform of the mirror caches: it turns a decoded
// mirror into a Mirror.
//
// Strings that repeat across mirrors (keys, namespaces, the names and
// annotation values shared by the mirrors of one source) are interned, so
// that ten thousand mirrors hold one copy of each instead of ten thousand:
// with the payload gone they are most of what is left. unique.Make keeps a
// value only while something refers to it.
func summarizeMirror(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // already a summary: the transform may see an object twice
	}
	secretType, immutable := Traits(u)
	shared := shareMeta(u.GetLabels(), withoutLastApplied(u.GetAnnotations()))
	m := &Mirror{
		TypeMeta: metav1.TypeMeta{APIVersion: intern(u.GetAPIVersion()), Kind: intern(u.GetKind())},
		ObjectMeta: metav1.ObjectMeta{
			Name:              intern(u.GetName()),
			Namespace:         intern(u.GetNamespace()),
			UID:               u.GetUID(),
			ResourceVersion:   u.GetResourceVersion(),
			Labels:            shared.labels,
			Annotations:       shared.annotations,
			DeletionTimestamp: u.GetDeletionTimestamp(),
		},
		SecretType:   intern(secretType),
		Immutable:    immutable,
		ObservedHash: intern(desired.Hash(u)),
		shared:       shared,
	}
	return m, nil
}

func intern(s string) string { return unique.Make(s).Value() }

func withoutLastApplied(a map[string]string) map[string]string {
	delete(a, lastApplied)
	return a
}

// sharedMeta is one set of labels and annotations, shared by every cached
// mirror that has exactly these. The mirrors of one source differ only in
// namespace (and cluster), so ten thousand mirrors of a few hundred
// sources hold a few hundred pairs of maps instead of ten thousand: maps
// are the largest part of a summary.
//
// Written by hand because no library interns maps: unique.Make needs
// comparable values. The table holds weak pointers, so a set is dropped
// once no mirror uses it; the maps must never be modified.
type sharedMeta struct {
	labels, annotations map[string]string
}

var sharedMetas sync.Map // unique.Handle[string] (canonical form) -> weak.Pointer[sharedMeta]

func shareMeta(labels, annots map[string]string) *sharedMeta {
	var b strings.Builder
	for _, m := range []map[string]string{labels, annots} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			b.WriteString(k)
			b.WriteByte(0)
			b.WriteString(m[k])
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	key := unique.Make(b.String())
	if v, ok := sharedMetas.Load(key); ok {
		if s := v.(weak.Pointer[sharedMeta]).Value(); s != nil {
			return s
		}
	}
	s := &sharedMeta{labels: internMap(labels), annotations: internMap(annots)}
	wp := weak.Make(s)
	// Should another goroutine store the same set meanwhile, both are
	// valid and the table keeps the later one.
	sharedMetas.Store(key, wp)
	goruntime.AddCleanup(s, func(key unique.Handle[string]) { sharedMetas.CompareAndDelete(key, wp) }, key)
	return s
}

func internMap(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[intern(k)] = intern(v)
	}
	return out
}
