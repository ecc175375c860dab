package controller

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// TestPullWaitsForItsNamespace: a pull mirror whose namespace the cache
// has not seen yet (it was created just before the pull mirror, and its
// event is late) gets no content until the namespace's labels are known;
// the namespace opted out of mirrors, the pull is then refused. Before,
// an unknown namespace counted as one without labels, and the content was
// written into a namespace that had opted out.
func TestPullWaitsForItsNamespace(t *testing.T) {
	gate := &watchGate{resource: "namespaces"}
	s := newStepsWrapped(t, Options{WriteStatus: true}, gate.wrap)
	t.Cleanup(gate.release) // before the fleet stops: a held watch would keep it
	g := NewWithT(t)
	ctx := context.Background()

	srcNS := namespace(g, "pullsrc")
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "open", Labels: map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationAllowPullInto: "*"}},
		Data: map[string][]byte{"k": []byte("v")},
	}
	g.Expect(api.Hub.Client.Create(ctx, src)).To(Succeed())
	s.cached(g, Key{Cluster: local, GVK: secrets, Namespace: srcNS, Name: "open"}, src.ResourceVersion)

	gate.hold()
	optedOut := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pulloptout-",
		Labels: map[string]string{annotations.LabelAllowMirrors: "false"}}}
	g.Expect(api.Hub.Client.Create(ctx, optedOut)).To(Succeed())
	ns := optedOut.Name
	x := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x", Labels: map[string]string{annotations.LabelPull: "true"},
			Annotations: map[string]string{annotations.AnnotationMirrorFrom: srcNS + "/open"}},
		Data: map[string][]byte{"own": []byte("mine")},
	}
	g.Expect(api.Hub.Client.Create(ctx, x)).To(Succeed())
	key := Key{Cluster: local, GVK: secrets, Namespace: ns, Name: "x", Pull: true}
	g.Eventually(func() bool { _, ok := s.c.Pull(secrets, ns, "x"); return ok }, 10*time.Second).Should(BeTrue())
	_, known := s.c.NamespaceLabels(ns)
	g.Expect(known).To(BeFalse(), "the namespace's event was not held")

	_, err := s.r.Reconcile(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	got := live(g, ns, "x")
	g.Expect(got.Data).To(Equal(map[string][]byte{"own": []byte("mine")}), "content written into a namespace whose labels were not known")
	g.Expect(got.ResourceVersion).To(Equal(x.ResourceVersion), "pull mirror written")

	gate.release()
	g.Eventually(func() bool { _, known := s.c.NamespaceLabels(ns); return known }, 10*time.Second).Should(BeTrue())
	_, err = s.r.Reconcile(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	got = live(g, ns, "x")
	g.Expect(got.Data).To(Equal(map[string][]byte{"own": []byte("mine")}))
	g.Expect(got.Annotations[annotations.AnnotationStatus]).To(And(ContainSubstring(annotations.LabelAllowMirrors+"=false"), HaveSuffix("nothing pulled yet")))
}

// watchGate holds the events of the watches of one resource while it is
// held: what a watch reads then is handed on when it is released.
type watchGate struct {
	resource string
	mu       sync.Mutex
	held     chan struct{} // nil: open
}

func (w *watchGate) hold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == nil {
		w.held = make(chan struct{})
	}
}

func (w *watchGate) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held != nil {
		close(w.held)
		w.held = nil
	}
}

func (w *watchGate) wait() {
	w.mu.Lock()
	held := w.held
	w.mu.Unlock()
	if held != nil {
		<-held
	}
}

func (w *watchGate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err != nil || r.URL.Query().Get("watch") != "true" || !strings.HasSuffix(r.URL.Path, "/"+w.resource) {
			return resp, err
		}
		resp.Body = &gatedBody{ReadCloser: resp.Body, gate: w}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// gatedBody hands on what it read only when its gate is open.
type gatedBody struct {
	io.ReadCloser
	gate *watchGate
}

func (b *gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.gate.wait()
	return n, err
}
