package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleet"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

var api *fleettest.Fleet

func TestMain(m *testing.M) { fleettest.Main(m, &api) }

// handProvider hands the fleet's Engager to the test.
type handProvider chan fleet.Engager

func (p handProvider) Run(ctx context.Context, e fleet.Engager) error {
	p <- e
	<-ctx.Done()
	return nil
}

// journal is a Subscriber that writes down what the fleet tells it.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, fmt.Sprintf(format, args...))
}

func (j *journal) read() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

func (j *journal) Source(string, schema.GroupVersionKind, *unstructured.Unstructured, bool) {}
func (j *journal) Mirror(string, schema.GroupVersionKind, *clusters.Mirror, bool)           {}
func (j *journal) Namespace(string, *metav1.PartialObjectMetadata)                          {}
func (*journal) Policy(string, *v1alpha1.MirrorPolicy, bool)                                {}
func (j *journal) Up(c *clusters.Cluster)                                                   { j.add("up %s", c.Name()) }
func (j *journal) Down(c *clusters.Cluster)                                                 { j.add("down %s", c.Name()) }
func (j *journal) Left(name string, gone bool)                                              { j.add("left %s gone=%v", name, gone) }
func (j *journal) KindSynced(c *clusters.Cluster, gvk schema.GroupVersionKind) {
	j.add("synced %s %s", c.Name(), gvk.Kind)
}

const finalizer = "example.com/test-cleanup"

var secrets = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// TestEngageAndDisengage drives a fleet through its provider seam against
// a real API server: a cluster engaged comes up with its kind watched; one
// replaced keeps its sources' finalizers and is back at once; one that
// leaves has them taken off; a cut connection is down and back up.
func TestEngageAndDisengage(t *testing.T) {
	if api == nil {
		t.Skip("needs an API server")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hub := api.Hub

	u, err := url.Parse(hub.Config.Host)
	g.Expect(err).NotTo(HaveOccurred())
	proxy, err := fleettest.NewFaultProxy(u.Host)
	g.Expect(err).NotTo(HaveOccurred())
	defer proxy.Close()
	kc, err := hub.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	kc, err = proxy.Through(kc)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	g.Expect(err).NotTo(HaveOccurred())

	hand := make(handProvider, 1)
	f := fleet.New(fleet.Options{
		Provider: hand, ManagedBy: "test", FieldManager: "test", Finalizer: finalizer,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second,
		Kinds: clusters.KindOptions{Explicit: []schema.GroupVersionKind{secrets}, ProbeInterval: 200 * time.Millisecond},
	})
	j := &journal{}
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, j) }()
	e := <-hand
	g.Expect(f.Known()).To(BeFalse())
	e.Listed()
	g.Expect(f.Known()).To(BeTrue())

	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fleet-src", Finalizers: []string{finalizer},
		Labels: map[string]string{annotations.LabelEnabled: "true"}}}
	g.Expect(hub.Client.Create(ctx, src)).To(Succeed())
	finalizers := func() []string {
		s := &corev1.Secret{}
		g.Expect(hub.Client.Get(ctx, client.ObjectKeyFromObject(src), s)).To(Succeed())
		return s.Finalizers
	}

	engage := func(cause error) context.CancelCauseFunc {
		ectx, end := context.WithCancelCause(ctx)
		g.Expect(e.Engage(ectx, fleet.Spec{Name: "a", Config: cfg, Labels: map[string]string{"env": "dev"}})).To(Succeed())
		return end
	}
	end := engage(nil)
	g.Eventually(j.read, 10*time.Second).Should(ContainElements("up a", "synced a Secret"))
	g.Expect(f.Members()).To(HaveLen(1))
	g.Expect(f.Members()[0].Up).To(BeTrue())
	g.Expect(f.Members()[0].Labels).To(HaveKeyWithValue("env", "dev"))
	g.Eventually(func() int { return len(f.Cluster("a").Sources(secrets)) }, 5*time.Second).Should(Equal(1))
	g.Expect(e.Engage(ctx, fleet.Spec{Name: "a", Config: cfg})).To(MatchError(ContainSubstring("engaged already")))
	e.Relabel("a", map[string]string{"env": "prod"})
	g.Expect(f.Members()[0].Labels).To(HaveKeyWithValue("env", "prod"))

	// A cut connection: down, then up again when healed.
	proxy.Cut()
	g.Eventually(j.read, 10*time.Second).Should(ContainElement("down a"))
	g.Expect(f.Cluster("a").Unreachable()).NotTo(BeNil())
	g.Expect(proxy.Heal()).To(Succeed())
	g.Eventually(func() int { return count(j.read(), "up a") }, 10*time.Second).Should(Equal(2))
	g.Expect(f.Cluster("a").Unreachable()).To(BeNil())

	// Replaced: engaged again at once, under the same name; the sources
	// keep the finalizer.
	old := f.Cluster("a")
	end(fleet.ErrReplaced)
	end = engage(nil)
	g.Expect(j.read()).To(ContainElement("left a gone=false"))
	g.Expect(f.Cluster("a")).NotTo(BeIdenticalTo(old))
	g.Expect(finalizers()).To(ContainElement(finalizer))
	g.Eventually(func() int { return count(j.read(), "up a") }, 10*time.Second).Should(Equal(3))

	// Gone: the sources are released, and the cluster is no more.
	end(nil)
	g.Eventually(j.read, 10*time.Second).Should(ContainElement("left a gone=true"))
	g.Expect(f.Cluster("a")).To(BeNil())
	g.Expect(finalizers()).NotTo(ContainElement(finalizer))

	cancel()
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
}

