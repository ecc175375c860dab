package clusters

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// TypedREST returns a REST client of group version gv that decodes into
// the Go types addToScheme registers, and the parameter codec of its
// options, configured from cfg as client-go's typed clients configure
// theirs (API path, serializers, user agent) and with its own HTTP client.
//
// The typed clients of k8s.io/client-go/kubernetes are not used because
// each of them imports client-go's scheme, which registers every built-in
// API type of every group (6.8 MB of code in the hub, with its tables
// more: the hub's binary was 33.0 MB with it and Cluster API's helpers,
// 21.2 MB without), mostly paged in, for the two kinds the hub reads typed
// (the kubeconfig Secrets, its shard Leases). client-go's generic typed client
// (k8s.io/client-go/gentype) has no such scheme, but links 67 packages
// more (OpenAPI models, YAML, easyjson) through its fake client.
func TypedREST(cfg *rest.Config, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error) (*rest.RESTClient, runtime.ParameterCodec, error) {
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("registering the types of %s: %w", gv, err)
	}
	// As client-go's scheme: the options of every request encode as v1.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
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
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, runtime.NewParameterCodec(scheme), nil
}
