package events

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

var fleet *fleettest.Fleet

func TestMain(m *testing.M) { fleettest.Main(m, &fleet) }

const (
	timeout = 20 * time.Second
	poll    = 50 * time.Millisecond
)

// serial numbers the namespaces of the tests (-count runs each test
// several times in one API server).
var serial atomic.Int32

// namespace creates a namespace for the test and returns its name.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	if fleet == nil {
		t.Skip("needs an API server")
	}
	ns := fmt.Sprintf("%s-%d", prefix, serial.Add(1))
	g := NewWithT(t)
	g.Expect(fleet.Hub.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// object is a ConfigMap ns/name as the agents hold their sources: an
// unstructured object with its kind. It need not exist.
func object(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID("2f1b2d4e-6c1a-4c3e-9a55-1d2b3c4d5e6f")
	return u
}

// logs collects what a Broadcaster logs, errors and V(1) alike.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 1})
}

func (l *logs) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// ours starts a Broadcaster on cfg for the test.
func ours(t *testing.T, cfg *rest.Config, opts Options) *Broadcaster {
	t.Helper()
	if opts.Component == "" {
		opts.Component = "fleetmirror-test"
	}
	b, err := New(cfg, nil, opts)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(b.Shutdown)
	return b
}

// theirs starts client-go's core/v1 recorder on cfg for the test.
func theirs(t *testing.T, cfg *rest.Config) record.EventRecorder {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "fleetmirror-test"})
}

// written is what an Event says, without its name, namespace, object and
// times, which differ from one recorder to the other.
type written struct {
	Type, Reason, Message string
	Count                 int32
	Component, Reporting  string
}

