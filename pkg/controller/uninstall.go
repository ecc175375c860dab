package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// Uninstall: the writer going away for good takes back what it put into
// the fleet, so that nothing outlives it. In every cluster it deletes its
// mirrors (unless asked to keep them), takes its finalizer off the sources
// and its part off their status annotation, and removes the status it
// wrote on the pull mirrors it serves (their content, the owner's object,
// stays). It writes only what the reconciler would: mirrors proven ours by
// deleteUntargeted's ownership test, sources through patchSource.
//
// Each cluster is a lane of its own: it waits until the cluster answers
// and its caches hold everything of the writer's there (fleet.Settled),
// cleans it, and tries again after a failure, until the context ends. An
// unreachable cluster never holds the others.

// UninstallOptions say what Pipeline.Uninstall removes.
type UninstallOptions struct {
	// KeepMirrors leaves the mirrors where they are: only the writer's hold
	// on sources (finalizer, status) and pull mirrors (status) goes.
	KeepMirrors bool
}

// ClusterCleanup is what Uninstall did in one cluster and, when it could
// not finish, what it left there.
type ClusterCleanup struct {
	// Cluster is the cluster's name.
	Cluster string
	// Reached: the cluster answered with complete caches, so the counts
	// below cover all there was of the writer's.
	Reached bool
	// Done: nothing of the writer's is left there (but kept mirrors).
	Done bool
	// MirrorsDeleted, FinalizersRemoved and StatusesCleared count the
	// writes to mirrors and sources; PullStatusesCleared to pull mirrors.
	MirrorsDeleted, FinalizersRemoved, StatusesCleared, PullStatusesCleared int
	// MirrorsLeft and SourcesLeft are what a reached cluster still holds
	// when not Done: mirrors not deleted, sources not released.
	MirrorsLeft, SourcesLeft int
	// Err is the last failure in the cluster; nil when Done.
	Err error
}

// String says what was done in the cluster, or what is left.
func (c ClusterCleanup) String() string {
	switch {
	case !c.Reached:
		return c.Cluster + ": not reached"
	case !c.Done:
		left := []string{c.Cluster + ": incomplete"}
		if c.MirrorsLeft > 0 {
			left = append(left, count(c.MirrorsLeft, "mirror")+" not deleted")
		}
		if c.SourcesLeft > 0 {
			left = append(left, count(c.SourcesLeft, "source")+" not released")
		}
		return fmt.Sprintf("%s (%v)", strings.Join(left, ", "), c.Err)
	}
	statuses := c.StatusesCleared + c.PullStatusesCleared
	plural := "es"
	if statuses == 1 {
		plural = ""
	}
	return fmt.Sprintf("%s: %s deleted, %s removed, %d status%s cleared", c.Cluster, count(c.MirrorsDeleted, "mirror"),
		count(c.FinalizersRemoved, "finalizer"), statuses, plural)
}

// Remains says, of a cluster not done, what may still carry the mark of
// the writer id there: its part of the status annotation on sources not
// released (and the finalizer an older version held, if one did), and,
// unless they were kept, its mirrors, by the label that finds them. None of
// it holds a deletion; kubectl fleetmirror cleanup removes it.
func (c ClusterCleanup) Remains(id Identity, keptMirrors bool) string {
	mirrors := ""
	if !keptMirrors {
		mirrors = fmt.Sprintf(", and mirrors labelled %s=%s stay", annotations.LabelManagedBy, id.ManagedBy)
	}
	if !c.Reached {
		return fmt.Sprintf("cluster %s not reached (its sources may keep %s%s)", c.Cluster, annotations.AnnotationStatus, mirrors)
	}
	return fmt.Sprintf("cluster %s; sources not released keep %s%s", c, annotations.AnnotationStatus, mirrors)
}

