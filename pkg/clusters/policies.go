package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/policy"
)

// PolicyGVK is the kind of MirrorPolicies.
var PolicyGVK = v1alpha1.GroupVersion.WithKind("MirrorPolicy")

// PolicySources is what one MirrorPolicy has watched: the objects of one
// kind in the policy's namespace, by name or by label selector. Sources
// named by a policy carry none of our labels, so each policy has watches
// of its own, as narrow as it names them: one per name (a field selector
// on metadata.name), or one label-selected watch.
type PolicySources struct {
	GVK       schema.GroupVersionKind
	Namespace string
	// Names, or else Selector, select the sources.
	Names    []string
	Selector labels.Selector
	// Trigger, when not nil, is the policy's trigger: the objects whose
	// namespaces its copies go to.
	Trigger *PolicyTrigger
}

// PolicyTrigger is what a policy's trigger watches: the objects of one
// kind, in Namespaces (empty: every namespace), by name (empty: any), and
// by label (nil: any). Only their metadata is held.
type PolicyTrigger struct {
	GVK        schema.GroupVersionKind
	Namespaces []string
	Names      []string
	Selector   labels.Selector
}

// equal reports whether s and o watch the same objects.
func (s PolicySources) equal(o PolicySources) bool {
	return s.GVK == o.GVK && s.Namespace == o.Namespace && slices.Equal(s.Names, o.Names) &&
		sameSelector(s.Selector, o.Selector) && (s.Trigger == nil) == (o.Trigger == nil) &&
		(s.Trigger == nil || s.Trigger.GVK == o.Trigger.GVK && slices.Equal(s.Trigger.Namespaces, o.Trigger.Namespaces) &&
			slices.Equal(s.Trigger.Names, o.Trigger.Names) && sameSelector(s.Trigger.Selector, o.Trigger.Selector))
}

func sameSelector(a, b labels.Selector) bool {
	return (a == nil) == (b == nil) && (a == nil || a.String() == b.String())
}

// policyWatch is one policy's watches of its sources, and of its
// trigger's objects.
type policyWatch struct {
	spec     PolicySources
	watches  []*watch
	triggers []*watch
	stop     context.CancelFunc
	// epoch tells these watches from any other, in any cluster, that
	// held the same policy's sources before.
	epoch uint64
	// triggerChanges counts the changes, after the trigger's first lists,
	// of the namespaces that hold one of its objects: present, guarded by
	// presentMu. An event that leaves them as they were (an object
	// changed, a second one in a namespace that has one) changes nothing.
	triggerChanges atomic.Uint64
	presentMu      sync.Mutex
	present        sets.Set[string]
	// triggerErr says why the trigger's objects are not watched; built
	// is when these watches were made.
	triggerErr error
	built      time.Time
}

// triggerIn reports whether namespace holds an object of the trigger.
func (pw *policyWatch) triggerIn(namespace string) bool {
	for _, w := range pw.triggers {
		if objs, _ := w.GetIndexer().ByIndex(cache.NamespaceIndex, namespace); len(objs) > 0 {
			return true
		}
	}
	return false
}

// triggerEvent notes an event of the trigger's objects in namespace and
// reports whether it changed which namespaces hold one. The stores have
// the event already. The stores are read under the lock: each event's
// look then comes after every store change whose look came before it, so
// that the last look of a namespace sees its last change, whichever
// watch brought it.
func (pw *policyWatch) triggerEvent(namespace string) bool {
	pw.presentMu.Lock()
	defer pw.presentMu.Unlock()
	in := pw.triggerIn(namespace)
	if pw.present.Has(namespace) == in {
		return false
	}
	if in {
		pw.present.Insert(namespace)
	} else {
		pw.present.Delete(namespace)
	}
	return true
}

// triggerListed adds the namespaces of a trigger watch's first list to
// those that hold one.
func (pw *policyWatch) triggerListed(w *watch) {
	pw.presentMu.Lock()
	defer pw.presentMu.Unlock()
	for _, ns := range w.GetIndexer().ListIndexFuncValues(cache.NamespaceIndex) {
		pw.present.Insert(ns)
	}
}

// policyEpochs numbers the policyWatches of the process.
var policyEpochs atomic.Uint64

