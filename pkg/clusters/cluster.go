package clusters

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// IndexSource indexes mirrors by their AnnotationSource value, so the
// mirrors of one source are found without a scan or an API call.
const IndexSource = "fleetmirror.io/source"

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Handler receives the events of a Cluster's watches. Calls come from
// watch goroutines and must not block.
type Handler interface {
	// Source is called when a source object is added, changed or deleted.
	Source(cluster string, gvk schema.GroupVersionKind, obj *unstructured.Unstructured, deleted bool)
	// Mirror is called when one of our mirrors is added, changed or deleted.
	Mirror(cluster string, gvk schema.GroupVersionKind, obj *Mirror, deleted bool)
	// Namespace is called when a namespace is added, changed or deleted.
	Namespace(cluster string, ns *metav1.PartialObjectMetadata)
	// Policy is called when a MirrorPolicy is added, changed or deleted
	// (WatchPolicies).
	Policy(cluster string, p *v1alpha1.MirrorPolicy, deleted bool)
}

// Options configure a Cluster.
type Options struct {
	// Name names the cluster in source references, logs and metrics.
	Name string
	// ManagedBy selects the mirrors this agent owns (LabelManagedBy).
	ManagedBy string
	// Resync is the watches' resync period; zero disables it.
	Resync time.Duration
	// Handler receives every watch event.
	Handler Handler
	// SlowCall, when set, is called when a call made with CallContext is
	// still running after SlowCallAfter (once per such call).
	SlowCall      func()
	SlowCallAfter time.Duration
	// Unanswered, when set, is called when a watch gets no answer (it
	// cannot connect): the cluster's health should be checked now, so
	// that it is marked down and its watches wait for its return.
	Unanswered func()
	// WatchConnection gives the watches an HTTP/2 connection of their own,
	// apart from the writes. An API server serves all the streams of one
	// connection from one loop: while many writes go through it, a watch
	// stream's events wait behind them, and the API server closes a
	// watcher that cannot take its events as "unresponsive" (the member
	// benchmark saw 4 to 36 such restarts per initial sync, and none with
	// a connection of its own). It costs one connection and its reader
	// goroutine.
	WatchConnection bool
	// MaxCallsInFlight bounds the calls made with CallContext that are in
	// flight to the cluster at once, across every worker; zero bounds
	// nothing. A call waits for a slot within its own deadline.
	MaxCallsInFlight int
	// AnswerWithin, when set, is how soon after its request an answer
	// counts as the API server serving (AnsweredSince); the probe's
	// deadline.
	AnswerWithin time.Duration
}

// Cluster is one API server with the watches kept on it.
type Cluster struct {
	opts   Options
	config *rest.Config
	dyn    dynamic.Interface
	md     metadata.Interface
	mapper *kindMapper

	namespaces *watch
	// namespacesGen changes after every change of the namespaces' cache
	// (NamespacesGeneration).
	namespacesGen atomic.Uint64
	httpClient    *http.Client
	transport     *closingTransport // httpClient's; nil for clients made otherwise
	discovery     *Discovery
	raw           rest.Interface
	meta          rest.Interface // metadata responses, for Objects
	// watchREST opens the watches: meta, or with Options.WatchConnection a
	// client of a connection of its own, closed by watchTransport.
	watchREST      rest.Interface
	watchTransport *closingTransport

	health *health
	// throttle is the back-off the cluster asked for with 429 answers;
	// nil for clients made otherwise than by New.
	throttle *throttle
	// answers is when the cluster last answered in time (AnsweredSince);
	// nil without Options.AnswerWithin, or for clients made otherwise
	// than by New.
	answers *answers
	// inFlight counts the calls made with CallContext not returned yet.
	inFlight prometheus.Gauge
	// slots holds a token per call in flight when Options.MaxCallsInFlight
	// bounds them; nil otherwise.
	slots chan struct{}

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*kindWatch
	// presences notice the first source of kinds not watched (presence.go).
	presences map[schema.GroupVersionKind]*presence
	// hint follows the member agent's kinds object (kindshint.go).
	hint *kindsHintWatch
	// policies watches the MirrorPolicies, once WatchPolicies started it;
	// selected holds each policy's watches of its sources, by PolicyID
	// (policies.go).
	policies     *watch
	stopPolicies context.CancelFunc
	// policiesRefused is why the agent may not list MirrorPolicies here,
	// until ResetPresence.
	policiesRefused error
	selected        map[string]*policyWatch
	ctx             context.Context // set by Start; parent of every watch
	closed          bool            // set by Close; no watch starts again
}

