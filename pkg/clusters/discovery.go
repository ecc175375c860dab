package clusters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// discoveryParallelism bounds the group versions asked about at once. A
// cluster serves a few dozen of them; client-go asks for all at once, we
// ask for a few at a time, which costs little more on one HTTP/2
// connection and spares the API server a burst.
const discoveryParallelism = 8

// discoveryBurst is the burst of the client-side rate limit of a
// discovery client whose configuration sets none, as client-go's
// discovery client has it: a discovery is one request per group version.
const discoveryBurst = 300

// Discovery asks an API server which group versions and resources it
// serves. It asks for the aggregated discovery documents (Kubernetes 1.30
// and later serve them): /api and /apis then hold every group version's
// resources, two requests in all. From an older server it reads the
// legacy documents: /api and /apis list the group versions, and each group
// version lists its resources, a request each.
//
// Written by hand because client-go's discovery package imports
// k8s.io/client-go/kubernetes/scheme, which registers every built-in API
// type: about 7 MB of the binary, and their pages in memory, for a client
// that reads four document types. It decodes with encoding/json; the
// scheme of metav1 alone decodes the API server's errors.
type Discovery struct {
	client rest.Interface
}

// NewDiscovery returns the discovery client of cfg's API server. Its
// requests go through httpClient, whose Timeout bounds each of them.
func NewDiscovery(cfg *rest.Config, httpClient *http.Client) (*Discovery, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath, cfg.GroupVersion = "", nil
	cfg.AcceptContentTypes, cfg.ContentType = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = metainternalversionscheme.Codecs.WithoutConversion()
	if cfg.Burst == 0 {
		cfg.Burst = discoveryBurst
	}
	client, err := rest.UnversionedRESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &Discovery{client: client}, nil
}

// PartialDiscoveryError is returned, with the resource lists that could be
// read, when some group versions could not be: typically those of an
// aggregated API whose server is down, which the API server answers with
// 503 Service Unavailable.
type PartialDiscoveryError struct {
	// Failed holds the error of each group version that could not be read.
	Failed map[schema.GroupVersion]error
}

func (e *PartialDiscoveryError) Error() string {
	msgs := make([]string, 0, len(e.Failed))
	for gv, err := range e.Failed {
		msgs = append(msgs, fmt.Sprintf("%s: %v", gv, err))
	}
	slices.Sort(msgs)
	return "discovery of some group versions failed: " + strings.Join(msgs, ", ")
}

// ResourcesFor returns the resources of the group version gv. A group
// version the server does not serve is an error apierrors.IsNotFound
// recognises.
func (d *Discovery) ResourcesFor(ctx context.Context, gv schema.GroupVersion) (*metav1.APIResourceList, error) {
	if gv.Version == "" {
		return nil, fmt.Errorf("discovery: group version %q has no version", gv)
	}
	path := []string{"/apis", gv.Group, gv.Version}
	if gv.Group == "" {
		path = []string{"/api", gv.Version}
	}
	list := &metav1.APIResourceList{GroupVersion: gv.String()}
	if err := d.get(ctx, list, path...); err != nil {
		return nil, err
	}
	return list, nil
}

// GroupsAndResources returns the resources of every group version the
// server serves, core first, then the groups in the order the server
// lists them. When some group versions cannot be read, it returns the
// others with a *PartialDiscoveryError; any other error means nothing
// could be read.
func (d *Discovery) GroupsAndResources(ctx context.Context) ([]*metav1.APIResourceList, error) {
	groups, lists, err := d.all(ctx)
	if lists == nil {
		return nil, err
	}
	gvs := groupVersions(groups)
	out := make([]*metav1.APIResourceList, 0, len(lists))
	for _, gv := range gvs {
		if l := lists[gv]; l != nil {
			out = append(out, l)
		}
	}
	return out, err
}

