package clusters

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// DeniedKinds are never discovered for mirroring: copies of them are
// meaningless (Pods, Events, Endpoints, Leases, controller bookkeeping),
// harmful (PersistentVolumeClaims claim storage), or hand out privileges
// (Roles, RoleBindings, ServiceAccounts) to whoever can annotate a source.
var DeniedKinds = []schema.GroupKind{
	{Kind: "Pod"}, {Kind: "Event"}, {Group: "events.k8s.io", Kind: "Event"},
	{Kind: "Endpoints"}, {Group: "discovery.k8s.io", Kind: "EndpointSlice"},
	{Group: "coordination.k8s.io", Kind: "Lease"},
	{Group: "apps", Kind: "ControllerRevision"}, {Group: "apps", Kind: "ReplicaSet"},
	{Kind: "PodTemplate"}, {Kind: "PersistentVolumeClaim"},
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}, {Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
	{Kind: "ServiceAccount"},
	// Copies of our own policies would grant copying rights in the
	// namespaces they land in (desired.Refusal says so to any who try).
	{Group: "fleetmirror.io", Kind: "MirrorPolicy"},
}

// PrivilegeKinds can only be mirrored with an explicit, dangerous opt-in.
var PrivilegeKinds = []schema.GroupKind{
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}, {Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
	{Kind: "ServiceAccount"},
}

// requiredVerbs are what mirroring a kind needs.
var requiredVerbs = sets.New("get", "list", "watch", "create", "update", "patch", "delete")

// KindOptions say which kinds are watched, in every cluster alike.
type KindOptions struct {
	// Explicit kinds to mirror; empty means discover them.
	Explicit []schema.GroupVersionKind
	// Deny lists kinds never discovered.
	Deny []schema.GroupKind
	// Lazy watches a kind only while a source, one of our mirrors or a pull
	// mirror of it exists somewhere, noticed by idle label-selected
	// watches (presence.go).
	Lazy bool
	// ProbeInterval is how often the watched kinds are reviewed: idle ones
	// stopped, failed ones asked again. New sources are noticed at once.
	ProbeInterval time.Duration
	// DiscoveryInterval is how often kinds are discovered again.
	DiscoveryInterval time.Duration
	// IdleTimeout is how long a lazily watched kind stays watched after its
	// last source and mirror are gone.
	IdleTimeout time.Duration
	// ManagedBy selects our mirrors in probes.
	ManagedBy string
	// Synced is called once the watches of a kind newly watched in a
	// cluster have synced.
	Synced func(c *Cluster, gvk schema.GroupVersionKind)
	// MemberKinds, with Lazy, reads each cluster's member kinds object
	// (kindshint.go) and keeps no presence for the kinds it rules out.
	MemberKinds bool
	// InvalidKindsObject, when set, is told of each invalid kinds object.
	InvalidKindsObject func(c *Cluster, obj *unstructured.Unstructured, err error)
	// Policies watches each cluster's MirrorPolicies where the cluster
	// serves them (WatchPolicies, asked again every pass; after a refusal,
	// at the next discovery), and counts a kind a policy names as used.
	Policies bool
	// ReceiveOnly, when set, says which clusters only receive: there every
	// kind is ruled out as a member's kinds object rules it out (no
	// presence, our mirrors only, no MirrorPolicies), whatever the mode,
	// except where sources or pull mirrors are cached or referred to.
	ReceiveOnly func(c *Cluster) bool
}

// Kinds starts and stops the kind watches of a set of clusters. A kind is
// needed fleet-wide: when any cluster has a source or a mirror of it, it is
// watched in every cluster (the hub needs mirror caches wherever sources
// may reach).
type Kinds struct {
	opts KindOptions

	mu           sync.Mutex
	discovered   map[string][]schema.GroupVersionKind // per cluster
	discoveredAt map[string]time.Time
	idleSince    map[schema.GroupVersionKind]time.Time
	needed       map[schema.GroupVersionKind]bool
	unlistable   map[string]bool // cluster/gvk whose probe was forbidden, logged
	// settled holds, per cluster name, the cluster the last pass looked at
	// whole (see Settled); looked, those it looked at, whole or not.
	settled, looked map[string]*Cluster

	trigger chan struct{}
}

