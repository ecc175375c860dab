package clusters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
)

// watch is one list-and-watch of a label-selected collection, kept in an
// indexer, with one handler called for every change.
//
// Written by hand instead of with client-go's Reflector (or an informer,
// which adds a DeltaFIFO, a processor and two goroutines per handler)
// because of what a watch costs per cluster on a hub. Besides the HTTP/2
// stream's own goroutine, a Reflector runs its loop, a resync goroutine
// (even with resync off) and the StreamWatcher's decoding goroutine: with
// seven watches per cluster for two kinds, those were 21 of the 30
// goroutines per cluster that the fleet benchmark measured. Here one
// goroutine reads the stream, decodes each event and hands it to the
// store, whose handler only enqueues; a resync runs on a timer.
//
// What a Reflector does that matters here is kept: the first list is
// streamed (a watch with sendInitialEvents, so that the whole list is
// never held at once), with a plain LIST where the API server does not
// offer that; a watch that ends resumes from the last resourceVersion
// (bookmarks keep it current), and lists again only when the API server
// can no longer resume it; failures back off as a Reflector's do.
type watch struct {
	src         watchSource
	description string
	resync      time.Duration
	store       *watchStore
	// noWatchList is set when the API server refused a streamed list;
	// this watch LISTs from then on.
	noWatchList atomic.Bool
	// health, when set, is the cluster's: the watch dials nothing while
	// the cluster is marked down, and reconnects at once, resuming from
	// its resourceVersion, when it is marked up.
	health *health
	// unanswered, when set, is called when the watch could not list or
	// open a stream for want of an answer (no status from the API server):
	// the cluster's health is then checked at once.
	unanswered func()
	// stream is 1 + the cluster's health.ups when the stream open now was
	// opened, 0 while none is open; lastEvent is when that stream opened
	// or last brought an event (UnixNano). See current.
	stream    atomic.Uint64
	lastEvent atomic.Int64
	// listed is the resourceVersion of a list stored before run (see
	// listFirst): the first stream resumes from it.
	listed string
	// paged lists in pages of listPageSize objects. An API server whose
	// cache of the collection is still filling (a CRD's first request
	// creates it) answers an unpaged list without selectors with 429
	// "storage is (re)initializing" and Retry-After 1, and serves a paged
	// one from etcd at once (KEP-4568).
	paged bool
}

// listPageSize is the page of a paged list, client-go's pager's default.
const listPageSize = 500

// watchSource is where a watch reads: one collection of one cluster.
type watchSource struct {
	// open starts a watch stream of the collection with opts.
	open func(ctx context.Context, opts metav1.ListOptions) (io.ReadCloser, error)
	// list LISTs the collection with opts, in pages of opts.Limit objects
	// if it is set: the items and the list's resourceVersion.
	list func(ctx context.Context, opts metav1.ListOptions) ([]runtime.Object, string, error)
	// next decodes the next event of a stream (see nextUnstructured).
	next func(dec sigsjson.Decoder) (apiwatch.EventType, runtime.Object, error)
	// selector is the label selector of every request, fieldSelector its
	// field selector.
	selector, fieldSelector string
}

// Timing of a watch, as client-go's Reflector has it: a watch request asks
// the API server to end the stream after 5 to 10 minutes, so that the
// watches of many clients do not all reconnect at once; failures are
// retried after 0.8 s, doubling up to 30 s.
const (
	minWatchTimeout = 5 * time.Minute
	// healthyWatch is how long a stream must have lasted, if it brought
	// no event, for its end to be retried at once.
	healthyWatch = 10 * time.Second
)

func newWatchBackoff() wait.Backoff {
	return wait.Backoff{Duration: 800 * time.Millisecond, Factor: 2, Jitter: 1, Steps: 1 << 30, Cap: 30 * time.Second}
}

// newWatch builds a watch of src's objects, indexed by idx and turned by
// transform before they are stored (transform must accept its own
// output). It does not run until run is called.
func newWatch(src watchSource, description string, resync time.Duration, idx cache.Indexers, transform cache.TransformFunc) *watch {
	if idx == nil {
		idx = cache.Indexers{} // each index costs memory per object: only those read
	}
	return &watch{src: src, description: description, resync: resync, store: &watchStore{
		indexer:   cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, idx),
		transform: transform,
	}}
}

