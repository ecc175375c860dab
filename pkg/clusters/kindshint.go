package clusters

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// The member's kinds object: a ConfigMap the member agent keeps in its own
// namespace, naming the kinds it covers and those that hold sources or
// pull mirrors in its cluster. The hub watches only that object in a
// member cluster and keeps presence watches (presence.go) only for the
// kinds it does not rule out: an idle cluster then costs one watch instead
// of two per kind. A member is less trusted than the hub: the object only
// ever rules kinds out while it is valid, unique and renewed; otherwise
// the hub watches every kind as it does without a member agent.
const (
	// MemberKindsName names the member's kinds object.
	MemberKindsName = "fleetmirror-member-kinds"
	// LabelMemberKinds marks it; the hub's watch selects on it.
	LabelMemberKinds = annotations.Prefix + "member-kinds"
	// Keys of its data: newline-separated Kind.version[.group] entries,
	// and the RFC 3339 time the member last wrote it.
	MemberKindsCovered   = "covered"
	MemberKindsUsed      = "used"
	MemberKindsRenewedAt = "renewedAt"

	// MemberKindsRenewal is how often the member rewrites its object
	// although nothing changed, to show that it is alive.
	MemberKindsRenewal = time.Minute
	// MemberKindsStale is how long the hub trusts an object not renewed:
	// a member that died without deleting it (crash, lost node) is no
	// longer believed after this.
	MemberKindsStale = 3 * time.Minute

	// Bounds of what the hub reads.
	maxKindsObjectBytes   = 64 << 10
	maxKindsObjectEntries = 2000
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// KindsHint is what a valid kinds object says.
type KindsHint struct {
	// Covered are the kinds the member knows about: for those of them not
	// in Used there is neither a source nor a pull mirror in its cluster.
	Covered sets.Set[schema.GroupVersionKind]
	// Used are the covered kinds that have sources or pull mirrors (or
	// had them moments ago).
	Used sets.Set[schema.GroupVersionKind]
	// RenewedAt is when the member wrote the object.
	RenewedAt time.Time
}

// RulesOut reports whether the hint says that gvk has no source and no
// pull mirror in the cluster.
func (h *KindsHint) RulesOut(gvk schema.GroupVersionKind) bool {
	return h.Covered.Has(gvk) && !h.Used.Has(gvk)
}

// kindName is a Kind as the API server accepts it in a CRD: an upper-case
// letter first, letters and digits after, at most 63.
var kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

// ParseKind reads a strict Kind.version[.group] entry.
func ParseKind(s string) (schema.GroupVersionKind, error) {
	kind, rest, ok := strings.Cut(s, ".")
	if !ok || !kindName.MatchString(kind) {
		return schema.GroupVersionKind{}, fmt.Errorf("%q is not Kind.version[.group]", s)
	}
	version, group, _ := strings.Cut(rest, ".")
	if errs := validation.IsDNS1035Label(version); len(errs) > 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("%q: bad version: %s", s, strings.Join(errs, "; "))
	}
	if _, dotted := strings.CutSuffix(rest, "."); group == "" && dotted {
		return schema.GroupVersionKind{}, fmt.Errorf("%q: empty group", s)
	}
	if group != "" {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return schema.GroupVersionKind{}, fmt.Errorf("%q: bad group: %s", s, strings.Join(errs, "; "))
		}
	}
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, nil
}

// FormatKind writes gvk as ParseKind reads it.
func FormatKind(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind + "." + gvk.Version
	}
	return gvk.Kind + "." + gvk.Version + "." + gvk.Group
}

