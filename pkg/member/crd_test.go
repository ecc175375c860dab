package member_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// crd returns a namespaced CustomResourceDefinition of group example.com
// whose objects keep any field.
func crd(kind, plural string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + ".example.com"},
		"spec": map[string]any{
			"group": "example.com",
			"scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind), "listKind": kind + "List"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

func customSource(kind, ns, name, targets string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{annotations.LabelEnabled: "true"})
	u.SetAnnotations(map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: targets})
	return u
}

func installCRD(t *testing.T, c *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The API server serves the kind once the CRD is Established.
	NewWithT(t).Eventually(func() error {
		u := &unstructured.UnstructuredList{}
		u.SetAPIVersion("example.com/v1")
		u.SetKind(c.Object["spec"].(map[string]any)["names"].(map[string]any)["kind"].(string) + "List")
		return k8s.List(ctx, u)
	}, timeout, poll).Should(Succeed())
}

func getCustom(kind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind(kind)
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return u, err
}

// watchedResources lists the resources the current agent opened watches
// on, from its request log.
func watchedResources() map[string]bool {
	out := map[string]bool{}
	for r, sels := range watchesByResource() {
		// Only the caches watch our mirrors; the presences of kinds not
		// watched follow sources and pull mirrors. Namespaces are always
		// cached.
		if r == "namespaces" || slices.ContainsFunc(sels, func(s string) bool { return strings.Contains(s, annotations.LabelMirror+"=") }) {
			out[r] = true
		}
	}
	return out
}

// watchesByResource lists the label selectors of the agent's WATCH
// requests by resource.
func watchesByResource() map[string][]string {
	out := map[string][]string{}
	for _, r := range agent.requests.all() {
		method, uri, _ := strings.Cut(r, " ")
		if method != "GET" || !strings.Contains(uri, "watch=true") {
			continue
		}
		path, query, _ := strings.Cut(uri, "?")
		parts := strings.Split(path, "/")
		q, _ := url.ParseQuery(query)
		out[parts[len(parts)-1]] = append(out[parts[len(parts)-1]], q.Get("labelSelector"))
	}
	return out
}

// Issue 5: any kind, discovered; only kinds with sources are watched; a CRD
// installed after start is mirrored; a CRD deleted while mirrored stops its
// watches cleanly.
func TestDiscoveredKindsAndLazyWatches(t *testing.T) {
	g := NewWithT(t)
	installCRD(t, crd("Widget", "widgets"))
	installCRD(t, crd("Note", "notes"))
	withAgent(t, "--resource-types=", "--discovery-interval=500ms", "--lazy-probe-interval=200ms", "--watch-idle-timeout=1s")

	ns := namespaces(t, "crd", nil, "src", "a")
	widget := customSource("Widget", ns[0], "w", ns[1], map[string]any{"spec": map[string]any{"size": int64(3), "color": "red"}})
	note := customSource("Note", ns[0], "n", ns[1], map[string]any{"text": "hello", "tags": []any{"a", "b"}})
	g.Expect(k8s.Create(context.Background(), widget)).To(Succeed())
	g.Expect(k8s.Create(context.Background(), note)).To(Succeed())

	g.Eventually(func(g Gomega) {
		m, err := getCustom("Widget", ns[1], "w")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m).NotTo(BeNil())
		g.Expect(m.Object["spec"]).To(Equal(map[string]any{"size": int64(3), "color": "red"}))
		g.Expect(m.GetLabels()).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByMember))
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		m, err := getCustom("Note", ns[1], "n")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(m).NotTo(BeNil())
		g.Expect(m.Object["text"]).To(Equal("hello"))
		g.Expect(m.Object["tags"]).To(Equal([]any{"a", "b"}))
	}, timeout, poll).Should(Succeed())

	// A CRD installed after start is picked up by rediscovery.
	installCRD(t, crd("Gadget", "gadgets"))
	gadget := customSource("Gadget", ns[0], "g", ns[1], map[string]any{"spec": map[string]any{"on": true}})
	g.Expect(k8s.Create(context.Background(), gadget)).To(Succeed())
	g.Eventually(func() (*unstructured.Unstructured, error) { return getCustom("Gadget", ns[1], "g") }, timeout, poll).ShouldNot(BeNil())

	// Only kinds with sources or mirrors were watched, out of every kind
	// the API server offers (Secrets and ConfigMaps exist in this suite).
	watched := watchedResources()
	for _, r := range []string{"widgets", "notes", "gadgets", "namespaces"} {
		g.Expect(watched).To(HaveKey(r))
	}
	for _, r := range []string{"services", "deployments", "ingresses", "jobs", "pods", "roles", "serviceaccounts"} {
		g.Expect(watched).NotTo(HaveKey(r), "kind %s has no source and must not be watched", r)
	}
	g.Expect(len(watched)).To(BeNumerically("<=", 6), fmt.Sprint(watched))
	// A kind with no source is followed by idle presence watches, so that
	// its first source is noticed at once.
	g.Expect(watchesByResource()["services"]).To(ContainElements(annotations.LabelEnabled+"=true", annotations.LabelPull+"=true"))

	// Deleting a CRD while mirrored: its objects go with it, its watches stop.
	g.Expect(k8s.Delete(context.Background(), crd("Gadget", "gadgets"))).To(Succeed())
	g.Eventually(func() (*unstructured.Unstructured, error) { return getCustom("Widget", ns[1], "w") }, timeout, poll).ShouldNot(BeNil())
	g.Eventually(func() bool { return watchedKind("example.com/Gadget") }, timeout, poll).Should(BeFalse(),
		"watches of a deleted CRD must stop")
	g.Expect(watchedKind("example.com/Widget")).To(BeTrue())

	// When its last source is gone, a kind is no longer watched.
	g.Expect(k8s.Delete(context.Background(), note)).To(Succeed())
	g.Eventually(func() (*unstructured.Unstructured, error) { return getCustom("Note", ns[1], "n") }, timeout, poll).Should(BeNil())
	g.Eventually(func() bool { return watchedKind("example.com/Note") }, timeout, poll).Should(BeFalse(),
		"an idle kind must be unwatched after --watch-idle-timeout")

	// Updates of custom content propagate; the rest of the pipeline is shared.
	change(t, widget, func(u *unstructured.Unstructured) { u.Object["spec"].(map[string]any)["size"] = int64(5) })
	g.Eventually(func() any {
		m, _ := getCustom("Widget", ns[1], "w")
		if m == nil {
			return nil
		}
		return m.Object["spec"].(map[string]any)["size"]
	}, timeout, poll).Should(Equal(int64(5)))
}

// watchedKind reports whether the agent exports fleetmirror_watched_kinds
// for kind (its metric label, group/Kind outside the core group) in this
// cluster.
func watchedKind(kind string) bool {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return false
	}
	for _, f := range families {
		if f.GetName() != "fleetmirror_watched_kinds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster"] == clusterName && labels["kind"] == kind && m.GetGauge().GetValue() == 1 {
				return true
			}
		}
	}
	return false
}