// kindWatch holds the watches of one kind in a cluster. Its watches are
// not changed once it is in Cluster.kinds: narrowing or widening the kind
// (WatchMirrors, Watch) puts another kindWatch in its place that shares the
// mirrors' watch. Its cancel functions are used under Cluster.mu only.
type kindWatch struct {
	mirrors *watch
	// sources, and pulls (the pull mirrors of the kind, pull.go), are nil
	// while the kind is watched for our mirrors only.
	sources, pulls *watch
	// stopMirrors ends the mirrors' watch, stopRest the other two; both
	// are set by run.
	stopMirrors, stopRest context.CancelFunc
}

// mirrorsOnly reports whether the kind is watched for our mirrors only.
func (w *kindWatch) mirrorsOnly() bool { return w.sources == nil }

// stop ends every watch of the kind.
func (w *kindWatch) stop() {
	for _, cancel := range []context.CancelFunc{w.stopMirrors, w.stopRest} {
		if cancel != nil {
			cancel()
		}
	}
}

// New builds the clients of a cluster. All of them share one HTTP client,
// so one connection pool and one rate limiter serve the cluster; with
// Options.WatchConnection the watches have a connection of their own.
func New(cfg *rest.Config, opts Options) (*Cluster, error) {
	cfg, httpClient, transport, err := closingClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}
	c, err := newWithHTTPClient(cfg, httpClient, opts)
	if err != nil {
		return nil, err
	}
	c.httpClient, c.transport = httpClient, transport
	c.throttle = &throttle{cluster: opts.Name}
	metrics.Throttled.WithLabelValues(opts.Name).Add(0) // exported from the start, as 0
	if opts.AnswerWithin > 0 {
		c.answers = &answers{within: opts.AnswerWithin}
	}
	transport.down, transport.throttle, transport.answers = c.unreachable, c.throttle, c.answers
	rawCfg := rest.CopyConfig(cfg)
	// The raw client reads /readyz. The scheme of metav1 alone decodes
	// the API server's errors (a Status); the kubernetes scheme would link
	// every built-in API type into the binary.
	rawCfg.NegotiatedSerializer = metainternalversionscheme.Codecs.WithoutConversion()
	if c.raw, err = rest.UnversionedRESTClientForConfigAndClient(rawCfg, httpClient); err != nil {
		return nil, err
	}
	if opts.WatchConnection {
		wcfg, wclient, wtransport, err := closingClient(cfg)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
		if c.watchREST, err = newMetadataREST(wcfg, wclient); err != nil {
			return nil, err
		}
		c.watchTransport = wtransport
		wtransport.down, wtransport.throttle, wtransport.answers = c.unreachable, c.throttle, c.answers
	}
	return c, nil
}

// unreachable is Unreachable as an error: nil while the cluster is not
// marked down.
func (c *Cluster) unreachable() error {
	if down := c.Unreachable(); down != nil {
		return down
	}
	return nil
}

// closingClient returns an HTTP client of its own for cfg (and the copy of
// cfg it was made from), with the closingTransport that closes its
// connections. The dialer is the client's own, so that Close can close
// the connections; it also keeps client-go from sharing the transport with
// other clients of the same credentials (its cache keys on the dialer).
func closingClient(cfg *rest.Config) (*rest.Config, *http.Client, *closingTransport, error) {
	cfg = rest.CopyConfig(cfg)
	dialer := trackedDialer(cfg.Dial)
	cfg.Dial = dialer.DialContext
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	leanHTTP2(httpClient.Transport)
	transport := &closingTransport{next: httpClient.Transport, conns: dialer.ConnectionTracker}
	httpClient.Transport = transport
	return cfg, httpClient, transport, nil
}

// HTTPClient is the client every request to the cluster goes through; its
// connections are closed by Close.
func (c *Cluster) HTTPClient() *http.Client { return c.httpClient }

// RESTConfig returns a copy of the configuration the cluster's clients were
// built from, for a client the Cluster does not provide (the hub's event
// recorder of a member). Give it HTTPClient, so that its requests go
// through the cluster's connections and end with them.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.config) }