// WatchPolicies starts the watch of the cluster's MirrorPolicies, in every
// namespace, unless it runs; their events go to Handler.Policy. It returns
// once the policies are cached, so that the kinds pass that calls it knows
// which kinds they name. It reports false when the cluster does not serve
// MirrorPolicies (the CRD is not installed: no error) or the agent may not
// list them (the refusal, remembered until ResetPresence, so that the
// cluster is not asked every pass): a cluster without the feature pays
// nothing for it. It is cheap to call again.
func (c *Cluster) WatchPolicies(ctx context.Context) (bool, error) {
	c.mu.Lock()
	running, refused := c.policies != nil, c.policiesRefused
	c.mu.Unlock()
	switch {
	case running:
		return true, nil
	case refused != nil:
		return false, refused
	}
	mapping, err := c.namespacedMapping(PolicyGVK)
	if err != nil {
		return false, nil //nolint:nilerr // not served: no policies here
	}
	w := c.watch(mapping.Resource, labels.Everything(), cache.Indexers{indexPolicySources: indexByPolicySources}, toPolicy)
	// The first request for a CRD's objects creates the API server's
	// cache of them: a paged list is served meanwhile, an unpaged one
	// waits a second (see paged).
	w.paged = true
	// The watch's first list is made here, not by its loop: a watch the
	// agent may not open would retry forever, and an agent installed
	// without the permission goes without policies, as the log says.
	if err := w.listFirst(ctx); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			c.mu.Lock()
			c.policiesRefused = err
			c.mu.Unlock()
		}
		return false, err
	}
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return false, fmt.Errorf("cluster %s: closed", c.opts.Name)
	case c.policies != nil:
		c.mu.Unlock()
		return true, nil // another caller won the race
	}
	c.policies = w
	if c.ctx != nil {
		c.runPoliciesLocked()
	}
	c.mu.Unlock()
	// The handler is set once the watch is the cluster's: it is called at
	// once with each listed policy, whose reconcile reads the policy from
	// the cluster (Policy). Set before, a reconcile that ran at once found
	// no policy, took it for deleted, and nothing woke it again: a policy
	// created just before the watch was never served.
	w.setHandler(func(obj any, deleted bool) {
		if p, ok := obj.(*v1alpha1.MirrorPolicy); ok {
			c.opts.Handler.Policy(c.opts.Name, p, deleted)
		}
	})
	return true, nil
}

// UnwatchPolicies stops the watch of the cluster's MirrorPolicies, and
// those of their sources.
func (c *Cluster) UnwatchPolicies() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.policies == nil {
		return
	}
	c.closePoliciesLocked()
}

// toPolicy keeps MirrorPolicies as typed objects in the cache.
func toPolicy(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // a tombstone, or already converted
	}
	p := &v1alpha1.MirrorPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
		return nil, fmt.Errorf("MirrorPolicy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	p.ManagedFields = nil
	return p, nil
}

// Policy returns the cached MirrorPolicy namespace/name. Shared with the
// cache: never modify it.
func (c *Cluster) Policy(namespace, name string) (*v1alpha1.MirrorPolicy, bool) {
	c.mu.Lock()
	w := c.policies
	c.mu.Unlock()
	if w == nil {
		return nil, false
	}
	return get[*v1alpha1.MirrorPolicy](w.GetStore(), namespace+"/"+name)
}

// Policies returns every cached MirrorPolicy. Shared with the cache.
func (c *Cluster) Policies() []*v1alpha1.MirrorPolicy {
	c.mu.Lock()
	w := c.policies
	c.mu.Unlock()
	if w == nil {
		return nil
	}
	return typed[*v1alpha1.MirrorPolicy](w.GetStore().List())
}

// indexPolicySources indexes the cached MirrorPolicies by what their
// sources are: "NAMESPACE/GROUP/VERSION/KIND" (policySourcesKey), none
// for a spec that does not say. Each spec is read once per change, not
// at every question about the kinds or a namespace's policies.
const indexPolicySources = "fleetmirror.io/policy-sources"

func policySourcesKey(namespace string, gvk schema.GroupVersionKind) string {
	return namespace + "/" + gvk.Group + "/" + gvk.Version + "/" + gvk.Kind
}