// PreferredNamespacedResources returns the namespaced resources the server
// serves, each in one version only: the preferred version of its group
// where that serves it, else the first of the group's other versions that
// does, in the server's order (most preferred first). This is what
// client-go's ServerPreferredNamespacedResources returns. Subresources are
// left out, and so are group versions with no namespaced resource. Errors
// are those of GroupsAndResources: a group version that cannot be read is
// left out, and its resources come from another version of the group if
// any serves them.
func (d *Discovery) PreferredNamespacedResources(ctx context.Context) ([]*metav1.APIResourceList, error) {
	groups, lists, err := d.all(ctx)
	if lists == nil {
		return nil, err
	}
	var out []*metav1.APIResourceList
	for _, g := range groups {
		// The preferred version first, then the others in the server's
		// order.
		versions := []string{g.PreferredVersion.Version}
		for _, v := range g.Versions {
			if v.Version != g.PreferredVersion.Version {
				versions = append(versions, v.Version)
			}
		}
		taken := map[string]bool{} // resources of the group found in a version before
		for _, v := range versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v}
			l := lists[gv]
			if l == nil {
				continue
			}
			var namespaced []metav1.APIResource
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") || taken[r.Name] {
					continue
				}
				taken[r.Name] = true
				if r.Namespaced {
					namespaced = append(namespaced, r)
				}
			}
			if len(namespaced) > 0 {
				out = append(out, &metav1.APIResourceList{GroupVersion: l.GroupVersion, APIResources: namespaced})
			}
		}
	}
	return out, err
}

// all returns the groups the server serves, core first, and the resources
// of each group version. When some group versions could not be read (or an
// aggregated document marks them stale) the others come with a
// *PartialDiscoveryError; with any other error, lists is nil.
func (d *Discovery) all(ctx context.Context) (groups []metav1.APIGroup, lists map[schema.GroupVersion]*metav1.APIResourceList, err error) {
	lists, failed := map[schema.GroupVersion]*metav1.APIResourceList{}, map[schema.GroupVersion]error{}
	var legacy []schema.GroupVersion // group versions whose resources need a request each
	for _, path := range []string{"/api", "/apis"} {
		body, aggregated, err := d.index(ctx, path)
		switch {
		case path == "/api" && apierrors.IsNotFound(err):
			continue // an aggregated API server has no core group, as client-go's discovery allows
		case err != nil:
			return nil, nil, err
		case aggregated:
			var doc apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(body, &doc); err != nil {
				return nil, nil, fmt.Errorf("discovery: decoding %s: %w", path, err)
			}
			for _, g := range doc.Items {
				groups = append(groups, splitAggregated(g, lists, failed))
			}
			continue
		}
		var found []metav1.APIGroup
		if path == "/api" {
			var core metav1.APIVersions
			err = json.Unmarshal(body, &core)
			if len(core.Versions) > 0 {
				g := metav1.APIGroup{}
				for _, v := range core.Versions {
					g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
				}
				g.PreferredVersion = g.Versions[0]
				found = append(found, g)
			}
		} else {
			var named metav1.APIGroupList
			err = json.Unmarshal(body, &named)
			found = named.Groups
		}
		if err != nil {
			return nil, nil, fmt.Errorf("discovery: decoding %s: %w", path, err)
		}
		groups = append(groups, found...)
		legacy = append(legacy, groupVersions(found)...)
	}
	read, err := d.resources(ctx, legacy)
	maps.Copy(lists, read)
	var partial *PartialDiscoveryError
	if errors.As(err, &partial) {
		maps.Copy(failed, partial.Failed)
	}
	if len(failed) > 0 {
		return groups, lists, &PartialDiscoveryError{Failed: failed}
	}
	return groups, lists, nil
}

// acceptAggregated asks for the aggregated discovery document, v2, and
// takes the legacy one from servers that do not have it.
const acceptAggregated = runtime.ContentTypeJSON + ";g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," + runtime.ContentTypeJSON

