// Package apply is the fourth stage of the mirroring pipeline: it makes one
// desired mirror exist in one target cluster, or removes one, and never
// touches an object that is not ours. It is the only stage that writes
// mirrors. The state it starts from is the cluster's cache (metadata and
// content hash of our mirrors); it reads from the API server only when the
// cache cannot answer (a name already taken, a mirror that drifted).
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// Outcome is what Ensure or Delete did to one target.
type Outcome string

// Outcomes; they are also the values of the result label of sync metrics.
const (
	Created   Outcome = "created"
	Updated   Outcome = "updated"
	Replaced  Outcome = "replaced"
	Unchanged Outcome = "unchanged"
	Deleted   Outcome = "deleted"
	Conflict  Outcome = "conflict"
	// Adopted targets held a copy another tool made of the source; it was
	// taken over and is our mirror now.
	Adopted Outcome = "adopted"
	// Skipped targets cannot take a mirror now (namespace terminating or gone).
	Skipped Outcome = "skipped"
	// Orphaned: a released mirror made a plain object (copy-once, or
	// deletion-policy Orphan): our labels and annotations taken off.
	Orphaned Outcome = "orphaned"
	Failed   Outcome = "error"
)

// ConflictError says that the target name is taken by an object we do not own.
type ConflictError struct {
	Namespace, Name string
	// Owner is the source reference of the mirror in the way, or "" when the
	// object is not a mirror of this writer at all.
	Owner string
	// NotAdopted says why the object was not adopted, when the source asks
	// for the copies of other tools to be adopted.
	NotAdopted string
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("%s/%s exists and is not managed by fleetmirror", e.Namespace, e.Name)
	if e.Owner != "" {
		msg = fmt.Sprintf("%s/%s already mirrors %s", e.Namespace, e.Name, e.Owner)
	}
	if e.NotAdopted != "" {
		msg += "; not adopted: " + e.NotAdopted
	}
	return msg
}

// ErrStaleSource says the mirror holds content from a newer source version
// than the one in our cache; writing would go back in time.
var ErrStaleSource = errors.New("mirror holds newer source content than the cache; waiting for the cache")

// Applier writes mirrors for one writer (member or hub).
type Applier struct {
	// FieldManager is the name our writes carry in managedFields.
	FieldManager string
	// ManagedBy is the LabelManagedBy value of our mirrors.
	ManagedBy string
	// Renamed, when set, reports whether our mirrors of a source in the
	// cluster named from may be taken over by the same source (same UID)
	// seen in the cluster named to: the cluster was registered again
	// under a new name (see takesOver).
	Renamed func(from, to string) bool

	// accepted remembers, per mirror UID, a live hash that differs from the
	// desired hash only by what the API server added (defaults, webhook
	// labels), so that such mirrors are not read again on every reconcile.
	accepted sync.Map // types.UID -> acceptance

	// written remembers our last write of each mirror, so that a reconcile
	// that runs before the cache shows that write neither rewrites the same
	// content nor updates from a resourceVersion that is already gone.
	written sync.Map // target -> write
	// memos is at least the number of entries of written (raised before
	// one is stored, lowered after one is gone): while it is zero, as
	// once every write is cached, looking one up costs no hashing of its
	// key, which every Seen and InPlace would pay for each mirror.
	memos atomic.Int64

	// conflicts remembers names held by objects that are not ours, so that
	// reconciles in quick succession (every namespace event re-reconciles
	// every source) do not each send a create and a read that must fail.
	conflicts sync.Map // target -> conflictMemo
}

type conflictMemo struct {
	err   *ConflictError
	until time.Time
	// adopt is the list of tools the conflict was found with: a source
	// that starts asking for adoption has the object looked at again.
	adopt string
}

// conflictTTL bounds how long a conflict is taken as known without asking
// the API server again.
const conflictTTL = 30 * time.Second