// TestEngageBeforeRun is refused: a provider only engages within Run.
func TestEngageBeforeRun(t *testing.T) {
	f := fleet.New(fleet.Options{})
	if err := f.Engage(context.Background(), fleet.Spec{Name: "a"}); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("Engage before Run = %v, want an error", err)
	}
}

func count(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if l == line {
			n++
		}
	}
	return n
}

// stalledLists holds every list and watch of Namespaces until the
// request is cancelled: a connection through it never syncs.
type stalledLists struct{ next http.RoundTripper }

func (s stalledLists) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces" {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return s.next.RoundTrip(r)
}

func (s stalledLists) WrappedRoundTripper() http.RoundTripper { return s.next }

// TestWaitForLocalFollowsReplacement: the local cluster replaced before
// its caches synced (a sharded hub engages its own cluster read only,
// then for writing, as the split settles at start-up) does not hold the
// controller's start for good; WaitForLocal returns once the connection
// that replaced it has synced.
func TestWaitForLocalFollowsReplacement(t *testing.T) {
	if api == nil {
		t.Skip("needs an API server")
	}
	g := NewWithT(t)
	ctx := context.Background()
	f, e := runLocalFleet(t, 200*time.Millisecond)

	stalled := rest.CopyConfig(api.Hub.Config)
	stalled.Wrap(func(rt http.RoundTripper) http.RoundTripper { return stalledLists{next: rt} })
	first, replace := context.WithCancelCause(ctx)
	g.Expect(e.Engage(first, fleet.Spec{Name: "hub", Config: stalled, Local: true, ReadOnly: true})).To(Succeed())
	e.Listed()
	waited := make(chan error, 1)
	go func() { waited <- f.WaitForLocal(ctx) }()
	g.Consistently(waited, time.Second).ShouldNot(Receive())
	g.Expect(f.LocalSynced()).To(BeFalse())

	replace(fleet.ErrReplaced)
	g.Expect(e.Engage(ctx, fleet.Spec{Name: "hub", Config: api.Hub.Config, Local: true})).To(Succeed())
	g.Eventually(waited, 20*time.Second).Should(Receive(BeNil()))
	// The kinds pass may add a watch after WaitForLocal saw the new
	// connection synced (a fresh watch is unsynced for a moment): what
	// matters is that the wait ended, and that the caches sync.
	g.Eventually(f.LocalSynced, 10*time.Second).Should(BeTrue())
}

// heldDiscovery holds the discovery of the core group (GET /api/v1, which
// the kinds pass needs to map a kind) until release is closed.
type heldDiscovery struct {
	next    http.RoundTripper
	release chan struct{}
}

func (h heldDiscovery) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Path == "/api/v1" {
		select {
		case <-h.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return h.next.RoundTrip(r)
}

func (h heldDiscovery) WrappedRoundTripper() http.RoundTripper { return h.next }

// TestReadyOnceTheKindsPassLooked: the agent is not ready (/readyz) while
// only its namespaces have synced: a kinds pass must have looked at its
// cluster, so that the caches that synced include the kinds in use. A
// rolling update would otherwise retire the old replica while the new one
// has not started to watch what it mirrors.
func TestReadyOnceTheKindsPassLooked(t *testing.T) {
	if api == nil {
		t.Skip("needs an API server")
	}
	g := NewWithT(t)
	ctx := context.Background()
	f, e := runLocalFleet(t, time.Hour)

	held := heldDiscovery{release: make(chan struct{})}
	cfg := rest.CopyConfig(api.Hub.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { held.next = rt; return held })
	g.Expect(e.Engage(ctx, fleet.Spec{Name: "hub", Config: cfg, Local: true})).To(Succeed())
	e.Listed()
	g.Eventually(f.LocalSynced, 10*time.Second).Should(BeTrue(), "the namespaces synced")
	g.Consistently(f.LocalReady, time.Second).Should(BeFalse(), "ready before a kinds pass looked at the cluster")

	close(held.release)
	g.Eventually(f.LocalReady, 10*time.Second).Should(BeTrue())
	g.Expect(f.Cluster("hub").Watched()).To(ConsistOf(secrets))
}

// runLocalFleet runs a fleet whose one kind is Secrets, reviewed every
// review, and returns it with its engager; the fleet stops at cleanup.
func runLocalFleet(t *testing.T, review time.Duration) (*fleet.Fleet, fleet.Engager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hand := make(handProvider, 1)
	f := fleet.New(fleet.Options{
		Provider: hand, ManagedBy: "test", FieldManager: "test", Finalizer: finalizer,
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second,
		Kinds: clusters.KindOptions{Explicit: []schema.GroupVersionKind{secrets}, ProbeInterval: review},
	})
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, &journal{}) }()
	t.Cleanup(func() {
		cancel()
		NewWithT(t).Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	})
	return f, <-hand
}
