package apply

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// A mirror stamped fleetmirror.io/keep-additions keeps what other writers
// add to it. Who wrote a field is read from the object's managedFields,
// the API server's own record, with structured-merge-diff's field sets
// (the library server-side apply is built on): a field that another field
// manager owns and the mirror does not set is theirs and stays; one that
// only fieldManager owns and the mirror no longer sets is a leftover of an
// earlier version of the source and goes; one that nobody owns was
// defaulted by the API server, which defaults it again. The mirror's own
// fields keep the source's values.
//
// Server-side apply would keep additions by itself only for fields first
// written by an apply, and an apply that creates the object would also
// write over an object of the name that is not ours; the agent creates
// mirrors with a plain create, so the merge is made here and written with
// an update on the checked resourceVersion.

// keepsAdditions reports whether want, a mirror desired.Build made, keeps
// what other writers add.
func keepsAdditions(want *unstructured.Unstructured) bool {
	return want.GetAnnotations()[annotations.AnnotationKeepAdditions] == "true"
}

// owners returns the union of the field sets of live's managedFields
// entries of fieldManager (ours) and of every other manager (theirs).
func owners(live *unstructured.Unstructured, fieldManager string) (ours, theirs *fieldpath.Set, err error) {
	ours, theirs = &fieldpath.Set{}, &fieldpath.Set{}
	for _, mf := range live.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(mf.FieldsV1.GetRawReader()); err != nil {
			return nil, nil, fmt.Errorf("managedFields of %s: %w", mf.Manager, err)
		}
		if mf.Manager == fieldManager {
			ours = ours.Union(s)
		} else {
			theirs = theirs.Union(s)
		}
	}
	return ours, theirs, nil
}

// keptAdditions returns want with what other writers added to live (every
// field of live, under the content or the labels and annotations, that
// want does not set and another manager owns), and whether live needs no
// write: it holds what want propagates, and no field that we wrote and
// want no longer sets.
func keptAdditions(live, want *unstructured.Unstructured, fieldManager string) (merged *unstructured.Unstructured, inSync bool, err error) {
	ours, theirs, err := owners(live, fieldManager)
	if err != nil {
		return nil, false, err
	}
	leftover := false
	merged = want.DeepCopy()
	// walk copies into to what of have (at path) want does not set and
	// others own.
	var walk func(path fieldpath.Path, have, to map[string]any)
	walk = func(path fieldpath.Path, have, to map[string]any) {
		for k, v := range have {
			p := append(path.Copy(), fieldpath.PathElement{FieldName: &k})
			hm, isMap := v.(map[string]any)
			if w, wanted := to[k]; wanted {
				if wm, ok := w.(map[string]any); ok && isMap {
					walk(p, hm, wm)
				}
				continue
			}
			switch {
			case theirs.Has(p):
				to[k] = v
			case isMap && under(theirs, p):
				m := map[string]any{}
				walk(p, hm, m)
				to[k] = m
			case ours.Has(p) || under(ours, p):
				leftover = true
			}
		}
	}
	// The content at the top of the object, then labels and annotations.
	walk(nil, desired.Content(live), merged.Object)
	walk(fieldpath.MakePathOrDie("metadata"), labelsAndAnnotations(live, false), labelsAndAnnotations(merged, true))
	return merged, !leftover && holds(live, want), nil
}

// under reports whether set holds a field below path p.
func under(set *fieldpath.Set, p fieldpath.Path) bool {
	for _, pe := range p {
		set = set.WithPrefix(pe)
	}
	return !set.Empty()
}

// labelsAndAnnotations holds obj's labels and annotations maps (shared
// with obj, not copies) under their field names. With create, an absent
// one is added to obj, empty, to receive additions.
func labelsAndAnnotations(obj *unstructured.Unstructured, create bool) map[string]any {
	md, _ := obj.Object["metadata"].(map[string]any)
	out := map[string]any{}
	for _, f := range []string{"labels", "annotations"} {
		m, ok := md[f].(map[string]any)
		if !ok && create && md != nil {
			m = map[string]any{}
			md[f] = m
		}
		if m != nil {
			out[f] = m
		}
	}
	return out
}
