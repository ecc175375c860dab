package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/events"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Options configure a Fleet. They are the writer's: the same for every
// cluster.
type Options struct {
	// Provider tells the fleet which clusters there are.
	Provider Provider
	// ManagedBy selects the mirrors this writer owns (LabelManagedBy).
	ManagedBy string
	// FieldManager names the writer in managedFields and as the component
	// of its Events.
	FieldManager string
	// Finalizer is the finalizer earlier versions of the writer held on
	// sources (this one holds none); it is taken off the sources of a
	// cluster that leaves the fleet.
	Finalizer string
	// Resync is the watches' resync period; zero disables it.
	Resync time.Duration
	// ProbeInterval is how often each cluster is probed while it answers;
	// ProbeTimeout is the deadline of one probe.
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// Limit returns the REST config the fleet uses for a cluster's config
	// (client-side rate limits); nil uses the config as it is.
	Limit func(*rest.Config) *rest.Config
	// MaxCallsInFlight bounds the pipeline's calls in flight to each
	// cluster (clusters.Options); zero bounds nothing.
	MaxCallsInFlight int
	// Kinds say which kinds are watched; ManagedBy and Synced are the
	// fleet's.
	Kinds clusters.KindOptions
	// Metrics are the series the fleet keeps per cluster; nil ones are
	// not kept.
	Metrics Metrics
	// Identities serves each cluster through one registration only: the
	// identity of every engaged cluster (clusters.Cluster.Identity) is
	// read before anything else is, and a registration that reaches a
	// cluster another one serves is refused (Spec.Refused) until that one
	// goes away (see Award). The hub sets it; the member agent has one
	// cluster.
	Identities bool
}

// Metrics are the series a fleet keeps. The member and the hub publish
// them under names of their own, which dashboards and alerts know.
type Metrics struct {
	// Up is 1 while a cluster answers and its caches are synced, by cluster.
	Up *prometheus.GaugeVec
	// ProbeFailures counts failed probes, by cluster.
	ProbeFailures *prometheus.CounterVec
	// Size is the number of engaged clusters.
	Size prometheus.Gauge
}

// Subscriber is told what happens in the fleet: the watch events of every
// cluster, and the clusters' comings and goings. Calls must not block.
type Subscriber interface {
	clusters.Handler
	// Up is called when a cluster answers and has its caches, the first
	// time and after it did not answer.
	Up(c *clusters.Cluster)
	// Down is called when a cluster that was up stops answering.
	Down(c *clusters.Cluster)
	// Left is called when the cluster named name was disengaged and its
	// connection closed; gone is false when it was replaced.
	Left(name string, gone bool)
	// KindSynced is called once the watches of a kind newly watched in c
	// have synced.
	KindSynced(c *clusters.Cluster, gvk schema.GroupVersionKind)
}

// Fleet keeps one connection per engaged cluster: its clients and caches,
// its health (probed, marked down and up), its Event recorder, and the
// kind watches that Kinds starts and stops on it. Providers engage and
// disengage clusters; the controller reads the fleet.
type Fleet struct {
	opts  Options
	kinds *clusters.Kinds

	mu      sync.RWMutex
	conns   map[string]*connection
	leaving map[string]chan struct{} // per name: closed when its teardown ends
	// elsewhere are the clusters registered but served by another replica
	// (Spec.Elsewhere); engaging counts, per name, the Engage calls that
	// are connecting, so that Registered has no gap while one is.
	elsewhere map[string]*remote
	engaging  map[string]int
	ctx       context.Context // Run's
	sub       Subscriber      // Run's
	listed    atomic.Bool
	listedCh  chan struct{}
	// releasing holds, by identity, the name of a cluster served until it
	// was disengaged, while it is torn down: no other registration of it
	// serves before the teardown ends. departed holds, by name, the
	// identity of a registration that left while another registration of
	// the same cluster was engaged: it was renamed (see Successor).
	releasing map[string]string
	departed  map[string]string
}

