package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	fmcontroller "github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Event reasons on registration Secrets.
const (
	ReasonClusterRegistered  = "ClusterRegistered"
	ReasonInvalidKubeconfig  = "InvalidKubeconfig"
	ReasonDuplicateCluster   = "DuplicateClusterName"
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonRegistrationRefused: the Secret was written by a mirroring
	// agent, not by whoever may register clusters, so it registers nothing.
	ReasonRegistrationRefused = "RegistrationRefused"
)

// member is one cluster of the fleet as the hub keeps it.
type member struct {
	name    string
	labels  atomic.Pointer[map[string]string] // the Secret's labels, for cluster selectors
	hash    string
	secret  string // namespace/name of the registration Secret; "" for the hub itself
	cluster *clusters.Cluster
	events  record.EventRecorder
	// up is true while the cluster answers and its caches are synced.
	up atomic.Bool
	// everUp is true once the cluster was up at least once.
	everUp atomic.Bool
	// created is when the member was registered (or reconnected).
	created time.Time
	// started is true once the cluster's watches run.
	started atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when every goroutine of the member ended
	// probeNow asks the probe loop for a probe before the interval ends.
	probeNow chan struct{}
}

// Registry keeps the fleet: the hub's own cluster and one member per valid
// registration Secret.
type Registry struct {
	opts      Options
	hubConfig *rest.Config
	handler   *fmcontroller.Events
	recorder  record.EventRecorder // for registration Secrets, in the hub

	mu      sync.RWMutex
	members map[string]*member
	local   *member

	ctx     context.Context
	trigger chan struct{}
	// onStopped is called with the name of a cluster whose connection was
	// closed.
	onStopped func(name string)
	// onStarted is called when a cluster's watches run (the kinds to
	// watch there are decided at once).
	onStarted func()
	// refused remembers the last refusal reported per Secret (sync loop only).
	refused map[string]string
	secrets []cache.SharedIndexInformer
	// synced is set once the registration Secrets were listed and every
	// cluster they register was added: before, the fleet is not known.
	synced atomic.Bool
}

func newRegistry(hubConfig *rest.Config, o Options, handler *fmcontroller.Events, recorder record.EventRecorder) (*Registry, error) {
	r := &Registry{opts: o, hubConfig: hubConfig, handler: handler, recorder: recorder,
		members: map[string]*member{}, trigger: make(chan struct{}, 1), refused: map[string]string{}}
	local, err := r.newMember(o.ClusterName, nil, "", "", hubConfig, recorder)
	if err != nil {
		return nil, err
	}
	r.local = local
	r.members[local.name] = local

	// The core/v1 group client, not the whole clientset: a clientset links
	// the typed clients of every API group into the binary, megabytes of
	// code that are paged in and never used.
	core, err := typedcorev1.NewForConfig(hubConfig)
	if err != nil {
		return nil, err
	}
	// Only labelled Secrets of one namespace are listed: never all Secrets.
	for _, key := range []string{annotations.LabelClusterName, clusterv1.ClusterNameLabel} {
		req, _ := labels.NewRequirement(key, selection.Exists, nil)
		sel := labels.NewSelector().Add(*req).String()
		lw := cache.NewFilteredListWatchFromClient(core.RESTClient(), "secrets", o.ClusterSecretsNamespace,
			func(lo *metav1.ListOptions) { lo.LabelSelector = sel })
		inf := cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { r.poke() },
			UpdateFunc: func(any, any) { r.poke() },
			DeleteFunc: func(any) { r.poke() },
		}); err != nil {
			return nil, err
		}
		r.secrets = append(r.secrets, inf)
	}
	return r, nil
}

func (r *Registry) poke() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Local is the hub's own cluster.
func (r *Registry) Local() *clusters.Cluster { return r.local.cluster }

// Start runs the registration watches and the hub's own cluster until ctx
// ends, then stops every member.
func (r *Registry) Start(ctx context.Context) error {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	r.startMember(ctx, r.local)
	for _, inf := range r.secrets {
		go inf.RunWithContext(ctx)
	}
	for _, inf := range r.secrets {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil
		}
	}
	for {
		r.sync(ctx)
		r.synced.Store(true)
		select {
		case <-ctx.Done():
			r.mu.Lock()
			all := make([]*member, 0, len(r.members))
			for _, m := range r.members {
				all = append(all, m)
			}
			r.mu.Unlock()
			for _, m := range all {
				r.stopMember(m)
			}
			return nil
		case <-r.trigger:
		}
	}
}