// Ping asks the API server whether it is ready; it is sent even while the
// cluster is marked unreachable, to find out whether it is back.
func (c *Cluster) Ping(ctx context.Context) error {
	// The one request a cluster marked unreachable is sent (transport.go).
	return c.get(context.WithValue(ctx, probeKey{}, true), "/readyz")
}

// AskVersion asks the API server for its version, which it answers from
// memory, without its storage or its readiness checks: an answer in time
// while a readiness answer is late tells that it serves (AnsweredSince).
// Unlike Ping, it is not sent while the cluster is marked unreachable.
func (c *Cluster) AskVersion(ctx context.Context) error { return c.get(ctx, "/version") }

// get GETs path of the API server, for its answer's status alone.
func (c *Cluster) get(ctx context.Context, path string) error {
	if c.raw == nil {
		return fmt.Errorf("cluster %s: no client", c.opts.Name)
	}
	return c.raw.Get().AbsPath(path).Do(ctx).Error()
}

// Close stops every watch, refuses further requests and closes the
// connections once the requests in flight have ended. Start must have been
// given a context that is cancelled too, or has been.
func (c *Cluster) Close() {
	c.mu.Lock()
	c.closed = true
	c.closePresencesLocked()
	c.closePoliciesLocked()
	for gvk, w := range c.kinds {
		w.stop()
		delete(c.kinds, gvk)
	}
	c.mu.Unlock()
	// The watches end as their contexts are cancelled; the connections
	// close when the last stream or write in flight has ended.
	for _, t := range []*closingTransport{c.transport, c.watchTransport} {
		if t != nil {
			t.close()
		}
	}
}

func newWithHTTPClient(cfg *rest.Config, httpClient *http.Client, opts Options) (*Cluster, error) {
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	disco, err := NewDiscovery(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	metaREST, err := newMetadataREST(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		meta:      metaREST,
		watchREST: metaREST,
		opts:      opts,
		config:    cfg,
		dyn:       dyn,
		md:        md,
		mapper:    newKindMapper(disco),
		discovery: disco,
		kinds:     map[schema.GroupVersionKind]*kindWatch{},
		presences: map[schema.GroupVersionKind]*presence{},
		selected:  map[string]*policyWatch{},
		health:    newHealth(),
		inFlight:  metrics.CallsInFlight.WithLabelValues(opts.Name),
	}
	if opts.MaxCallsInFlight > 0 {
		c.slots = make(chan struct{}, opts.MaxCallsInFlight)
	}
	c.namespaces = c.followHealth(newWatch(c.watchSource(namespacesGVR, labels.Everything(), true), "namespaces", opts.Resync, nil, stripMetadata))
	// Namespaces are LISTed, not streamed: everything waits for them (a
	// cluster is up once they have synced), and the API server ends a
	// streamed list at its next bookmark tick, 1 to 1.25 s later
	// (kubernetes/kubernetes#122277): every agent start, and every cluster
	// a hub replica took over, waited that second. Their list is small,
	// metadata only; the mirrors and sources, which may be 100,000, keep
	// streaming theirs.
	c.namespaces.noWatchList.Store(true)
	c.namespaces.setHandler(func(obj any, _ bool) {
		c.namespacesGen.Add(1) // after the cache changed, before anyone is told
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			opts.Handler.Namespace(opts.Name, m)
		}
	})
	return c, nil
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.opts.Name }

// Start runs the namespace watch and every kind watch until ctx ends.
// It returns at once.
func (c *Cluster) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ctx = ctx
	c.namespaces.run(ctx)
	for _, w := range c.kinds {
		w.run(c.ctx)
	}
	if c.policies != nil {
		c.runPoliciesLocked()
	}
	for _, pw := range c.selected {
		pw.run(ctx)
	}
}