// Uninstall runs the fleet's watches and cleans every engaged cluster, as
// the package comment of this file says, until every cluster is done or
// ctx ends; then it stops the watches. It reports on every cluster, in the
// fleet's order; the error is the fleet's, when its provider failed.
func (p *Pipeline) Uninstall(ctx context.Context, o UninstallOptions) ([]ClusterCleanup, error) {
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	fleetDone := make(chan struct{})
	go func() {
		defer close(fleetDone)
		if err := p.RunFleet(runCtx); err != nil {
			stop(fmt.Errorf("fleet: %w", err))
		}
	}()
	defer func() { <-fleetDone }()
	defer stop(nil) // runs before the wait above

	// The clusters are those the provider knows at start; an uninstall
	// expects no registrations.
	f := p.opts.Fleet
	known := func(context.Context) (bool, error) { return f.Known(), nil }
	if err := wait.PollUntilContextCancel(runCtx, readyPoll, true, known); err != nil {
		if ferr := fleetErr(runCtx); ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("the clusters to clean were not known in time (the provider did not list them): %w", err)
	}
	u := &uninstall{r: p.events.reconciler, opts: o, named: map[string]map[Key]string{}, recorded: map[string]bool{},
		changed: make(chan struct{})}
	cs := f.Clusters()
	u.lanes = len(cs)
	out := make([]ClusterCleanup, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { out[i] = u.lane(runCtx, c) })
	}
	wg.Wait()
	return out, fleetErr(runCtx)
}

// fleetErr is the fleet's failure that ended ctx, if that is what did.
func fleetErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	return nil
}

// readyPoll is how often a lane looks whether its cluster is ready; it
// reads the fleet's state only.
const readyPoll = 100 * time.Millisecond

// uninstall is one run of Pipeline.Uninstall.
type uninstall struct {
	r     *Reconciler
	opts  UninstallOptions
	lanes int

	mu sync.Mutex
	// named holds, by the cluster of the source, the sources that the
	// writer's mirrors name: one missing from the source caches (its
	// enabled label removed while no agent ran) may still hold the
	// finalizer. recorded are the clusters whose mirrors were looked at.
	named    map[string]map[Key]string // Key -> source reference
	recorded map[string]bool
	// changed is closed, and replaced, when named or recorded change.
	changed chan struct{}
}

// laneState is what one lane remembers across its passes: what is done,
// so that a pass after a failure neither writes nor counts it again.
type laneState struct {
	res                  ClusterCleanup
	mirrorsDone, sources map[Key]bool
	pullsDone            map[Key]bool
	policiesDone         bool
}

// lane cleans cluster c, as the package comment of this file says, and
// reports on it.
func (u *uninstall) lane(ctx context.Context, c *clusters.Cluster) ClusterCleanup {
	log := logf.FromContext(ctx).WithValues("cluster", c.Name())
	st := &laneState{res: ClusterCleanup{Cluster: c.Name()}, mirrorsDone: map[Key]bool{}, sources: map[Key]bool{}, pullsDone: map[Key]bool{}}
	ready := func(context.Context) (bool, error) { return u.ready(c), nil }
	for {
		if err := wait.PollUntilContextCancel(ctx, readyPoll, true, ready); err != nil {
			return u.left(c, st, err)
		}
		if !st.res.Reached {
			st.res.Reached = true
			u.record(c)
			log.Info("Cleaning up the cluster")
		}
		seen := u.version()
		if err := u.pass(ctx, c, st); err != nil {
			log.Info("Cleanup incomplete; trying again", "error", err.Error())
			select {
			case <-ctx.Done():
				return u.left(c, st, err)
			case <-time.After(retryStale):
			}
			continue
		}
		// Done, unless clusters not looked at yet name sources here.
		if u.allRecorded() {
			st.res.Done = true
			return st.res
		}
		select {
		case <-seen:
		case <-ctx.Done():
			st.res.Done = true
			return st.res
		}
	}
}

// ready reports whether c answers and its caches hold all of the writer's.
func (u *uninstall) ready(c *clusters.Cluster) bool {
	m, ok := u.r.fleet.Member(c.Name())
	return ok && m.Up && u.r.fleet.Settled(c)
}