// acceptance is a live mirror's hash taken for the content hash want: what
// the API server added to what we wrote (serverOnly), or what others added
// that keep-additions keeps.
type acceptance struct {
	live, want string
	serverOnly bool
}

type write struct {
	uid             types.UID
	resourceVersion string
	hash            string
}

// target names one mirror: cluster, kind, namespace and name.
type target struct {
	cluster         string
	gvk             schema.GroupVersionKind
	namespace, name string
}

func writtenKey(cluster string, gvk schema.GroupVersionKind, obj metav1.Object) target {
	return target{cluster: cluster, gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName()}
}

func (a *Applier) remember(key target, got metav1.Object, hash string) {
	a.memos.Add(1)
	if _, loaded := a.written.Swap(key, write{uid: got.GetUID(), resourceVersion: got.GetResourceVersion(), hash: hash}); loaded {
		a.memos.Add(-1)
	}
}

// memo returns our last write of key, if remembered.
func (a *Applier) memo(key target) (any, bool) {
	if a.memos.Load() == 0 {
		return nil, false
	}
	return a.written.Load(key)
}

// dropMemo forgets the write v of key, unless a newer one was stored
// since (v nil: whatever is stored).
func (a *Applier) dropMemo(key target, v any) {
	var gone bool
	if v == nil {
		_, gone = a.written.LoadAndDelete(key)
	} else {
		gone = a.written.CompareAndDelete(key, v)
	}
	if gone {
		a.memos.Add(-1)
	}
}

// lastWrite returns our last write of the mirror named like want when the
// cached object live (nil: not cached) is older than that write. A write
// the cache has caught up with is forgotten here, as Seen does.
func (a *Applier) lastWrite(key target, live *clusters.Mirror) (write, bool) {
	v, ok := a.memo(key)
	if !ok {
		return write{}, false
	}
	w := v.(write)
	if live == nil {
		return w, true
	}
	if live.GetUID() != w.uid {
		return write{}, false
	}
	if !rvLess(live.GetResourceVersion(), w.resourceVersion) {
		a.dropMemo(key, v)
		return write{}, false
	}
	return w, true
}