// Watch makes sure sources, mirrors and pull mirrors of gvk are watched:
// a kind watched for our mirrors only is widened. It is cheap to call
// again for a kind watched whole.
func (c *Cluster) Watch(gvk schema.GroupVersionKind) error {
	if w := c.kind(gvk); w != nil && !w.mirrorsOnly() {
		return nil
	}
	mapping, err := c.namespacedMapping(gvk)
	if err != nil {
		return err
	}
	sources, pulls := c.sourceWatch(mapping.Resource), c.pullInformer(mapping.Resource)
	c.handleSources(gvk, sources)
	c.handlePulls(gvk, pulls)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("cluster %s: closed", c.opts.Name)
	}
	w, ok := c.kinds[gvk]
	switch {
	case ok && !w.mirrorsOnly():
		return nil // another caller won the race
	case ok:
		w = &kindWatch{mirrors: w.mirrors, stopMirrors: w.stopMirrors, sources: sources, pulls: pulls}
	default:
		w = &kindWatch{mirrors: c.mirrorWatch(gvk, mapping.Resource), sources: sources, pulls: pulls}
	}
	c.publishLocked(gvk, w)
	return nil
}

// WatchMirrors makes sure our mirrors of gvk are watched, and only they
// where nothing else of the kind is known: a kind not watched yet gets the
// mirrors' watch alone; one watched whole is narrowed to it once its
// sources and pull mirrors have synced and there are none. It reports
// whether the kind is watched for our mirrors only. The caller knows from
// elsewhere (the member agent's kinds object) that c has no source and no
// pull mirror of gvk: while narrowed, the cluster's new sources and pull
// mirrors of gvk go unnoticed until Watch widens it again.
func (c *Cluster) WatchMirrors(gvk schema.GroupVersionKind) (bool, error) {
	if w := c.kind(gvk); w != nil {
		if w.mirrorsOnly() {
			return true, nil
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		w, ok := c.kinds[gvk]
		if !ok || w.mirrorsOnly() || !w.sources.HasSynced() || !w.pulls.HasSynced() ||
			len(w.sources.GetStore().ListKeys()) > 0 || len(w.pulls.GetStore().ListKeys()) > 0 {
			return ok && w.mirrorsOnly(), nil
		}
		if w.stopRest != nil {
			w.stopRest()
		}
		c.kinds[gvk] = &kindWatch{mirrors: w.mirrors, stopMirrors: w.stopMirrors}
		return true, nil
	}
	mapping, err := c.namespacedMapping(gvk)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false, fmt.Errorf("cluster %s: closed", c.opts.Name)
	}
	if w, ok := c.kinds[gvk]; ok {
		return w.mirrorsOnly(), nil // another caller won the race
	}
	c.publishLocked(gvk, &kindWatch{mirrors: c.mirrorWatch(gvk, mapping.Resource)})
	return true, nil
}

// MirrorsOnly reports whether gvk is watched in c for our mirrors only.
func (c *Cluster) MirrorsOnly(gvk schema.GroupVersionKind) bool {
	w := c.kind(gvk)
	return w != nil && w.mirrorsOnly()
}

// publishLocked puts w in c.kinds as gvk's watches and starts those of
// them not running, if c runs; c.mu must be held.
func (c *Cluster) publishLocked(gvk schema.GroupVersionKind, w *kindWatch) {
	c.kinds[gvk] = w
	c.stopPresenceLocked(gvk) // the watches see all it would
	if c.ctx != nil {
		w.run(c.ctx)
	}
}

// namespacedMapping resolves gvk, a namespaced kind.
func (c *Cluster) namespacedMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mapping, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return nil, fmt.Errorf("cluster %s: kind %s is not namespaced", c.opts.Name, gvk)
	}
	return mapping, nil
}

// sourceWatch builds the watch of gvr's sources, not started. Sources are
// kept whole (their content is copied) but for what stripMetadata drops. A
// mirror someone labelled as a source is listed too, so that the
// reconciler can refuse it out loud; there are none unless somebody tries,
// and then they are few.
func (c *Cluster) sourceWatch(gvr schema.GroupVersionResource) *watch {
	sel := labels.SelectorFromSet(labels.Set{annotations.LabelEnabled: "true"})
	return c.watch(gvr, sel, nil, stripMetadata)
}

// mirrorWatch builds the watch of our mirrors of gvk, with its handler,
// not started.
func (c *Cluster) mirrorWatch(gvk schema.GroupVersionKind, gvr schema.GroupVersionResource) *watch {
	sel := labels.SelectorFromSet(labels.Set{annotations.LabelMirror: "true", annotations.LabelManagedBy: c.opts.ManagedBy})
	w := c.watch(gvr, sel, cache.Indexers{IndexSource: indexBySource}, summarizeMirror)
	events := metrics.WatchEvents.WithLabelValues(metrics.KindLabel(gvk), c.opts.Name, "mirrors")
	w.setHandler(func(obj any, deleted bool) {
		events.Inc()
		if m, ok := obj.(*Mirror); ok {
			c.opts.Handler.Mirror(c.opts.Name, gvk, m, deleted)
		}
	})
	return w
}