// run lists and watches until ctx ends; it returns at once.
func (w *watch) run(ctx context.Context) {
	if w.resync > 0 {
		var t *time.Timer
		t = time.AfterFunc(w.resync, func() {
			if ctx.Err() == nil {
				w.store.Resync()
				t.Reset(w.resync)
			}
		})
		context.AfterFunc(ctx, func() { t.Stop() })
	}
	go w.loop(ctx)
}

// loop lists and watches until ctx ends.
func (w *watch) loop(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("watch", w.description)
	retry := newRetries(w.health, newWatchBackoff)
	rv := w.listed // where the next watch resumes; "" lists first
	for ctx.Err() == nil {
		// A cluster marked down is asked nothing but the probe.
		if !retry.begin(ctx) {
			return
		}
		opts := metav1.ListOptions{
			LabelSelector:       w.src.selector,
			FieldSelector:       w.src.fieldSelector,
			AllowWatchBookmarks: true,
			// Spreads reconnections; no secret depends on it.
			TimeoutSeconds: ptr.To(int64(minWatchTimeout.Seconds() * (1 + rand.Float64()))), //nolint:gosec // see above
		}
		var initial map[string]struct{} // the keys of a streamed list so far
		switch {
		case rv != "":
			opts.ResourceVersion = rv
		case !w.noWatchList.Load():
			opts.SendInitialEvents = ptr.To(true)
			opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
			initial = map[string]struct{}{}
		default:
			var err error
			if rv, err = w.list(ctx); err != nil {
				w.failed(err)
				// Logged as a Reflector does: a refusal (RBAC) must show.
				log.Info("Listing failed", "error", err.Error())
				retry.throttled(err)
				if !retry.pause(ctx) {
					return
				}
				continue
			}
			opts.ResourceVersion = rv
		}
		opts.Watch = true
		body, err := w.src.open(ctx, opts)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return
			case initial != nil && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)):
				// An API server without streamed lists (before 1.27, or
				// with the WatchList feature off) rejects the option.
				log.V(1).Info("The API server does not stream lists; listing instead", "error", err.Error())
				w.noWatchList.Store(true)
				continue
			case resumeFailed(err):
				rv = ""
			default:
				w.failed(err)
				log.Info("Watching failed", "error", err.Error())
				retry.throttled(err)
			}
			if !retry.pause(ctx) {
				return
			}
			continue
		}
		if retry.interrupted() {
			// Marked down (and maybe up) while it opened: the stream may
			// have dodged the closing of the connections. Start over from
			// the same resourceVersion.
			_ = body.Close()
			continue
		}
		opened := time.Now()
		w.lastEvent.Store(opened.UnixNano())
		w.stream.Store(retry.ups + 1)
		next, events, err := w.consume(ctx, body, rv, initial)
		w.stream.Store(0)
		_ = body.Close()
		rv = next
		switch {
		case ctx.Err() != nil:
			return
		case resumeFailed(err):
			rv = "" // list again, at once
			continue
		case err != nil && !errors.Is(err, io.EOF):
			log.V(1).Info("Watch ended", "error", err.Error())
		}
		// A stream that ended after bringing events, or after a while, is
		// the API server's timeout or a watcher it closed: resume at once.
		// One that keeps ending at once backs off.
		if events > 0 || time.Since(opened) > healthyWatch {
			retry.reset()
			continue
		}
		if !retry.pause(ctx) {
			return
		}
	}
}

// failed tells the cluster that an attempt got no answer: not a status of
// the API server (a refusal, an invalid request), but no connection.
func (w *watch) failed(err error) {
	var status apierrors.APIStatus
	if w.unanswered != nil && !errors.As(err, &status) {
		w.unanswered()
	}
}

// current reports whether the watch has caught up since the cluster was
// marked up the ups-th time: it has its list, and a stream opened since
// then that has brought no event for settle. A resumed stream first sends
// at once every change since its resourceVersion, which the API server
// holds ready when it answers; settle lets them arrive.
func (w *watch) current(ups uint64, settle time.Duration) bool {
	return w.HasSynced() && w.stream.Load() == ups+1 &&
		time.Since(time.Unix(0, w.lastEvent.Load())) >= settle
}

