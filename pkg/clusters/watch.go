package clusters

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// watch is one list-and-watch of a resource, kept in an indexer, with one
// handler called for every change.
//
// It is client-go's Reflector writing into a store of ours, instead of a
// SharedIndexInformer. The informer exists to share one cache among many
// handlers, and pays for that per watch: a DeltaFIFO, a processing loop, a
// distributing processor and, per handler, two goroutines and a growing
// buffer between them. Each of our caches has exactly one handler, which
// only enqueues, so the store calls it directly on the reflector's
// goroutine, in the order of the watch, once the cache holds the change.
// That leaves the reflector's goroutines and the watch stream's: on a hub
// with hundreds of clusters and several watches each, it is half of the
// goroutines of a SharedIndexInformer (the fleet-scale benchmark has the
// figures). The reflector, its list, watch-list, relist, backoff and
// bookmark handling are client-go's, unchanged.
type watch struct {
	reflector *cache.Reflector
	store     *watchStore
}

// newWatch builds a watch of lw's objects (of the type of expected),
// indexed by idx and turned by transform before they are stored
// (transform must accept its own output: see Transformer). It does
// not run until run is called.
func newWatch(lw cache.ListerWatcher, expected runtime.Object, description string, resync time.Duration, idx cache.Indexers, transform cache.TransformFunc) *watch {
	if idx == nil {
		idx = cache.Indexers{} // each index costs memory per object: only those read
	}
	s := &watchStore{
		indexer:   cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, idx),
		transform: transform,
	}
	r := cache.NewReflectorWithOptions(lw, expected, s, cache.ReflectorOptions{
		Name:            description,
		TypeDescription: description,
		ResyncPeriod:    resync,
	})
	return &watch{reflector: r, store: s}
}

// run lists and watches until ctx ends; it returns at once.
func (w *watch) run(ctx context.Context) { go w.reflector.RunWithContext(ctx) }

// HasSynced reports whether the first list is stored and handled.
func (w *watch) HasSynced() bool { return w.store.synced.Load() }

// GetStore returns the cache.
func (w *watch) GetStore() cache.Store { return w.store.indexer }

// GetIndexer returns the cache with its indexes.
func (w *watch) GetIndexer() cache.Indexer { return w.store.indexer }

// setHandler makes fn the handler. Set on a watch that has stored objects
// already, fn is first called with each of them, as an informer does for
// a handler added late; no change is missed or reordered meanwhile.
func (w *watch) setHandler(fn func(obj any, deleted bool)) {
	s := w.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = fn
	for _, o := range s.indexer.List() {
		fn(o, false)
	}
}

// watchStore is the Reflector's store: it transforms, stores and hands each
// change to the handler, under one lock so that the reflector's watch and
// its resync timer (another goroutine) never interleave.
type watchStore struct {
	mu        sync.Mutex
	indexer   cache.Indexer
	transform cache.TransformFunc
	handler   func(obj any, deleted bool)
	synced    atomic.Bool
}

var _ cache.TransformingStore = (*watchStore)(nil)

// Transformer lets the reflector transform the objects of a streamed first
// list as they arrive, so that they are never all held whole at once.
// Replace may then see objects transformed already: transforms must accept
// their own output.
func (s *watchStore) Transformer() cache.TransformFunc { return s.transform }

func (s *watchStore) transformed(obj any) (any, error) {
	if s.transform == nil {
		return obj, nil
	}
	return s.transform(obj)
}

func (s *watchStore) Add(obj any) error { return s.Update(obj) }

func (s *watchStore) Update(obj any) error {
	obj, err := s.transformed(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.indexer.Update(obj); err != nil {
		return err
	}
	s.notify(obj, false)
	return nil
}

func (s *watchStore) Delete(obj any) error {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The cached object is what the handler knows (transformed); the
	// deleted one from the watch is not transformed.
	if old, ok, _ := s.indexer.GetByKey(key); ok {
		obj = old
	} else if obj, err = s.transformed(obj); err != nil {
		return err
	}
	if err := s.indexer.Delete(obj); err != nil {
		return err
	}
	s.notify(obj, true)
	return nil
}

// Replace stores a full list: the first one, or a relist after the watch
// could not resume. Objects gone from the list are deleted; the others are
// handed to the handler only if they are new or changed (by
// resourceVersion), so a relist after a broken watch is no wave of work.
func (s *watchStore) Replace(list []any, _ string) error {
	items := make([]any, 0, len(list))
	for _, o := range list {
		t, err := s.transformed(o)
		if err != nil {
			return err
		}
		items = append(items, t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[string]any{}
	for _, o := range s.indexer.List() {
		if key, err := cache.MetaNamespaceKeyFunc(o); err == nil {
			old[key] = o
		}
	}
	if err := s.indexer.Replace(items, ""); err != nil {
		return err
	}
	for _, o := range items {
		key, err := cache.MetaNamespaceKeyFunc(o)
		if err != nil {
			continue
		}
		prev, ok := old[key]
		delete(old, key)
		if ok && resourceVersion(prev) == resourceVersion(o) {
			continue
		}
		s.notify(o, false)
	}
	for _, o := range old {
		s.notify(o, true)
	}
	s.synced.Store(true)
	return nil
}

// Resync hands every cached object to the handler again (the Resync
// option of the Cluster).
func (s *watchStore) Resync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.indexer.List() {
		s.notify(o, false)
	}
	return nil
}

func (s *watchStore) notify(obj any, deleted bool) {
	if s.handler != nil {
		s.handler(obj, deleted)
	}
}

func resourceVersion(obj any) string {
	if o, ok := obj.(interface{ GetResourceVersion() string }); ok {
		return o.GetResourceVersion()
	}
	return ""
}