// Trigger asks for a pass now, e.g. because a cluster joined.
func (k *Kinds) Trigger() {
	select {
	case k.trigger <- struct{}{}:
	default:
	}
}

// NewKinds returns a Kinds; Run drives it.
func NewKinds(o KindOptions) *Kinds {
	return &Kinds{opts: o, discovered: map[string][]schema.GroupVersionKind{}, discoveredAt: map[string]time.Time{},
		idleSince: map[schema.GroupVersionKind]time.Time{}, needed: map[schema.GroupVersionKind]bool{}, unlistable: map[string]bool{},
		settled: map[string]*Cluster{}, looked: map[string]*Cluster{}, trigger: make(chan struct{}, 1)}
}

// Run adjusts the watches of the clusters listed by clusters every
// ProbeInterval until ctx ends.
func (k *Kinds) Run(ctx context.Context, clusters func() []*Cluster) {
	t := time.NewTicker(k.opts.ProbeInterval)
	defer t.Stop()
	for {
		k.Step(ctx, clusters())
		select {
		case <-ctx.Done():
			for _, c := range clusters() {
				metrics.WatchedKinds.DeletePartialMatch(prometheus.Labels{"cluster": c.Name()})
			}
			return
		case <-t.C:
		case <-k.trigger:
		}
	}
}

// passParallelism is how many clusters a pass looks at at once. A look may
// ask the cluster's API server (discovery, the REST mapping of a kind
// watched for the first time there, the member agent's kinds object): one
// cluster after the other, a hub replica that took over the 355 clusters
// of a killed one spent 18 s on those round trips to a loaded kcp before
// the last of them was watched.
const passParallelism = 16

// eachCluster calls fn for every cluster of cs, passParallelism at once,
// and returns when all calls have. (errgroup bounds the goroutines; fn
// reports nothing, each look being on its own.)
func eachCluster(cs []*Cluster, fn func(c *Cluster)) {
	var g errgroup.Group
	g.SetLimit(passParallelism)
	for _, c := range cs {
		g.Go(func() error { fn(c); return nil })
	}
	_ = g.Wait()
}

