package clusters

import (
	"context"
	"maps"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kindMapper maps the few kinds an agent uses to their resources, asking
// discovery for one group version at a time and keeping only the answers.
//
// Written by hand because the library mappers keep all of discovery:
// client-go's deferred mapper and controller-runtime's dynamic mapper (which
// loads the aggregated document when the server offers it) each hold every
// resource of every group, about 0.3 MiB per cluster measured on the hub,
// where a cluster needs two or three mappings.
type kindMapper struct {
	disco *Discovery

	mu    sync.Mutex
	known map[schema.GroupVersionKind]*meta.RESTMapping // nil: the kind is not served
}

func newKindMapper(d *Discovery) *kindMapper {
	return &kindMapper{disco: d, known: map[schema.GroupVersionKind]*meta.RESTMapping{}}
}

// RESTMapping returns the resource and scope of gvk. A kind the server does
// not serve is a meta.NoKindMatchError, remembered until Reset, as the
// library mappers remember their discovery; other errors are not.
func (m *kindMapper) RESTMapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m.mu.Lock()
	mapping, ok := m.known[gvk]
	m.mu.Unlock()
	if !ok {
		var err error
		if mapping, err = m.discover(gvk); err != nil {
			return nil, err
		}
		m.mu.Lock()
		m.known[gvk] = mapping
		m.mu.Unlock()
	}
	if mapping == nil {
		return nil, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
	}
	return mapping, nil
}

// discover asks for gvk's group version; nil when it does not have the kind.
// The request's deadline is the HTTP client's timeout: RESTMapping's
// callers have no context.
func (m *kindMapper) discover(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	gv := gvk.GroupVersion()
	list, err := m.disco.ResourcesFor(context.Background(), gv)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range list.APIResources {
		if r.Kind != gvk.Kind || strings.Contains(r.Name, "/") { // not a subresource
			continue
		}
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		return &meta.RESTMapping{Resource: gv.WithResource(r.Name), GroupVersionKind: gvk, Scope: scope}, nil
	}
	return nil, nil
}

// Reset forgets every answer: kinds may have come or gone.
func (m *kindMapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.known)
}

// ForgetMissing forgets the kinds found not served, and keeps the
// mappings found: a CRD installed since is found at the next question
// about its kind, and the kinds in use cost no request.
func (m *kindMapper) ForgetMissing() {
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.DeleteFunc(m.known, func(_ schema.GroupVersionKind, mapping *meta.RESTMapping) bool { return mapping == nil })
}