// connection is one engaged cluster.
type connection struct {
	spec    Spec
	labels  atomic.Pointer[map[string]string]
	cluster *clusters.Cluster
	events  events.Recorder
	// up is true while the cluster answers and its caches are synced.
	up atomic.Bool
	// everUp is true once the cluster was up.
	everUp atomic.Bool
	// started is true once the cluster's watches run.
	started atomic.Bool
	created time.Time
	cancel  context.CancelFunc
	done    chan struct{} // closed when the connection is closed
	// probeTimer runs the next probe (see start); probing is held while
	// one runs.
	probeTimer atomic.Pointer[time.Timer]
	probing    sync.Mutex
	// notReady counts the probes in a row that the API server answered
	// with not ready (see notReadyProbes); guarded by probing.
	notReady int
	// late is set while the probes of an up cluster come back late but
	// the cluster answers other calls in time (see probe); guarded by
	// probing.
	late bool
	// engaged is the provider's context for the cluster; left is closed
	// once the cluster was disengaged and torn down.
	engaged context.Context
	left    chan struct{}

	// The claim on the cluster's identity (Options.Identities), guarded by
	// the fleet's mu: the identity once read, whether its first read was
	// tried, whether the connection serves (only then is it started, and
	// returned by Cluster), and the registration it was refused for (a
	// refused one is not listed by Clusters and Members).
	identity  string
	tried     bool
	serving   bool
	refusedBy string
}

// remote is a cluster engaged with Spec.Elsewhere.
type remote struct {
	spec    Spec
	labels  atomic.Pointer[map[string]string]
	engaged context.Context
}

// New returns a fleet; Run drives it.
func New(o Options) *Fleet {
	f := &Fleet{opts: o, conns: map[string]*connection{}, leaving: map[string]chan struct{}{}, listedCh: make(chan struct{}),
		elsewhere: map[string]*remote{}, engaging: map[string]int{}, releasing: map[string]string{}, departed: map[string]string{}}
	ko := o.Kinds
	ko.ManagedBy = o.ManagedBy
	ko.Synced = f.kindSynced
	ko.InvalidKindsObject = f.invalidKindsObject
	if o.ManagedBy == annotations.ManagedByHub { // a member has no registered clusters
		ko.ReceiveOnly = f.receiveOnly
	}
	f.kinds = clusters.NewKinds(ko)
	return f
}

// Run runs the provider and the engaged clusters, telling sub what
// happens, until ctx ends or the provider fails; then it closes every
// connection and returns the provider's error.
func (f *Fleet) Run(ctx context.Context, sub Subscriber) error {
	f.mu.Lock()
	if f.ctx != nil {
		f.mu.Unlock()
		return errors.New("fleet: Run called twice")
	}
	f.ctx, f.sub = ctx, sub
	f.mu.Unlock()
	go f.kinds.Run(ctx, f.Started)
	go reportMirrors(ctx, f.Clusters)
	err := f.opts.Provider.Run(ctx, f)
	if err == nil {
		<-ctx.Done()
	} // else the provider cannot go on: neither can the agent
	f.mu.Lock()
	all := make([]*connection, 0, len(f.conns))
	for _, c := range f.conns {
		all = append(all, c)
	}
	f.mu.Unlock()
	for _, c := range all {
		f.stop(c)
	}
	return err
}

// NeedLeaderElection is false: followers keep warm caches, so that a new
// leader starts at once.
func (f *Fleet) NeedLeaderElection() bool { return false }

// Engage adds a cluster until ctx ends; see Engager.
func (f *Fleet) Engage(ctx context.Context, s Spec) error {
	if s.Elsewhere {
		return f.engageElsewhere(ctx, s)
	}
	f.mu.Lock()
	if r := f.elsewhere[s.Name]; r != nil && r.engaged.Err() == nil {
		f.mu.Unlock()
		return fmt.Errorf("cluster %s is engaged already, as served elsewhere", s.Name)
	}
	f.engaging[s.Name]++
	defer func() {
		f.mu.Lock()
		if f.engaging[s.Name]--; f.engaging[s.Name] == 0 {
			delete(f.engaging, s.Name)
		}
		f.mu.Unlock()
	}()
	for {
		if ch := f.leaving[s.Name]; ch != nil {
			f.mu.Unlock()
			<-ch
			f.mu.Lock()
			continue
		}
		old, ok := f.conns[s.Name]
		if !ok {
			break
		}
		if old.engaged.Err() == nil {
			f.mu.Unlock()
			return fmt.Errorf("cluster %s is engaged already", s.Name)
		}
		// Disengaged by its provider a moment ago, and not yet torn down.
		f.mu.Unlock()
		<-old.left
		f.mu.Lock()
	}
	parent := f.ctx
	f.mu.Unlock()
	if parent == nil {
		return errors.New("fleet: Engage before Run")
	}
	// A replaced registration gave its cluster up without an award (see
	// disengage): whatever becomes of this one, the claims are decided
	// again.
	defer f.award()
	c, err := f.connect(ctx, s)
	if err != nil {
		return err
	}
	// The hub's own cluster is never refused; it is still identified
	// before it starts, and every other claim waits for it.
	c.serving = !f.opts.Identities || s.Local
	// The connection's own context exists before anyone can find the
	// connection: Run's shutdown and a disengagement stop it through it.
	runCtx, cancel := context.WithCancel(parent)
	c.cancel = cancel
	f.mu.Lock()
	f.conns[s.Name] = c
	delete(f.elsewhere, s.Name) // its engagement ended before this one began
	delete(f.departed, s.Name)
	f.mu.Unlock()
	f.setSize()
	f.start(runCtx, c)
	// AfterFunc rather than a goroutine waiting on ctx: nothing runs, or
	// is held, per cluster until its engagement ends.
	context.AfterFunc(ctx, func() {
		if parent.Err() == nil { // else Run closes every connection
			f.disengage(c, context.Cause(ctx))
		}
		if s.Left != nil {
			s.Left()
		}
	})
	return nil
}