// Step makes one pass: discover, probe, watch what is needed and unwatch
// what is not.
func (k *Kinds) Step(ctx context.Context, cs []*Cluster) {
	log := logf.FromContext(ctx)
	candidates := map[*Cluster][]schema.GroupVersionKind{}
	all := sets.New[schema.GroupVersionKind]()
	// Clusters that failed a probe in this pass are not asked again in it:
	// a hung cluster would otherwise hold the pass one deadline per kind.
	// Neither they nor those whose discovery or watches failed (incomplete)
	// are settled.
	failed, incomplete := map[*Cluster]bool{}, map[*Cluster]bool{}
	var mu sync.Mutex // guards candidates, all and incomplete while clusters are looked at in parallel
	eachCluster(cs, func(c *Cluster) {
		kinds, err := k.candidates(ctx, c)
		if err != nil {
			log.V(1).Info("Discovery failed", "cluster", c.Name(), "error", err.Error())
			kinds = c.Watched() // keep what runs; an unreachable cluster changes nothing
		}
		mu.Lock()
		if err != nil {
			incomplete[c] = true
		}
		candidates[c] = kinds
		all.Insert(kinds...)
		mu.Unlock()
		// After discovery, which may have reset a refusal; before usage,
		// which counts the kinds the cached policies name.
		if k.opts.Policies {
			k.watchPolicies(ctx, c)
		}
	})
	for gvk := range all {
		needed, unknown := true, false
		if k.opts.Lazy {
			needed, unknown = k.usage(ctx, cs, gvk, failed)
		}
		k.mu.Lock()
		switch {
		case needed:
			delete(k.idleSince, gvk)
		case unknown:
			// Some cluster could not say: keep the kind as it is, watched
			// or not, everywhere. A fault never widens or narrows what is
			// watched, and the idle clock waits for an answer.
			needed = k.needed[gvk]
		case k.needed[gvk]:
			since, ok := k.idleSince[gvk]
			if !ok {
				since = time.Now()
				k.idleSince[gvk] = since
			}
			needed = time.Since(since) < k.opts.IdleTimeout
		}
		k.needed[gvk] = needed
		k.mu.Unlock()
	}
	refs := &referencedClusters{cs: cs}
	eachCluster(cs, func(c *Cluster) {
		for _, gvk := range c.Watched() {
			k.mu.Lock()
			keep := k.needed[gvk] && slices.Contains(candidates[c], gvk)
			k.mu.Unlock()
			if !keep {
				log.Info("Stopping watches of kind", "cluster", c.Name(), "gvk", gvk.String())
				c.Unwatch(gvk)
				metrics.WatchedKinds.DeleteLabelValues(c.Name(), metrics.KindLabel(gvk))
			}
		}
		for _, gvk := range candidates[c] {
			k.mu.Lock()
			need := k.needed[gvk]
			k.mu.Unlock()
			if !need {
				continue
			}
			if err := k.watch(ctx, c, gvk, refs); err != nil {
				log.Info("Cannot watch kind", "cluster", c.Name(), "gvk", gvk.String(), "error", err.Error())
				if !meta.IsNoMatchError(err) { // a kind c does not serve has nothing there
					mu.Lock()
					incomplete[c] = true
					mu.Unlock()
				}
			}
		}
	})
	k.mu.Lock()
	for gvk := range k.needed {
		if !all.Has(gvk) {
			delete(k.needed, gvk)
			delete(k.idleSince, gvk)
		}
	}
	clear(k.settled)
	clear(k.looked) // a cluster gone is not kept alive here
	for _, c := range cs {
		k.looked[c.Name()] = c
		if !failed[c] && !incomplete[c] && c.Unreachable() == nil {
			k.settled[c.Name()] = c
		}
	}
	k.mu.Unlock()
}

// watch makes sure gvk is watched in c, whole or for our mirrors only
// (WatchMirrors): for our mirrors only where c's member agent rules out
// sources and pull mirrors of the kind and no mirror or pull mirror
// anywhere refers to a source in c (refs), else whole. A kind newly
// watched, or widened, is announced once synced.
func (k *Kinds) watch(ctx context.Context, c *Cluster, gvk schema.GroupVersionKind, refs *referencedClusters) error {
	log := logf.FromContext(ctx).WithValues("cluster", c.Name(), "gvk", gvk.String())
	w := c.kind(gvk)
	watched, narrow := w != nil, w != nil && w.mirrorsOnly()
	if (k.narrows() || k.receiveOnly(c)) && k.rulesOut(ctx, c, gvk) && !refs.has(gvk, c.Name()) && !c.PolicyKinds().Has(gvk) {
		mirrorsOnly, err := c.WatchMirrors(gvk)
		if err != nil {
			return err
		}
		if watched {
			// Narrowing announces nothing: the caches lost nothing but
			// empty ones.
			if mirrorsOnly && !narrow {
				log.Info("Watching kind for our mirrors only: " + k.whyMirrorsOnly(c))
			}
			return nil
		}
		log.Info("Watching kind", "mirrorsOnly", mirrorsOnly)
	} else {
		if watched && !narrow {
			return nil
		}
		if err := c.Watch(gvk); err != nil {
			return err
		}
		log.Info("Watching kind", "widened", watched)
	}
	metrics.WatchedKinds.WithLabelValues(c.Name(), metrics.KindLabel(gvk)).Set(1)
	go k.announce(ctx, c, gvk)
	return nil
}

