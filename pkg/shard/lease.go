package shard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// LabelGroup marks the shard Leases of one hub; its value is the group
// (Options.Group), so that two hubs in one namespace do not mix.
const LabelGroup = annotations.Prefix + "hub-shard"

// AnnotationClaims lists, comma-separated and sorted, the clusters a
// replica claims: those it serves, is about to serve or is still tearing
// down. Another replica serves none of them while it is live.
const AnnotationClaims = annotations.Prefix + "shard-claims"

// peer is what a replica saw of another replica's Lease, and when, on its
// own clock: liveness is judged, as client-go's leader election does, by
// observed changes of the Lease, never by the timestamps another
// replica's clock wrote into it.
type peer struct {
	identity        string
	claims          []string
	resourceVersion string
	seen            time.Time
	// since is when the replica was seen live first in its current run of
	// changes less than a lease duration apart.
	since time.Time
}

// leases keeps this replica's Lease and watches the group's Leases.
type leases struct {
	client   leaseClient
	name     string // this replica's Lease
	identity string
	group    string
	duration time.Duration
	changed  func() // called when a Lease changed or this replica's freshness did

	mu        sync.Mutex
	peers     map[string]*peer // by Lease name, this replica's own included
	own       *coordinationv1.Lease
	renewedAt time.Time // start of the last successful renewal, local clock
	published []string  // the claims the last successful write carried
	pubRV     string    // and the resourceVersion it produced
}

// newLeases is replica identity's view of the Leases of group, read and
// written through client; changed is called as leases.changed.
func newLeases(client leaseClient, group, identity string, duration time.Duration, changed func()) *leases {
	return &leases{client: client, name: leaseName(group, identity), identity: identity,
		group: group, duration: duration, changed: changed, peers: map[string]*peer{}}
}

// watch runs an informer on the group's Leases until ctx ends.
func (l *leases) watch(ctx context.Context) cache.SharedIndexInformer {
	sel := labels.SelectorFromSet(labels.Set{LabelGroup: l.group}).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return l.client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return l.client.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.observe(obj) },
		UpdateFunc: func(_, obj any) { l.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if lease, ok := obj.(*coordinationv1.Lease); ok {
				l.mu.Lock()
				delete(l.peers, lease.Name)
				l.mu.Unlock()
				l.changed()
			}
		},
	})
	go inf.RunWithContext(ctx)
	return inf
}

func (l *leases) observe(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	l.mu.Lock()
	p := l.peers[lease.Name]
	if p == nil || p.resourceVersion != lease.ResourceVersion {
		now := time.Now()
		since := now
		if p != nil && now.Sub(p.seen) < l.duration {
			since = p.since
		}
		l.peers[lease.Name] = &peer{identity: holder(lease), claims: parseClaims(lease), resourceVersion: lease.ResourceVersion, seen: now, since: since}
	}
	l.mu.Unlock()
	l.changed()
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity != nil {
		return *l.Spec.HolderIdentity
	}
	return l.Name
}

func parseClaims(l *coordinationv1.Lease) []string {
	v := l.Annotations[AnnotationClaims]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// fresh reports whether this replica's Lease was renewed recently enough
// for it to serve clusters: a renewal that started less than deadline ago
// succeeded.
func (l *leases) fresh(deadline time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.renewedAt.IsZero() && time.Since(l.renewedAt) < deadline
}

// freshUntil is when this replica stops serving unless it renews.
func (l *leases) freshUntil(deadline time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewedAt.Add(deadline)
}

// renew writes this replica's Lease: renewed now, claiming claims. It
// creates the Lease when there is none.
func (l *leases) renew(ctx context.Context, claims []string) error {
	start := time.Now()
	l.mu.Lock()
	own := l.own
	l.mu.Unlock()
	now := metav1.NewMicroTime(start)
	seconds := int32(min(l.duration/time.Second, math.MaxInt32)) //nolint:gosec // bounded just before
	want := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Labels: map[string]string{LabelGroup: l.group},
			Annotations: map[string]string{AnnotationClaims: strings.Join(claims, ",")}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &l.identity, LeaseDurationSeconds: &seconds, RenewTime: &now},
	}
	var written *coordinationv1.Lease
	var err error
	if own == nil {
		written, err = l.client.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			// A Lease of ours from before a restart: take it over.
			own, err = l.client.Get(ctx, l.name, metav1.GetOptions{})
			if err == nil {
				l.mu.Lock()
				l.own = own
				l.mu.Unlock()
				return l.renew(ctx, claims)
			}
		}
	} else {
		want.ResourceVersion = own.ResourceVersion
		if want.Spec.AcquireTime = own.Spec.AcquireTime; want.Spec.AcquireTime == nil {
			want.Spec.AcquireTime = &now
		}
		written, err = l.client.Update(ctx, want, metav1.UpdateOptions{FieldManager: fieldManager})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			l.mu.Lock()
			l.own = nil // read or create it again at the next renewal
			l.mu.Unlock()
		}
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.own, l.renewedAt, l.published, l.pubRV = written, start, claims, written.ResourceVersion
	l.mu.Unlock()
	return nil
}

