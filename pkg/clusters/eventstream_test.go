package clusters

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// watchEvent is one event of a JSON watch stream, as the API server
// writes it, with a ConfigMap whose data holds size bytes.
func watchEvent(tb testing.TB, name string, size int) []byte {
	tb.Helper()
	b, err := json.Marshal(map[string]any{"type": apiwatch.Modified, "object": map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default", "resourceVersion": "1"},
		"data":     map[string]any{"k": strings.Repeat("x", size)},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return append(b, '\n')
}

// chunked hands out its bytes at most n at a time, as a network stream
// does.
type chunked struct {
	r *bytes.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// Every event of a stream comes out whole and in order, however large,
// however the stream is cut and whatever whitespace separates the events,
// across the decoders dropped after large events or given back while the
// stream waits, including the events a decoder had read ahead.
func TestEventStreamOrder(t *testing.T) {
	const small, large = 200, 3 * largeEvent
	for _, tc := range []struct {
		name  string
		sizes []int
	}{
		{"small events only", []int{small, small, small}},
		{"one large event", []int{large}},
		{"large between small", []int{small, large, small, small}},
		{"large after large", []int{large, large, small}},
		{"just above and below the threshold", []int{largeEvent + 1, largeEvent - 200, small}},
		{"a large event read ahead whole with another", []int{8 * large, largeEvent + 1000, small, largeEvent + 1000, small, small}},
		{"small events read ahead of a large one", []int{large, small, small, small, small, small, small, large, small}},
	} {
		for _, cut := range []int{1 << 30, 4096, 1000, 7} {
			// The API server ends each event with a newline; a stream
			// whose decoder holds more than whitespace keeps it.
			for _, sep := range []string{"\n", "", "\r\n", " \n\n\t "} {
				t.Run(fmt.Sprintf("%s, read %d at a time, separated by %q", tc.name, cut, sep), func(t *testing.T) {
					g := NewWithT(t)
					var stream []byte
					for i, size := range tc.sizes {
						stream = append(append(stream, bytes.TrimSuffix(watchEvent(t, fmt.Sprint("cm-", i), size), []byte("\n"))...), sep...)
					}
					s := newEventStream(&chunked{r: bytes.NewReader(stream), n: cut}, nextUnstructured)
					for i, size := range tc.sizes {
						typ, obj, err := s.next()
						g.Expect(err).NotTo(HaveOccurred(), "event %d", i)
						g.Expect(typ).To(Equal(apiwatch.Modified))
						u := obj.(*unstructured.Unstructured)
						g.Expect(u.GetName()).To(Equal(fmt.Sprint("cm-", i)))
						data, _, _ := unstructured.NestedStringMap(u.Object, "data")
						g.Expect(data["k"]).To(HaveLen(size), "event %d", i)
					}
					_, _, err := s.next()
					g.Expect(err).To(MatchError(io.EOF))
				})
			}
		}
	}
}

// liveHeap is the bytes of the heap in use after a collection.
func liveHeap() int64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// retainedAfterLargeEvent reads a 2 MiB event and a small one from a stream
// that stays open, and returns how much more heap the stream holds then
// than before the large event.
func retainedAfterLargeEvent(t testing.TB) int64 {
	pr, pw := io.Pipe()
	defer func() { _ = pw.Close() }()
	s := newEventStream(pr, nextUnstructured)
	written := make(chan error, 1)
	write := func(name string, size int) {
		go func() { _, err := pw.Write(watchEvent(t, name, size)); written <- err }()
	}
	g := NewWithT(t)
	write("warm-up", 200)
	_, _, err := s.next()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-written).To(Succeed())
	before := liveHeap()
	write("large", 2<<20)
	_, _, err = s.next()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-written).To(Succeed())
	write("small", 200)
	_, _, err = s.next()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-written).To(Succeed())
	retained := liveHeap() - before
	goruntime.KeepAlive(s)
	return retained
}

// A stream that carried one large event does not keep a buffer of its size
// afterwards: a decoder keeps the largest value it read.
func TestEventStreamDropsLargeBuffer(t *testing.T) {
	retained := retainedAfterLargeEvent(t)
	t.Logf("held after a 2 MiB event: %d KiB", retained/1024)
	NewWithT(t).Expect(retained).To(BeNumerically("<", 256<<10), "bytes held by the stream after a 2 MiB event")
}