// rvLess reports whether resourceVersion a is older than b. See newer for
// why the numeric comparison is sound here; unparsable means "no".
func rvLess(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// Ensure makes want exist in cluster c. With sourceVerified, want was built
// from a source just read from the API server, so a mirror claiming newer
// source content is wrong and is overwritten; otherwise such a mirror makes
// Ensure return ErrStaleSource and write nothing. An object in the way
// that proves to be a copy of want's source made by one of the tools in
// adopt is adopted (see adoptOrRefuse); any other is a conflict.
func (a *Applier) Ensure(ctx context.Context, c *clusters.Cluster, gvk schema.GroupVersionKind, want *unstructured.Unstructured, sourceVerified bool, adopt ...peers.Tool) (Outcome, error) {
	out, err := a.ensure(ctx, c, gvk, want, sourceVerified, adopt)
	// The watch often brings our write to the cache before its answer
	// came, so before remember stored the write, and its Seen found
	// nothing to forget: the write is forgotten here then, or it would be
	// kept for every mirror (a sixth of the heap at 100,000 mirrors).
	if m, ok := c.Mirror(gvk, want.GetNamespace(), want.GetName()); ok {
		a.Seen(c.Name(), gvk, m)
	}
	return out, err
}

func (a *Applier) ensure(ctx context.Context, c *clusters.Cluster, gvk schema.GroupVersionKind, want *unstructured.Unstructured, sourceVerified bool, adopt []peers.Tool) (Outcome, error) {
	res, err := c.Objects(gvk, want.GetNamespace())
	if err != nil {
		return Failed, err
	}
	wantHash := want.GetAnnotations()[annotations.AnnotationContentHash]
	live, cached := c.Mirror(gvk, want.GetNamespace(), want.GetName())
	if !cached {
		live = nil
	}
	key := writtenKey(c.Name(), gvk, want)
	w, written := a.lastWrite(key, live)
	if a.holds(w, written, live, want.GetAnnotations()[annotations.AnnotationSource], wantHash) {
		return Unchanged, nil
	}
	if written {
		// The cache has not caught up with our own last write.
		return a.updateOrRefresh(ctx, key, res, w.resourceVersion, want, sourceVerified, adopt)
	}
	if !cached {
		adoptKey := fmt.Sprint(adopt)
		if v, ok := a.conflicts.Load(key); ok && time.Now().Before(v.(conflictMemo).until) && v.(conflictMemo).adopt == adoptKey {
			return Conflict, v.(conflictMemo).err
		}
		out, err := a.create(ctx, key, res, want, sourceVerified, adopt)
		var ce *ConflictError
		if errors.As(err, &ce) {
			a.conflicts.Store(key, conflictMemo{err: ce, until: time.Now().Add(conflictTTL), adopt: adoptKey})
		} else {
			a.conflicts.Delete(key)
		}
		return out, err
	}
	if err := a.checkOwner(live, want); err != nil {
		if !a.takesOver(live, want) {
			return Conflict, err
		}
		// Ours, of the same source under the cluster's former name: one
		// update in place makes it the mirror of the new name.
		return a.updateOrRefresh(ctx, key, res, live.GetResourceVersion(), want, sourceVerified, adopt)
	}
	observed := live.ObservedHash
	if !sourceVerified && newer(live, want) {
		return Failed, ErrStaleSource
	}
	if secretType, immutable := live.Traits(); needsReplace(secretType, immutable, want) {
		return a.replace(ctx, key, res, live, want)
	}
	if observed == live.GetAnnotations()[annotations.AnnotationContentHash] || a.onlyServerAdded(live) {
		// The live mirror is exactly what we wrote last, or that and what
		// the API server added to it: only the source changed, so the
		// cached resourceVersion is enough to update.
		return a.updateOrRefresh(ctx, key, res, live.GetResourceVersion(), want, sourceVerified, adopt)
	}
	// The mirror differs from what we wrote: a hand edit, or fields the API
	// server added. Read it whole to tell which.
	full, err := res.Get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		return Failed, ignoreNotFoundAsRetry(err)
	}
	return a.reconcileLive(ctx, key, res, full, want, sourceVerified, adopt)
}

// InPlace reports whether the mirror named name in namespace of cluster c,
// of the source sourceRef, holds the content hash already, by what the
// cache and our own last write say: Ensure would return Unchanged for it
// without a call. It is the question a reconcile asks of most of its
// targets, asked without building each one's object first.
func (a *Applier) InPlace(c *clusters.Cluster, gvk schema.GroupVersionKind, namespace, name, sourceRef, hash string) bool {
	live, cached := c.Mirror(gvk, namespace, name)
	if !cached {
		live = nil
	}
	w, written := a.lastWrite(target{cluster: c.Name(), gvk: gvk, namespace: namespace, name: name}, live)
	return a.holds(w, written, live, sourceRef, hash)
}

// holds reports whether a mirror, cached as live (nil: not cached), is
// ours for sourceRef and holds the content hash: by our last write w when
// the cache has not caught up with it (written, see lastWrite), else by
// the cached object, whose observed hash is the one wanted or was accepted
// for it (what another writer added, kept by keep-additions).
func (a *Applier) holds(w write, written bool, live *clusters.Mirror, sourceRef, hash string) bool {
	if written {
		return w.hash == hash
	}
	if live == nil || !desired.Owned(live.GetLabels(), live.GetAnnotations(), a.ManagedBy, sourceRef) {
		return false
	}
	return live.ObservedHash == hash || a.isAccepted(live.GetUID(), live.ObservedHash, hash)
}

