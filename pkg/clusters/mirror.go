package clusters

import (
	"maps"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"unique"
	"weak"

	"github.com/google/uuid"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// Mirror is what the cache keeps of one of our mirrors: the metadata that
// ownership checks and writes need, the fields that decide whether it can be
// updated in place, and the hash of its content. The payload is not kept, so
// the cache's memory does not grow with the size of what is mirrored.
//
// It is a metav1.Object of its own rather than an embedded ObjectMeta,
// which with its fields no stage reads (generation, owners, finalizers,
// managed fields, timestamps...) made up 232 of its 312 bytes: a cached
// mirror costs about a third less (BenchmarkMirrorCacheMemory). Of the
// metadata only name, namespace, UID, resourceVersion, labels,
// annotations and deletionTimestamp are kept; the other getters return
// nothing and their setters drop what they are given. Mirrors are shared
// with the cache: never modify one.
type Mirror struct {
	mirrorMeta

	// ObservedHash is desired.Hash of the live object, computed when the
	// cache stored it: drift shows as a difference from the content hash
	// we stamped.
	ObservedHash string

	// shared holds labels and annotations when other mirrors have the same
	// ones; it keeps them in the sharing table while this mirror lives.
	shared *sharedMeta
}

var (
	_ metav1.Object     = (*Mirror)(nil)
	_ runtime.Object    = (*Mirror)(nil)
	_ schema.ObjectKind = (*mirrorMeta)(nil)
)

// mirrorMeta is the metadata a Mirror keeps, and its metav1.Object
// methods.
type mirrorMeta struct {
	// typ holds what the mirrors of one kind and one source share besides
	// their labels and annotations, once for all of them.
	typ                 unique.Handle[mirrorType]
	name, namespace     string
	uid                 compactUID
	resourceVersion     string
	deletionTimestamp   *metav1.Time
	labels, annotations map[string]string
}

// mirrorType is the type of a mirror and its Traits: a handle to one is a
// word, where the four fields took seven in each mirror.
type mirrorType struct {
	apiVersion, kind string
	secretType       string
	immutable        bool
}

// typeOf returns m's type; the zero value for a Mirror made empty.
func (m *mirrorMeta) typeOf() mirrorType {
	if m.typ == (unique.Handle[mirrorType]{}) {
		return mirrorType{}
	}
	return m.typ.Value()
}

// Traits returns the fields of the mirror that decide whether it can be
// updated in place: a Secret's type ("" for other kinds) and the
// immutable flag (see the function Traits).
func (m *Mirror) Traits() (secretType string, immutable bool) {
	t := m.typeOf()
	return t.secretType, t.immutable
}

// compactUID holds a UID in 16 bytes when it is a UUID in its canonical
// text (what the API server assigns), else as text: a UID string took 64
// bytes of each cached mirror (its header, and 36 bytes of text in a
// 48-byte allocation). The text is interned only to be a word wide; UIDs
// do not repeat. google/uuid parses, and the round trip is checked
// because it accepts other spellings of a UUID too.
type compactUID struct {
	uuid  uuid.UUID
	other unique.Handle[types.UID]
}

func makeUID(v types.UID) compactUID {
	if u, err := uuid.Parse(string(v)); err == nil && u != uuid.Nil && u.String() == string(v) {
		return compactUID{uuid: u}
	}
	if v == "" {
		return compactUID{}
	}
	return compactUID{other: unique.Make(v)}
}

func (c compactUID) get() types.UID {
	switch {
	case c.other != (unique.Handle[types.UID]{}):
		return c.other.Value()
	case c.uuid == uuid.Nil:
		return ""
	}
	return types.UID(c.uuid.String())
}

// DeepCopyObject implements runtime.Object.
func (m *Mirror) DeepCopyObject() runtime.Object {
	out := *m
	out.labels, out.annotations = maps.Clone(m.labels), maps.Clone(m.annotations)
	out.deletionTimestamp = m.deletionTimestamp.DeepCopy()
	out.shared = nil // the copy has maps of its own
	return &out
}

// GetObjectKind implements runtime.Object.
func (m *mirrorMeta) GetObjectKind() schema.ObjectKind { return m }

// GroupVersionKind implements schema.ObjectKind.
func (m *mirrorMeta) GroupVersionKind() schema.GroupVersionKind {
	t := m.typeOf()
	return schema.FromAPIVersionAndKind(t.apiVersion, t.kind)
}

// SetGroupVersionKind implements schema.ObjectKind.
func (m *mirrorMeta) SetGroupVersionKind(gvk schema.GroupVersionKind) {
	t := m.typeOf()
	t.apiVersion, t.kind = gvk.ToAPIVersionAndKind()
	m.typ = unique.Make(t)
}

// The metadata a Mirror keeps.

func (m *mirrorMeta) GetNamespace() string                { return m.namespace }
func (m *mirrorMeta) SetNamespace(v string)               { m.namespace = v }
func (m *mirrorMeta) GetName() string                     { return m.name }
func (m *mirrorMeta) SetName(v string)                    { m.name = v }
func (m *mirrorMeta) GetUID() types.UID                   { return m.uid.get() }
func (m *mirrorMeta) SetUID(v types.UID)                  { m.uid = makeUID(v) }
func (m *mirrorMeta) GetResourceVersion() string          { return m.resourceVersion }
func (m *mirrorMeta) SetResourceVersion(v string)         { m.resourceVersion = v }
func (m *mirrorMeta) GetDeletionTimestamp() *metav1.Time  { return m.deletionTimestamp }
func (m *mirrorMeta) SetDeletionTimestamp(v *metav1.Time) { m.deletionTimestamp = v }
func (m *mirrorMeta) GetLabels() map[string]string        { return m.labels }
func (m *mirrorMeta) SetLabels(v map[string]string)       { m.labels = v }
func (m *mirrorMeta) GetAnnotations() map[string]string   { return m.annotations }
func (m *mirrorMeta) SetAnnotations(v map[string]string)  { m.annotations = v }

// The metadata a Mirror drops: no stage reads it.

func (m *mirrorMeta) GetGenerateName() string                       { return "" }
func (m *mirrorMeta) SetGenerateName(string)                        {}
func (m *mirrorMeta) GetGeneration() int64                          { return 0 }
func (m *mirrorMeta) SetGeneration(int64)                           {}
func (m *mirrorMeta) GetSelfLink() string                           { return "" }
func (m *mirrorMeta) SetSelfLink(string)                            {}
func (m *mirrorMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (m *mirrorMeta) SetCreationTimestamp(metav1.Time)              {}
func (m *mirrorMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (m *mirrorMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (m *mirrorMeta) GetFinalizers() []string                       { return nil }
func (m *mirrorMeta) SetFinalizers([]string)                        {}
func (m *mirrorMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (m *mirrorMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (m *mirrorMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (m *mirrorMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

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
	m := &Mirror{mirrorMeta: mirrorMeta{
		typ:               unique.Make(mirrorType{apiVersion: u.GetAPIVersion(), kind: u.GetKind(), secretType: secretType, immutable: immutable}),
		name:              intern(u.GetName()),
		namespace:         intern(u.GetNamespace()),
		uid:               makeUID(u.GetUID()),
		resourceVersion:   u.GetResourceVersion(),
		labels:            shared.labels,
		annotations:       shared.annotations,
		deletionTimestamp: u.GetDeletionTimestamp(),
	},
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
