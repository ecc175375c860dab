package clusters_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// newDiscovery returns a discovery client of cfg's API server, and the
// count of its requests. With legacy, it asks for the legacy documents
// only, as a client of a server before aggregated discovery would get.
func newDiscovery(t *testing.T, cfg *rest.Config, legacy bool) (*clusters.Discovery, *atomic.Int64) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	requests := &atomic.Int64{}
	next := httpClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	// A client of our own: HTTPClientFor may return http.DefaultClient.
	httpClient = &http.Client{Timeout: httpClient.Timeout, Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		requests.Add(1)
		if legacy {
			r = r.Clone(r.Context())
			r.Header.Set("Accept", "application/json")
		}
		return next.RoundTrip(r)
	})}
	d, err := clusters.NewDiscovery(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return d, requests
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceScopes flattens lists to "group/version resource" keys, each with
// whether the resource is namespaced.
func resourceScopes(lists []*metav1.APIResourceList) map[string]bool {
	out := map[string]bool{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			out[l.GroupVersion+" "+r.Name] = r.Namespaced
		}
	}
	return out
}

// Discovery against a real API server: the core and named groups with the
// scope of their resources, a CRD once it is Established (in each of its
// versions, and in the preferred one only among the preferred resources),
// NotFound for group versions not served, and an aggregated API whose
// server is missing failing alone, with everything else still found.
func TestDiscovery(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	d, requests := newDiscovery(t, fleet.Hub.Config, false)
	widgetsV1 := schema.GroupVersion{Group: "example.com", Version: "v1"}

	_, err := d.ResourcesFor(ctx, widgetsV1)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a group not served yet: %v", err)

	// A CRD served in two versions; v1 is preferred (GA before beta).
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{
			"group": "example.com",
			"scope": "Namespaced",
			"names": map[string]any{"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
			"versions": []any{
				crdVersion("v1beta1", false),
				crdVersion("v1", true),
			},
		},
	}}
	g.Expect(fleet.Hub.Client.Create(ctx, crd)).To(Succeed())
	g.Eventually(func() string {
		g.Expect(fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)).To(Succeed())
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Established" {
				return c["status"].(string)
			}
		}
		return ""
	}, "10s", "50ms").Should(Equal("True"), "the CRD is not Established")

	for _, tt := range []struct {
		gv       schema.GroupVersion
		resource string
		found    bool // false: the group version is not served
	}{
		{gv: schema.GroupVersion{Version: "v1"}, resource: "configmaps", found: true},
		{gv: schema.GroupVersion{Group: "apps", Version: "v1"}, resource: "deployments", found: true},
		{gv: widgetsV1, resource: "widgets", found: true},
		{gv: schema.GroupVersion{Group: "example.com", Version: "v1beta1"}, resource: "widgets", found: true},
		{gv: schema.GroupVersion{Group: "example.com", Version: "v2"}},
		{gv: schema.GroupVersion{Group: "nothing.example.com", Version: "v1"}},
		{gv: schema.GroupVersion{Version: "v2"}},
	} {
		l, err := d.ResourcesFor(ctx, tt.gv)
		if !tt.found {
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v, want NotFound", tt.gv, err)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "%s", tt.gv)
		g.Expect(l.GroupVersion).To(Equal(tt.gv.String()))
		g.Expect(resourceScopes([]*metav1.APIResourceList{l})).To(HaveKeyWithValue(tt.gv.String()+" "+tt.resource, true))
	}

	// Every group version, with subresources; namespaced or not as the
	// server says.
	before := requests.Load()
	lists, err := d.GroupsAndResources(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(requests.Load()-before).To(Equal(int64(2)), "the aggregated /api and /apis hold everything")
	g.Expect(lists[0].GroupVersion).To(Equal("v1"), "the core group comes first")
	all := resourceScopes(lists)

	// Asked for the legacy documents only, the server tells the same, in
	// one more request per group version.
	legacy, legacyRequests := newDiscovery(t, fleet.Hub.Config, true)
	legacyLists, err := legacy.GroupsAndResources(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resourceScopes(legacyLists)).To(Equal(all))
	g.Expect(legacyRequests.Load()).To(Equal(int64(2 + len(lists))))
	legacyPreferred, err := legacy.PreferredNamespacedResources(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for key, namespaced := range map[string]bool{
		"v1 configmaps":              true,
		"v1 secrets":                 true,
		"v1 namespaces":              false,
		"v1 pods/log":                true,
		"apps/v1 deployments":        true,
		"apps/v1 deployments/status": true,
		"rbac.authorization.k8s.io/v1 clusterroles":         false,
		"autoscaling/v1 horizontalpodautoscalers":           true,
		"autoscaling/v2 horizontalpodautoscalers":           true,
		"apiextensions.k8s.io/v1 customresourcedefinitions": false,
		"example.com/v1 widgets":                            true,
		"example.com/v1beta1 widgets":                       true,
	} {
		g.Expect(all).To(HaveKeyWithValue(key, namespaced))
	}

	// Namespaced resources only, each in its group's preferred version
	// (autoscaling/v2 over v1, example.com/v1 over v1beta1), no
	// subresources.
	preferred, err := d.PreferredNamespacedResources(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	got := resourceScopes(preferred)
	g.Expect(resourceScopes(legacyPreferred)).To(Equal(got))
	g.Expect(got).To(HaveKey("v1 configmaps"))
	g.Expect(got).To(HaveKey("apps/v1 deployments"))
	g.Expect(got).To(HaveKey("autoscaling/v2 horizontalpodautoscalers"))
	g.Expect(got).To(HaveKey("example.com/v1 widgets"))
	for _, key := range []string{"v1 namespaces", "v1 pods/log", "apps/v1 deployments/status", "rbac.authorization.k8s.io/v1 clusterroles",
		"autoscaling/v1 horizontalpodautoscalers", "example.com/v1beta1 widgets"} {
		g.Expect(got).NotTo(HaveKey(key))
	}
	for key, namespaced := range got {
		g.Expect(namespaced).To(BeTrue(), "%s is not namespaced", key)
	}

	// Discover: the preferred kinds that can be mirrored, minus the
	// denied ones.
	kinds, err := clusters.Discover(ctx, d, clusters.DeniedKinds)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kinds).To(ContainElements(
		schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}))
	g.Expect(kinds).NotTo(ContainElement(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}), "denied")
	g.Expect(kinds).NotTo(ContainElement(schema.GroupVersionKind{Group: "example.com", Version: "v1beta1", Kind: "Widget"}))

	// An aggregated API whose service does not exist: the API server lists
	// its group version, marked stale in the aggregated documents and
	// answered with 503 in the legacy ones. It alone fails; everything else
	// is still found.
	broken := schema.GroupVersion{Group: "broken.example.com", Version: "v1"}
	g.Expect(fleet.Hub.Client.Create(ctx, fleettest.UnavailableAPIService(broken))).To(Succeed())
	var partial *clusters.PartialDiscoveryError
	g.Eventually(func() error {
		lists, err = d.GroupsAndResources(ctx)
		return err
	}, "10s", "100ms").Should(BeAssignableToTypeOf(partial), "the aggregated API's failure was not noticed")
	g.Expect(errors.As(err, &partial)).To(BeTrue())
	g.Expect(partial.Failed).To(HaveLen(1))
	g.Expect(apierrors.IsServiceUnavailable(partial.Failed[broken])).To(BeTrue(), "%v", partial.Failed)
	g.Expect(err.Error()).To(ContainSubstring("broken.example.com/v1: "))
	t.Logf("with the aggregated API down: %v", err)
	g.Expect(resourceScopes(lists)).To(Equal(all), "the lists that did not fail")
	legacyLists, err = legacy.GroupsAndResources(ctx)
	g.Expect(errors.As(err, &partial)).To(BeTrue(), "%v", err)
	g.Expect(partial.Failed).To(HaveLen(1))
	g.Expect(apierrors.IsServiceUnavailable(partial.Failed[broken])).To(BeTrue(), "%v", partial.Failed)
	g.Expect(resourceScopes(legacyLists)).To(Equal(all), "the legacy lists that did not fail")

	preferred, err = d.PreferredNamespacedResources(ctx)
	g.Expect(errors.As(err, &partial)).To(BeTrue(), "%v", err)
	g.Expect(partial.Failed).To(HaveKey(broken))
	g.Expect(resourceScopes(preferred)).To(Equal(got))
	discovered, err := clusters.Discover(ctx, d, clusters.DeniedKinds)
	g.Expect(err).NotTo(HaveOccurred(), "a failed group version fails discovery")
	g.Expect(discovered).To(Equal(kinds))
}