// ParseKindsHint validates the data of a kinds object: at most 64 KiB and
// 2,000 entries, only the known keys, every entry Kind.version[.group],
// the used kinds among the covered ones, and a renewal time.
func ParseKindsHint(data map[string]string) (*KindsHint, error) {
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > maxKindsObjectBytes {
		return nil, fmt.Errorf("%d bytes of data, more than %d", size, maxKindsObjectBytes)
	}
	for k := range data {
		if k != MemberKindsCovered && k != MemberKindsUsed && k != MemberKindsRenewedAt {
			return nil, fmt.Errorf("unknown key %q", k)
		}
	}
	at, err := time.Parse(time.RFC3339, data[MemberKindsRenewedAt])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", MemberKindsRenewedAt, err)
	}
	h := &KindsHint{RenewedAt: at}
	entries := 0
	for _, key := range []string{MemberKindsCovered, MemberKindsUsed} {
		set := sets.New[schema.GroupVersionKind]()
		for line := range strings.SplitSeq(data[key], "\n") {
			if line == "" {
				continue
			}
			if entries++; entries > maxKindsObjectEntries {
				return nil, fmt.Errorf("more than %d entries", maxKindsObjectEntries)
			}
			gvk, err := ParseKind(line)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			set.Insert(gvk)
		}
		if key == MemberKindsCovered {
			h.Covered = set
		} else {
			h.Used = set
		}
	}
	if extra := h.Used.Difference(h.Covered); extra.Len() > 0 {
		return nil, fmt.Errorf("%s names %s, which %s does not", MemberKindsUsed, FormatKind(extra.UnsortedList()[0]), MemberKindsCovered)
	}
	return h, nil
}

// FormatKindsHint returns the data of a kinds object, sorted so that an
// unchanged state writes the same bytes.
func FormatKindsHint(covered, used []schema.GroupVersionKind, at time.Time) map[string]string {
	list := func(kinds []schema.GroupVersionKind) string {
		out := make([]string, len(kinds))
		for i, k := range kinds {
			out[i] = FormatKind(k)
		}
		slices.Sort(out)
		return strings.Join(slices.Compact(out), "\n")
	}
	return map[string]string{MemberKindsCovered: list(covered), MemberKindsUsed: list(used), MemberKindsRenewedAt: at.UTC().Format(time.RFC3339)}
}

// kindsHintWatch follows the kinds objects of one cluster: one LIST, then
// one label-selected watch, read by one goroutine.
type kindsHintWatch struct {
	cancel context.CancelFunc

	mu   sync.Mutex
	objs map[string]*unstructured.Unstructured // by namespace/name
	hint *KindsHint                            // nil: none to trust
	why  string                                // why hint is nil
	// failedAt is when the LIST or watch was refused (RBAC): asked again
	// after hintRetry.
	failedAt time.Time
	// reported is the resourceVersion of the invalid object last reported.
	reported string
}

// hintRetry is how long a cluster that refused the kinds objects is not
// asked again.
const hintRetry = 5 * time.Minute

// memberKinds returns what c's member agent says about its kinds, or nil
// when there is nothing to trust: no object, several, an invalid one, one
// not renewed for MemberKindsStale, or the objects cannot be read. The
// first call LISTs; then a watch follows the objects and notify is called
// on every change. invalid is called once per invalid object seen.
func (c *Cluster) memberKinds(ctx context.Context, notify func(), invalid func(*Cluster, *unstructured.Unstructured, error)) *KindsHint {
	c.mu.Lock()
	h := c.hint
	c.mu.Unlock()
	if h == nil || (!h.failedAt.IsZero() && time.Since(h.failedAt) > hintRetry) {
		h = c.startKindsHint(ctx, notify, invalid)
	}
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hint == nil {
		return nil
	}
	if time.Since(h.hint.RenewedAt) > MemberKindsStale {
		return nil
	}
	return h.hint
}

