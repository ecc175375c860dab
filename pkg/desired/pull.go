package desired

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PullContent returns what a pull mirror of src receives: the Content a
// push mirror gets, without immutable. A pull mirror belongs to its
// namespace's owner and is never replaced (the agent never deletes it), so
// copying immutable: true would freeze the owner's object and every later
// change of the source would be refused. Labels, annotations and transform
// rules are not applied: they describe the source's own mirrors. The result
// shares no memory with src.
func PullContent(src *unstructured.Unstructured) map[string]any {
	c := deepCopy(Content(src))
	delete(c, "immutable")
	return c
}

// PullHash is the hash of a pull mirror's content, stamped on it as
// AnnotationContentHash when the content is written.
func PullHash(content map[string]any) string { return hashOf(content, nil, nil) }

// PullRefusal says why live may not receive the content of src, or "" when
// it may: a Secret's type cannot change, and an immutable object's content
// cannot.
func PullRefusal(gvk schema.GroupVersionKind, live, src *unstructured.Unstructured) string {
	if immutable, _, _ := unstructured.NestedBool(live.Object, "immutable"); immutable {
		return "it is immutable (immutable: true), so its content cannot change; recreate it without immutable"
	}
	if gvk.Group == "" && gvk.Kind == "Secret" {
		have, _, _ := unstructured.NestedString(live.Object, "type")
		want, _, _ := unstructured.NestedString(src.Object, "type")
		if have != want {
			return "its type " + quoteOr(have) + " differs from the source's " + quoteOr(want) +
				", and a Secret's type cannot change; recreate it with type " + quoteOr(want)
		}
	}
	return ""
}

func quoteOr(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