// engageElsewhere records a cluster another replica serves until ctx
// ends. It may be engaged while the connection of the same name is being
// torn down (handed over), so that the name is never unknown meanwhile.
func (f *Fleet) engageElsewhere(ctx context.Context, s Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[s.Name]; ok && c.engaged.Err() == nil {
		return fmt.Errorf("cluster %s is engaged already", s.Name)
	}
	if r := f.elsewhere[s.Name]; r != nil && r.engaged.Err() == nil {
		return fmt.Errorf("cluster %s is engaged already, as served elsewhere", s.Name)
	}
	r := &remote{spec: s, engaged: ctx}
	labels := s.Labels
	r.labels.Store(&labels)
	f.elsewhere[s.Name] = r
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		if f.elsewhere[s.Name] == r {
			delete(f.elsewhere, s.Name)
		}
		f.mu.Unlock()
		if s.Left != nil {
			s.Left()
		}
	})
	return nil
}

// Elsewhere lists the clusters registered but served by another replica
// (Spec.Elsewhere), by name, with their labels.
func (f *Fleet) Elsewhere() []Spec {
	f.mu.RLock()
	out := make([]Spec, 0, len(f.elsewhere))
	for _, r := range f.elsewhere {
		if r.engaged.Err() == nil {
			out = append(out, Spec{Name: r.spec.Name, Labels: *r.labels.Load(), Elsewhere: true})
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Registered reports whether the cluster named name is registered: engaged
// here (connecting, connected or being torn down) or served elsewhere.
// A source of a cluster that is not is a source of an unregistered one.
func (f *Fleet) Registered(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, conn := f.conns[name]
	_, leaving := f.leaving[name]
	_, elsewhere := f.elsewhere[name]
	return conn || leaving || elsewhere || f.engaging[name] > 0
}

// Leaving reports whether the cluster named name is being torn down: its
// registration went away (or was replaced, or handed over) and what it
// becomes is known once the teardown ends. Registered is true meanwhile.
func (f *Fleet) Leaving(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, leaving := f.leaving[name]
	return leaving
}

// Relabel replaces the labels of the cluster named name.
func (f *Fleet) Relabel(name string, labels map[string]string) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if c, ok := f.conns[name]; ok {
		was := *c.labels.Swap(&labels)
		if IsReceiveOnly(was) != IsReceiveOnly(labels) {
			f.kinds.Trigger() // its watches widen or narrow now
		}
	}
	if r, ok := f.elsewhere[name]; ok {
		r.labels.Store(&labels)
	}
}

// receiveOnly reports whether c, a registered cluster, was registered
// receive-only (annotations.LabelReceiveOnly "true"): Kinds then looks
// for no sources, pull mirrors or MirrorPolicies there. The agent's own
// cluster never is.
func (f *Fleet) receiveOnly(c *clusters.Cluster) bool {
	f.mu.RLock()
	conn, ok := f.conns[c.Name()]
	f.mu.RUnlock()
	return ok && conn.cluster == c && !conn.spec.Local && IsReceiveOnly(*conn.labels.Load())
}

// IsReceiveOnly reports whether a registration's labels declare its
// cluster receive-only. Only "true" does: any other value leaves the
// cluster looked at whole, the safe side.
func IsReceiveOnly(labels map[string]string) bool {
	return labels[annotations.LabelReceiveOnly] == "true"
}

// Listed marks the fleet as known. Claims on clusters are decided from
// then on.
func (f *Fleet) Listed() {
	if !f.listed.Swap(true) {
		close(f.listedCh)
	}
	f.award()
}

// Known reports whether every provider has listed its clusters.
func (f *Fleet) Known() bool { return f.listed.Load() }

func (f *Fleet) connect(engaged context.Context, s Spec) (*connection, error) {
	c := &connection{spec: s, engaged: engaged, left: make(chan struct{}), events: s.Recorder, done: make(chan struct{}),
		created: time.Now()}
	cfg := s.Config
	if f.opts.Limit != nil {
		cfg = f.opts.Limit(cfg)
	}
	cl, err := clusters.New(cfg, clusters.Options{Name: s.Name, ManagedBy: f.opts.ManagedBy, Resync: f.opts.Resync, Handler: f.sub,
		// A call still running after slowCallAfter has the cluster probed
		// now: if it hangs, it is marked down within a probe deadline
		// more, and the calls waiting on it are aborted.
		SlowCall: c.pokeProbe, SlowCallAfter: min(f.opts.ProbeTimeout, slowCallAfter),
		// A watch that cannot connect has the cluster probed now: marked
		// down, its watches wait for the probe to see it back.
		Unanswered: c.pokeProbe,
		// The agent's own cluster takes most of its writes (a member's
		// every mirror), so its watches get a connection apart from them.
		// A registered cluster of a hub takes its share of the fleet's
		// writes, and keeps to one connection: on a hub, what a cluster
		// costs counts more.
		WatchConnection:  s.Local,
		MaxCallsInFlight: f.opts.MaxCallsInFlight,
		// An answer within the probe's deadline outweighs a late probe.
		AnswerWithin: f.opts.ProbeTimeout})
	if err != nil {
		return nil, err
	}
	c.cluster = cl
	labels := s.Labels
	c.labels.Store(&labels)
	return c, nil
}

// slowCallAfter is how long a call may run before its cluster is probed.
// A write or read of one object takes milliseconds; one that takes a
// second is worth one readiness request, which API Priority and Fairness
// serves at once even to a busy API server (probes are exempt).
const slowCallAfter = time.Second

// pokeProbe has the cluster probed now (once it is started), rather than
// at the end of the probe interval.
func (c *connection) pokeProbe() {
	if t := c.probeTimer.Load(); t != nil {
		t.Reset(0)
	}
}

// start connects to a cluster in the background, until ctx (the
// connection's own) ends: it waits until the API
// server answers, starts the watches, and probes its health until the
// connection is stopped.
func (f *Fleet) start(ctx context.Context, c *connection) {
	log := logf.FromContext(ctx).WithValues("cluster", c.spec.Name)
	var lazy *lazyRecorder
	if c.events == nil {
		lazy = &lazyRecorder{log: log, start: func() (events.Recorder, func(), error) {
			b, err := NewRecorder(c.cluster.RESTConfig(), c.cluster.HTTPClient(), events.Options{Component: f.opts.FieldManager, Log: log})
			if err != nil {
				return nil, nil, err
			}
			return b, b.Shutdown, nil
		}}
		c.events = lazy
	}
	// The connection runs on a timer, not on a goroutine of its own: a
	// hub with hundreds of clusters would otherwise keep one parked per
	// cluster. Each run is one step (see step); the next is scheduled as
	// it ends, and pokeProbe brings it forward.
	t := time.AfterFunc(math.MaxInt64, func() { f.step(ctx, c) })
	c.probeTimer.Store(t) // before the first run, which reschedules t
	t.Reset(0)
	context.AfterFunc(ctx, func() {
		t.Stop()
		c.probing.Lock() // a step running ends first; none runs again
		if lazy != nil {
			lazy.Shutdown()
		}
		c.cluster.Close()
		close(c.done)
	})
}

// step is one run of a connection's timer. Until the API server first
// answers, it pings; then it starts the watches (Kinds adds the kind
// watches once the cluster is listed as started) and from then on probes.
// It schedules the next run as it ends. A run that finds another one
// running returns: that one schedules the next.
func (f *Fleet) step(ctx context.Context, c *connection) {
	if !c.probing.TryLock() {
		return // running, or closed: the closing holds the lock for good
	}
	if ctx.Err() != nil {
		c.probing.Unlock() // the closing waits for it; no next run
		return
	}
	next := f.opts.ProbeInterval
	if f.opts.Identities && !c.started.Load() {
		if serve, retry := f.identify(ctx, c); !serve {
			// Refused, or waiting for the claims to be decided: nothing
			// more goes through it until award pokes it.
			c.probing.Unlock()
			switch {
			case ctx.Err() != nil:
			case retry > 0:
				c.probeTimer.Load().Reset(retry)
			case f.serves(c):
				c.probeTimer.Load().Reset(0) // awarded meanwhile: its poke found the lock held
			}
			return
		}
	}
	if !c.started.Load() {
		if err := f.ping(ctx, c); err != nil {
			logf.FromContext(ctx).Info("Cluster not ready", "cluster", c.spec.Name, "error", err.Error())
			f.probeFailed(c)
			f.setUp(c, false)
		} else {
			c.cluster.Start(ctx)
			c.started.Store(true)
			f.kinds.Trigger()
			next = f.probe(ctx, c)
		}
	} else {
		next = f.probe(ctx, c)
	}
	c.probing.Unlock()
	// After the unlock: a run that found the lock held has then always
	// left the scheduling to this one.
	if ctx.Err() == nil {
		c.probeTimer.Load().Reset(next)
	}
}

// probe keeps c.up and the cluster's health current: the cluster answers
// a readiness request within ProbeTimeout (or, while it is up, answers
// something else within it meanwhile: its readiness checks are slow, it
// serves) and its caches are synced. A
// cluster that does not answer is marked down at once, which makes every
// call to it fail fast and aborts those in flight, and is probed again
// every clusters.DownProbeInterval (at most ProbeInterval) until it
// answers, so that its pending changes land seconds after it is back.
// Meanwhile its watches dial nothing; marked up, they resume at once, and
// the subscriber hears that the cluster is up again only once they have
// caught up (or ProbeTimeout passed): its sources are then reconciled from
// current caches, not from what they held before the outage, which would
// write stale content and conflict on the sources' resourceVersions. It
// returns when to probe next.
func (f *Fleet) probe(ctx context.Context, c *connection) time.Duration {
	log := logf.FromContext(ctx).WithValues("cluster", c.spec.Name)
	synced := c.cluster.NamespacesSynced()
	var err error
	if synced {
		sent := time.Now()
		err = f.ping(ctx, c)
		switch {
		case apierrors.IsTooManyRequests(err):
			// A busy API server answered: it is alive, and its calls
			// wait for the Retry-After it gave (clusters.Throttled).
			err = nil
		case answeredNotReady(err) && c.up.Load():
			c.notReady++
			if c.notReady < notReadyProbes {
				// One of its own checks failed (etcd slow under load,
				// say): probed again in a second, not marked down yet.
				f.probeFailed(c)
				return min(f.opts.ProbeInterval, clusters.DownProbeInterval)
			}
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && c.up.Load() && c.cluster.AnsweredSince(sent):
			// Its readiness answer is late, but it answered other calls
			// (or the hedge, see ping) in time while the probe waited:
			// it serves, slowly in its readiness checks
			// (clusters/answers.go). It stays up, and is probed at the
			// usual interval; a call that hangs meanwhile has it probed
			// at once (SlowCall), and a probe that no answer in time
			// keeps company marks it down.
			f.probeFailed(c)
			if !c.late {
				c.late = true
				log.Info("Readiness probe late, but the cluster answers other calls in time; kept up", "deadline", f.opts.ProbeTimeout)
			}
			return f.opts.ProbeInterval
		case err == nil:
			c.notReady = 0
			if c.late {
				c.late = false
				log.Info("Readiness probe answered in time again")
			}
		}
	}
	ok := synced && err == nil
	if !ok {
		f.probeFailed(c)
	}
	if err != nil && ctx.Err() == nil {
		c.cluster.MarkDown("health probe failed: " + err.Error())
	} else if err == nil {
		c.cluster.MarkUp()
	}
	if ok && !c.up.Load() && c.everUp.Load() {
		wctx, cancel := context.WithTimeout(ctx, f.opts.ProbeTimeout)
		current := c.cluster.WaitForWatches(wctx)
		cancel()
		if !current && ctx.Err() == nil {
			log.Info("Watches not caught up yet; going on", "after", f.opts.ProbeTimeout)
		}
	}
	was := c.up.Swap(ok)
	returned := ok && !was && c.everUp.Swap(true)
	f.setUp(c, ok)
	switch {
	case returned:
		log.Info("Cluster is up again")
		f.sub.Up(c.cluster)
	case ok && !was:
		log.Info("Cluster is up")
		f.sub.Up(c.cluster)
	case !ok && was:
		log.Info("Cluster is unreachable", "error", fmt.Sprint(err))
		f.sub.Down(c.cluster)
	}
	switch interval := f.opts.ProbeInterval; {
	case !synced:
		return min(interval, firstSyncPoll)
	case err != nil:
		return min(interval, clusters.DownProbeInterval)
	default:
		return interval
	}
}

// firstSyncPoll is how often a started cluster is looked at until its
// namespaces have synced: the look reads a flag and sends nothing, and the
// cluster is up (its sources reconciled) at the first look after the sync.
// It was a second, which every agent start and every cluster a hub replica
// took over waited, for a LIST of namespaces that takes milliseconds (see
// clusters.New).
const firstSyncPoll = 50 * time.Millisecond

// notReadyProbes is how many probes in a row an up cluster's API server
// must answer with "not ready" before it is marked down. It answered, so it
// is alive: a readiness check of its own that fails once (kube-apiserver's
// etcd-readiness, when etcd is slow under load; kcp's, at a thousand
// logical clusters) is no outage, and marking it down would abort every
// call in flight to it. A server that stays not ready is marked down after
// about two seconds (DownProbeInterval); one that does not answer, at once.
const notReadyProbes = 3

// answeredNotReady reports whether err is the API server's own answer that
// it is not ready: 500 (a failed readiness check) or 503.
func answeredNotReady(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

func (f *Fleet) ping(ctx context.Context, c *connection) error {
	ctx, cancel := context.WithTimeout(ctx, f.opts.ProbeTimeout)
	defer cancel()
	if c.up.Load() {
		// A hedge: should the readiness answer take more than half its
		// deadline, the cluster is asked for its version too, which it
		// answers from memory. In time, that answer keeps an idle
		// cluster whose readiness checks are slow up (see probe); a
		// cluster that answers neither in time is marked down, within the
		// one deadline as before. A prompt readiness answer costs nothing
		// more.
		hedge := time.AfterFunc(f.opts.ProbeTimeout/2, func() { _ = c.cluster.AskVersion(ctx) })
		defer hedge.Stop()
	}
	return c.cluster.Ping(ctx)
}

func (f *Fleet) probeFailed(c *connection) {
	if f.opts.Metrics.ProbeFailures != nil {
		f.opts.Metrics.ProbeFailures.WithLabelValues(c.spec.Name).Inc()
	}
}

func (f *Fleet) setUp(c *connection, up bool) {
	if f.opts.Metrics.Up == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	f.opts.Metrics.Up.WithLabelValues(c.spec.Name).Set(v)
}

func (f *Fleet) setSize() {
	if f.opts.Metrics.Size == nil {
		return
	}
	f.mu.RLock()
	n := 0
	for _, c := range f.conns {
		if c.listed() {
			n++
		}
	}
	f.mu.RUnlock()
	f.opts.Metrics.Size.Set(float64(n))
}

// stop ends the connection's goroutines and closes it.
func (f *Fleet) stop(c *connection) {
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	c.up.Store(false)
}

// disengage takes a cluster out of the fleet, for the reason cause. One
// that leaves for good (not replaced, not handed over) first has the
// writer's finalizer taken off its sources, while its connection still
// works, unless it is read only; its series are deleted. One handed over
// to another replica is marked unreachable first, which aborts the calls
// in flight and fails new ones.
func (f *Fleet) disengage(c *connection, cause error) {
	handedOver := errors.Is(cause, ErrHandedOver)
	gone := !handedOver && !errors.Is(cause, ErrReplaced)
	if handedOver {
		c.cluster.MarkDown("served by another hub replica")
	}
	name := c.spec.Name
	defer close(c.left)
	f.mu.Lock()
	if f.conns[name] == c {
		delete(f.conns, name)
	}
	f.leaving[name] = c.left
	// Its cluster stays its own until the teardown ends; a registration
	// that reaches it too takes it over then: it was renamed.
	served, id := c.serving, c.identity
	renamed := false
	for _, other := range f.conns {
		renamed = renamed || (id != "" && other.identity == id)
	}
	if served && id != "" {
		f.releasing[id] = name
	}
	if renamed && gone {
		f.departed[name] = id
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if f.leaving[name] == c.left {
			delete(f.leaving, name)
		}
		f.mu.Unlock()
	}()
	log := logf.FromContext(f.ctx).WithValues("cluster", name)
	log.Info("Disengaging cluster", "leaving", gone)
	switch {
	case !gone || c.spec.ReadOnly || !served:
	case renamed:
		log.Info("Cluster registered under another name: served on under it")
	case c.cluster.Unreachable() == nil:
		releaseSources(f.ctx, c.cluster, f.opts.Finalizer, f.opts.FieldManager)
	default:
		log.Info("Cluster leaving the fleet is unreachable: a finalizer an earlier version held on its sources stays; kubectl fleetmirror cleanup removes it", "finalizer", f.opts.Finalizer)
	}
	f.stop(c)
	if gone || handedOver {
		metrics.ForgetCluster(name)
		f.forgetSeries(name)
	}
	f.mu.Lock()
	if f.releasing[id] == name {
		delete(f.releasing, id)
	}
	f.mu.Unlock()
	if !errors.Is(cause, ErrReplaced) {
		// A replaced registration comes back at once, and claims its
		// cluster again before a younger one may (Engage awards then).
		f.award()
	}
	f.setSize()
	f.sub.Left(name, gone)
}

func (f *Fleet) kindSynced(c *clusters.Cluster, gvk schema.GroupVersionKind) {
	f.mu.RLock()
	sub := f.sub
	f.mu.RUnlock()
	if sub != nil {
		sub.KindSynced(c, gvk)
	}
}

// KindsChanged asks for a pass of the kind watches now: what policies
// name changed.
func (f *Fleet) KindsChanged() { f.kinds.Trigger() }

// Cluster returns the engaged cluster named name, or nil.
func (f *Fleet) Cluster(name string) *clusters.Cluster {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if c, ok := f.conns[name]; ok && c.serving {
		return c.cluster
	}
	return nil
}

// Clusters lists the engaged clusters, local ones first, then by name.
func (f *Fleet) Clusters() []*clusters.Cluster {
	conns := f.sorted()
	out := make([]*clusters.Cluster, len(conns))
	for i, c := range conns {
		out[i] = c.cluster
	}
	return out
}

// Started lists the clusters whose watches run, for the kind watches.
func (f *Fleet) Started() []*clusters.Cluster {
	var out []*clusters.Cluster
	for _, c := range f.sorted() {
		if c.started.Load() {
			out = append(out, c.cluster)
		}
	}
	return out
}

// sorted lists the listed connections, local ones first, then by name.
func (f *Fleet) sorted() []*connection {
	f.mu.RLock()
	out := make([]*connection, 0, len(f.conns))
	for _, c := range f.conns {
		if c.listed() {
			out = append(out, c)
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b *connection) int {
		if a.spec.Local != b.spec.Local {
			if a.spec.Local {
				return -1
			}
			return 1
		}
		return strings.Compare(a.spec.Name, b.spec.Name)
	})
	return out
}

// Recorder returns the Event recorder for objects of c, nil when there is
// none (c is not engaged, or its recorder could not be made).
func (f *Fleet) Recorder(c *clusters.Cluster) events.Recorder {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if conn, ok := f.conns[c.Name()]; ok && conn.cluster == c && conn.serving {
		return conn.events
	}
	return nil
}

// Member is what target resolution needs to know of one engaged cluster.
type Member struct {
	Cluster *clusters.Cluster
	Labels  map[string]string
	Local   bool
	// Up: the cluster answers and its caches are synced.
	Up bool
	// Connecting: not up yet, and engaged less than three probe rounds
	// ago: neither reachable nor known unreachable.
	Connecting bool
	// ExcludedNamespaces are never targeted in this cluster, for the
	// reason ExcludedBecause gives in plain words.
	ExcludedNamespaces glob.List
	ExcludedBecause    string
	// ReadOnly: its sources are read, nothing is written into it
	// (Spec.ReadOnly).
	ReadOnly bool
}

// Members lists the engaged clusters as Clusters does.
func (f *Fleet) Members() []Member {
	conns := f.sorted()
	out := make([]Member, len(conns))
	for i, c := range conns {
		out[i] = f.member(c)
	}
	return out
}

// Member returns the engaged cluster named name as Members lists it.
func (f *Fleet) Member(name string) (Member, bool) {
	f.mu.RLock()
	c, ok := f.conns[name]
	ok = ok && c.listed()
	f.mu.RUnlock()
	if !ok {
		return Member{}, false
	}
	return f.member(c), true
}

func (f *Fleet) member(c *connection) Member {
	return Member{Cluster: c.cluster, Labels: *c.labels.Load(), Local: c.spec.Local, Up: c.up.Load(),
		Connecting:         !c.everUp.Load() && time.Since(c.created) < 3*f.opts.ProbeInterval+f.opts.ProbeTimeout,
		ExcludedNamespaces: c.spec.ExcludedNamespaces, ExcludedBecause: c.spec.ExcludedBecause, ReadOnly: c.spec.ReadOnly}
}

// Settled reports whether the caches of c hold everything of the writer's
// there: the kind watches looked at all of c's kinds in their last pass
// (clusters.Kinds.Settled), and every watch of c has its initial list.
func (f *Fleet) Settled(c *clusters.Cluster) bool {
	return f.kinds.Settled(c) && c.HasSynced()
}

// LocalSynced reports whether the fleet is known and every local cluster
// has its caches.
func (f *Fleet) LocalSynced() bool {
	if !f.Known() {
		return false
	}
	for _, c := range f.sorted() {
		if c.spec.Local && !c.cluster.HasSynced() {
			return false
		}
	}
	return true
}

// LocalReady reports whether the agent is ready to serve: LocalSynced,
// and a kinds pass has looked at every local cluster, so that the caches
// that have synced include the kinds in use there, not only the
// namespaces.
func (f *Fleet) LocalReady() bool {
	if !f.LocalSynced() {
		return false
	}
	for _, c := range f.sorted() {
		if c.spec.Local && !f.kinds.Looked(c.cluster) {
			return false
		}
	}
	return true
}

// WaitForLocal blocks until LocalSynced or ctx ends. It looks at the
// local connections of the moment, every localPoll, not at those there
// were when it began: a sharded hub engages its own cluster again when
// its role there changes (read only, served, read only), and a connection
// replaced before its caches synced never syncs. Waiting on that one
// left a replica with no queue, hence no writes and no status, for good.
func (f *Fleet) WaitForLocal(ctx context.Context) error {
	select {
	case <-f.listedCh:
	case <-ctx.Done():
		return ctx.Err()
	}
	tick := time.NewTicker(localPoll)
	defer tick.Stop()
	for !f.LocalSynced() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the local caches did not sync: %w", ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// localPoll is how often WaitForLocal looks at the local caches: a cheap
// look (no request), and a tenth of a second of delay at start at most.
const localPoll = 100 * time.Millisecond

// WaitForLocalWatches blocks until the watches of every local cluster have
// caught up since it was last marked up (clusters.Cluster.WatchesCurrent),
// or ctx ends: a leader that takes over when its own API server is back
// starts from current caches. Call it after WaitForLocal.
func (f *Fleet) WaitForLocalWatches(ctx context.Context) error {
	for _, c := range f.sorted() {
		if c.spec.Local && !c.cluster.WaitForWatches(ctx) {
			return fmt.Errorf("cluster %s: watches did not catch up: %w", c.spec.Name, ctx.Err())
		}
	}
	return nil
}

// NewRecorder returns a recorder of core/v1 Events writing to the cluster
// of cfg as opts.Component; its Shutdown stops it. With httpClient, it
// sends on that client's connections: those of a cluster that can go away
// are then closed with it. Without opts.Scheme, the kinds of typed objects
// are those of fleetmirror.io (the MirrorPolicy).
func NewRecorder(cfg *rest.Config, httpClient *http.Client, opts events.Options) (*events.Broadcaster, error) {
	if opts.Scheme == nil {
		opts.Scheme = policyScheme
	}
	return events.New(cfg, httpClient, opts)
}

// policyScheme knows the kinds of fleetmirror.io, whose typed objects get
// Events.
var policyScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()