// resumeFailed reports whether err says the watch cannot resume from its
// resourceVersion: it is too old (410 Gone, Expired) or newer than the
// API server has (after a restore, say).
func resumeFailed(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// listFirst LISTs the collection into the store before the watch runs,
// for a caller that needs the answer at once (a refusal, or the objects)
// rather than from a stream that retries; the watch then resumes from that
// list instead of listing again.
func (w *watch) listFirst(ctx context.Context) error {
	rv, err := w.list(ctx)
	w.listed = rv
	return err
}

// list LISTs the collection into the store, as Replace does, and returns
// the list's resourceVersion to watch from.
func (w *watch) list(ctx context.Context) (string, error) {
	opts := metav1.ListOptions{LabelSelector: w.src.selector, FieldSelector: w.src.fieldSelector}
	if w.paged {
		opts.Limit = listPageSize
	}
	items, rv, err := w.src.list(ctx, opts)
	if err != nil {
		return "", err
	}
	return rv, w.store.Replace(items)
}

// nextUnstructured decodes the next event of a stream of whole objects. An
// ERROR event's Status is returned as the error, an *apierrors.StatusError.
//
// The event is decoded in one pass, straight into the object's map, where
// client-go's decoder scans each event three times (to frame it, to check
// it, to decode it): a mirror watch decodes every mirror the agent writes.
func nextUnstructured(dec sigsjson.Decoder) (apiwatch.EventType, runtime.Object, error) {
	var ev struct {
		Type   apiwatch.EventType `json:"type"`
		Object map[string]any     `json:"object"`
	}
	if err := dec.Decode(&ev); err != nil {
		return "", nil, err
	}
	if ev.Type == apiwatch.Error {
		var status metav1.Status
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ev.Object, &status); err != nil {
			return "", nil, err
		}
		return ev.Type, nil, &apierrors.StatusError{ErrStatus: status}
	}
	if ev.Object == nil {
		return "", nil, fmt.Errorf("a %s watch event without an object", ev.Type)
	}
	return ev.Type, &unstructured.Unstructured{Object: ev.Object}, nil
}

// nextMetadata decodes the next event of a stream of PartialObjectMetadata,
// as nextUnstructured does.
func nextMetadata(dec sigsjson.Decoder) (apiwatch.EventType, runtime.Object, error) {
	var ev struct {
		Type   apiwatch.EventType `json:"type"`
		Object json.RawMessage    `json:"object"`
	}
	if err := dec.Decode(&ev); err != nil {
		return "", nil, err
	}
	if ev.Type == apiwatch.Error {
		var status metav1.Status
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(ev.Object, &status); err != nil {
			return "", nil, err
		}
		return ev.Type, nil, &apierrors.StatusError{ErrStatus: status}
	}
	m := &metav1.PartialObjectMetadata{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(ev.Object, m); err != nil {
		return "", nil, err
	}
	return ev.Type, m, nil
}

// consume hands the events of body to the store until the stream ends or
// fails. initial, when not nil, collects the keys of a streamed list until
// its closing bookmark; rv is where the stream started. It returns the
// resourceVersion to resume from ("" to list again) and how many events
// came.
func (w *watch) consume(ctx context.Context, body io.Reader, rv string, initial map[string]struct{}) (string, int, error) {
	stream := newEventStream(body, w.src.next)
	events := 0
	for {
		typ, obj, err := stream.next()
		if err != nil {
			// The stream ended or broke, or the API server sent an error
			// (which loop reads). A streamed list cut short is listed again.
			if initial != nil {
				return "", events, err
			}
			return rv, events, err
		}
		events++
		w.lastEvent.Store(time.Now().UnixNano())
		m, err := meta.Accessor(obj)
		if err != nil {
			return "", events, err
		}
		switch typ {
		case apiwatch.Added, apiwatch.Modified:
			err = w.store.apply(obj, initial)
		case apiwatch.Deleted:
			err = w.store.Delete(obj)
		case apiwatch.Bookmark:
			if initial != nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				w.store.dropUnseen(initial)
				initial = nil
			}
		}
		if err != nil {
			return "", events, err
		}
		if initial == nil {
			rv = m.GetResourceVersion()
		}
		if ctx.Err() != nil {
			return rv, events, ctx.Err()
		}
	}
}

