package clusters

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// Every supported Kubernetes streams lists (the WatchList feature, on by
// default since 1.34), but an operator can turn it off: the watch loop
// then finds its streamed list refused, LISTs instead from then on, and
// hears every change as it does with streams.
func TestWatchWithoutStreamedLists(t *testing.T) {
	fleet, ctx := fleettest.APIServerWithFlags(t, map[string]string{"feature-gates": "WatchList=false"})
	k8s := fleet.Hub.Client
	g := NewWithT(t)
	c, err := New(fleet.Hub.Config, Options{Name: "one", ManagedBy: "test", Handler: nopHandler{}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(c.Close)
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	selected := labels.SelectorFromSet(labels.Set{"selected": "yes"})
	src := c.watchSource(secrets, selected, false)

	// The API server does refuse a streamed list.
	_, err = src.open(ctx, metav1.ListOptions{
		Watch: true, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	g.Expect(err).To(HaveOccurred(), "the API server streamed a list with WatchList=false")
	g.Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "refused otherwise: %v", err)

	create := func(name string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"selected": "yes"}}}
		g.Expect(k8s.Create(ctx, s)).To(Succeed())
		return s
	}
	before := create("before")

	w := newWatch(src, "secrets", 0, nil, stripMetadata)
	var mu sync.Mutex
	var got []string
	w.setHandler(func(obj any, deleted bool) {
		mu.Lock()
		defer mu.Unlock()
		u := obj.(*unstructured.Unstructured)
		got = append(got, fmt.Sprintf("%s del=%v", u.GetName(), deleted))
	})
	handled := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	w.run(ctx)
	// The refusal is not a failure to back off from: the LIST follows at once.
	g.Eventually(w.HasSynced, "10s", "20ms").Should(BeTrue(), "the watch never synced")
	g.Expect(w.noWatchList.Load()).To(BeTrue(), "the watch still asks for streamed lists")
	g.Expect(handled()).To(Equal([]string{"before del=false"}))

	after := create("after")
	before.Annotations = map[string]string{"changed": "yes"}
	g.Expect(k8s.Update(ctx, before)).To(Succeed())
	g.Expect(k8s.Delete(ctx, after)).To(Succeed())
	g.Eventually(handled, "10s", "20ms").Should(Equal([]string{
		"before del=false", "after del=false", "before del=false", "after del=true"}))
	g.Expect(w.store.indexer.ListKeys()).To(ConsistOf("default/before"))
}
