package clusters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

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
// serves, with the legacy discovery documents: /api and /apis list the
// group versions, and each group version lists its resources. That is a
// request per group version where aggregated discovery (client-go's
// default) needs two, a few dozen requests every discovery interval; it
// spares us the aggregated document's types and their conversion.
//
// Written by hand because client-go's discovery package imports
// k8s.io/client-go/kubernetes/scheme, which registers every built-in API
// type: about 7 MB of the binary, and their pages in memory, for a client
// that reads three metav1 types. It decodes with encoding/json; the
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
	groups, err := d.groups(ctx)
	if err != nil {
		return nil, err
	}
	gvs := groupVersions(groups)
	lists, err := d.resources(ctx, gvs)
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
	groups, err := d.groups(ctx)
	if err != nil {
		return nil, err
	}
	lists, err := d.resources(ctx, groupVersions(groups))
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

// groups returns the groups the server serves: the core group of /api
// first, if it has any version, then those of /apis. /api may be missing
// (an aggregated API server has none), as client-go's discovery allows.
func (d *Discovery) groups(ctx context.Context) ([]metav1.APIGroup, error) {
	var core metav1.APIVersions
	if err := d.get(ctx, &core, "/api"); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	var groups []metav1.APIGroup
	if len(core.Versions) > 0 {
		g := metav1.APIGroup{}
		for _, v := range core.Versions {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: v, Version: v})
		}
		g.PreferredVersion = g.Versions[0]
		groups = append(groups, g)
	}
	var named metav1.APIGroupList
	if err := d.get(ctx, &named, "/apis"); err != nil {
		return nil, err
	}
	return append(groups, named.Groups...), nil
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
