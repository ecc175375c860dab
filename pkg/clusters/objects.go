package clusters

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Objects is the client the Applier writes the mirrors of one kind in one
// namespace with. Reads and deletes are the dynamic client's; creates and
// updates send the whole object but ask for only its metadata back: the
// resourceVersion and UID are all a writer needs, and the API server then
// neither encodes nor sends the payload a second time (for a Secret of a
// few KiB, most of the response and of the time the agent spends decoding
// it).
type Objects struct {
	dynamic.ResourceInterface
	meta rest.Interface
	gvr  schema.GroupVersionResource
	ns   string
}

// acceptMetadata asks for the written object as PartialObjectMetadata, in
// protobuf when the server offers it, as client-go's metadata client does.
const acceptMetadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

var (
	parameterScheme = runtime.NewScheme()
	parameterCodec  = runtime.NewParameterCodec(parameterScheme)
	versionV1       = schema.GroupVersion{Version: "v1"}
)

func init() {
	metav1.AddToGroupVersion(parameterScheme, versionV1)
}

// newMetadataREST returns the REST client of metadata responses: client-go's
// metadata client has no create or update, so the requests are built here
// on a client configured as it configures its own.
func newMetadataREST(cfg *rest.Config, httpClient *http.Client) (rest.Interface, error) {
	mc := metadata.ConfigFor(cfg)
	mc.GroupVersion = &schema.GroupVersion{}
	mc.APIPath = "/this-value-is-never-sent" // every request has an absolute path
	return rest.RESTClientForConfigAndClient(mc, httpClient)
}

// CreateMeta creates obj and returns the metadata of the stored object.
func (o *Objects) CreateMeta(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*metav1.PartialObjectMetadata, error) {
	return o.write(ctx, o.meta.Post().AbsPath(o.segments("")...), obj, &opts)
}

// UpdateMeta replaces the object named like obj (obj's resourceVersion, if
// set, is a precondition) and returns the metadata of the stored object.
func (o *Objects) UpdateMeta(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*metav1.PartialObjectMetadata, error) {
	return o.write(ctx, o.meta.Put().AbsPath(o.segments(obj.GetName())...), obj, &opts)
}

func (o *Objects) write(ctx context.Context, req *rest.Request, obj *unstructured.Unstructured, opts runtime.Object) (*metav1.PartialObjectMetadata, error) {
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	result := req.Body(body).
		SetHeader("Content-Type", "application/json").
		SetHeader("Accept", acceptMetadata).
		SpecificallyVersionedParams(opts, parameterCodec, versionV1).
		Do(ctx)
	if err := result.Error(); err != nil {
		return nil, err
	}
	got, err := result.Get()
	if err != nil {
		return nil, err
	}
	m, ok := got.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("writing %s %s/%s: the API server answered with %T, not metadata", o.gvr.Resource, o.ns, obj.GetName(), got)
	}
	return m, nil
}

// segments is the path of the collection, or of the object name.
func (o *Objects) segments(name string) []string { return resourcePath(o.gvr, o.ns, name) }

// resourcePath is the path of gvr's collection in namespace ns (every
// namespace when ""), or of the object name in it.
func resourcePath(gvr schema.GroupVersionResource, ns, name string) []string {
	p := []string{"api"}
	if gvr.Group != "" {
		p = []string{"apis", gvr.Group}
	}
	p = append(p, gvr.Version)
	if ns != "" {
		p = append(p, "namespaces", ns)
	}
	p = append(p, gvr.Resource)
	if name != "" {
		p = append(p, name)
	}
	return p
}