// handleSources sends the events of the sources' watch w to the cluster's
// Handler.
func (c *Cluster) handleSources(gvk schema.GroupVersionKind, w *watch) {
	events := metrics.WatchEvents.WithLabelValues(metrics.KindLabel(gvk), c.opts.Name, "sources")
	w.setHandler(func(obj any, deleted bool) {
		events.Inc()
		if u, ok := obj.(*unstructured.Unstructured); ok {
			c.opts.Handler.Source(c.opts.Name, gvk, u, deleted)
		}
	})
}

// watchSettle is how long a resumed watch must bring no event to count as
// current (watch.current).
const watchSettle = 100 * time.Millisecond

// WatchesCurrent reports whether the cluster's caches have caught up since
// it was last marked up: it is not marked down, and every watch
// (namespaces, and each kind's) has its list and a stream opened since then
// that has brought what the API server held for it. Their handlers have
// then heard of every change made while the cluster was away.
func (c *Cluster) WatchesCurrent() bool {
	ups, _, down := c.health.state()
	if down || !c.namespaces.current(ups, watchSettle) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.kinds {
		for _, w := range w.watches() {
			if !w.current(ups, watchSettle) {
				return false
			}
		}
	}
	return true
}

// WaitForWatches blocks until WatchesCurrent or ctx ends; it reports
// whether they are.
func (c *Cluster) WaitForWatches(ctx context.Context) bool {
	return wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return c.WatchesCurrent(), nil
	}) == nil
}

// Unwatch stops the watches of gvk and drops their caches.
func (c *Cluster) Unwatch(gvk schema.GroupVersionKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.kinds[gvk]; ok {
		w.stop()
		delete(c.kinds, gvk)
	}
}

// Watched lists the kinds watched now.
func (c *Cluster) Watched() []schema.GroupVersionKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]schema.GroupVersionKind, 0, len(c.kinds))
	for gvk := range c.kinds {
		out = append(out, gvk)
	}
	return out
}

// run starts the watches of the kind not running yet: the mirrors' under
// a context of its own, a child of ctx that stopMirrors ends, and the
// sources' and pull mirrors' under another that stopRest ends.
func (w *kindWatch) run(ctx context.Context) {
	if w.stopMirrors == nil {
		var mctx context.Context
		mctx, w.stopMirrors = context.WithCancel(ctx) //nolint:gosec // G118: kindWatch.stop calls it
		w.mirrors.run(mctx)
	}
	if !w.mirrorsOnly() && w.stopRest == nil {
		var rctx context.Context
		rctx, w.stopRest = context.WithCancel(ctx) //nolint:gosec // G118: kindWatch.stop calls it, or the removal of the kind's sources
		w.sources.run(rctx)
		w.pulls.run(rctx)
	}
}

// watches lists the kind's watches.
func (w *kindWatch) watches() []*watch {
	if w.mirrorsOnly() {
		return []*watch{w.mirrors}
	}
	return []*watch{w.sources, w.mirrors, w.pulls}
}

// watch builds the label-selected watch of gvr's objects in every
// namespace.
func (c *Cluster) watch(gvr schema.GroupVersionResource, sel labels.Selector, idx cache.Indexers, transform cache.TransformFunc) *watch {
	return c.followHealth(newWatch(c.watchSource(gvr, sel, false), gvr.String()+" "+sel.String(), c.opts.Resync, idx, transform))
}

// followHealth makes w wait while the cluster is marked down and report
// the attempts that got no answer (see health).
func (c *Cluster) followHealth(w *watch) *watch {
	w.health, w.unanswered = c.health, c.opts.Unanswered
	return w
}