// eventsIn lists the Events in ns, as written, sorted.
func eventsIn(g Gomega, ns string) []written {
	var list corev1.EventList
	g.Expect(fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := make([]written, 0, len(list.Items))
	for _, e := range list.Items {
		w := written{e.Type, e.Reason, e.Message, e.Count, e.Source.Component, e.ReportingController}
		if strings.HasPrefix(e.Message, combinedPrefix) {
			// The one difference, on purpose: client-go's combined Event
			// names no reporting component, ours does as all others.
			w.Reporting = "(not compared)"
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b written) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return out
}

// The Broadcaster writes what client-go's core/v1 recorder writes, scenario
// by scenario: each is played to both recorders, each about an object of
// its own namespace, and the Events of the two namespaces must say the
// same and be as many as the scenario expects.
func TestSameEventsAsClientGo(t *testing.T) {
	type event struct{ eventtype, reason, message string }
	repeat := func(n int, f func(i int) event) []event {
		var out []event
		for i := range n {
			out = append(out, f(i))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		events []event
		// objects is how many Event objects the scenario leaves, and
		// maxCount the highest count among them.
		objects  int
		maxCount int32
	}{
		{name: "one", events: []event{{Normal, "Synced", "Mirrored into 3 namespaces"}}, objects: 1, maxCount: 1},
		{name: "repeated", events: repeat(3, func(int) event { return event{Warning, "Refused", "not ours"} }), objects: 1, maxCount: 3},
		{name: "two types", events: []event{{Normal, "Synced", "a"}, {Warning, "Synced", "a"}, {Normal, "Synced", "a"}}, objects: 2, maxCount: 2},
		// The 10th distinct message of one reason starts a combined Event,
		// on which the 11th and 12th count.
		{name: "similar", events: repeat(12, func(i int) event { return event{Warning, "Invalid", fmt.Sprintf("message %d", i)} }), objects: 10, maxCount: 3},
		// 25 Events of one type per object, then none for 5 minutes.
		{name: "burst", events: repeat(30, func(i int) event { return event{Normal, fmt.Sprintf("Reason%d", i), "m"} }), objects: 25, maxCount: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			nsOurs, nsTheirs := namespace(t, "ours"), namespace(t, "theirs")
			o, c := ours(t, fleet.Hub.Config, Options{}), theirs(t, fleet.Hub.Config)
			for _, e := range tc.events {
				o.Eventf(object(nsOurs, "src"), e.eventtype, e.reason, "%s", e.message)
				c.Eventf(object(nsTheirs, "src"), e.eventtype, e.reason, "%s", e.message)
			}
			g.Eventually(func(g Gomega) {
				want := eventsIn(g, nsTheirs)
				g.Expect(want).To(HaveLen(tc.objects))
				g.Expect(slices.MaxFunc(want, func(a, b written) int { return int(a.Count - b.Count) }).Count).To(Equal(tc.maxCount))
				g.Expect(eventsIn(g, nsOurs)).To(Equal(want))
			}, timeout, poll).Should(Succeed())
			g.Consistently(func(g Gomega) {
				g.Expect(eventsIn(g, nsOurs)).To(Equal(eventsIn(g, nsTheirs)))
			}, time.Second, 100*time.Millisecond).Should(Succeed())
		})
	}
}

// An Event names the object it is about as client-go's does: kind,
// apiVersion, namespace, name and UID, from the object's TypeMeta or, for
// a typed object without one, from the scheme; in the object's namespace,
// named after the object. Without a kind, no Event is written and the
// Broadcaster says why.
func TestEventNamesItsObject(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "object")
	var l logs
	scheme := runtime.NewScheme()
	g.Expect(corev1.AddToScheme(scheme)).To(Succeed())
	b := ours(t, fleet.Hub.Config, Options{Scheme: scheme, Log: l.logger()})
	b.Eventf(object(ns, "src"), Normal, "Unstructured", "about %s", "a ConfigMap")
	typed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds", UID: "7d0c5b9e-1111-4c3e-9a55-1d2b3c4d5e6f", ResourceVersion: "42"}}
	b.Eventf(typed, Warning, "Typed", "about a Secret")
	noKind := &unstructured.Unstructured{}
	noKind.SetNamespace(ns)
	noKind.SetName("nokind")
	b.Eventf(noKind, Normal, "NoKind", "never written")
	b.Eventf(object(ns, "src"), "Info", "BadType", "never written")

	g.Eventually(func(g Gomega) {
		var list corev1.EventList
		g.Expect(fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(2))
		byReason := map[string]corev1.Event{}
		for _, e := range list.Items {
			byReason[e.Reason] = e
		}
		u, s := byReason["Unstructured"], byReason["Typed"]
		g.Expect(u.InvolvedObject).To(Equal(corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: "src", UID: object(ns, "src").GetUID()}))
		g.Expect(u.Name).To(HavePrefix("src."))
		g.Expect(u.Message).To(Equal("about a ConfigMap"))
		g.Expect(u.FirstTimestamp).To(Equal(u.LastTimestamp))
		g.Expect(u.FirstTimestamp.IsZero()).To(BeFalse())
		g.Expect(s.InvolvedObject).To(Equal(corev1.ObjectReference{Kind: "Secret", APIVersion: "v1", Namespace: ns, Name: "creds", UID: typed.UID, ResourceVersion: "42"}))
		g.Expect(s.Type).To(Equal(Warning))
		g.Expect(s.Source.Component).To(Equal("fleetmirror-test"))
	}, timeout, poll).Should(Succeed())
	g.Expect(l.count("the kind of *unstructured.Unstructured is not known")).To(Equal(1))
	g.Expect(l.count("Unsupported event type")).To(Equal(1))
}