// crdVersion is a served version of a CRD whose objects keep any field.
func crdVersion(name string, storage bool) map[string]any {
	return map[string]any{
		"name": name, "served": true, "storage": storage,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{
			"type": "object", "x-kubernetes-preserve-unknown-fields": true,
		}},
	}
}

// discoveryServer answers each path with its document (marshalled to
// JSON), or with the HTTP status an int gives; other paths are 404.
func discoveryServer(t *testing.T, docs map[string]any) *clusters.Discovery {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			doc = http.StatusNotFound
		}
		w.Header().Set("Content-Type", "application/json")
		if status, ok := doc.(int); ok {
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Code: int32(status), Reason: metav1.StatusReason(http.StatusText(status))})
			return
		}
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	d, _ := newDiscovery(t, &rest.Config{Host: srv.URL}, false)
	return d
}

// apiGroup is a discovery group whose first version is preferred unless
// preferred names another.
func apiGroup(name, preferred string, versions ...string) metav1.APIGroup {
	g := metav1.APIGroup{Name: name}
	for _, v := range versions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + v, Version: v})
	}
	g.PreferredVersion = g.Versions[0]
	for _, v := range g.Versions {
		if v.Version == preferred {
			g.PreferredVersion = v
		}
	}
	return g
}

// resourceList lists resources of gv, namespaced unless their name
// starts with "cluster".
func resourceList(gv string, names ...string) metav1.APIResourceList {
	l := metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: n, Namespaced: !strings.HasPrefix(n, "cluster"), Kind: "K", Verbs: []string{"get"}})
	}
	return l
}

