package clusters

import (
	"context"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// A presence is how a cluster notices the first source or pull mirror of a
// kind it does not watch: one LIST with limit=1 per label selector when it
// starts, then a metadata-only watch per selector that matches nothing
// until somebody labels an object. An idle watch costs the API server
// nothing and this agent no request, where polling with LISTs cost three
// requests per kind and cluster every probe interval, and noticed a new
// source only that late.
//
// Our own mirrors are only LISTed: a mirror appears only when this agent
// writes one, and it writes only kinds it watches.
//
// It is not a cache (no Reflector, no store): it only has to see one event.
// Its goroutine reads both watches, so an unused kind costs one goroutine
// and two watch streams per cluster.
type presence struct {
	cancel context.CancelFunc
	used   atomic.Bool
	// err is the failure of the first LISTs, kept so that a kind the agent
	// may not list is not asked about again until the next discovery.
	err error
}

// presenceSelectors are the label selectors of a presence's watches.
var presenceSelectors = []string{annotations.LabelEnabled + "=true", annotations.LabelPull + "=true"}

// Presence reports whether c has a source, one of our mirrors or a pull
// mirror of gvk, a kind it does not watch. The first call LISTs (and so
// can fail); from then on the answer comes from watches, and notify is
// called when it changes to true. Watch(gvk) stops the presence;
// ResetPresence forgets failures.
func (c *Cluster) Presence(ctx context.Context, gvk schema.GroupVersionKind, notify func()) (bool, error) {
	c.mu.Lock()
	p, ok := c.presences[gvk]
	c.mu.Unlock()
	if ok {
		return p.used.Load(), p.err
	}
	res, err := c.MetadataResource(gvk, metav1.NamespaceAll)
	if err != nil {
		return false, err
	}
	p = &presence{}
	mirrors := annotations.LabelMirror + "=true," + annotations.LabelManagedBy + "=" + c.opts.ManagedBy
	rvs := make([]string, len(presenceSelectors))
	for i, sel := range append(append([]string(nil), presenceSelectors...), mirrors) {
		found, rv, err := listOne(ctx, res, sel)
		if apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) {
			p.err = err // remembered: asked again after the next discovery
			break
		}
		if err != nil {
			return false, err // asked again at the next pass
		}
		if found {
			p.used.Store(true)
			break
		}
		if i < len(rvs) {
			rvs[i] = rv
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, watched := c.kinds[gvk]; watched || c.closed || c.ctx == nil {
		return p.used.Load(), p.err
	}
	if old, ok := c.presences[gvk]; ok { // another caller won the race
		return old.used.Load(), old.err
	}
	c.presences[gvk] = p
	if !p.used.Load() && p.err == nil {
		var pctx context.Context
		pctx, p.cancel = context.WithCancel(c.ctx)
		go p.watch(pctx, c.health, res, rvs, notify)
	}
	return p.used.Load(), p.err
}

// stopPresenceLocked ends the presence of gvk; c.mu must be held.
func (c *Cluster) stopPresenceLocked(gvk schema.GroupVersionKind) {
	if p, ok := c.presences[gvk]; ok {
		if p.cancel != nil {
			p.cancel()
		}
		delete(c.presences, gvk)
	}
}

// ResetPresence forgets the presences that failed (kinds the agent may not
// list) and a refusal to list MirrorPolicies, to ask again: discovery may
// have changed, or RBAC.
func (c *Cluster) ResetPresence() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.policiesRefused = nil
	for gvk, p := range c.presences {
		if p.err != nil {
			c.stopPresenceLocked(gvk)
		}
	}
}

// listOne LISTs at most one object matching selector, and returns the
// list's resourceVersion to watch from.
func listOne(ctx context.Context, res metadata.ResourceInterface, selector string) (bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
	if err != nil {
		return false, "", err
	}
	return len(list.Items) > 0, list.ResourceVersion, nil
}

// watch follows the presence's selectors from rvs until an object shows up
// or ctx ends. A watch that ends is opened again from the last
// resourceVersion it reported (bookmarks keep it current); one the API
// server can no longer resume is LISTed again first. While the cluster is
// marked down (h) it dials nothing, and it reconnects when it is marked up.
// retryBackoff spaces the retries of the label-selected watches that are
// no cache (presences, the kinds objects): longer each time until a watch
// lasts, from 1s up to a minute.
func retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 7, Cap: time.Minute}
}

func (p *presence) watch(ctx context.Context, h *health, res metadata.ResourceInterface, rvs []string, notify func()) {
	retry := newRetries(h, retryBackoff)
	watches := make([]apiwatch.Interface, len(presenceSelectors))
	opened := make([]time.Time, len(presenceSelectors))
	defer func() {
		for _, w := range watches {
			if w != nil {
				w.Stop()
			}
		}
	}()
	for ctx.Err() == nil {
		if !retry.begin(ctx) {
			return
		}
		// (Re)open what is not open.
		failed := false
		for i, sel := range presenceSelectors {
			if watches[i] != nil {
				continue
			}
			if rvs[i] == "" {
				found, rv, err := listOne(ctx, res, sel)
				if found {
					p.used.Store(true)
					notify()
					return
				}
				if err != nil {
					retry.throttled(err)
					failed = true
					continue
				}
				rvs[i] = rv
			}
			w, err := res.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rvs[i], AllowWatchBookmarks: true})
			if err != nil {
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rvs[i] = ""
				}
				retry.throttled(err)
				failed = true
				continue
			}
			watches[i], opened[i] = w, time.Now()
		}
		if failed {
			if !retry.pause(ctx) {
				return
			}
			continue
		}
		i, ev, open := next(ctx, watches)
		switch {
		case ctx.Err() != nil:
			return
		case ev.Type == apiwatch.Added || ev.Type == apiwatch.Modified:
			p.used.Store(true)
			notify()
			return
		case ev.Type == apiwatch.Bookmark:
			if m, ok := ev.Object.(metav1.Object); ok {
				rvs[i] = m.GetResourceVersion()
			}
			continue
		case !open:
			// Ended: the API server's timeout (tens of minutes), or a
			// connection that broke. Opened again from rvs[i].
		default:
			// An Error event, most likely 410 Gone: the resourceVersion
			// is too old to resume from; LIST again.
			watches[i].Stop()
			rvs[i] = ""
		}
		watches[i] = nil
		if time.Since(opened[i]) > time.Minute {
			retry.reset()
		} else if !retry.pause(ctx) {
			return
		}
	}
}

// next waits for the next event of either watch (there are two
// presenceSelectors); open is false when the watch i ended.
func next(ctx context.Context, ws []apiwatch.Interface) (i int, ev apiwatch.Event, open bool) {
	select {
	case <-ctx.Done():
		return 0, ev, false
	case ev, open = <-ws[0].ResultChan():
		return 0, ev, open
	case ev, open = <-ws[1].ResultChan():
		return 1, ev, open
	}
}

// closePresencesLocked ends every presence; c.mu must be held.
func (c *Cluster) closePresencesLocked() {
	c.stopKindsHintLocked()
	for gvk := range c.presences {
		c.stopPresenceLocked(gvk)
	}
}