// startKindsHint LISTs the kinds objects of c and starts their watch.
func (c *Cluster) startKindsHint(ctx context.Context, notify func(), invalid func(*Cluster, *unstructured.Unstructured, error)) *kindsHintWatch {
	res := c.dyn.Resource(configMapsGVR).Namespace(metav1.NamespaceAll)
	sel := LabelMemberKinds + "=true"
	h := &kindsHintWatch{}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	list, err := res.List(lctx, metav1.ListOptions{LabelSelector: sel})
	cancel()
	if err != nil && !apierrors.IsForbidden(err) {
		return nil // asked again at the next pass
	}
	if err != nil {
		h.failedAt, h.why = time.Now(), err.Error()
	} else {
		h.replace(c, list.Items, invalid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.ctx == nil {
		return nil
	}
	if c.hint != nil {
		if c.hint.failedAt.IsZero() { // another caller won the race
			return c.hint
		}
		c.hint.cancel()
	}
	c.hint = h
	if h.failedAt.IsZero() {
		var wctx context.Context
		wctx, h.cancel = context.WithCancel(c.ctx)
		go h.watch(wctx, c, list.GetResourceVersion(), notify, invalid)
	} else {
		h.cancel = func() {}
	}
	return h
}

// stopKindsHintLocked ends the watch of the kinds objects; c.mu must be held.
func (c *Cluster) stopKindsHintLocked() {
	if c.hint != nil {
		c.hint.cancel()
		c.hint = nil
	}
}

// replace makes items the objects known, and decides what to trust.
func (h *kindsHintWatch) replace(c *Cluster, items []unstructured.Unstructured, invalid func(*Cluster, *unstructured.Unstructured, error)) {
	h.mu.Lock()
	h.objs = map[string]*unstructured.Unstructured{}
	for i := range items {
		h.objs[items[i].GetNamespace()+"/"+items[i].GetName()] = &items[i]
	}
	h.mu.Unlock()
	h.decide(c, invalid)
}

// decide sets the hint from the objects known.
func (h *kindsHintWatch) decide(c *Cluster, invalid func(*Cluster, *unstructured.Unstructured, error)) {
	h.mu.Lock()
	var bad *unstructured.Unstructured
	var badErr error
	switch len(h.objs) {
	case 0:
		h.hint, h.why = nil, "no kinds object"
	case 1:
		for _, obj := range h.objs {
			hint, err := kindsHintOf(obj)
			if hint != nil && hint.RenewedAt.After(time.Now()) {
				// A member clock ahead of ours counts as now: an object is
				// never trusted longer than MemberKindsStale after we read it.
				hint.RenewedAt = time.Now()
			}
			h.hint = hint
			if err != nil {
				h.why = err.Error()
				if obj.GetResourceVersion() != h.reported {
					h.reported, bad, badErr = obj.GetResourceVersion(), obj, err
				}
			}
		}
	default:
		h.hint, h.why = nil, fmt.Sprintf("%d kinds objects, not one", len(h.objs))
	}
	h.mu.Unlock()
	if bad != nil && invalid != nil {
		invalid(c, bad, badErr)
	}
}

// kindsHintOf checks and parses one kinds object.
func kindsHintOf(obj *unstructured.Unstructured) (*KindsHint, error) {
	if obj.GetName() != MemberKindsName {
		return nil, fmt.Errorf("a kinds object must be named %s", MemberKindsName)
	}
	data, found, err := unstructured.NestedStringMap(obj.Object, "data")
	if err != nil || !found {
		return nil, errors.New("no string data")
	}
	if bin, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "binaryData"); bin != nil {
		return nil, errors.New("binaryData is not allowed")
	}
	return ParseKindsHint(data)
}

// watch follows the kinds objects from rv until ctx ends, as a presence
// watch follows its selectors; a change calls notify.
func (h *kindsHintWatch) watch(ctx context.Context, c *Cluster, rv string, notify func(), invalid func(*Cluster, *unstructured.Unstructured, error)) {
	res := c.dyn.Resource(configMapsGVR).Namespace(metav1.NamespaceAll)
	sel := LabelMemberKinds + "=true"
	retry := newRetries(c.health, retryBackoff) // as a presence's
	for ctx.Err() == nil {
		// A cluster marked down is asked nothing but its probe.
		if !retry.begin(ctx) {
			return
		}
		if rv == "" {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			list, err := res.List(lctx, metav1.ListOptions{LabelSelector: sel})
			cancel()
			if err != nil {
				retry.throttled(err)
				if !retry.pause(ctx) {
					return
				}
				continue
			}
			h.replace(c, list.Items, invalid)
			notify()
			rv = list.GetResourceVersion()
		}
		w, err := res.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			retry.throttled(err)
			if !retry.pause(ctx) {
				return
			}
			continue
		}
		opened := time.Now()
		rv = h.follow(ctx, c, w, rv, notify, invalid)
		w.Stop()
		if time.Since(opened) > time.Minute {
			retry.reset()
		} else if !retry.pause(ctx) {
			return
		}
	}
}