// Discovery's choices and failures, against documents served by a fake:
// which version a resource is preferred in, which group versions fail
// alone, and which failures fail all.
func TestDiscoveryDocuments(t *testing.T) {
	core := metav1.APIVersions{Versions: []string{"v1"}}
	coreV1 := resourceList("v1", "configmaps", "clusternamespaces", "pods", "pods/log")
	tests := []struct {
		name string
		docs map[string]any
		// all is every resource found, preferred the namespaced ones in
		// their preferred version ("group/version resource").
		all, preferred []string
		failed         []string // group versions failed alone
		fails          bool     // discovery fails as a whole
	}{{
		name: "a resource only in an older version is preferred there",
		docs: map[string]any{
			"/api": core, "/api/v1": coreV1,
			"/apis":           metav1.APIGroupList{Groups: []metav1.APIGroup{apiGroup("g", "", "v1", "v1beta1")}},
			"/apis/g/v1":      resourceList("g/v1", "widgets", "widgets/status"),
			"/apis/g/v1beta1": resourceList("g/v1beta1", "widgets", "gadgets", "clustergadgets"),
		},
		all:       []string{"v1 configmaps", "v1 clusternamespaces", "v1 pods", "v1 pods/log", "g/v1 widgets", "g/v1 widgets/status", "g/v1beta1 widgets", "g/v1beta1 gadgets", "g/v1beta1 clustergadgets"},
		preferred: []string{"v1 configmaps", "v1 pods", "g/v1 widgets", "g/v1beta1 gadgets"},
	}, {
		name: "the preferred version need not be listed first",
		docs: map[string]any{
			"/api": core, "/api/v1": coreV1,
			"/apis":      metav1.APIGroupList{Groups: []metav1.APIGroup{apiGroup("g", "v2", "v1", "v2")}},
			"/apis/g/v1": resourceList("g/v1", "widgets"),
			"/apis/g/v2": resourceList("g/v2", "widgets"),
		},
		all:       []string{"v1 configmaps", "v1 clusternamespaces", "v1 pods", "v1 pods/log", "g/v1 widgets", "g/v2 widgets"},
		preferred: []string{"v1 configmaps", "v1 pods", "g/v2 widgets"},
	}, {
		name: "a group version that fails fails alone",
		docs: map[string]any{
			"/api": core, "/api/v1": coreV1,
			"/apis":                 metav1.APIGroupList{Groups: []metav1.APIGroup{apiGroup("g", "", "v1"), apiGroup("metrics", "", "v1beta1"), apiGroup("gone", "", "v1")}},
			"/apis/g/v1":            resourceList("g/v1", "widgets"),
			"/apis/metrics/v1beta1": http.StatusServiceUnavailable,
			// gone/v1 was removed since /apis was read: 404
		},
		all:       []string{"v1 configmaps", "v1 clusternamespaces", "v1 pods", "v1 pods/log", "g/v1 widgets"},
		preferred: []string{"v1 configmaps", "v1 pods", "g/v1 widgets"},
		failed:    []string{"gone/v1", "metrics/v1beta1"},
	}, {
		name: "a preferred version that fails leaves its resources to another version",
		docs: map[string]any{
			"/api": core, "/api/v1": coreV1,
			"/apis":           metav1.APIGroupList{Groups: []metav1.APIGroup{apiGroup("g", "", "v1", "v1beta1")}},
			"/apis/g/v1":      http.StatusServiceUnavailable,
			"/apis/g/v1beta1": resourceList("g/v1beta1", "widgets"),
		},
		all:       []string{"v1 configmaps", "v1 clusternamespaces", "v1 pods", "v1 pods/log", "g/v1beta1 widgets"},
		preferred: []string{"v1 configmaps", "v1 pods", "g/v1beta1 widgets"},
		failed:    []string{"g/v1"},
	}, {
		name: "the core group failing fails alone",
		docs: map[string]any{
			"/api": core, "/api/v1": http.StatusInternalServerError,
			"/apis":      metav1.APIGroupList{Groups: []metav1.APIGroup{apiGroup("g", "", "v1")}},
			"/apis/g/v1": resourceList("g/v1", "widgets"),
		},
		all:       []string{"g/v1 widgets"},
		preferred: []string{"g/v1 widgets"},
		failed:    []string{"v1"},
	}, {
		name: "a server without /api (an aggregated API server) has the groups of /apis",
		docs: map[string]any{
			"/apis":      metav1.APIGroupList{Groups: []metav1.APIGroup{apiGroup("g", "", "v1")}},
			"/apis/g/v1": resourceList("g/v1", "widgets"),
		},
		all:       []string{"g/v1 widgets"},
		preferred: []string{"g/v1 widgets"},
	}, {
		name:  "/api failing fails all",
		docs:  map[string]any{"/api": http.StatusServiceUnavailable, "/apis": metav1.APIGroupList{}},
		fails: true,
	}, {
		name:  "/apis failing fails all",
		docs:  map[string]any{"/api": core, "/api/v1": coreV1, "/apis": http.StatusForbidden},
		fails: true,
	}, {
		name:  "a document that does not decode fails all",
		docs:  map[string]any{"/api": core, "/api/v1": coreV1, "/apis": "not a group list"},
		fails: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := discoveryServer(t, tt.docs)
			ctx := context.Background()
			all, err := d.GroupsAndResources(ctx)
			checkDiscovered(t, "GroupsAndResources", all, err, tt.all, tt.failed, tt.fails)
			preferred, err := d.PreferredNamespacedResources(ctx)
			checkDiscovered(t, "PreferredNamespacedResources", preferred, err, tt.preferred, tt.failed, tt.fails)
		})
	}
}