// pass makes one cleanup of c: mirrors, sources, pull mirrors, each with
// up to Parallelism writes at once. It returns the failures.
func (u *uninstall) pass(ctx context.Context, c *clusters.Cluster, st *laneState) error {
	var mu sync.Mutex // guards st and errs
	var errs []error
	each := func(keys []Key, fn func(Key) error) {
		workqueue.ParallelizeUntil(ctx, max(u.r.opts.Parallelism, 1), len(keys), func(i int) {
			if err := fn(keys[i]); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	if !u.opts.KeepMirrors {
		mirrored := u.mirrored(c)
		each(sortedKeys(mirrored, st.mirrorsDone), func(key Key) error {
			sum := u.r.deleteUntargeted(ctx, key, mirrored[key], nil, "", []*clusters.Cluster{c}, desired.ClaimEnded)
			mu.Lock()
			defer mu.Unlock()
			st.res.MirrorsDeleted += sum.deleted
			if err := sum.err(); err != nil {
				return err
			}
			st.mirrorsDone[key] = true
			return nil
		})
	}
	each(sortedKeys(u.sourcesIn(c), st.sources), func(key Key) error {
		fin, status, err := u.release(ctx, c, key)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			return err
		}
		st.sources[key] = true
		st.res.FinalizersRemoved += fin
		st.res.StatusesCleared += status
		return nil
	})
	each(sortedKeys(u.pullStatuses(c), st.pullsDone), func(key Key) error {
		if err := u.clearPullStatus(ctx, c, key); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		st.pullsDone[key] = true
		st.res.PullStatusesCleared++
		return nil
	})
	if u.r.opts.Scope == ScopeLocal && !st.policiesDone {
		n, err := u.releasePolicies(ctx, c)
		st.res.FinalizersRemoved += n
		if err != nil {
			errs = append(errs, err)
		} else {
			st.policiesDone = true
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err) // ParallelizeUntil stops handing out work
	}
	return errors.Join(errs...)
}

// releasePolicies takes the finalizer older member agents held off every
// MirrorPolicy of c, read from the API server (an uninstall may run before
// any policy watch has synced, or in a cluster whose CRD is gone: then
// there is nothing to do). It returns how many it took off.
func (u *uninstall) releasePolicies(ctx context.Context, c *clusters.Cluster) (int, error) {
	res, err := c.MetadataResource(clusters.PolicyGVK, metav1.NamespaceAll)
	if apimeta.IsNoMatchError(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	callCtx, cancel := u.r.callContext(ctx, c)
	list, err := res.List(callCtx, metav1.ListOptions{})
	cancel()
	if err = clusters.CallError(callCtx, err); apierrors.IsNotFound(err) {
		return 0, nil // the CRD was deleted meanwhile
	} else if err != nil {
		return 0, err
	}
	removed := 0
	for i := range list.Items {
		dropped, err := u.r.dropPolicyFinalizer(ctx, c, &list.Items[i])
		if err != nil {
			return removed, err // a conflict: the next pass reads it again
		}
		if dropped {
			removed++
		}
	}
	return removed, nil
}

// mirrored returns the sources of the writer's mirrors in c that the
// reconciler would delete there, with their references: those named by
// their source annotation, whose name they carry, of a cluster whose
// mirrors the writer puts into c.
func (u *uninstall) mirrored(c *clusters.Cluster) map[Key]string {
	out := map[Key]string{}
	for _, gvk := range c.Watched() {
		for _, m := range c.AllMirrors(gvk) {
			ref := m.GetAnnotations()[annotations.AnnotationSource]
			cluster, ns, name, ok := ParseSourceRef(ref)
			if ok && desired.NamedAsBuilt(m.GetName(), m.GetAnnotations()) && u.r.opts.Scope.mirrorsIn(cluster, c.Name()) {
				out[Key{Cluster: cluster, GVK: gvk, Namespace: ns, Name: name}] = ref
			}
		}
	}
	return out
}

// record notes the sources the writer's mirrors in c name, by cluster.
func (u *uninstall) record(c *clusters.Cluster) {
	mirrored := u.mirrored(c)
	u.mu.Lock()
	defer u.mu.Unlock()
	for key, ref := range mirrored {
		if u.named[key.Cluster] == nil {
			u.named[key.Cluster] = map[Key]string{}
		}
		u.named[key.Cluster][key] = ref
	}
	u.recorded[c.Name()] = true
	close(u.changed)
	u.changed = make(chan struct{})
}

// version returns a channel closed at the next change of what is recorded.
func (u *uninstall) version() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.changed
}

func (u *uninstall) allRecorded() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.recorded) == u.lanes
}