func (a *Applier) reconcileLive(ctx context.Context, key target, res *clusters.Objects, full, want *unstructured.Unstructured, sourceVerified bool, adopt []peers.Tool) (Outcome, error) {
	if err := a.checkOwner(full, want); err != nil {
		if a.takesOver(full, want) {
			if secretType, immutable := clusters.Traits(full); needsReplace(secretType, immutable, want) {
				return a.replace(ctx, key, res, full, want)
			}
			return a.update(ctx, key, res, full.GetResourceVersion(), want)
		}
		return a.adoptOrRefuse(ctx, key, res, full, want, sourceVerified, adopt, err)
	}
	if wantHash := want.GetAnnotations()[annotations.AnnotationContentHash]; desired.Hash(full) == wantHash {
		// Everything we propagate is in place; only our bookkeeping (such
		// as the source's resourceVersion) differs, which is no reason to
		// write.
		a.remember(key, full, wantHash)
		return Unchanged, nil
	}
	if a.onlyServerAdditions(full, want) {
		return Unchanged, nil
	}
	keep := keepsAdditions(want)
	if keep {
		merged, inSync, err := keptAdditions(full, want, a.FieldManager)
		if err != nil {
			return Failed, err
		}
		if inSync {
			a.accepted.Store(full.GetUID(), acceptance{live: desired.Hash(full), want: want.GetAnnotations()[annotations.AnnotationContentHash]})
			return Unchanged, nil
		}
		want = merged
	}
	if !sourceVerified && newer(full, want) {
		return Failed, ErrStaleSource
	}
	if secretType, immutable := clusters.Traits(full); needsReplace(secretType, immutable, want) {
		return a.replace(ctx, key, res, full, want)
	}
	out, err := a.update(ctx, key, res, full.GetResourceVersion(), want)
	if err == nil && keep {
		// What was written holds others' additions: the mirror as the
		// cache will see it is accepted, not read again.
		a.accepted.Store(full.GetUID(), acceptance{live: desired.Hash(want), want: want.GetAnnotations()[annotations.AnnotationContentHash]})
	}
	return out, err
}

// onlyServerAdditions reports whether full holds everything want sets and
// nobody but us wrote to it, so that what differs was added by the API
// server. It remembers the answer for the mirror.
func (a *Applier) onlyServerAdditions(full, want *unstructured.Unstructured) bool {
	if !serverAdditionsOnly(full, want, a.FieldManager) {
		return false
	}
	a.accepted.Store(full.GetUID(), acceptance{live: desired.Hash(full), want: want.GetAnnotations()[annotations.AnnotationContentHash], serverOnly: true})
	return true
}

// serverAdditionsOnly reports whether full holds everything want sets and
// nobody but fieldManager wrote to it.
func serverAdditionsOnly(full, want *unstructured.Unstructured, fieldManager string) bool {
	for _, mf := range full.GetManagedFields() {
		if mf.Manager != fieldManager {
			return false
		}
	}
	return holds(full, want)
}

// holds reports whether live has everything want propagates: its content,
// labels and annotations (not our stamps), with want's values.
func holds(live, want *unstructured.Unstructured) bool {
	return subset(desired.Content(want), desired.Content(live)) &&
		subsetStrings(propagated(want.GetLabels()), live.GetLabels()) &&
		subsetStrings(propagated(want.GetAnnotations()), live.GetAnnotations())
}

// InSync reports whether live, a mirror read whole from the API server and
// proved ours, needs no write to become want: what Ensure decides for it,
// without its memory of earlier decisions. Everything propagated is in
// place (the hash of live is want's content hash), or what differs was
// added by the API server to what fieldManager wrote. Tools that report on
// mirrors (the kubectl plugin) use it, so that they call in sync exactly
// what the agent leaves alone.
func InSync(live, want *unstructured.Unstructured, fieldManager string) bool {
	if desired.Hash(live) == want.GetAnnotations()[annotations.AnnotationContentHash] ||
		serverAdditionsOnly(live, want, fieldManager) {
		return true
	}
	if !keepsAdditions(want) {
		return false
	}
	_, inSync, err := keptAdditions(live, want, fieldManager)
	return err == nil && inSync
}