// checkDiscovered compares what a discovery call returned with what it
// should have.
func checkDiscovered(t *testing.T, call string, lists []*metav1.APIResourceList, err error, want, wantFailed []string, fails bool) {
	t.Helper()
	var got []string
	for _, l := range lists {
		for _, r := range l.APIResources {
			got = append(got, l.GroupVersion+" "+r.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s found %q, want %q", call, got, want)
	}
	var partial *clusters.PartialDiscoveryError
	var failed []string
	if errors.As(err, &partial) {
		for gv := range partial.Failed {
			failed = append(failed, gv.String())
		}
		slices.Sort(failed)
	}
	switch {
	case fails && (err == nil || partial != nil):
		t.Errorf("%s: error %v, want discovery failed as a whole", call, err)
	case !fails && !slices.Equal(failed, wantFailed):
		t.Errorf("%s: error %v, want the failed group versions %q", call, err, wantFailed)
	case !fails && len(wantFailed) == 0 && err != nil:
		t.Errorf("%s: %v", call, err)
	}
}

// ResourcesFor tells a group version not served (NotFound) from one the
// client may not read (Forbidden), and asks for a few group versions at a
// time, not one after the other and not all at once.
func TestDiscoveryResourcesFor(t *testing.T) {
	var (
		mu             sync.Mutex
		inFlight, most int
	)
	groups := metav1.APIGroupList{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		groups.Groups = append(groups.Groups, apiGroup(name, "", "v1"))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			_ = json.NewEncoder(w).Encode(metav1.APIVersions{})
		case "/apis":
			_ = json.NewEncoder(w).Encode(groups)
		case "/apis/secret/v1":
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
		case "/apis/missing/v1":
			w.WriteHeader(http.StatusNotFound)
		default:
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			inFlight--
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(resourceList(strings.TrimPrefix(r.URL.Path, "/apis/"), "widgets"))
		}
	}))
	t.Cleanup(srv.Close)
	d, _ := newDiscovery(t, &rest.Config{Host: srv.URL}, false)
	ctx := context.Background()

	if _, err := d.ResourcesFor(ctx, schema.GroupVersion{Group: "missing", Version: "v1"}); !apierrors.IsNotFound(err) {
		t.Errorf("a group version not served: %v, want NotFound", err)
	}
	if _, err := d.ResourcesFor(ctx, schema.GroupVersion{Group: "secret", Version: "v1"}); !apierrors.IsForbidden(err) {
		t.Errorf("a group version refused: %v, want Forbidden", err)
	}
	l, err := d.ResourcesFor(ctx, schema.GroupVersion{Group: "a", Version: "v1"})
	if err != nil || l.GroupVersion != "a/v1" || len(l.APIResources) != 1 || l.APIResources[0].Name != "widgets" {
		t.Errorf("a/v1: %v, %v; want its widgets", l, err)
	}

	lists, err := d.GroupsAndResources(ctx)
	if err != nil || len(lists) != len(groups.Groups) {
		t.Fatalf("%d lists, %v; want %d", len(lists), err, len(groups.Groups))
	}
	if most < 2 || most > 8 {
		t.Errorf("%d group versions asked for at once, want 2 to 8", most)
	}
}