// watchPolicies watches c's MirrorPolicies unless c's member agent says,
// in a kinds object the hub trusts, that there are none; a watch that
// holds some is kept whatever the object says, as kinds with sources are.
func (k *Kinds) watchPolicies(ctx context.Context, c *Cluster) {
	if k.rulesOut(ctx, c, PolicyGVK) && len(c.Policies()) == 0 {
		c.UnwatchPolicies()
		return
	}
	switch _, err := c.WatchPolicies(ctx); {
	case apierrors.IsForbidden(err):
		k.notListable(ctx, c, PolicyGVK, err)
	case err != nil:
		logf.FromContext(ctx).V(1).Info("Cannot watch MirrorPolicies", "cluster", c.Name(), "error", err.Error())
	}
}

// narrows reports whether kinds are ever watched for our mirrors only: in
// discovery mode with lazy watches and member kinds objects. With explicit
// kinds the operator chose what to watch, and the kinds objects are read
// only for kinds not watched at all: a cluster without a member agent
// would pay a watch of its kinds objects for nothing.
func (k *Kinds) narrows() bool {
	return k.opts.Lazy && k.opts.MemberKinds && len(k.opts.Explicit) == 0
}

// referencedClusters answers, for one pass, which clusters hold sources of
// a kind that a mirror or pull mirror somewhere refers to: the hub keeps
// watching such sources whatever a member agent says. Built per kind on
// first use, from the caches.
type referencedClusters struct {
	cs    []*Cluster
	mu    sync.Mutex // the pass asks from several clusters at once
	kinds map[schema.GroupVersionKind]sets.Set[string]
}

// has reports whether a mirror or pull mirror of gvk in any cluster refers
// to a source in the cluster named cluster.
func (r *referencedClusters) has(gvk schema.GroupVersionKind, cluster string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds == nil {
		r.kinds = map[schema.GroupVersionKind]sets.Set[string]{}
	}
	refs, ok := r.kinds[gvk]
	if !ok {
		refs = sets.New[string]()
		for _, d := range r.cs {
			for _, ref := range d.sourceRefs(gvk) {
				if src, _, ok := strings.Cut(ref, "/"); ok {
					refs.Insert(src)
				}
			}
		}
		r.kinds[gvk] = refs
	}
	return refs.Has(cluster)
}

// Settled reports whether the last pass looked at c whole: its kinds were
// discovered, each was found used or unused there (none left unknown
// because c did not answer), and every kind needed is watched. Once c's
// watches have synced too (Cluster.HasSynced), its caches hold every
// source, mirror and pull mirror of ours in c.
func (k *Kinds) Settled(c *Cluster) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.settled[c.Name()] == c
}

// Looked reports whether the last pass looked at c (this connection to
// the cluster, not one before it), whole or not: the kinds it found needed
// there are watched.
func (k *Kinds) Looked(c *Cluster) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.looked[c.Name()] == c
}