func (a *Applier) isAccepted(uid types.UID, live, want string) bool {
	_, ok := a.acceptedAs(uid, live, want)
	return ok
}

// acceptedAs returns what was accepted for the mirror uid when it is
// live taken for want.
func (a *Applier) acceptedAs(uid types.UID, live, want string) (acceptance, bool) {
	v, ok := a.accepted.Load(uid)
	if !ok || v.(acceptance).live != live || v.(acceptance).want != want {
		return acceptance{}, false
	}
	return v.(acceptance), true
}

// AsWritten reports whether the cached mirror m holds what we wrote last,
// by the content hash stamped on it: the same content, or what the API
// server or keep-additions added to it and was accepted. A mirror that
// does not is drift (or not ours), which its source's reconcile corrects.
func (a *Applier) AsWritten(m *clusters.Mirror) bool {
	stamped := m.GetAnnotations()[annotations.AnnotationContentHash]
	return m.ObservedHash == stamped || a.isAccepted(m.GetUID(), m.ObservedHash, stamped)
}

// onlyServerAdded reports whether the cached mirror m is what we wrote
// last plus what the API server added to it, and nothing else: updated
// from its cached resourceVersion, it loses nothing the server would not
// add again.
func (a *Applier) onlyServerAdded(m *clusters.Mirror) bool {
	acc, ok := a.acceptedAs(m.GetUID(), m.ObservedHash, m.GetAnnotations()[annotations.AnnotationContentHash])
	return ok && acc.serverOnly
}

// noteAnswer accepts the labels and annotations the API server added to
// want in answer to our own write got (kcp names the logical cluster on
// every object; a mutating admission policy or webhook may add its own).
// They came back in the answer to our write, so nobody else wrote them,
// and the mirror the cache will see is what we wrote: neither drift to
// enqueue its source for, nor a reason to read it whole at the next
// update. Values changed, or content the server changed (a default), do
// not show here: such a mirror is read whole and decided on as before.
func (a *Applier) noteAnswer(got metav1.Object, want *unstructured.Unstructured) {
	labels, annots := got.GetLabels(), got.GetAnnotations()
	if len(labels) == len(want.GetLabels()) && len(annots) == len(want.GetAnnotations()) {
		return // nothing added (a changed value is not an addition)
	}
	if !subsetStrings(want.GetLabels(), labels) || !subsetStrings(want.GetAnnotations(), annots) {
		return
	}
	a.accepted.Store(got.GetUID(), acceptance{
		live:       desired.HashWith(want, labels, annots),
		want:       want.GetAnnotations()[annotations.AnnotationContentHash],
		serverOnly: true,
	})
}

func (a *Applier) create(ctx context.Context, key target, res *clusters.Objects, want *unstructured.Unstructured, sourceVerified bool, adopt []peers.Tool) (Outcome, error) {
	got, err := res.CreateMeta(ctx, want, metav1.CreateOptions{FieldManager: a.FieldManager})
	switch {
	case err == nil:
		a.remember(key, got, want.GetAnnotations()[annotations.AnnotationContentHash])
		a.noteAnswer(got, want)
		return Created, nil
	case apierrors.IsAlreadyExists(err):
		// Not in our cache: either not ours, or ours and the cache lags.
		full, err := res.Get(ctx, want.GetName(), metav1.GetOptions{})
		if err != nil {
			return Failed, ignoreNotFoundAsRetry(err)
		}
		return a.reconcileLive(ctx, key, res, full, want, sourceVerified, adopt)
	case isNamespaceUnavailable(err):
		return Skipped, nil
	default:
		return Failed, err
	}
}

