package clusters

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func nsObject(name, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv,
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
}

// recorder is a watch handler that writes down what it was told.
type recorder []string

func (r *recorder) handle(obj any, deleted bool) {
	m := obj.(*metav1.PartialObjectMetadata)
	verb := "set"
	if deleted {
		verb = "del"
	}
	if m.ManagedFields != nil {
		verb += "(untransformed)"
	}
	*r = append(*r, fmt.Sprintf("%s %s@%s", verb, m.Name, m.ResourceVersion))
}

func newTestStore() (*watchStore, *recorder) {
	w := newWatch(nil, &metav1.PartialObjectMetadata{}, "test", 0, nil, stripMetadata)
	r := &recorder{}
	w.setHandler(r.handle)
	return w.store, r
}

// The store is what the reflector writes into: each step is one call, and
// the handler must hear exactly the changes, transformed, in order.
func TestWatchStore(t *testing.T) {
	tests := []struct {
		name string
		run  func(s *watchStore) error
		want []string
		// keys in the cache afterwards
		cached []string
		synced bool
	}{{
		name: "first list: every object is new",
		run: func(s *watchStore) error {
			return s.Replace([]any{nsObject("a", "1"), nsObject("b", "2")}, "2")
		},
		want:   []string{"set a@1", "set b@2"},
		cached: []string{"a", "b"},
		synced: true,
	}, {
		name: "relist: unchanged objects are not handled again, changed and gone ones are",
		run: func(s *watchStore) error {
			if err := s.Replace([]any{nsObject("a", "1"), nsObject("b", "2"), nsObject("c", "3")}, "3"); err != nil {
				return err
			}
			return s.Replace([]any{nsObject("a", "1"), nsObject("b", "5")}, "5")
		},
		want:   []string{"set a@1", "set b@2", "set c@3", "set b@5", "del c@3"},
		cached: []string{"a", "b"},
		synced: true,
	}, {
		name: "watch events before the list: stored and handled, not yet synced",
		run: func(s *watchStore) error {
			if err := s.Add(nsObject("a", "1")); err != nil {
				return err
			}
			if err := s.Update(nsObject("a", "2")); err != nil {
				return err
			}
			return s.Delete(nsObject("a", "3"))
		},
		// The delete hands over what the cache held.
		want:   []string{"set a@1", "set a@2", "del a@2"},
		cached: []string{},
	}, {
		name: "delete of an object never cached is handled, transformed",
		run:  func(s *watchStore) error { return s.Delete(nsObject("x", "9")) },
		want: []string{"del x@9"},
	}, {
		name: "resync hands every cached object over again",
		run: func(s *watchStore) error {
			if err := s.Replace([]any{nsObject("a", "1")}, "1"); err != nil {
				return err
			}
			return s.Resync()
		},
		want:   []string{"set a@1", "set a@1"},
		cached: []string{"a"},
		synced: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, r := newTestStore()
			if err := tc.run(s); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(*r, tc.want) {
				t.Errorf("handled %q, want %q", *r, tc.want)
			}
			if tc.cached != nil {
				keys := s.indexer.ListKeys()
				slices.Sort(keys)
				if !slices.Equal(keys, tc.cached) {
					t.Errorf("cached %q, want %q", keys, tc.cached)
				}
			}
			for _, o := range s.indexer.List() {
				if o.(*metav1.PartialObjectMetadata).ManagedFields != nil {
					t.Errorf("cached %v untransformed", o)
				}
			}
			if got := s.synced.Load(); got != tc.synced {
				t.Errorf("synced %v, want %v", got, tc.synced)
			}
		})
	}
}

// A handler set on a watch that has objects cached hears each of them
// first, as an informer's late handler does, and then every change.
func TestWatchLateHandler(t *testing.T) {
	w := newWatch(nil, &metav1.PartialObjectMetadata{}, "test", 0, cache.Indexers{}, stripMetadata)
	if err := w.store.Replace([]any{nsObject("a", "1"), nsObject("b", "2")}, "2"); err != nil {
		t.Fatal(err)
	}
	if !w.HasSynced() {
		t.Fatal("not synced after the first list")
	}
	r := &recorder{}
	w.setHandler(r.handle)
	if err := w.store.Update(nsObject("a", "3")); err != nil {
		t.Fatal(err)
	}
	got := *r
	slices.Sort(got[:2]) // the cache lists in no order
	want := []string{"set a@1", "set b@2", "set a@3"}
	if !slices.Equal(got, want) {
		t.Errorf("handled %q, want %q", got, want)
	}
}