// largeEvent is the size above which an event's decoder is not kept for
// the next event (eventStream). Mirrors and sources are a few kilobytes;
// a decoder replaced after every event would cost an allocation per event.
const largeEvent = 64 << 10

// eventStream decodes the events of one watch stream. A JSON decoder keeps
// its buffer as large as the largest value it has read, for as long as it
// lives. Two things follow from that:
//
//   - A watch that saw one 1 MiB Secret or ConfigMap, a mirror of a CA
//     bundle say, would keep over a megabyte until its stream ends, in
//     every cluster the object is mirrored to (a hub with 1,000 clusters:
//     a gigabyte). So a decoder that read an event of more than largeEvent
//     bytes is dropped with its buffer.
//   - A watch spends its life waiting: a hub has three in every cluster,
//     each idle between rare events, and a decoder that read one mirror of
//     a few kilobytes keeps a buffer of twice that (the three buffers were
//     a tenth of an idle cluster's live heap on the hub). So a stream holds a
//     decoder only while it has bytes to decode: once an event leaves
//     nothing but whitespace buffered, the decoder goes back to a pool
//     shared by every stream, and the stream waits for its next bytes
//     with a small buffer of its own (readAhead.wait).
//
// What a decoder had read beyond the event that retires it is read again
// first by the next one.
//
// Written by hand: neither encoding/json nor sigs.k8s.io/json can shrink a
// Decoder's buffer or move it to another stream, and apimachinery's framed
// readers keep theirs too.
type eventStream struct {
	in     *readAhead
	dec    *pooledDecoder // nil while the stream waits for bytes
	decode func(sigsjson.Decoder) (apiwatch.EventType, runtime.Object, error)
}

func newEventStream(body io.Reader, decode func(sigsjson.Decoder) (apiwatch.EventType, runtime.Object, error)) *eventStream {
	return &eventStream{in: &readAhead{body: body}, decode: decode}
}

// next decodes the next event.
func (s *eventStream) next() (apiwatch.EventType, runtime.Object, error) {
	if s.dec == nil {
		if err := s.in.wait(); err != nil {
			return "", nil, err
		}
		s.dec = decoders.Get().(*pooledDecoder)
		s.dec.in.Reader = s.in
	}
	before := s.in.read
	typ, obj, err := s.decode(s.dec.dec)
	if err != nil {
		s.dec = nil // the stream ends; a decoder that failed is not reused
		return "", nil, err
	}
	large := s.in.read-before > largeEvent
	blankRest := s.dec.blankAfter()
	switch {
	case large && !blankRest:
		// What the old decoder read beyond this event is read again by
		// the next one, first; it is at most what one read brought.
		ahead, rerr := io.ReadAll(s.dec.dec.Buffered())
		if rerr != nil {
			return "", nil, rerr
		}
		s.in.ahead = append(ahead, s.in.ahead...)
		s.dec = nil
	case large:
		s.dec = nil
	case blankRest:
		s.dec.in.Reader = nil
		decoders.Put(s.dec)
		s.dec = nil
	}
	return typ, obj, err
}

// pooledDecoder is a JSON decoder that can move between streams: it reads
// from in, which is pointed at the stream that holds it.
type pooledDecoder struct {
	in  *fedReader
	dec sigsjson.Decoder
}

// fedReader is what a pooled decoder reads from: the stream that holds it.
// It counts every byte it gave the decoder, over all the streams.
type fedReader struct {
	io.Reader
	fed int64
}

func (r *fedReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	r.fed += int64(n)
	return n, err
}

// blankAfter reports whether the decoder holds nothing but whitespace
// beyond the value it decoded (the API server ends each event with a
// newline): what it was fed less what it consumed. Only a short rest is
// looked at: the API server writes one newline, and Buffered costs an
// allocation.
func (d *pooledDecoder) blankAfter() bool {
	switch rest := d.in.fed - d.dec.InputOffset(); {
	case rest == 0:
		return true
	case rest <= 2:
		return blank(d.dec.Buffered())
	default:
		return false
	}
}