// NeedLeaderElection is false: followers keep warm caches.
func (r *Registry) NeedLeaderElection() bool { return false }

// sync makes the members match the registration Secrets.
func (r *Registry) sync(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx)
	var secrets []*corev1.Secret
	seen := map[string]bool{}
	for _, inf := range r.secrets {
		for _, o := range inf.GetStore().List() {
			s := o.(*corev1.Secret)
			if _, ok := clusterName(s); ok && !seen[s.Namespace+"/"+s.Name] {
				seen[s.Namespace+"/"+s.Name] = true
				secrets = append(secrets, s)
			}
		}
	}
	// The oldest Secret keeps a name claimed twice, whatever order the
	// caches list them in.
	sort.Slice(secrets, func(i, j int) bool {
		a, b := secrets[i], secrets[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	want := map[string]*registration{}
	wantSecret := map[string]*corev1.Secret{}
	for _, s := range secrets {
		if why := mirrored(s); why != "" {
			r.refuse(s, ReasonRegistrationRefused, "mirror", why)
			continue
		}
		reg, err := parseRegistration(s, r.opts.AllowKubeconfigPlugins)
		name, _ := clusterName(s)
		switch {
		case errors.Is(err, errPlugin):
			r.refuse(s, ReasonInvalidKubeconfig, "plugin", err.Error())
		case err != nil:
			r.refuse(s, ReasonInvalidKubeconfig, "invalid", err.Error())
		case name == r.opts.ClusterName:
			r.refuse(s, ReasonDuplicateCluster, "duplicate", fmt.Sprintf("cluster name %q is the hub's own name", name))
		case want[name] != nil:
			r.refuse(s, ReasonDuplicateCluster, "duplicate", fmt.Sprintf("cluster %q is already registered by Secret %s", name, wantSecret[name].Name))
		default:
			want[name], wantSecret[name] = reg, s
		}
	}

	r.mu.RLock()
	var stale []*member
	for name, m := range r.members {
		if m == r.local {
			continue
		}
		if reg, ok := want[name]; !ok || reg.hash != m.hash {
			stale = append(stale, m)
		}
	}
	r.mu.RUnlock()
	for _, m := range stale {
		log.Info("Unregistering cluster", "cluster", m.name)
		r.mu.Lock()
		delete(r.members, m.name)
		r.mu.Unlock()
		if _, again := want[m.name]; !again && m.cluster.Unreachable() == nil {
			releaseSources(ctx, m.cluster)
		} else if !again {
			log.Info("Cluster leaving the fleet is unreachable: its sources keep the hub's finalizer; remove it by hand",
				"cluster", m.name, "finalizer", Finalizer)
		}
		r.stopMember(m)
		if _, again := want[m.name]; !again {
			metrics.ForgetCluster(m.name)
			forgetClusterSeries(m.name)
			r.handler.ClusterGone(m.name)
		}
		r.handler.FleetChanged() // sources that targeted it must say so
	}
	for name, reg := range want {
		r.mu.RLock()
		m, ok := r.members[name]
		r.mu.RUnlock()
		if ok {
			m.labels.Store(&reg.labels) // labels may change without a reconnect
			continue
		}
		s := wantSecret[name]
		m, err := r.newMember(name, reg.labels, reg.hash, s.Namespace+"/"+s.Name, reg.config, nil)
		if err != nil {
			r.refuse(s, ReasonInvalidKubeconfig, "invalid", err.Error())
			continue
		}
		log.Info("Registering cluster", "cluster", name, "secret", s.Name)
		r.recorder.Eventf(s, corev1.EventTypeNormal, ReasonClusterRegistered, "Cluster %s registered", name)
		r.mu.Lock()
		r.members[name] = m
		r.mu.Unlock()
		r.startMember(ctx, m)
	}
	registeredClusters.Set(float64(len(want) + 1))
}

// refuse reports a registration Secret that is not used, once per version
// of the Secret and message: a sync caused by another Secret repeats nothing.
func (r *Registry) refuse(s *corev1.Secret, reason, metric, msg string) {
	seen := string(s.UID) + "/" + s.ResourceVersion + "/" + msg
	if r.refused[s.Namespace+"/"+s.Name] == seen {
		return
	}
	r.refused[s.Namespace+"/"+s.Name] = seen
	registrationErrors.WithLabelValues(metric).Inc()
	r.recorder.Eventf(s, corev1.EventTypeWarning, reason, "%s", msg)
}

func (r *Registry) newMember(name string, lbls map[string]string, hash, secret string, cfg *rest.Config, recorder record.EventRecorder) (*member, error) {
	m := &member{name: name, hash: hash, secret: secret, events: recorder, done: make(chan struct{}), created: time.Now(),
		probeNow: make(chan struct{}, 1)}
	cfg = r.opts.Limited(cfg)
	c, err := clusters.New(cfg, clusters.Options{Name: name, ManagedBy: annotations.ManagedByHub, Resync: r.opts.ResyncPeriod, Handler: r.handler,
		// A call still running after slowCallAfter has the cluster probed
		// now: if it hangs, it is marked down within a probe deadline
		// more, and the calls waiting on it are aborted.
		SlowCall: m.pokeProbe, SlowCallAfter: min(r.opts.ProbeTimeout, slowCallAfter)})
	if err != nil {
		return nil, err
	}
	m.cluster = c
	m.labels.Store(&lbls)
	return m, nil
}

// pokeProbe asks for a probe of m now.
func (m *member) pokeProbe() {
	select {
	case m.probeNow <- struct{}{}:
	default:
	}
}

// startMember connects to a member in the background: it sets up its
// watches (retrying while the cluster is unreachable), announces it once
// synced, and probes its health until the member is stopped.
func (r *Registry) startMember(parent context.Context, m *member) {
	ctx, cancel := context.WithCancel(parent)
	m.cancel = cancel
	var stopRecorder func()
	if m.events == nil {
		if rec, stop, err := agent.NewRecorder(m.cluster.RESTConfig(), m.cluster.HTTPClient(), FieldManager); err == nil {
			m.events, stopRecorder = rec, stop
		} else {
			ctrl.LoggerFrom(ctx).Error(err, "Cannot record events in the member cluster", "cluster", m.name)
		}
	}
	go func() {
		defer close(m.done)
		defer func() {
			if stopRecorder != nil {
				stopRecorder()
			}
			m.cluster.Close()
		}()
		log := ctrl.LoggerFrom(ctx).WithValues("cluster", m.name)
		// Wait until the API server answers; the kind watches are added by
		// the hub's Kinds once the cluster is listed as started.
		_ = wait.PollUntilContextCancel(ctx, r.opts.ProbeInterval, true, func(ctx context.Context) (bool, error) {
			if err := r.ping(ctx, m); err != nil {
				log.Info("Cluster not ready", "error", err.Error())
				probeFailures.WithLabelValues(m.name).Inc()
				clusterUp.WithLabelValues(m.name).Set(0)
				return false, nil
			}
			return true, nil
		})
		if ctx.Err() != nil {
			return
		}
		m.cluster.Start(ctx)
		m.started.Store(true)
		if r.onStarted != nil {
			r.onStarted()
		}
		r.probe(ctx, m)
	}()
}

// probe keeps m.up and the cluster's health current: the cluster
// answers a readiness request within ProbeTimeout and its caches are
// synced. A cluster that does not answer is marked down at once, which
// makes every call to it fail fast and aborts those in flight, and is
// probed again every clusters.DownProbeInterval (at most ProbeInterval) until it
// answers, so that its pending changes land seconds after it is back. A
// cluster that comes back is announced, so its sources and the sources
// targeting it are reconciled.
func (r *Registry) probe(ctx context.Context, m *member) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", m.name)
	for {
		synced := m.cluster.NamespacesSynced()
		var err error
		if synced {
			err = r.ping(ctx, m)
		}
		ok := synced && err == nil
		if !ok {
			probeFailures.WithLabelValues(m.name).Inc()
		}
		if err != nil && ctx.Err() == nil {
			m.cluster.MarkDown("health probe failed: " + err.Error())
		} else if err == nil {
			m.cluster.MarkUp()
		}
		was := m.up.Swap(ok)
		if ok {
			m.everUp.Store(true)
		}
		clusterUp.WithLabelValues(m.name).Set(boolFloat(ok))
		if ok && !was {
			log.Info("Cluster is up")
			r.handler.Synced(m.cluster)
		} else if !ok && was {
			log.Info("Cluster is unreachable", "error", fmt.Sprint(err))
			r.handler.FleetChanged()
		}
		interval := r.opts.ProbeInterval
		switch {
		case !synced:
			interval = min(interval, time.Second) // waiting for the first sync
		case err != nil:
			interval = min(interval, clusters.DownProbeInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		case <-m.probeNow:
		}
	}
}

// slowCallAfter is how long a call may run before its cluster is probed.
// A write or read of one object takes milliseconds; one that takes a
// second is worth one readiness request, which API Priority and Fairness
// serves at once even to a busy API server (probes are exempt).
const slowCallAfter = time.Second

func (r *Registry) ping(ctx context.Context, m *member) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	defer cancel()
	return m.cluster.Ping(ctx)
}

func (r *Registry) stopMember(m *member) {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	m.up.Store(false)
	if r.onStopped != nil {
		r.onStopped(m.name)
	}
}

// Cluster returns the cluster named name, or nil.
func (r *Registry) Cluster(name string) *clusters.Cluster {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if m, ok := r.members[name]; ok {
		return m.cluster
	}
	return nil
}

func (r *Registry) member(c *clusters.Cluster) *member {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if m, ok := r.members[c.Name()]; ok && m.cluster == c {
		return m
	}
	return nil
}

// Clusters lists every cluster of the fleet, the hub's own first.
func (r *Registry) Clusters() []*clusters.Cluster {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := []*clusters.Cluster{r.local.cluster}
	for _, m := range r.sortedLocked() {
		if m != r.local {
			out = append(out, m.cluster)
		}
	}
	return out
}

func (r *Registry) sortedLocked() []*member {
	out := make([]*member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *member) int { return strings.Compare(a.name, b.name) })
	return out
}

