package clusters

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// TypedREST returns a REST client of group version gv that decodes into
// the Go types addToScheme registers, configured from cfg as client-go's
// typed clients configure theirs (API path, serializers, user agent) and
// with its own HTTP client. Options go into requests with
// metav1.ParameterCodec, as client-go's ListWatch sends them with any
// REST client.
//
// The typed clients of k8s.io/client-go/kubernetes are not used because
// each of them imports client-go's scheme, which registers every built-in
// API type of every group (6.8 MB of code in the hub, with its tables
// more: the hub's binary was 33.0 MB with it and Cluster API's helpers,
// 21.2 MB without), mostly paged in, for the two kinds the hub reads typed
// (the kubeconfig Secrets, its shard Leases). client-go's generic typed client
// (k8s.io/client-go/gentype) has no such scheme, but links 67 packages
// more (OpenAPI models, YAML, easyjson) through its fake client.
func TypedREST(cfg *rest.Config, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering the types of %s: %w", gv, err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(cfg)
}