// Streams that wait for their next event hold no decoder: a decoder that
// read an event of a few kilobytes keeps a buffer of twice that, and a hub
// has three idle watches in every cluster.
func TestIdleStreamsHoldNoDecoder(t *testing.T) {
	const streams, size = 100, 6 << 10
	g := NewWithT(t)
	writers := make([]*io.PipeWriter, streams)
	got := make(chan error, streams)
	for i := range writers {
		pr, pw := io.Pipe()
		writers[i] = pw
		s := newEventStream(pr, nextUnstructured)
		go func() {
			for {
				if _, _, err := s.next(); err != nil {
					got <- err
					return
				}
				got <- nil
			}
		}()
	}
	// Each stream waits for its first event; then it reads one and waits
	// for the next.
	before := liveHeap()
	event := watchEvent(t, "cm", size)
	for _, w := range writers {
		_, err := w.Write(event)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(<-got).To(Succeed())
	}
	held := (liveHeap() - before) / streams
	t.Logf("held per stream waiting after an event of %d KiB: %d B", size>>10, held)
	g.Expect(held).To(BeNumerically("<", 2<<10), "bytes held per stream waiting after an event of 6 KiB")
	for _, w := range writers {
		_ = w.Close()
		g.Expect(<-got).To(MatchError(io.EOF))
	}
}

// BenchmarkEventStreamHeld reports what a watch stream holds after a 2 MiB
// event followed by a small one (HeldB/stream), and what decoding a 1 KiB
// event costs (ns/op, B/op: a stream that never sees a large event never
// replaces its decoder).
func BenchmarkEventStreamHeld(b *testing.B) {
	held := retainedAfterLargeEvent(b)
	event := watchEvent(b, "cm", 1<<10)
	var stream []byte
	for range 1000 {
		stream = append(stream, event...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s := newEventStream(bytes.NewReader(stream), nextUnstructured)
		for range 1000 {
			if _, _, err := s.next(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(held), "HeldB/stream")
}

// On a real API server: a cluster that wrote a mirror of almost 1 MiB
// and whose watch saw it come and go holds nothing of its size afterwards.
// Before, its watch kept the decoder's buffer (over a megabyte) and its
// connection the framer's write buffer (256 KiB) for as long as they ran:
// on a hub, in every cluster the object was mirrored to.
func TestClusterForgetsLargeMirror(t *testing.T) {
	fleet, ctx := fleettest.APIServer(t)
	g := NewWithT(t)
	c, err := New(fleet.Hub.Config, Options{Name: "one", ManagedBy: annotations.ManagedByHub, Handler: nopHandler{}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(c.Close)
	c.Start(ctx)
	cms := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	_, err = c.WatchMirrors(cms)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(c.HasSynced, "10s", "20ms").Should(BeTrue())
	objects, err := c.Objects(cms, "default")
	g.Expect(err).NotTo(HaveOccurred())
	resource, err := c.Resource(cms, "default")
	g.Expect(err).NotTo(HaveOccurred())

	// A mirror as the hub writes it, of a source in namespace app.
	mirror := func(name string, size int) *unstructured.Unstructured {
		src := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "app"},
			"data":     map[string]any{"k": strings.Repeat("x", size)},
		}}
		m, _, err := desired.Build(src, desired.Target{Cluster: "one", Namespace: "default"}, desired.Options{SourceCluster: "one", ManagedBy: annotations.ManagedByHub}, nil)
		g.Expect(err).NotTo(HaveOccurred())
		return m
	}
	mirrored := func() int { return len(c.AllMirrors(cms)) }
	// Every client path the test takes is used once before the heap is
	// read, so that what their first use sets up is not counted.
	g.Expect(apierrors.IsNotFound(resource.Delete(ctx, "absent", metav1.DeleteOptions{}))).To(BeTrue())
	small, err := objects.CreateMeta(ctx, mirror("small", 100), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(mirrored, "10s", "20ms").Should(Equal(1))
	before := liveHeap()

	_, err = objects.CreateMeta(ctx, mirror("large", 1000<<10), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(mirrored, "10s", "20ms").Should(Equal(2))
	g.Expect(resource.Delete(ctx, "large", metav1.DeleteOptions{})).To(Succeed())
	g.Eventually(mirrored, "10s", "20ms").Should(Equal(1))
	// A small write and its event after it, so that both have moved on.
	changed := mirror("small", 10)
	changed.SetResourceVersion(small.ResourceVersion)
	small, err = objects.UpdateMeta(ctx, changed, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string {
		m, ok := c.Mirror(cms, "default", "small")
		if !ok {
			return ""
		}
		return m.GetResourceVersion()
	}, "10s", "20ms").Should(Equal(small.ResourceVersion))

	held := liveHeap() - before
	t.Logf("held after writing and watching a 1000 KiB mirror: %d KiB", held/1024)
	g.Expect(held).To(BeNumerically("<", 160<<10), "bytes held after writing and watching a 1000 KiB mirror")
}