// fieldManager names the shard's writes of Leases.
const fieldManager = "fleetmirror-hub-shard"

// seenOwnClaim reports whether this replica's Lease was last written
// claiming cluster, and the watch has delivered that write or a later one:
// then it has delivered every write of the other Leases that came before
// it, so that a claim of the same cluster made before ours is known. (One
// watch delivers the events of its resource in the order of their
// resourceVersions, etcd's revisions.)
func (l *leases) seenOwnClaim(cluster string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peers[l.name]
	if p == nil || l.pubRV == "" || !slices.Contains(l.published, cluster) {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(p.resourceVersion, l.pubRV)
	return err == nil && c >= 0
}

// live lists the identities of the other replicas whose Lease changed
// less than a lease duration ago, on this replica's clock.
func (l *leases) live() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, p := range l.peers {
		if name != l.name && time.Since(p.seen) < l.duration {
			out = append(out, p.identity)
		}
	}
	return out
}

// settled lists the identities of the replicas, this one included, that
// have been live for settle at least: their Leases changed less than a
// lease duration apart ever since, on this replica's clock. settling
// reports whether a live replica, this one included, has not been live
// that long yet.
func (l *leases) settled(settle time.Duration) (out []string, settling bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers[l.name] == nil {
		settling = true // its own Lease not seen yet
	}
	for _, p := range l.peers {
		switch {
		case time.Since(p.seen) >= l.duration:
		case time.Since(p.since) >= settle:
			out = append(out, p.identity)
		default:
			settling = true
		}
	}
	return out, settling
}

// claimedByOther reports whether another replica may serve cluster: a
// live one claims it, or a silent one claims it and its Lease, read now
// from the API server (not from the watch, which may lag), changed since
// it was last seen. A Lease that is gone or unchanged for a lease duration
// belongs to a replica that stopped serving at its renew deadline.
//
// checked holds, for one step, the silent replicas whose Lease was read
// and found gone or unchanged: the answer holds for every cluster they
// claim, so the step reads each silent Lease once, not once per cluster
// and state. Read per cluster, the takeover of a killed replica's 355
// clusters spent about 12 s on 700 reads of its Lease, one after another
// (the hub-shards bench on kcp).
func (l *leases) claimedByOther(ctx context.Context, cluster string, checked silentChecked) bool {
	l.mu.Lock()
	var silent []string
	for name, p := range l.peers {
		if name == l.name || !slices.Contains(p.claims, cluster) {
			continue
		}
		if time.Since(p.seen) < l.duration {
			l.mu.Unlock()
			return true
		}
		if !checked[name] {
			silent = append(silent, name)
		}
	}
	l.mu.Unlock()
	for _, name := range silent {
		cur, err := l.client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			checked[name] = true
			continue
		case err != nil:
			return true // not known to be dead
		}
		l.mu.Lock()
		p := l.peers[name]
		changed := p == nil || p.resourceVersion != cur.ResourceVersion
		l.mu.Unlock()
		if changed {
			l.observe(cur)
			return true
		}
		checked[name] = true
	}
	return false
}

