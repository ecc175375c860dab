package clusters_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

func newUnstarted(t *testing.T, opts clusters.Options) *clusters.Cluster {
	t.Helper()
	opts.Name, opts.Handler = "c", ignoreEvents{}
	c, err := clusters.New(&rest.Config{Host: "https://" + refusedAddress(t)}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Marking a cluster down aborts the calls in flight with the cluster's
// unreachability as the cause, fails new calls at once, and marking it up
// lets calls through again.
func TestCallContextFollowsHealth(t *testing.T) {
	c := newUnstarted(t, clusters.Options{})
	ctx, done := c.CallContext(context.Background(), time.Minute)
	defer done()
	c.MarkDown("probe timed out")
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a call in flight was not aborted when its cluster was marked down")
	}
	var down *clusters.ErrUnreachable
	if err := clusters.CallError(ctx, ctx.Err()); !errors.As(err, &down) || down.Reason != "probe timed out" {
		t.Fatalf("CallError = %v, want the cluster's unreachability", err)
	}

	start := time.Now()
	next, done2 := c.CallContext(context.Background(), time.Minute)
	defer done2()
	if next.Err() == nil || time.Since(start) > time.Second {
		t.Fatal("a call to a cluster marked down did not fail at once")
	}
	if again := c.Unreachable(); again == nil || !again.Since.Equal(down.Since) {
		t.Errorf("Unreachable() = %v, want the first marking kept", again)
	}
	c.MarkDown("another reason") // no change while down
	if c.Unreachable().Reason != "probe timed out" {
		t.Errorf("a second MarkDown replaced the reason")
	}

	c.MarkUp()
	if c.Unreachable() != nil {
		t.Fatal("still unreachable after MarkUp")
	}
	up, done3 := c.CallContext(context.Background(), time.Minute)
	defer done3()
	if up.Err() != nil {
		t.Fatalf("a call after MarkUp failed: %v", context.Cause(up))
	}
	if err := clusters.CallError(up, errors.New("boom")); err.Error() != "boom" {
		t.Errorf("CallError changed an error of a healthy cluster: %v", err)
	}
}

// A call that outlasts SlowCallAfter reports itself.
func TestSlowCallIsReported(t *testing.T) {
	slow := make(chan struct{}, 1)
	c := newUnstarted(t, clusters.Options{SlowCall: func() { slow <- struct{}{} }, SlowCallAfter: 20 * time.Millisecond})
	_, done := c.CallContext(context.Background(), time.Minute)
	defer done()
	select {
	case <-slow:
	case <-time.After(5 * time.Second):
		t.Fatal("a slow call was not reported")
	}
}

// requestLog records "METHOD URI" of every request sent through the
// transports it wraps, in order.
type requestLog struct {
	mu   sync.Mutex
	list []string
}

func (l *requestLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.list = append(l.list, r.Method+" "+r.URL.RequestURI())
		l.mu.Unlock()
		return next.RoundTrip(r)
	})
}

func (l *requestLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list[min(i, len(l.list)):])
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.list)
}

// throughFaultProxy returns a fault proxy in front of c's API server, and
// a config that reaches it through the proxy and records its requests.
func throughFaultProxy(t *testing.T, c *fleettest.Cluster) (*fleettest.FaultProxy, *rest.Config, *requestLog) {
	t.Helper()
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := fleettest.NewFaultProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cfg := rest.CopyConfig(c.Config)
	cfg.Host = "https://" + proxy.Addr()
	reqs := &requestLog{}
	cfg.Wrap(reqs.wrap)
	return proxy, cfg, reqs
}