// announce calls Synced once the kind's watches in c have synced.
func (k *Kinds) announce(ctx context.Context, c *Cluster, gvk schema.GroupVersionKind) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		synced, watched := c.KindSynced(gvk)
		if !watched {
			return
		}
		if synced {
			if k.opts.Synced != nil {
				k.opts.Synced(c, gvk)
			}
			if k.narrows() || k.opts.ReceiveOnly != nil {
				// Its mirrors may refer to sources in clusters whose
				// kind is watched for mirrors only: a pass widens those
				// now rather than at the next ProbeInterval.
				k.Trigger()
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// usage reports whether any cluster has a source, one of our mirrors or a
// pull mirror of gvk: from the caches where it is watched, else from its
// presence in the cluster (presence.go: LISTs once, then idle watches).
// unknown is true when no cluster had one but some could not answer
// (unreachable, failing, forbidden): the caller then decides nothing.
// Clusters whose probe fails are added to failed and skipped while in it.
func (k *Kinds) usage(ctx context.Context, cs []*Cluster, gvk schema.GroupVersionKind, failed map[*Cluster]bool) (used, unknown bool) {
	for _, c := range cs {
		if c.PolicyKinds().Has(gvk) {
			return true, false // named by a policy: its sources are not labelled
		}
		if failed[c] || c.Unreachable() != nil {
			unknown = true
			continue
		}
		if synced, watched := c.KindSynced(gvk); watched {
			switch {
			case !synced:
				unknown = true // its caches will say soon
			case len(c.Sources(gvk)) > 0 || len(c.AllMirrors(gvk)) > 0 || len(c.Pulls(gvk)) > 0:
				return true, false
			case c.MirrorsOnly(gvk) && !k.rulesOut(ctx, c, gvk):
				unknown = true // the kinds object no longer rules it out: the pass widens it
			}
			continue
		}
		if k.rulesOut(ctx, c, gvk) {
			continue // the member agent's kinds object says: none there
		}
		used, err := c.Presence(ctx, gvk, k.Trigger)
		switch {
		case used:
			return true, false
		case meta.IsNoMatchError(err):
			// c does not serve the kind (an explicit kind whose CRD is
			// not installed there): nothing of it can be there.
		case apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err):
			// The agent may not list this kind here (discovery offers it,
			// RBAC does not grant it): not used, as far as this agent can
			// know. The cluster answered, so it is no reason to stop
			// asking it about the other kinds.
			k.notListable(ctx, c, gvk, err)
		case err != nil:
			unknown, failed[c] = true, true
		}
	}
	return false, unknown
}

// notListable logs, once per cluster and kind, that the agent may not list
// gvk (a kind to mirror, or MirrorPolicies) in c.
func (k *Kinds) notListable(ctx context.Context, c *Cluster, gvk schema.GroupVersionKind, err error) {
	key := c.Name() + "/" + gvk.String()
	k.mu.Lock()
	seen := k.unlistable[key]
	k.unlistable[key] = true
	k.mu.Unlock()
	msg := "Kind not mirrored: the agent may not list it; grant it to mirror it"
	if gvk == PolicyGVK {
		msg = "MirrorPolicies not served: the agent may not list them; grant it (the charts' RBAC does) to serve them"
	}
	if !seen {
		logf.FromContext(ctx).Info(msg, "cluster", c.Name(), "gvk", gvk.String(), "error", err.Error())
	}
}

// candidates are the kinds that may be watched in c: the explicit ones, or
// those discovered. Every DiscoveryInterval the discovered kinds are
// discovered again (and their REST mappings forgotten), and either way the
// kinds found unlistable or not served are asked about again.
func (k *Kinds) candidates(ctx context.Context, c *Cluster) ([]schema.GroupVersionKind, error) {
	k.mu.Lock()
	kinds, fresh := k.discovered[c.Name()], time.Since(k.discoveredAt[c.Name()]) < k.opts.DiscoveryInterval
	k.mu.Unlock()
	if fresh {
		return kinds, nil
	}
	var err error
	if kinds = k.opts.Explicit; len(kinds) == 0 {
		if kinds, err = Discover(ctx, c.discovery, k.opts.Deny); err != nil {
			return nil, err
		}
		c.mapper.Reset() // CRDs may have come or gone
	} else {
		// The explicit kinds and MirrorPolicies not served at the last
		// look are asked about again: their CRD may have been installed
		// since (a member chart installed after the hub registered the
		// cluster). Those served keep their mappings.
		c.mapper.ForgetMissing()
	}
	// Kinds the agent may not list are asked about again: RBAC may have
	// changed.
	c.ResetPresence()
	k.mu.Lock()
	k.discovered[c.Name()], k.discoveredAt[c.Name()] = kinds, time.Now()
	k.mu.Unlock()
	return kinds, nil
}

// Discover lists the namespaced kinds (preferred versions) that support
// every verb mirroring needs, minus deny.
func Discover(ctx context.Context, d *Discovery, deny []schema.GroupKind) ([]schema.GroupVersionKind, error) {
	// Group versions that cannot be read (an aggregated API down) lose
	// only their kinds.
	lists, err := d.PreferredNamespacedResources(ctx)
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var out []schema.GroupVersionKind
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			gvk := gv.WithKind(r.Kind)
			if strings.Contains(r.Name, "/") || !sets.New(r.Verbs...).IsSuperset(requiredVerbs) || slices.Contains(deny, gvk.GroupKind()) {
				continue
			}
			out = append(out, gvk)
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}