func indexByPolicySources(obj any) ([]string, error) {
	p, ok := obj.(*v1alpha1.MirrorPolicy)
	if !ok {
		return nil, nil
	}
	gvk, _, err := policy.Source(&p.Spec)
	if err != nil {
		return nil, nil //nolint:nilerr // an invalid spec names no sources
	}
	return []string{policySourcesKey(p.Namespace, gvk)}, nil
}

// PoliciesOf returns the cached MirrorPolicies whose sources are objects
// of kind gvk in namespace. Shared with the cache.
func (c *Cluster) PoliciesOf(namespace string, gvk schema.GroupVersionKind) []*v1alpha1.MirrorPolicy {
	c.mu.Lock()
	w := c.policies
	c.mu.Unlock()
	if w == nil {
		return nil
	}
	objs, _ := w.GetIndexer().ByIndex(indexPolicySources, policySourcesKey(namespace, gvk))
	return typed[*v1alpha1.MirrorPolicy](objs)
}

// WatchPolicySources makes the sources of the policy id (its
// namespace/name) those of spec: it starts their watches, or replaces
// watches of other objects. The sources' events go to Handler.Source as
// those of labelled sources do. It returns the sources the replaced
// watches held, which may no longer be named.
func (c *Cluster) WatchPolicySources(ctx context.Context, id string, spec PolicySources) ([]*unstructured.Unstructured, error) {
	c.mu.Lock()
	old := c.selected[id]
	c.mu.Unlock()
	if old != nil && old.spec.equal(spec) {
		if old.triggerErr == nil || time.Since(old.built) < TriggerRetry {
			return nil, old.triggerErr
		}
		// The trigger was refused a while ago: all is watched afresh,
		// in case its kind was installed or granted meanwhile.
	}
	mapping, err := c.namespacedMapping(spec.GVK)
	if err != nil {
		return nil, err
	}
	pw := &policyWatch{spec: spec, epoch: policyEpochs.Add(1), present: sets.New[string](), built: time.Now()}
	events := metrics.WatchEvents.WithLabelValues(metrics.KindLabel(spec.GVK), c.opts.Name, "policy-sources")
	// The policy waits for its watches to sync before it looks at its
	// sources; the last one to sync wakes it.
	wake := func() {
		if !pw.synced() {
			return
		}
		if p, ok := c.Policy(SplitPolicyID(id)); ok {
			c.opts.Handler.Policy(c.opts.Name, p, false)
		}
	}
	add := func(sel labels.Selector, fsel fields.Selector) {
		src := c.watchSourceIn(mapping.Resource, spec.Namespace, sel, fsel, false)
		w := c.followHealth(newWatch(src, mapping.Resource.String()+" "+spec.Namespace+" "+sel.String()+" "+fsel.String(), c.opts.Resync, nil, stripMetadata))
		// The objects of the first list are not handed on one by one: the
		// policy, woken once every watch has synced, looks at all it holds
		// then (after a restart, each source would otherwise be reconciled
		// twice). Changes after that list are.
		var listed atomic.Bool
		w.store.onSynced = func() {
			listed.Store(true)
			wake()
		}
		w.setHandler(func(obj any, deleted bool) {
			events.Inc()
			if u, ok := obj.(*unstructured.Unstructured); ok && listed.Load() {
				c.opts.Handler.Source(c.opts.Name, spec.GVK, u, deleted)
			}
		})
		pw.watches = append(pw.watches, w)
	}
	if spec.Selector != nil {
		add(spec.Selector, fields.Everything())
	}
	for _, name := range spec.Names {
		add(labels.Everything(), fields.OneTermEqualSelector("metadata.name", name))
	}
	if spec.Trigger != nil {
		if err := c.watchTrigger(ctx, pw, spec.Trigger, wake); err != nil {
			// The sources are watched all the same, so that nothing
			// else waits for this policy; its own sources wait for the
			// trigger (PolicyTriggers), their copies untouched.
			pw.triggers, pw.triggerErr = nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("cluster %s: closed", c.opts.Name)
	}
	var held []*unstructured.Unstructured
	if old := c.selected[id]; old != nil {
		held = old.sources()
		old.stopWatches()
	}
	c.selected[id] = pw
	if c.ctx != nil {
		pw.run(c.ctx)
	}
	return held, pw.triggerErr
}

// TriggerRetry is how long a policy whose trigger was refused goes
// before WatchPolicySources tries its trigger again; until then it
// returns the refusal.
const TriggerRetry = 30 * time.Second

// ErrTriggerRefused says that the objects of a policy's trigger cannot be watched
// (their kind is not served, or the agent may not list it).
var ErrTriggerRefused = errors.New("spec.trigger")

// watchTrigger adds to pw the watches of the trigger t's objects; wake is
// the policy's.
func (c *Cluster) watchTrigger(ctx context.Context, pw *policyWatch, t *PolicyTrigger, wake func()) error {
	tm, err := c.namespacedMapping(t.GVK)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTriggerRefused, err)
	}
	tevents := metrics.WatchEvents.WithLabelValues(metrics.KindLabel(t.GVK), c.opts.Name, "policy-trigger")
	sel := t.Selector
	if sel == nil {
		sel = labels.Everything()
	}
	// A trigger's objects count by where they are, never by what
	// they hold: only their metadata is watched, as narrowly as the
	// trigger and the policy's namespaces allow.
	addTrigger := func(ns string, fsel fields.Selector) {
		src := c.watchSourceIn(tm.Resource, ns, sel, fsel, true)
		w := c.followHealth(newWatch(src, tm.Resource.String()+" trigger "+ns+" "+sel.String()+" "+fsel.String(), c.opts.Resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, stripMetadata))
		var listed atomic.Bool
		w.store.onSynced = func() {
			pw.triggerListed(w)
			listed.Store(true)
			wake()
		}
		w.setHandler(func(obj any, _ bool) {
			tevents.Inc()
			m, err := meta.Accessor(obj)
			if err != nil || !listed.Load() || !pw.triggerEvent(m.GetNamespace()) {
				return
			}
			pw.triggerChanges.Add(1)
			wake()
		})
		pw.triggers = append(pw.triggers, w)
	}
	nss := t.Namespaces
	if len(nss) == 0 {
		nss = []string{metav1.NamespaceAll}
	}
	for _, ns := range nss {
		if len(t.Names) == 0 {
			addTrigger(ns, fields.Everything())
		}
		for _, name := range t.Names {
			addTrigger(ns, fields.OneTermEqualSelector("metadata.name", name))
		}
	}
	// The trigger's first lists are made here, as WatchPolicies
	// makes its own: a kind the agent may not list would leave the
	// policy waiting for them without a word; refused, the policy's
	// status says why. Any other failure is retried by the watch.
	for _, w := range pw.triggers {
		if err := w.listFirst(ctx); apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			return fmt.Errorf("%w: the agent cannot list %s: %w", ErrTriggerRefused, tm.Resource.Resource, err)
		}
	}
	return nil
}

