package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// How a mirror's content is judged: the tracker digests the data of every
// mirror it sees and compares it with the digest of the data the bench last
// wrote to the source. That is what a user would check (kubectl get shows
// the same bytes), it needs no knowledge of the agent's own hash, and a
// mirror that carries the right content-hash annotation over wrong data
// would not count. The digest is computed once per watch event, in the
// informer's transform, which then drops the payload so the cache holds
// metadata only.

// digestAnnotation carries the tracker's digest on cached mirrors.
const digestAnnotation = "bench.fleetmirror.io/digest"

// Kinds of the workloads' objects.
const (
	kindSecret    = "Secret"
	kindConfigMap = "ConfigMap"
)

// mirrorKey names one mirror: the cluster it is in, its kind, namespace and name.
type mirrorKey struct {
	Cluster, Kind, Namespace, Name string
}

func (k mirrorKey) String() string {
	return k.Cluster + "/" + k.Kind + "/" + k.Namespace + "/" + k.Name
}

// wantAbsent is the wanted state of a mirror that must not exist; any
// other is the digest of the data it must have.
const wantAbsent = ""

// tracker keeps the digest of every mirror in the watched clusters, fed by
// label-selected informers, and times goals: the moment every mirror of a
// set is in its wanted state, taken in the event handler that completed it.
type tracker struct {
	mu      sync.Mutex
	digests map[mirrorKey]string // present mirrors
	goal    *goal
	stops   []func()
}

// goal is a set of mirrors in wanted states.
type goal struct {
	want map[mirrorKey]string
	met  int
	done chan struct{}
	at   time.Time
}

func newTracker() *tracker {
	return &tracker{digests: map[mirrorKey]string{}}
}

// watch starts informers on the Secrets and ConfigMaps of cs labelled as
// mirrors and waits until they have synced.
func (t *tracker) watch(ctx context.Context, cluster string, cs kubernetes.Interface) error {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = annotations.LabelMirror + "=true" }),
		informers.WithTransform(digestTransform))
	for kind, inf := range map[string]cache.SharedIndexInformer{
		kindSecret:    f.Core().V1().Secrets().Informer(),
		kindConfigMap: f.Core().V1().ConfigMaps().Informer(),
	} {
		if _, err := inf.AddEventHandler(t.handler(cluster, kind)); err != nil {
			cancel()
			return err
		}
	}
	f.Start(ctx.Done())
	t.stops = append(t.stops, func() { cancel(); f.Shutdown() })
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cluster %s: %v informer not synced: %w", cluster, typ, ctx.Err())
		}
	}
	return nil
}

// stop ends every informer.
func (t *tracker) stop() {
	for _, s := range t.stops {
		s()
	}
	t.stops = nil
}

func (t *tracker) handler(cluster, kind string) cache.ResourceEventHandler {
	key := func(obj any) (mirrorKey, string, bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return mirrorKey{}, "", false
		}
		return mirrorKey{Cluster: cluster, Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}, m.GetAnnotations()[digestAnnotation], true
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if k, d, ok := key(obj); ok {
				t.observe(k, d, true)
			}
		},
		UpdateFunc: func(_, obj any) {
			if k, d, ok := key(obj); ok {
				t.observe(k, d, true)
			}
		},
		DeleteFunc: func(obj any) {
			if k, _, ok := key(obj); ok {
				t.observe(k, "", false)
			}
		},
	}
}

// digestTransform digests the data of a Secret or ConfigMap into an
// annotation and drops the payload and managed fields from the cache.
func digestTransform(obj any) (any, error) {
	var m *metav1.ObjectMeta
	var d string
	switch o := obj.(type) {
	case *corev1.Secret:
		d, m = digest(o.Data), &o.ObjectMeta
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		d, m = digestStrings(o.Data), &o.ObjectMeta
		o.Data, o.BinaryData = nil, nil
	default:
		return obj, nil
	}
	m.ManagedFields = nil
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[digestAnnotation] = d
	return obj, nil
}

// satisfied tells whether a mirror in state (digest, present) is as wanted.
func satisfied(want, digest string, present bool) bool {
	if want == wantAbsent {
		return !present
	}
	return present && digest == want
}

func (t *tracker) observe(k mirrorKey, d string, present bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	old, wasPresent := t.digests[k]
	if present {
		t.digests[k] = d
	} else {
		delete(t.digests, k)
	}
	g := t.goal
	if g == nil {
		return
	}
	want, ok := g.want[k]
	if !ok {
		return
	}
	before, after := satisfied(want, old, wasPresent), satisfied(want, d, present)
	switch {
	case !before && after:
		g.met++
	case before && !after:
		g.met--
	}
	if g.met == len(g.want) && g.at.IsZero() {
		g.at = now
		close(g.done)
	}
}

// expect makes want the goal, replacing any other, and returns it; it may
// be met already.
func (t *tracker) expect(want map[mirrorKey]string) *goal {
	g := &goal{want: want, done: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, w := range want {
		d, present := t.digests[k]
		if satisfied(w, d, present) {
			g.met++
		}
	}
	if g.met == len(want) {
		g.at = time.Now()
		close(g.done)
	}
	t.goal = g
	return g
}

// wait waits until the goal is met and returns when it was, or fails after
// timeout naming a few mirrors not in their wanted state. failed, when not
// nil, is checked every second (an agent that died).
func (t *tracker) wait(ctx context.Context, g *goal, timeout time.Duration, failed func() error) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-g.done:
			return g.at, nil
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("after %s: %s", timeout, t.describe(g))
		case <-tick.C:
			if failed != nil {
				if err := failed(); err != nil {
					return time.Time{}, err
				}
			}
		}
	}
}

// describe says how far a goal is from being met.
func (t *tracker) describe(g *goal) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var missing []string
	for k, w := range g.want {
		d, present := t.digests[k]
		if satisfied(w, d, present) {
			continue
		}
		state := "absent"
		if present {
			state = "stale content"
		}
		if w == wantAbsent {
			state = "still present"
		}
		missing = append(missing, k.String()+" ("+state+")")
	}
	slices.Sort(missing)
	n := len(missing)
	if len(missing) > 5 {
		missing = append(missing[:5], "...")
	}
	return fmt.Sprintf("%d of %d mirrors as wanted; %d not: %s", len(g.want)-n, len(g.want), n, strings.Join(missing, ", "))
}

// count returns the number of mirrors present in cluster ("" for all).
func (t *tracker) count(cluster string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cluster == "" {
		return len(t.digests)
	}
	n := 0
	for k := range t.digests {
		if k.Cluster == cluster {
			n++
		}
	}
	return n
}

// unexpected lists mirrors present that are not in want, and mirrors of
// want not in their wanted state.
func (t *tracker) unexpected(want map[mirrorKey]string) (extra, wrong []mirrorKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.digests {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	for k, w := range want {
		d, present := t.digests[k]
		if !satisfied(w, d, present) {
			wrong = append(wrong, k)
		}
	}
	return extra, wrong
}

// digest is a digest of data independent of key order.
func digest(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// digestStrings digests ConfigMap data like the same bytes in a Secret.
func digestStrings(data map[string]string) string {
	b := make(map[string][]byte, len(data))
	for k, v := range data {
		b[k] = []byte(v)
	}
	return digest(b)
}
