package fleettest

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// UnavailableAPIService is an APIService registering gv as an aggregated
// API served by a Service that does not exist: the API server lists the
// group version, marks it stale in aggregated discovery and answers its
// legacy discovery with 503, as it does for an aggregated API server that
// is down.
func UnavailableAPIService(gv schema.GroupVersion) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": gv.Version + "." + gv.Group},
		"spec": map[string]any{
			"group": gv.Group, "version": gv.Version,
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service":               map[string]any{"namespace": "default", "name": "no-such-service"},
			"insecureSkipTLSVerify": true,
		},
	}}
}