// A repeat whose Event was deleted in the meantime creates it again.
func TestRepeatOfDeletedEvent(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "deleted")
	b := ours(t, fleet.Hub.Config, Options{})
	b.Eventf(object(ns, "src"), Warning, "Refused", "not ours")
	var first corev1.Event
	g.Eventually(func(g Gomega) {
		var list corev1.EventList
		g.Expect(fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		first = list.Items[0]
	}, timeout, poll).Should(Succeed())
	g.Expect(fleet.Hub.Client.Delete(context.Background(), &first)).To(Succeed())

	b.Eventf(object(ns, "src"), Warning, "Refused", "not ours")
	g.Eventually(func(g Gomega) {
		var list corev1.EventList
		g.Expect(fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
		g.Expect(list.Items[0].UID).NotTo(Equal(first.UID))
		g.Expect(list.Items[0].Message).To(Equal("not ours"))
	}, timeout, poll).Should(Succeed())
}

// proxied returns the Config of a fault proxy in front of the test API
// server, and the proxy.
func proxied(t *testing.T) (*rest.Config, *fleettest.HTTPFaultProxy) {
	t.Helper()
	g := NewWithT(t)
	p, err := fleettest.NewHTTPFaultProxy(fleet.Hub.Config)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(p.Close)
	kc, err := p.Kubeconfig("proxied")
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	g.Expect(err).NotTo(HaveOccurred())
	return cfg, p
}

// A write that gets no answer is tried again until the API server answers;
// one the API server refuses is not, and the next Event is written at
// once rather than after the pause between tries.
func TestTriesAgainOnlyWithoutAnswer(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "tries")
	cfg, p := proxied(t)

	p.CutResponses()
	var cut logs
	b := ours(t, cfg, Options{retryInterval: 200 * time.Millisecond, Log: cut.logger()})
	b.Eventf(object(ns, "src"), Normal, "Cut", "written once answered")
	g.Eventually(func() int { return cut.count("trying again") }, timeout, poll).Should(BeNumerically(">=", 2))
	g.Expect(eventsIn(g, ns)).To(BeEmpty())
	g.Expect(p.Heal()).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(eventsIn(g, ns)).To(ConsistOf(HaveField("Reason", "Cut")))
	}, timeout, poll).Should(Succeed())

	// A pause of an hour: a refused Event tried again would hold up the
	// next one past the test's timeout.
	var l logs
	b = ours(t, cfg, Options{retryInterval: time.Hour, Log: l.logger()})
	p.Fail(http.StatusForbidden)
	b.Eventf(object(ns, "src"), Normal, "Forbidden", "refused")
	g.Eventually(func() int { return l.count("The API server refused an Event") }, timeout, poll).Should(Equal(1))
	g.Expect(p.Heal()).To(Succeed())
	b.Eventf(object(ns, "src"), Normal, "After", "written at once")
	b.Eventf(object("missing-namespace", "src"), Normal, "NoNamespace", "refused: no such namespace")
	b.Eventf(object(ns, "src"), Normal, "AfterMissing", "written at once")
	g.Eventually(func(g Gomega) {
		g.Expect(eventsIn(g, ns)).To(ConsistOf(HaveField("Reason", "Cut"), HaveField("Reason", "After"), HaveField("Reason", "AfterMissing")))
	}, timeout, poll).Should(Succeed())
	g.Expect(l.count("The API server refused an Event")).To(Equal(2))
}

// Events wait in a queue of queueLength while the writer cannot write:
// the next one is dropped and logged, and nothing blocks the caller. After
// Shutdown, Events are dropped without a word and nothing panics.
func TestQueueBoundedAndShutdown(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, "queue")
	cfg, p := proxied(t)
	p.CutResponses()
	var l logs
	b := ours(t, cfg, Options{retryInterval: time.Hour, Log: l.logger()})
	b.Eventf(object(ns, "src"), Normal, "Stuck", "the writer waits an hour to try again")
	// The writer takes the first Event off the queue and fails; then the
	// queue fills.
	g.Eventually(func() int { return l.count("trying again") }, timeout, poll).Should(Equal(1))
	g.Expect(b.queue).To(BeEmpty())
	for i := range queueLength + 5 {
		b.Eventf(object(ns, "src"), Normal, "Queued", "event %d", i)
	}
	g.Expect(len(b.queue)).To(Equal(queueLength))
	g.Expect(l.count("Too many Events queued")).To(Equal(5))

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				b.Eventf(object(ns, "src"), Normal, "Racing", "with Shutdown")
			}
		})
	}
	b.Shutdown()
	b.Shutdown()
	wg.Wait()
	dropped := l.count("Too many Events queued")
	b.Eventf(object(ns, "src"), Normal, "Late", "after Shutdown")
	g.Expect(l.count("Too many Events queued")).To(Equal(dropped))
}