// sourcesIn returns the sources of c the writer may hold: those cached
// that carry its finalizer or its part of the status, and those its
// mirrors name (looked up by release when not cached).
func (u *uninstall) sourcesIn(c *clusters.Cluster) map[Key]string {
	out := map[Key]string{}
	for _, gvk := range c.Watched() {
		for _, src := range c.Sources(gvk) {
			if fins, status := u.r.sourceChange(src, u.statusPart(src)); fins != nil || status != nil || u.copiedRecord(src) != nil {
				out[Key{Cluster: c.Name(), GVK: gvk, Namespace: src.GetNamespace(), Name: src.GetName()}] = ""
			}
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for key := range u.named[c.Name()] {
		out[key] = ""
	}
	return out
}

// copiedRecord is what release writes as the writer's part of src's copy-once
// record (fleetmirror.io/copied): nothing, for patchSourceRecord to drop
// it; nil when src holds none of it.
func (u *uninstall) copiedRecord(src metav1.Object) *string {
	if nextRecordValue(src, nil, true, u.r.opts.Scope == ScopeRemote) == nil {
		return nil
	}
	return new(string)
}

// statusPart is what release writes as the writer's part of src's status:
// "" removes it; nil leaves the status alone on a source being deleted,
// as removeAll does, and on a mirror labelled as a source, whose status
// is not the writer's.
func (u *uninstall) statusPart(src metav1.Object) *string {
	if src.GetDeletionTimestamp() != nil || desired.IsMirror(src.GetLabels()) {
		return nil
	}
	return new(string)
}

// release takes the writer's finalizer and status part off the source
// key of c, as removeAll does once its mirrors are gone: from the cached
// source, else from the API server's. It reports what it removed.
func (u *uninstall) release(ctx context.Context, c *clusters.Cluster, key Key) (finalizers, statuses int, err error) {
	var src metav1.Object
	if cached, ok := c.Source(key.GVK, key.Namespace, key.Name); ok {
		src = cached
	} else {
		live, err := u.r.getSourceMetadata(ctx, c, key)
		if err != nil || live == nil {
			return 0, 0, err
		}
		src = live
	}
	part := u.statusPart(src)
	fins, status := u.r.sourceChange(src, part)
	record := u.copiedRecord(src)
	if fins == nil && status == nil && record == nil {
		return 0, 0, nil
	}
	if _, err := u.r.patchSourceRecord(ctx, c, key, src, part, record); err != nil {
		return 0, 0, ignoreNotFound(err)
	}
	if fins != nil {
		finalizers = 1
	}
	if status != nil {
		statuses = 1
	}
	return finalizers, statuses, nil
}

// pullStatuses returns the pull mirrors of c that the writer serves and
// that carry a status, which only it writes.
func (u *uninstall) pullStatuses(c *clusters.Cluster) map[Key]string {
	out := map[Key]string{}
	remote := u.r.opts.Scope == ScopeRemote
	for _, gvk := range c.Watched() {
		for _, dst := range c.Pulls(gvk) {
			labels := dst.GetLabels()
			ref, _ := ParsePullMirror(dst)
			if !Serves(remote, ref) || labels[annotations.LabelEnabled] == "true" || desired.IsMirror(labels) {
				continue // as finishPull: never the status of a source or a mirror
			}
			if _, ok := dst.GetAnnotations()[annotations.AnnotationStatus]; ok {
				out[Key{Cluster: c.Name(), GVK: gvk, Namespace: dst.GetNamespace(), Name: dst.GetName(), Pull: true}] = ""
			}
		}
	}
	return out
}

// clearPullStatus removes the status annotation of the cached pull mirror
// key, as last cached: a conflict is a newer version on its way, looked at
// in the next pass.
func (u *uninstall) clearPullStatus(ctx context.Context, c *clusters.Cluster, key Key) error {
	dst, ok := c.Pull(key.GVK, key.Namespace, key.Name)
	if !ok {
		return nil
	}
	_, err := u.r.patchMetadata(ctx, c, key, dst.GetResourceVersion(), nil, new(string), nil)
	return ignoreNotFound(err)
}

// left reports on a lane that ran out of time: what its caches still hold
// of the writer's, when it was reached.
func (u *uninstall) left(c *clusters.Cluster, st *laneState, err error) ClusterCleanup {
	res := st.res
	res.Err = err
	if !res.Reached {
		return res
	}
	if !u.opts.KeepMirrors {
		for key := range u.mirrored(c) {
			if st.mirrorsDone[key] {
				continue
			}
			for _, m := range c.MirrorsOf(key.GVK, desired.SourceRef(key.Cluster, key.Namespace, key.Name)) {
				if m.GetName() == key.Name {
					res.MirrorsLeft++
				}
			}
		}
	}
	for key := range u.sourcesIn(c) {
		if !st.sources[key] {
			res.SourcesLeft++
		}
	}
	return res
}

// sortedKeys returns the keys of m not done, in a stable order.
func sortedKeys(m map[Key]string, done map[Key]bool) []Key {
	out := make([]Key, 0, len(m))
	for k := range m {
		if !done[k] {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}