// acceptMetadataJSON asks for objects as PartialObjectMetadata in JSON,
// the encoding a watch decodes.
const acceptMetadataJSON = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// watchSource is where a watch of gvr's objects matching sel, in every
// namespace, reads: whole objects, or only their metadata (asMetadata).
// The stream is requested as JSON and decoded by the watch itself, which
// is what spares it client-go's decoding goroutine; its errors are the
// REST client's.
func (c *Cluster) watchSource(gvr schema.GroupVersionResource, sel labels.Selector, asMetadata bool) watchSource {
	return c.watchSourceIn(gvr, "", sel, fields.Everything(), asMetadata)
}

// watchSourceIn is watchSource for the objects in namespace ns (all with
// ""), also matching the field selector fsel.
func (c *Cluster) watchSourceIn(gvr schema.GroupVersionResource, ns string, sel labels.Selector, fsel fields.Selector, asMetadata bool) watchSource {
	path := resourcePath(gvr, ns, "")
	accept, next := "application/json", nextUnstructured
	if asMetadata {
		accept, next = acceptMetadataJSON, nextMetadata
	}
	page := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		if asMetadata {
			return c.md.Resource(gvr).Namespace(ns).List(ctx, o)
		}
		return c.dyn.Resource(gvr).Namespace(ns).List(ctx, o)
	}
	// Pages of o.Limit objects, if set; else one unpaged list (the pager
	// has no page size of its own here).
	pages := &pager.ListPager{PageFn: page, FullListIfExpired: true}
	list := func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
		l, _, err := pages.List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		lm, err := meta.ListAccessor(l)
		if err != nil {
			return nil, "", err
		}
		items, err := meta.ExtractList(l)
		return items, lm.GetResourceVersion(), err
	}
	return watchSource{
		open: func(ctx context.Context, o metav1.ListOptions) (io.ReadCloser, error) {
			return c.watchREST.Get().AbsPath(path...).
				SetHeader("Accept", accept).
				SpecificallyVersionedParams(&o, parameterCodec, versionV1).
				Stream(ctx)
		},
		list:          list,
		next:          next,
		selector:      sel.String(),
		fieldSelector: fsel.String(),
	}
}

// HasSynced reports whether every watch has its initial list.
func (c *Cluster) HasSynced() bool {
	if !c.namespaces.HasSynced() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.kinds {
		if !w.synced() {
			return false
		}
	}
	return true
}

// NamespacesSynced reports whether the namespace watch has its initial list.
func (c *Cluster) NamespacesSynced() bool { return c.namespaces.HasSynced() }

// WaitForSync blocks until HasSynced or ctx ends.
func (c *Cluster) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), c.HasSynced)
}

func (c *Cluster) kind(gvk schema.GroupVersionKind) *kindWatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kinds[gvk]
}

// Source returns the cached source namespace/name of kind gvk: labelled
// as a source, or else named by a MirrorPolicy (PoliciesNaming). The
// object is shared with the cache: never modify it.
func (c *Cluster) Source(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool) {
	w := c.kind(gvk)
	if w == nil || w.mirrorsOnly() {
		return nil, false
	}
	if u, ok := get[*unstructured.Unstructured](w.sources.GetStore(), namespace+"/"+name); ok {
		return u, true
	}
	return c.policySource(gvk, namespace, name)
}

// Sources returns every cached source of kind gvk, labelled or named by a
// MirrorPolicy, once each. Shared with the cache.
func (c *Cluster) Sources(gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	w := c.kind(gvk)
	if w == nil || w.mirrorsOnly() {
		return nil
	}
	labelled := typed[*unstructured.Unstructured](w.sources.GetStore().List())
	named := c.policySources(gvk)
	if len(named) == 0 {
		return labelled
	}
	seen := make(map[string]bool, len(labelled))
	for _, u := range labelled {
		seen[u.GetNamespace()+"/"+u.GetName()] = true
	}
	for _, u := range named {
		if !seen[u.GetNamespace()+"/"+u.GetName()] {
			labelled = append(labelled, u)
		}
	}
	return labelled
}

// Mirror returns our cached mirror namespace/name of kind gvk. Shared with
// the cache.
func (c *Cluster) Mirror(gvk schema.GroupVersionKind, namespace, name string) (*Mirror, bool) {
	w := c.kind(gvk)
	if w == nil {
		return nil, false
	}
	return get[*Mirror](w.mirrors.GetStore(), namespace+"/"+name)
}