func (a *Applier) update(ctx context.Context, key target, res *clusters.Objects, resourceVersion string, want *unstructured.Unstructured) (Outcome, error) {
	obj := want.DeepCopy()
	// The resourceVersion is that of an object we proved ours; if anything
	// replaced it since, the update fails with a conflict instead of
	// writing over somebody else's object.
	obj.SetResourceVersion(resourceVersion)
	// Only the metadata comes back: labels and annotations the API server
	// added are accepted from it (noteAnswer). Should it have changed the
	// content (a default), the cache shows it as drift and the next
	// reconcile reads the object and accepts the additions.
	got, err := res.UpdateMeta(ctx, obj, metav1.UpdateOptions{FieldManager: a.FieldManager})
	if err != nil {
		return Failed, err
	}
	a.remember(key, got, want.GetAnnotations()[annotations.AnnotationContentHash])
	a.noteAnswer(got, want)
	return Updated, nil
}

// updateOrRefresh updates from a resourceVersion known from the cache or
// our last write. If the object moved on since (the cache lags, after a
// partition say), it is read again and checked from scratch.
func (a *Applier) updateOrRefresh(ctx context.Context, key target, res *clusters.Objects, resourceVersion string, want *unstructured.Unstructured, sourceVerified bool, adopt []peers.Tool) (Outcome, error) {
	out, err := a.update(ctx, key, res, resourceVersion, want)
	if !apierrors.IsConflict(err) {
		return out, err
	}
	full, err := res.Get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		return Failed, ignoreNotFoundAsRetry(err)
	}
	return a.reconcileLive(ctx, key, res, full, want, sourceVerified, adopt)
}

// replace deletes live and creates want, for changes the API server refuses
// in place: a Secret's type, or anything of an immutable object.
func (a *Applier) replace(ctx context.Context, key target, res *clusters.Objects, live metav1.Object, want *unstructured.Unstructured) (Outcome, error) {
	if err := deleteExact(ctx, res, live); err != nil {
		return Failed, err
	}
	got, err := res.CreateMeta(ctx, want, metav1.CreateOptions{FieldManager: a.FieldManager})
	if err != nil {
		return Failed, err
	}
	a.remember(key, got, want.GetAnnotations()[annotations.AnnotationContentHash])
	return Replaced, nil
}

// Delete removes our mirror live (a cached object). It refuses objects we do
// not own and deletes only the exact object that was checked.
func (a *Applier) Delete(ctx context.Context, c *clusters.Cluster, gvk schema.GroupVersionKind, live metav1.Object, sourceRef string) (Outcome, error) {
	return a.letGo(ctx, c, gvk, live, sourceRef, Deleted, func(res *clusters.Objects, obj metav1.Object) error {
		return deleteExact(ctx, res, obj)
	})
}

// Release removes our mirror live (a cached object) from its source's
// mirrors for why: deleted, or, when the mirror's markers say so
// (desired.Kept), made a plain object that nothing of ours claims any more.
func (a *Applier) Release(ctx context.Context, c *clusters.Cluster, gvk schema.GroupVersionKind, live metav1.Object, sourceRef string, why desired.Release) (Outcome, error) {
	if !desired.Kept(live.GetAnnotations(), why) {
		return a.Delete(ctx, c, gvk, live, sourceRef)
	}
	return a.letGo(ctx, c, gvk, live, sourceRef, Orphaned, func(res *clusters.Objects, obj metav1.Object) error {
		return orphanExact(ctx, res, obj, a.FieldManager)
	})
}