// UnwatchPolicySources stops the watches of the policy id and returns the
// sources they held.
func (c *Cluster) UnwatchPolicySources(id string) []*unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	pw, ok := c.selected[id]
	if !ok {
		return nil
	}
	delete(c.selected, id)
	pw.stopWatches()
	return pw.sources()
}

// PolicySourcesOf returns the sources the policy id holds now, whether
// their watches have synced, and the epoch of those watches: it changes
// whenever they are started again (a new spec, a new connection to the
// cluster), and their first list is then handed on by nobody but the
// policy's reconcile (WatchPolicySources). Shared with the cache.
func (c *Cluster) PolicySourcesOf(id string) (sources []*unstructured.Unstructured, synced bool, epoch uint64) {
	c.mu.Lock()
	pw := c.selected[id]
	c.mu.Unlock()
	if pw == nil {
		return nil, false, 0
	}
	return pw.sources(), pw.synced(), pw.epoch
}

// PolicyTriggers returns the namespaces that hold an object of the
// trigger of the policy id, whether every watch of the policy has synced
// (ok is false until then, and when the policy has no trigger), and how
// many trigger events came after their first lists.
func (c *Cluster) PolicyTriggers(id string) (namespaces sets.Set[string], ok bool, changes uint64) {
	c.mu.Lock()
	pw := c.selected[id]
	c.mu.Unlock()
	if pw == nil || pw.spec.Trigger == nil || pw.triggerErr != nil || !pw.synced() {
		return nil, false, 0
	}
	namespaces = sets.New[string]()
	for _, w := range pw.triggers {
		namespaces.Insert(w.GetIndexer().ListIndexFuncValues(cache.NamespaceIndex)...)
	}
	return namespaces, true, pw.triggerChanges.Load()
}