// MirrorsOf returns our cached mirrors of kind gvk whose source reference is
// sourceRef. Shared with the cache.
func (c *Cluster) MirrorsOf(gvk schema.GroupVersionKind, sourceRef string) []*Mirror {
	w := c.kind(gvk)
	if w == nil {
		return nil
	}
	objs, _ := w.mirrors.GetIndexer().ByIndex(IndexSource, sourceRef)
	return typed[*Mirror](objs)
}

// AllMirrors returns every cached mirror of kind gvk. Shared with the cache.
func (c *Cluster) AllMirrors(gvk schema.GroupVersionKind) []*Mirror {
	w := c.kind(gvk)
	if w == nil {
		return nil
	}
	return typed[*Mirror](w.mirrors.GetStore().List())
}

// sourceRefs returns the source references (cluster/namespace/name) that
// c's cached mirrors and pull mirrors of gvk refer to, from the indexes
// their caches keep.
func (c *Cluster) sourceRefs(gvk schema.GroupVersionKind) []string {
	w := c.kind(gvk)
	if w == nil {
		return nil
	}
	refs := w.mirrors.GetIndexer().ListIndexFuncValues(IndexSource)
	if !w.mirrorsOnly() {
		refs = append(refs, w.pulls.GetIndexer().ListIndexFuncValues(IndexMirrorFrom)...)
	}
	return refs
}

// NamespacesGeneration changes after every change of the cached
// namespaces: a list of Namespaces taken after reading it is at least as
// new as that generation, so that a copy made from it can be kept until
// the generation changes.
func (c *Cluster) NamespacesGeneration() uint64 { return c.namespacesGen.Load() }

// Namespaces returns the cached namespaces. Shared with the cache.
func (c *Cluster) Namespaces() []*metav1.PartialObjectMetadata {
	items := c.namespaces.GetStore().List()
	out := make([]*metav1.PartialObjectMetadata, 0, len(items))
	for _, o := range items {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			out = append(out, m)
		}
	}
	return out
}

// get returns the object stored under key if it is a T.
func get[T any](s cache.Store, key string) (T, bool) {
	var zero T
	o, ok, _ := s.GetByKey(key)
	if !ok {
		return zero, false
	}
	t, ok := o.(T)
	return t, ok
}

// typed keeps the objects that are a T.
func typed[T any](objs []any) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

func indexBySource(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if ref := m.GetAnnotations()[annotations.AnnotationSource]; ref != "" {
		return []string{ref}, nil
	}
	return nil, nil
}

// lastApplied is kubectl's copy of the whole object: large, and read by no
// stage.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// stripMetadata drops what no stage reads from cached objects.
func stripMetadata(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, lastApplied)
		}
	}
	return obj, nil
}

// Resource returns the dynamic client of kind gvk in namespace.
func (c *Cluster) Resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	mapping, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	return c.dyn.Resource(mapping.Resource).Namespace(namespace), nil
}

// MetadataResource returns the metadata-only client of kind gvk in
// namespace (metav1.NamespaceAll: every namespace).
func (c *Cluster) MetadataResource(gvk schema.GroupVersionKind, namespace string) (metadata.ResourceInterface, error) {
	mapping, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	return c.md.Resource(mapping.Resource).Namespace(namespace), nil
}

// Objects returns the client mirrors of kind gvk in namespace are written
// with.
func (c *Cluster) Objects(gvk schema.GroupVersionKind, namespace string) (*Objects, error) {
	mapping, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	return &Objects{
		ResourceInterface: c.dyn.Resource(mapping.Resource).Namespace(namespace),
		meta:              c.meta, gvr: mapping.Resource, ns: namespace,
	}, nil
}

// mapping resolves gvk by discovery, which may go to the network: never
// call it under c.mu.
func (c *Cluster) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mapping, err := c.mapper.RESTMapping(gvk)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kind %s: %w", c.opts.Name, gvk, err)
	}
	return mapping, nil
}

// KindSynced reports whether gvk is watched in c and, if so, whether its
// watches have their initial lists.
func (c *Cluster) KindSynced(gvk schema.GroupVersionKind) (synced, watched bool) {
	w := c.kind(gvk)
	if w == nil {
		return false, false
	}
	return w.synced(), true
}

// synced reports whether every watch of the kind has its initial list.
func (w *kindWatch) synced() bool {
	for _, w := range w.watches() {
		if !w.HasSynced() {
			return false
		}
	}
	return true
}