// A cluster marked down is asked nothing: its watches wait for it to be
// marked up (a watch that cannot connect has its health checked at once),
// then all reconnect at once and resume from their resourceVersions (no
// LIST, no streamed list), so that what changed meanwhile is heard within
// a second of its return however long it was away, and WatchesCurrent
// says when the caches have it.
func TestWatchesFollowHealth(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	k8s := fleet.Hub.Client
	proxy, cfg, reqs := throughFaultProxy(t, fleet.Hub)
	var unanswered atomic.Int32
	ev := &events{got: map[string][]string{}}
	c, err := clusters.New(cfg, clusters.Options{Name: "one", ManagedBy: annotations.ManagedByMember, Handler: ev,
		WatchConnection: true, Unanswered: func() { unanswered.Add(1) }})
	g.Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); c.Close() })
	c.Start(cctx)
	secrets := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	g.Expect(c.Watch(secrets)).To(Succeed())
	g.Eventually(c.HasSynced, "10s", "20ms").Should(BeTrue())
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "src", Labels: map[string]string{annotations.LabelEnabled: "true"}}}
	g.Expect(k8s.Create(ctx, src)).To(Succeed())
	g.Eventually(func() []string { return ev.of("sources") }, "10s", "20ms").Should(Equal([]string{"src"}))
	g.Eventually(c.WatchesCurrent, "5s", "20ms").Should(BeTrue())

	proxy.Cut()
	g.Eventually(unanswered.Load, "10s", "20ms").ShouldNot(BeZero(), "a watch that could not connect said nothing")
	c.MarkDown("test: probe failed")
	g.Expect(c.WatchesCurrent()).To(BeFalse())
	down := reqs.len()
	src.Labels["changed"] = "yes"
	g.Expect(k8s.Update(ctx, src)).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "while-down"}})).To(Succeed())
	// Long enough for watches on their own back-off to try twice.
	g.Consistently(func() []string { return reqs.since(down) }, "4s", "100ms").Should(BeEmpty(), "requests to a cluster marked down")

	g.Expect(proxy.Heal()).To(Succeed())
	c.MarkUp()
	back := time.Now()
	g.Eventually(func() []string { return ev.of("sources") }, "2s", "10ms").Should(Equal([]string{"src", "src"}))
	g.Eventually(func() []string { return ev.of("namespaces") }, "2s", "10ms").Should(ContainElement("while-down"))
	g.Expect(c.WaitForWatches(ctx)).To(BeTrue())
	t.Logf("caught up %s after the cluster was marked up", time.Since(back).Round(time.Millisecond))
	g.Expect(time.Since(back)).To(BeNumerically("<", 2*time.Second))
	for _, r := range reqs.since(down) {
		if !strings.Contains(r, "watch=true") || strings.Contains(r, "sendInitialEvents") || !strings.Contains(r, "resourceVersion=") {
			t.Errorf("after the return: %s; want watches resumed from their resourceVersion", r)
		}
	}
}

// The watch of the member's kinds object follows the cluster's health as
// the other watches do: nothing while the cluster is marked down, however
// long, and resumed from its resourceVersion once it is marked up.
func TestKindsObjectWatchFollowsHealth(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	proxy, cfg, reqs := throughFaultProxy(t, fleet.Hub)
	var unanswered atomic.Int32
	c, err := clusters.New(cfg, clusters.Options{Name: "one", ManagedBy: annotations.ManagedByHub, Handler: ignoreEvents{},
		WatchConnection: true, Unanswered: func() { unanswered.Add(1) }})
	g.Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); c.Close() })
	c.Start(cctx)

	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: clusters.MemberKindsName,
		Labels: map[string]string{clusters.LabelMemberKinds: "true"}},
		Data: clusters.FormatKindsHint([]schema.GroupVersionKind{configMaps}, nil, time.Now())}
	g.Expect(fleet.Hub.Client.Create(ctx, obj)).To(Succeed())
	kinds := clusters.NewKinds(clusters.KindOptions{Explicit: []schema.GroupVersionKind{configMaps}, Lazy: true,
		MemberKinds: true, ManagedBy: annotations.ManagedByHub})
	hintWatches := func(since int) []string {
		var out []string
		for _, r := range reqs.since(since) {
			if strings.Contains(r, url.QueryEscape(clusters.LabelMemberKinds)) && strings.Contains(r, "watch=true") {
				out = append(out, r)
			}
		}
		return out
	}
	g.Eventually(func() []string {
		kinds.Step(ctx, []*clusters.Cluster{c})
		return hintWatches(0)
	}, "10s", "50ms").ShouldNot(BeEmpty(), "the kinds object is watched")

	// Cut: the watches' connections end and their next attempts fail, as
	// the probe then notices.
	proxy.Cut()
	g.Eventually(unanswered.Load, "10s", "20ms").ShouldNot(BeZero(), "a watch that could not connect said nothing")
	c.MarkDown("test: probe failed")
	down := reqs.len()
	// Long enough for a watch on a back-off of its own (1s, then 2s) to
	// try twice.
	g.Consistently(func() []string { return reqs.since(down) }, "4s", "100ms").Should(BeEmpty(), "requests to a cluster marked down")

	g.Expect(proxy.Heal()).To(Succeed())
	c.MarkUp()
	g.Eventually(func() []string { return hintWatches(down) }, "2s", "10ms").Should(ContainElement(ContainSubstring("resourceVersion=")),
		"the kinds object's watch resumed")
}