// decoders holds the decoders of the streams that wait for bytes.
var decoders = sync.Pool{New: func() any {
	in := &fedReader{}
	return &pooledDecoder{in: in, dec: sigsjson.NewDecoderCaseSensitivePreserveInts(in)}
}}

// blank reports whether r, what a decoder holds beyond the value it
// decoded, is JSON whitespace only (the API server ends each event with a
// newline). A reader that cannot be looked into counts as not blank.
func blank(r io.Reader) bool {
	br, ok := r.(io.ByteReader)
	if !ok {
		return false
	}
	for {
		c, err := br.ReadByte()
		if err != nil {
			return true
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
}

// waitRead is the size of the buffer a stream waits for its next bytes
// with (readAhead.wait); a decoder reads what does not fit.
const waitRead = 512

// readAhead is the body of a watch stream, after bytes read before a
// decoder took the stream (a retired decoder's read-ahead, or what wait
// read); it counts what it hands out.
type readAhead struct {
	ahead []byte
	body  io.Reader
	err   error // the body's error that came with the bytes wait read
	read  int64
}

// wait blocks until the stream has bytes to give, or fails, and keeps
// what it read in ahead.
func (r *readAhead) wait() error {
	if len(r.ahead) > 0 {
		return nil
	}
	buf := make([]byte, waitRead)
	for len(r.ahead) == 0 && r.err == nil {
		n, err := r.body.Read(buf)
		r.ahead, r.err = buf[:n], err
	}
	if len(r.ahead) == 0 {
		return r.err
	}
	return nil
}

func (r *readAhead) Read(p []byte) (int, error) {
	if len(r.ahead) > 0 {
		n := copy(p, r.ahead)
		r.ahead = r.ahead[n:]
		if len(r.ahead) == 0 {
			r.ahead = nil
		}
		r.read += int64(n)
		return n, nil
	}
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.body.Read(p)
	r.read += int64(n)
	return n, err
}

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

// watchStore transforms, stores and hands each change to the handler,
// under one lock so that the watch and its resync timer never interleave.
type watchStore struct {
	mu        sync.Mutex
	indexer   cache.Indexer
	transform cache.TransformFunc
	handler   func(obj any, deleted bool)
	synced    atomic.Bool
	// onSynced, when set, is called once, when the first list is stored.
	onSynced func()
}

func (s *watchStore) transformed(obj any) (any, error) {
	if s.transform == nil {
		return obj, nil
	}
	return s.transform(obj)
}

// apply stores obj and hands it to the handler. With seen (a list being
// stored), obj's key is recorded there, and an object cached already with
// the same resourceVersion is left alone: a relist after a broken watch
// is then no wave of work.
func (s *watchStore) apply(obj any, seen map[string]struct{}) error {
	obj, err := s.transformed(obj)
	if err != nil {
		return err
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seen != nil {
		seen[key] = struct{}{}
		if old, ok, _ := s.indexer.GetByKey(key); ok && resourceVersion(old) == resourceVersion(obj) {
			return nil
		}
	}
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
// resourceVersion).
func (s *watchStore) Replace(list []runtime.Object) error {
	seen := make(map[string]struct{}, len(list))
	for _, o := range list {
		if err := s.apply(o, seen); err != nil {
			return err
		}
	}
	s.dropUnseen(seen)
	return nil
}

// dropUnseen ends a list: the cached objects it did not have are deleted
// and handed to the handler, and the store counts as synced. onSynced is
// called after the lock is released: it may read other caches.
func (s *watchStore) dropUnseen(seen map[string]struct{}) {
	s.mu.Lock()
	for _, key := range s.indexer.ListKeys() {
		if _, ok := seen[key]; ok {
			continue
		}
		if old, ok, _ := s.indexer.GetByKey(key); ok {
			_ = s.indexer.Delete(old)
			s.notify(old, true)
		}
	}
	first := !s.synced.Swap(true)
	s.mu.Unlock()
	if first && s.onSynced != nil {
		s.onSynced()
	}
}

// Resync hands every cached object to the handler again (the Resync
// option of the Cluster).
func (s *watchStore) Resync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.indexer.List() {
		s.notify(o, false)
	}
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