// PoliciesNaming returns the ids of the policies whose watches hold the
// object namespace/name of kind gvk, sorted.
func (c *Cluster) PoliciesNaming(gvk schema.GroupVersionKind, namespace, name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for id, pw := range c.selected {
		if pw.spec.GVK == gvk && pw.spec.Namespace == namespace {
			if _, ok := pw.get(name); ok {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// PolicyKinds returns the kinds that policies name: those whose sources
// are watched, and those the cached policies ask for, which a kinds pass
// may know before any policy has been reconciled (after a restart).
func (c *Cluster) PolicyKinds() sets.Set[schema.GroupVersionKind] {
	kinds := sets.New[schema.GroupVersionKind]()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.policies != nil {
		for _, key := range c.policies.GetIndexer().ListIndexFuncValues(indexPolicySources) {
			if parts := strings.SplitN(key, "/", 4); len(parts) == 4 {
				kinds.Insert(schema.GroupVersionKind{Group: parts[1], Version: parts[2], Kind: parts[3]})
			}
		}
	}
	for _, pw := range c.selected {
		kinds.Insert(pw.spec.GVK)
	}
	return kinds
}

// policySource returns the object namespace/name of kind gvk that some
// policy's watch holds.
func (c *Cluster) policySource(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pw := range c.selected {
		if pw.spec.GVK == gvk && pw.spec.Namespace == namespace {
			if u, ok := pw.get(name); ok {
				return u, true
			}
		}
	}
	return nil, false
}

// policySources returns every object of kind gvk that a policy's watch
// holds, once each.
func (c *Cluster) policySources(gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*unstructured.Unstructured
	seen := sets.New[string]()
	for _, pw := range c.selected {
		if pw.spec.GVK != gvk {
			continue
		}
		for _, u := range pw.sources() {
			if k := u.GetNamespace() + "/" + u.GetName(); !seen.Has(k) {
				seen.Insert(k)
				out = append(out, u)
			}
		}
	}
	return out
}

// closePoliciesLocked stops every policy watch; c.mu must be held.
func (c *Cluster) closePoliciesLocked() {
	for id, pw := range c.selected {
		pw.stopWatches()
		delete(c.selected, id)
	}
	if c.stopPolicies != nil {
		c.stopPolicies()
		c.stopPolicies = nil
	}
	c.policies = nil
}

// runPoliciesLocked starts the policies' watch under a context of its own,
// a child of the cluster's; c.mu must be held.
func (c *Cluster) runPoliciesLocked() {
	var ctx context.Context
	ctx, c.stopPolicies = context.WithCancel(c.ctx)
	c.policies.run(ctx)
}

func (pw *policyWatch) run(ctx context.Context) {
	ctx, pw.stop = context.WithCancel(ctx)
	for _, w := range pw.watches {
		w.run(ctx)
	}
	for _, w := range pw.triggers {
		w.run(ctx)
	}
}

func (pw *policyWatch) stopWatches() {
	if pw.stop != nil {
		pw.stop()
	}
}

func (pw *policyWatch) get(name string) (*unstructured.Unstructured, bool) {
	for _, w := range pw.watches {
		if u, ok := get[*unstructured.Unstructured](w.GetStore(), pw.spec.Namespace+"/"+name); ok {
			return u, true
		}
	}
	return nil, false
}

func (pw *policyWatch) sources() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, w := range pw.watches {
		out = append(out, typed[*unstructured.Unstructured](w.GetStore().List())...)
	}
	return out
}

func (pw *policyWatch) synced() bool {
	for _, w := range pw.watches {
		if !w.HasSynced() {
			return false
		}
	}
	for _, w := range pw.triggers {
		if !w.HasSynced() {
			return false
		}
	}
	return true
}

// PolicyID is the id of the policy namespace/name.
func PolicyID(namespace, name string) string { return namespace + "/" + name }

// SplitPolicyID splits a PolicyID.
func SplitPolicyID(id string) (namespace, name string) {
	namespace, name, _ = strings.Cut(id, "/")
	return namespace, name
}