// silentChecked is the memory of one step of claimedByOther: the silent
// replicas, by Lease name, whose Lease it read and found gone or unchanged.
type silentChecked map[string]bool

// collect deletes the group's Leases that have not changed for many lease
// durations: replicas gone for good (a Deployment's pods get new names).
// The delete is conditional on the version seen, so that a Lease renewed
// meanwhile stays.
func (l *leases) collect(ctx context.Context) {
	const after = 10
	l.mu.Lock()
	var old []*peer
	var names []string
	for name, p := range l.peers {
		if name != l.name && time.Since(p.seen) > after*l.duration {
			old, names = append(old, p), append(names, name)
		}
	}
	l.mu.Unlock()
	for i, p := range old {
		rv := p.resourceVersion
		// NotFound and Conflict (renewed after all) are fine; anything
		// else is tried again at the next round.
		_ = l.client.Delete(ctx, names[i], metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
	}
}

// leaseName is the name of a replica's Lease.
func leaseName(group, identity string) string {
	return fmt.Sprintf("%s-%s", group, identity)
}

// AwaitStopped waits until no replica of the group o.Group may serve a
// cluster any more: until every Lease of the group is gone or has not
// changed for o.LeaseDuration on this process's clock, as a replica that
// waits to take over judges it (a replica stops serving RenewDeadline after
// its last renewal). The hub's uninstall mode waits so before it cleans
// up, and deletes the Leases after (Stopped.Delete). It LISTs the group's
// Leases every LeaseDuration/8, which the shard Role allows.
func AwaitStopped(ctx context.Context, o Options) (*Stopped, error) {
	client, err := newLeaseClient(o.Config, o.Namespace)
	if err != nil {
		return nil, err
	}
	l := &leases{client: client, group: o.Group, duration: o.LeaseDuration, changed: func() {}, peers: map[string]*peer{}}
	sel := labels.SelectorFromSet(labels.Set{LabelGroup: o.Group}).String()
	for {
		list, lerr := l.client.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err = lerr; err == nil {
			// A Lease gone is a replica gone; one changed is seen now.
			peers := map[string]*peer{}
			l.mu.Lock()
			for i := range list.Items {
				lease := &list.Items[i]
				if p := l.peers[lease.Name]; p != nil && p.resourceVersion == lease.ResourceVersion {
					peers[lease.Name] = p
				} else {
					peers[lease.Name] = &peer{identity: holder(lease), resourceVersion: lease.ResourceVersion, seen: time.Now()}
				}
			}
			l.peers = peers
			l.mu.Unlock()
		}
		live := l.live()
		if err == nil && len(live) == 0 {
			return &Stopped{l: l}, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return nil, fmt.Errorf("cannot list the shard Leases of %s: %w", o.Group, err)
			}
			slices.Sort(live)
			return nil, fmt.Errorf("replicas of the sharded hub still renew their shard Leases (%s): stop them (delete the hub's Deployment) and run the uninstall again",
				strings.Join(live, ", "))
		case <-time.After(o.LeaseDuration / 8):
		}
	}
}

// Stopped is the Leases of a group whose replicas AwaitStopped saw stop.
type Stopped struct {
	l *leases
}

// Delete deletes the Leases AwaitStopped saw stop, so that an uninstalled
// hub leaves none behind. Only the shard's own are deleted: labelled with
// the group (AwaitStopped lists no others) and named after their holder as
// a replica names its Lease. Each delete is conditional on the version seen
// stopped, so that the Lease of a replica that came back since stays; a
// Lease gone already is fine, one that changed is reported.
func (s *Stopped) Delete(ctx context.Context) error {
	s.l.mu.Lock()
	rvs := map[string]string{}
	for name, p := range s.l.peers {
		if name == leaseName(s.l.group, p.identity) {
			rvs[name] = p.resourceVersion
		}
	}
	s.l.mu.Unlock()
	var errs []error
	for name, rv := range rvs {
		err := s.l.client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			errs = append(errs, fmt.Errorf("shard Lease %s changed after its replica was seen stopped: a replica of the hub runs again; stop it and run the uninstall again", name))
		default:
			errs = append(errs, fmt.Errorf("deleting shard Lease %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