// Started lists the clusters whose watches run, for the kind watches.
func (r *Registry) Started() []*clusters.Cluster {
	var out []*clusters.Cluster
	for _, m := range r.snapshot() {
		if m.started.Load() {
			out = append(out, m.cluster)
		}
	}
	return out
}

// snapshot lists the members sorted by name.
func (r *Registry) snapshot() []*member {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sortedLocked()
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// releaseSources removes the hub's finalizer from the sources of a cluster
// that leaves the fleet, while its connection still works, so that they
// can be deleted later. It tries for a bounded time; a cluster unreachable
// now keeps the finalizer, which is logged (remove it by hand).
func releaseSources(ctx context.Context, c *clusters.Cluster) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", c.Name())
	for _, gvk := range c.Watched() {
		for _, src := range c.Sources(gvk) {
			fins := src.GetFinalizers()
			if !slices.Contains(fins, Finalizer) {
				continue
			}
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"resourceVersion": src.GetResourceVersion(),
				"finalizers":      slices.DeleteFunc(slices.Clone(fins), func(f string) bool { return f == Finalizer }),
			}})
			res, err := c.MetadataResource(gvk, src.GetNamespace())
			if err != nil {
				break // the kind is unknown: skip it
			}
			_, err = res.Patch(ctx, src.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
			if err != nil && !apierrors.IsNotFound(err) {
				log.Info("Could not remove the hub's finalizer from a source of a cluster leaving the fleet; remove it by hand",
					"gvk", gvk.String(), "namespace", src.GetNamespace(), "name", src.GetName(), "finalizer", Finalizer, "error", err.Error())
			}
		}
	}
}

// connecting reports whether m is still within its first connection: not
// up yet, and registered less than three probe rounds ago.
func (r *Registry) connecting(m *member) bool {
	return !m.everUp.Load() && time.Since(m.created) < 3*r.opts.ProbeInterval+r.opts.ProbeTimeout
}