// letGo applies write (a delete or an orphaning of exactly the version it
// is given) to our mirror live, and forgets what was remembered of it;
// done is the outcome. It refuses an object we do not own. When the cached
// object is older than the live one (a conflict), it reads it again and
// writes only if it is still ours.
func (a *Applier) letGo(ctx context.Context, c *clusters.Cluster, gvk schema.GroupVersionKind, live metav1.Object, sourceRef string, done Outcome, write func(*clusters.Objects, metav1.Object) error) (Outcome, error) {
	if !desired.Owned(live.GetLabels(), live.GetAnnotations(), a.ManagedBy, sourceRef) {
		return Conflict, &ConflictError{Namespace: live.GetNamespace(), Name: live.GetName(), Owner: live.GetAnnotations()[annotations.AnnotationSource]}
	}
	res, err := c.Objects(gvk, live.GetNamespace())
	if err != nil {
		return Failed, err
	}
	err = write(res, live)
	if apierrors.IsConflict(err) {
		fresh, gerr := res.Get(ctx, live.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			err = nil
		case gerr != nil:
			return Failed, gerr
		case !desired.Owned(fresh.GetLabels(), fresh.GetAnnotations(), a.ManagedBy, sourceRef):
			return Conflict, &ConflictError{Namespace: fresh.GetNamespace(), Name: fresh.GetName(), Owner: fresh.GetAnnotations()[annotations.AnnotationSource]}
		default:
			err = write(res, fresh)
		}
	}
	if err != nil {
		return Failed, err
	}
	a.accepted.Delete(live.GetUID())
	a.dropMemo(writtenKey(c.Name(), gvk, live), nil)
	return done, nil
}

// orphanExact takes our labels and annotations off live, if it is still
// the version that was checked (the resourceVersion in a merge patch is a
// precondition).
func orphanExact(ctx context.Context, res *clusters.Objects, live metav1.Object, fieldManager string) error {
	patch, err := json.Marshal(map[string]any{"metadata": OrphanPatch(live)})
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, live.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// OrphanPatch is the metadata of a merge patch that makes the mirror live
// a plain object: every key of ours set to null, at live's resourceVersion.
// A synchronized mirror is left with a record of its source
// (annotations.AnnotationReleasedFrom and AnnotationReleasedFromUID), which
// claims nothing but lets a later claim of that source that adopts
// fleetmirror's copies take it back; a copy made once gets none, as it was
// its namespace's from the start.
func OrphanPatch(live metav1.Object) map[string]any {
	nulls := func(m map[string]string) map[string]any {
		out := map[string]any{}
		for k := range m {
			if desired.OurKeys(k) {
				out[k] = nil
			}
		}
		return out
	}
	a := live.GetAnnotations()
	annots := nulls(a)
	if a[annotations.AnnotationCopyOnce] != "true" {
		annots[annotations.AnnotationReleasedFrom] = a[annotations.AnnotationSource]
		annots[annotations.AnnotationReleasedFromUID] = a[annotations.AnnotationSourceUID]
	}
	return map[string]any{
		"resourceVersion": live.GetResourceVersion(),
		"labels":          nulls(live.GetLabels()),
		"annotations":     annots,
	}
}

func deleteExact(ctx context.Context, res *clusters.Objects, live metav1.Object) error {
	uid, rv := live.GetUID(), live.GetResourceVersion()
	err := res.Delete(ctx, live.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (a *Applier) checkOwner(live metav1.Object, want *unstructured.Unstructured) error {
	ref := want.GetAnnotations()[annotations.AnnotationSource]
	if desired.Owned(live.GetLabels(), live.GetAnnotations(), a.ManagedBy, ref) {
		return nil
	}
	owner := ""
	if desired.IsMirror(live.GetLabels()) {
		owner = live.GetAnnotations()[annotations.AnnotationSource]
	}
	return &ConflictError{Namespace: live.GetNamespace(), Name: live.GetName(), Owner: owner}
}

// takesOver reports whether live, a mirror that checkOwner refused for
// want, is ours and of want's very source under another cluster name that
// Renamed accepts: our labels, the same namespace and name in the source
// reference, and the same source UID (which the API server chose, and no
// other cluster's object has).
func (a *Applier) takesOver(live metav1.Object, want *unstructured.Unstructured) bool {
	if a.Renamed == nil || !desired.IsMirror(live.GetLabels()) || live.GetLabels()[annotations.LabelManagedBy] != a.ManagedBy {
		return false
	}
	la, wa := live.GetAnnotations(), want.GetAnnotations()
	uid := wa[annotations.AnnotationSourceUID]
	from, rest, ok1 := strings.Cut(la[annotations.AnnotationSource], "/")
	to, wantRest, ok2 := strings.Cut(wa[annotations.AnnotationSource], "/")
	return ok1 && ok2 && uid != "" && la[annotations.AnnotationSourceUID] == uid && rest == wantRest && from != to && a.Renamed(from, to)
}

// needsReplace reports whether a live object with the given Traits cannot
// be updated to want in place.
func needsReplace(liveType string, liveImmutable bool, want *unstructured.Unstructured) bool {
	if liveImmutable {
		return true
	}
	wantType, _ := clusters.Traits(want)
	return want.GetKind() == "Secret" && liveType != wantType
}

// newer reports whether live was written from a later version of the source
// than want. resourceVersions are opaque to clients in general, but those of
// one object from one API server grow; when either does not parse as a
// number nothing is concluded.
func newer(live metav1.Object, want *unstructured.Unstructured) bool {
	l, err1 := strconv.ParseUint(live.GetAnnotations()[annotations.AnnotationSourceResourceVersion], 10, 64)
	w, err2 := strconv.ParseUint(want.GetAnnotations()[annotations.AnnotationSourceResourceVersion], 10, 64)
	sameSource := live.GetAnnotations()[annotations.AnnotationSourceUID] == want.GetAnnotations()[annotations.AnnotationSourceUID]
	return err1 == nil && err2 == nil && sameSource && l > w
}

func isNamespaceUnavailable(err error) bool {
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "being terminated") {
		return true
	}
	return apierrors.IsNotFound(err)
}

func ignoreNotFoundAsRetry(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("mirror vanished while being checked; will retry: %w", err)
	}
	return err
}

// subset reports whether every field of want is in have with the same value;
// lists must have the same length and match element by element.
func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			hv, ok := h[k]
			if !ok || !subset(v, hv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return fmt.Sprint(want) == fmt.Sprint(have)
	}
}