// index reads the discovery document at path (/api or /apis); aggregated
// tells which of the two forms the server sent.
func (d *Discovery) index(ctx context.Context, path string) (body []byte, aggregated bool, err error) {
	var contentType string
	body, err = d.client.Get().AbsPath(path).SetHeader("Accept", acceptAggregated).Do(ctx).ContentType(&contentType).Raw()
	if err != nil {
		return nil, false, err
	}
	mediaType, params, _ := mime.ParseMediaType(contentType)
	return body, mediaType == runtime.ContentTypeJSON && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" &&
		params["as"] == "APIGroupDiscoveryList", nil
}

// splitAggregated returns the group of an aggregated document, and adds
// the resources of each of its versions to lists, or the version to failed
// when the document marks it stale (its aggregated API server did not
// answer), as client-go's discovery does. The preferred version is the
// first that is not stale.
func splitAggregated(g apidiscoveryv2.APIGroupDiscovery, lists map[schema.GroupVersion]*metav1.APIResourceList, failed map[schema.GroupVersion]error) metav1.APIGroup {
	group := metav1.APIGroup{Name: g.Name}
	for _, v := range g.Versions {
		gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
		if v.Freshness == apidiscoveryv2.DiscoveryFreshnessStale {
			failed[gv] = apierrors.NewServiceUnavailable("its discovery is stale: the API server that serves it does not answer")
			continue
		}
		version := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v.Version}
		group.Versions = append(group.Versions, version)
		if group.PreferredVersion.Version == "" {
			group.PreferredVersion = version
		}
		list := &metav1.APIResourceList{GroupVersion: gv.String()}
		for _, r := range v.Resources {
			if r.ResponseKind == nil || r.ResponseKind.Kind == "" {
				continue // a parent known only for its subresources; we use none
			}
			res := metav1.APIResource{
				Name: r.Resource, SingularName: r.SingularResource, Namespaced: r.Scope == apidiscoveryv2.ScopeNamespace,
				Group: r.ResponseKind.Group, Version: r.ResponseKind.Version, Kind: r.ResponseKind.Kind,
				Verbs: r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
			}
			list.APIResources = append(list.APIResources, res)
			for _, sub := range r.Subresources {
				if sub.ResponseKind == nil || sub.ResponseKind.Kind == "" {
					continue
				}
				list.APIResources = append(list.APIResources, metav1.APIResource{
					Name: r.Resource + "/" + sub.Subresource, SingularName: r.SingularResource, Namespaced: res.Namespaced,
					Group: sub.ResponseKind.Group, Version: sub.ResponseKind.Version, Kind: sub.ResponseKind.Kind, Verbs: sub.Verbs,
				})
			}
		}
		lists[gv] = list
	}
	return group
}

// groupVersions lists every version of groups.
func groupVersions(groups []metav1.APIGroup) []schema.GroupVersion {
	var gvs []schema.GroupVersion
	for _, g := range groups {
		for _, v := range g.Versions {
			gvs = append(gvs, schema.GroupVersion{Group: g.Name, Version: v.Version})
		}
	}
	return gvs
}

// resources reads the resource lists of gvs, discoveryParallelism at a
// time. The group versions that could not be read are missing from the
// map and named by a *PartialDiscoveryError.
func (d *Discovery) resources(ctx context.Context, gvs []schema.GroupVersion) (map[schema.GroupVersion]*metav1.APIResourceList, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		lists  = make(map[schema.GroupVersion]*metav1.APIResourceList, len(gvs))
		failed = map[schema.GroupVersion]error{}
		slots  = make(chan struct{}, discoveryParallelism)
	)
	for _, gv := range gvs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			l, err := d.ResourcesFor(ctx, gv)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[gv] = err
				return
			}
			lists[gv] = l
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		return lists, &PartialDiscoveryError{Failed: failed}
	}
	return lists, nil
}

// get reads the discovery document at path into v. Errors are the REST
// client's: an API server's refusal is an API status error.
func (d *Discovery) get(ctx context.Context, v any, path ...string) error {
	body, err := d.client.Get().AbsPath(path...).SetHeader("Accept", runtime.ContentTypeJSON).Do(ctx).Raw()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("discovery: decoding %s: %w", strings.Join(path, "/"), err)
	}
	return nil
}