// follow reads w until it ends, and returns the resourceVersion to resume
// from ("" to LIST again).
func (h *kindsHintWatch) follow(ctx context.Context, c *Cluster, w apiwatch.Interface, rv string, notify func(), invalid func(*Cluster, *unstructured.Unstructured, error)) string {
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, open := <-w.ResultChan():
			if !open {
				return rv
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == apiwatch.Error {
				return "" // most likely 410 Gone
			}
			rv = obj.GetResourceVersion()
			if ev.Type == apiwatch.Bookmark {
				continue
			}
			key := obj.GetNamespace() + "/" + obj.GetName()
			h.mu.Lock()
			if ev.Type == apiwatch.Deleted {
				delete(h.objs, key)
			} else {
				h.objs[key] = obj
			}
			h.mu.Unlock()
			h.decide(c, invalid)
			notify()
		}
	}
}

// rulesOut reports whether c has no source and no pull mirror of gvk to
// look for: c is registered receive-only, or its member agent says so in
// a kinds object the hub trusts.
func (k *Kinds) rulesOut(ctx context.Context, c *Cluster, gvk schema.GroupVersionKind) bool {
	if k.receiveOnly(c) {
		c.mu.Lock()
		c.stopPresenceLocked(gvk)
		c.stopKindsHintLocked() // nothing it says matters here
		c.mu.Unlock()
		return true
	}
	if !k.opts.MemberKinds {
		return false
	}
	hint := c.memberKinds(ctx, k.Trigger, k.opts.InvalidKindsObject)
	if hint == nil || !hint.RulesOut(gvk) {
		return false
	}
	c.mu.Lock()
	c.stopPresenceLocked(gvk) // the member's object says all it would
	c.mu.Unlock()
	return true
}

// receiveOnly reports whether c was registered receive-only
// (KindOptions.ReceiveOnly).
func (k *Kinds) receiveOnly(c *Cluster) bool {
	return k.opts.ReceiveOnly != nil && k.opts.ReceiveOnly(c)
}

// whyMirrorsOnly says, for the log, what ruled out the sources and pull
// mirrors of a kind in c.
func (k *Kinds) whyMirrorsOnly(c *Cluster) string {
	if k.receiveOnly(c) {
		return "the cluster is registered receive-only"
	}
	return "the member agent's kinds object rules out its sources and pull mirrors"
}

// Coverage returns what c's kinds object says, as the member agent writes
// it: the kinds looked at in c, and those of them watched (they have, or
// had moments ago, sources, mirrors or pull mirrors). A kind whose presence
// could not be asked (the agent may not list it) is not covered. ok is
// false until the last pass looked at c whole (Settled).
func (k *Kinds) Coverage(c *Cluster) (covered, used []schema.GroupVersionKind, ok bool) {
	k.mu.Lock()
	settled, candidates := k.settled[c.Name()] == c, slices.Clone(k.discovered[c.Name()])
	k.mu.Unlock()
	if !settled {
		return nil, nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// MirrorPolicies are covered where they are watched: the hub watches
	// them only where there are some.
	if c.policies != nil && c.policies.HasSynced() {
		covered = append(covered, PolicyGVK)
		if len(c.policies.GetStore().ListKeys()) > 0 {
			used = append(used, PolicyGVK)
		}
	}
	for _, gvk := range candidates {
		if w, ok := c.kinds[gvk]; ok {
			// A kind watched for our mirrors only is not known whole:
			// left out.
			if !w.mirrorsOnly() {
				covered, used = append(covered, gvk), append(used, gvk)
			}
			continue
		}
		if p, ok := c.presences[gvk]; ok && p.err == nil {
			covered = append(covered, gvk)
			if p.used.Load() {
				used = append(used, gvk)
			}
		}
	}
	return covered, used, true
}