// propagated drops control keys: they are our bookkeeping, compared by
// ownership checks, not content.
func propagated(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, annotations.Prefix) {
			out[k] = v
		}
	}
	return out
}

func subsetStrings(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Seen is told of every cached version of our mirrors. Once the cache holds
// our last write of m, or a later version, the memo of that write has done
// its job (the cache alone answers from then on) and is dropped, so that
// memos do not grow with the number of mirrors.
func (a *Applier) Seen(cluster string, gvk schema.GroupVersionKind, m *clusters.Mirror) {
	if a.memos.Load() == 0 {
		return
	}
	key := writtenKey(cluster, gvk, m)
	v, ok := a.written.Load(key)
	if !ok {
		return
	}
	if w := v.(write); w.uid == m.GetUID() && !rvLess(m.GetResourceVersion(), w.resourceVersion) {
		a.dropMemo(key, v) // only this memo: a write stored since is newer than m
	}
}

// Forget drops what the Applier remembers of a mirror that was deleted, so
// that the next Ensure sees it missing and creates it again.
func (a *Applier) Forget(cluster string, gvk schema.GroupVersionKind, mirror metav1.Object) {
	key := writtenKey(cluster, gvk, mirror)
	if v, ok := a.memo(key); ok && v.(write).uid == mirror.GetUID() {
		a.dropMemo(key, v)
	}
	a.conflicts.Delete(key) // the name may be free now
	a.accepted.Delete(mirror.GetUID())
}

// ForgetCluster drops everything remembered about the mirrors of a cluster
// whose connection is gone (unregistered, or reconnected with new
// credentials): what it held then says nothing about it now.
func (a *Applier) ForgetCluster(name string) {
	a.written.Range(func(k, v any) bool {
		if k.(target).cluster == name {
			a.dropMemo(k.(target), v)
		}
		return true
	})
	a.conflicts.Range(func(k, _ any) bool {
		if k.(target).cluster == name {
			a.conflicts.Delete(k)
		}
		return true
	})
}
