package clusters

import (
	"context"
	"fmt"
	"io"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
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
	w := newWatch(watchSource{}, "test", 0, nil, stripMetadata)
	r := &recorder{}
	w.setHandler(r.handle)
	return w.store, r
}

// The store is what a watch writes into: each step is one call, and
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
			return s.Replace([]runtime.Object{nsObject("a", "1"), nsObject("b", "2")})
		},
		want:   []string{"set a@1", "set b@2"},
		cached: []string{"a", "b"},
		synced: true,
	}, {
		name: "relist: unchanged objects are not handled again, changed and gone ones are",
		run: func(s *watchStore) error {
			if err := s.Replace([]runtime.Object{nsObject("a", "1"), nsObject("b", "2"), nsObject("c", "3")}); err != nil {
				return err
			}
			return s.Replace([]runtime.Object{nsObject("a", "1"), nsObject("b", "5")})
		},
		want:   []string{"set a@1", "set b@2", "set c@3", "set b@5", "del c@3"},
		cached: []string{"a", "b"},
		synced: true,
	}, {
		name: "watch events before the list: stored and handled, not yet synced",
		run: func(s *watchStore) error {
			if err := s.apply(nsObject("a", "1"), nil); err != nil {
				return err
			}
			if err := s.apply(nsObject("a", "2"), nil); err != nil {
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
			if err := s.Replace([]runtime.Object{nsObject("a", "1")}); err != nil {
				return err
			}
			s.Resync()
			return nil
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
	w := newWatch(watchSource{}, "test", 0, cache.Indexers{}, stripMetadata)
	if err := w.store.Replace([]runtime.Object{nsObject("a", "1"), nsObject("b", "2")}); err != nil {
		t.Fatal(err)
	}
	if !w.HasSynced() {
		t.Fatal("not synced after the first list")
	}
	r := &recorder{}
	w.setHandler(r.handle)
	if err := w.store.apply(nsObject("a", "3"), nil); err != nil {
		t.Fatal(err)
	}
	got := *r
	slices.Sort(got[:2]) // the cache lists in no order
	want := []string{"set a@1", "set b@2", "set a@3"}
	if !slices.Equal(got, want) {
		t.Errorf("handled %q, want %q", got, want)
	}
}

// script is a watchSource whose streams are written in advance: each
// open or list takes the next step, and records what it was asked.
type script struct {
	mu    sync.Mutex
	steps []step
	calls []string
}

// step answers one request: a stream of lines, an error, or a list.
type step struct {
	lines []string
	err   error
	list  []runtime.Object
	rv    string
}

func (s *script) next(call string) (step, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
	if len(s.steps) == 0 {
		return step{}, false
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	return st, true
}

func (s *script) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *script) source() watchSource {
	return watchSource{
		open: func(ctx context.Context, o metav1.ListOptions) (io.ReadCloser, error) {
			call := "watch rv=" + o.ResourceVersion
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				call = "stream list"
			}
			st, ok := s.next(call)
			if !ok { // nothing more: a watch that stays open
				r, w := io.Pipe()
				context.AfterFunc(ctx, func() { _ = w.CloseWithError(ctx.Err()) })
				return r, nil
			}
			if st.err != nil {
				return nil, st.err
			}
			return io.NopCloser(strings.NewReader(strings.Join(st.lines, "\n"))), nil
		},
		list: func(context.Context, metav1.ListOptions) ([]runtime.Object, string, error) {
			st, _ := s.next("list")
			return st.list, st.rv, st.err
		},
		next: nextMetadata,
	}
}

func event(typ, name, rv string) string {
	return fmt.Sprintf(`{"type":%q,"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":%q,"resourceVersion":%q}}}`, typ, name, rv)
}

func endOfList(rv string) string {
	return fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":%q,"annotations":{%q:"true"}}}}`, rv, metav1.InitialEventsAnnotationKey)
}

func errorEvent(code int32, reason metav1.StatusReason) string {
	return fmt.Sprintf(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d,"reason":%q}}`, code, reason)
}

// The watch loop against scripted API server answers: which request comes
// next, and what the handler hears, for each way a stream can end.
func TestWatchLoop(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		// calls are the requests expected, in order; the last one is a
		// watch that stays open.
		calls   []string
		handled []string
		cached  []string
	}{{
		name: "streamed list, then the watch resumes where the stream ended",
		steps: []step{
			{lines: []string{event("ADDED", "a", "1"), event("ADDED", "b", "2"), endOfList("5"), event("MODIFIED", "a", "6")}},
			{lines: []string{`{"type":"BOOKMARK","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"}}}`}},
		},
		calls:   []string{"stream list", "watch rv=6", "watch rv=9"},
		handled: []string{"set a@1", "set b@2", "set a@6"},
		cached:  []string{"a", "b"},
	}, {
		name: "410 Gone: listed again; only what changed is handled",
		steps: []step{
			{lines: []string{event("ADDED", "a", "1"), event("ADDED", "b", "2"), endOfList("5")}},
			{lines: []string{errorEvent(410, metav1.StatusReasonExpired)}},
			{lines: []string{event("ADDED", "a", "1"), event("ADDED", "c", "8"), endOfList("9")}},
		},
		calls:   []string{"stream list", "watch rv=5", "stream list", "watch rv=9"},
		handled: []string{"set a@1", "set b@2", "set c@8", "del b@2"},
		cached:  []string{"a", "c"},
	}, {
		name: "410 when opening the watch: listed again",
		steps: []step{
			{lines: []string{event("ADDED", "a", "1"), endOfList("5")}},
			{lines: []string{}},
			{err: apierrors.NewResourceExpired("too old")},
			{lines: []string{endOfList("7")}},
		},
		calls:   []string{"stream list", "watch rv=5", "watch rv=5", "stream list", "watch rv=7"},
		handled: []string{"set a@1", "del a@1"},
		cached:  []string{},
	}, {
		name: "a streamed list cut short is streamed again, not resumed",
		steps: []step{
			{lines: []string{event("ADDED", "a", "1")}},
			{lines: []string{event("ADDED", "a", "1"), event("ADDED", "b", "2"), endOfList("3")}},
		},
		calls:   []string{"stream list", "stream list", "watch rv=3"},
		handled: []string{"set a@1", "set b@2"},
		cached:  []string{"a", "b"},
	}, {
		name: "an API server without streamed lists: LIST, then watch from the list",
		steps: []step{
			{err: apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", nil)},
			{list: []runtime.Object{nsObject("a", "1")}, rv: "4"},
			{lines: []string{event("DELETED", "a", "5")}},
		},
		calls:   []string{"stream list", "list", "watch rv=4", "watch rv=5"},
		handled: []string{"set a@1", "del a@1"},
		cached:  []string{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{steps: tc.steps}
			w := newWatch(s.source(), "test", 0, nil, stripMetadata)
			var mu sync.Mutex
			r := &recorder{}
			w.setHandler(func(obj any, deleted bool) {
				mu.Lock()
				defer mu.Unlock()
				r.handle(obj, deleted)
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w.run(ctx)
			g := NewWithT(t)
			// Failures pause at most 1.6 s before the next request.
			g.Eventually(s.called, "10s", "10ms").Should(HaveLen(len(tc.calls)))
			g.Consistently(s.called, "100ms", "10ms").Should(Equal(tc.calls))
			mu.Lock()
			got := slices.Clone(*r)
			mu.Unlock()
			if !slices.Equal(got, tc.handled) {
				t.Errorf("handled %q, want %q", got, tc.handled)
			}
			keys := w.store.indexer.ListKeys()
			slices.Sort(keys)
			if !slices.Equal(keys, tc.cached) {
				t.Errorf("cached %q, want %q", keys, tc.cached)
			}
			if !w.HasSynced() {
				t.Error("not synced")
			}
		})
	}
}

// Watches on a real API server, with a streamed first list and with the
// plain LIST of API servers that have none: each caches exactly the
// labelled objects, hears every later change once, and costs one
// goroutine of its own (and one of its HTTP/2 stream) while it runs.
func TestWatchOnAPIServer(t *testing.T) {
	fleet, ctx := fleettest.APIServer(t)
	k8s := fleet.Hub.Client
	g := NewWithT(t)
	c, err := New(fleet.Hub.Config, Options{Name: "one", ManagedBy: "test", Handler: nopHandler{}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(c.Close)
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	selected := labels.SelectorFromSet(labels.Set{"selected": "yes"})
	create := func(g Gomega, name string, selected bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		if selected {
			s.Labels = map[string]string{"selected": "yes"}
		}
		g.Expect(k8s.Create(ctx, s)).To(Succeed())
		return s
	}
	before := create(g, "before", true)
	create(g, "unselected", false)

	for _, mode := range []struct {
		name        string
		noWatchList bool
	}{{"streamed list", false}, {"LIST", true}} {
		t.Run(mode.name, func(t *testing.T) {
			g := NewWithT(t)
			w := newWatch(c.watchSource(secrets, selected, false), "secrets", 0, nil, stripMetadata)
			w.noWatchList.Store(mode.noWatchList)
			var mu sync.Mutex
			var got []string
			w.setHandler(func(obj any, deleted bool) {
				mu.Lock()
				defer mu.Unlock()
				u := obj.(*unstructured.Unstructured)
				g.Expect(u.GetManagedFields()).To(BeEmpty(), "untransformed")
				got = append(got, fmt.Sprintf("%s del=%v", u.GetName(), deleted))
			})
			handled := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(got)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			w.run(wctx)
			g.Eventually(w.HasSynced, "10s", "20ms").Should(BeTrue())
			g.Expect(handled()).To(Equal([]string{"before del=false"}))

			after := create(g, "after-"+strings.ToLower(strings.ReplaceAll(mode.name, " ", "-")), true)
			before.Annotations = map[string]string{"changed": mode.name}
			g.Expect(k8s.Update(ctx, before)).To(Succeed())
			g.Expect(k8s.Delete(ctx, after)).To(Succeed())
			g.Eventually(handled, "10s", "20ms").Should(Equal([]string{
				"before del=false", after.Name + " del=false", "before del=false", after.Name + " del=true"}))
			g.Expect(w.store.indexer.ListKeys()).To(ConsistOf("default/before"))
			g.Expect(w.noWatchList.Load()).To(Equal(mode.noWatchList), "the API server streams lists")
		})
	}

	// What a running watch costs in goroutines: the reflector it replaced
	// cost four.
	const n = 20
	baseline := goruntime.NumGoroutine()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := make([]*watch, n)
	for i := range ws {
		ws[i] = newWatch(c.watchSource(secrets, selected, false), "secrets", 0, nil, stripMetadata)
		ws[i].run(wctx)
	}
	g.Eventually(func() bool {
		return !slices.ContainsFunc(ws, func(w *watch) bool { return !w.HasSynced() })
	}, "10s", "20ms").Should(BeTrue())
	g.Consistently(func() int { return goruntime.NumGoroutine() - baseline }, "300ms", "50ms").
		Should(BeNumerically("<=", 2*n+3), "goroutines of %d watches", n)
}

type nopHandler struct{}

func (nopHandler) Source(string, schema.GroupVersionKind, *unstructured.Unstructured, bool) {}
func (nopHandler) Mirror(string, schema.GroupVersionKind, *Mirror, bool)                    {}
func (nopHandler) Namespace(string, *metav1.PartialObjectMetadata)                          {}
func (nopHandler) Policy(string, *v1alpha1.MirrorPolicy, bool)                              {}

// With Options.WatchConnection the watch streams go over a connection of
// their own and the writes over the other; without it, over one.
func TestWatchConnection(t *testing.T) {
	fleet, ctx := fleettest.APIServer(t)
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	inFlight := func(t *closingTransport) int {
		if t == nil {
			return -1
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.inFlight
	}
	// Four streams: namespaces, and the sources, mirrors and pull mirrors
	// of Secrets.
	for _, separate := range []bool{true, false} {
		t.Run(fmt.Sprintf("separate=%v", separate), func(t *testing.T) {
			g := NewWithT(t)
			c, err := New(fleet.Hub.Config, Options{Name: "one", ManagedBy: "test", Handler: nopHandler{}, WatchConnection: separate})
			g.Expect(err).NotTo(HaveOccurred())
			cctx, cancel := context.WithCancel(ctx)
			c.Start(cctx)
			g.Expect(c.Watch(secrets)).To(Succeed())
			g.Eventually(c.HasSynced, "10s", "20ms").Should(BeTrue())
			if separate {
				g.Eventually(func() int { return inFlight(c.watchTransport) }, "5s", "20ms").Should(Equal(4))
				g.Consistently(func() int { return inFlight(c.transport) }, "200ms", "20ms").Should(Equal(0))
			} else {
				g.Expect(c.watchTransport).To(BeNil())
				g.Eventually(func() int { return inFlight(c.transport) }, "5s", "20ms").Should(Equal(4))
			}
			cancel()
			c.Close()
			for _, tr := range []*closingTransport{c.transport, c.watchTransport} {
				if tr != nil {
					g.Eventually(func() int { return inFlight(tr) }, "5s", "20ms").Should(Equal(0))
					g.Expect(tr.closed).To(BeTrue())
				}
			}
		})
	}
}
