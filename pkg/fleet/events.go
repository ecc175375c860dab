package fleet

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// coreScheme knows the core/v1 types only: Events, and the typed objects
// (Secrets of the hub's providers) that Events may be about.
var coreScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err) // registers types: fails only on a programming error
	}
	return s
}()

// eventSink writes the broadcaster's Events to a cluster.
//
// Written here, and not client-go's typed core/v1 EventSinkImpl, because
// every typed client links client-go's scheme of all built-in API types
// (about 7 MB of the binary) where Events need the core/v1 group only.
// It sends what EventSinkImpl sends: a POST, a PUT, or a strategic merge
// PATCH to the Event's namespace.
type eventSink struct {
	client rest.Interface
}

var _ record.EventSink = eventSink{}

func newEventSink(cfg *rest.Config, httpClient *http.Client) (eventSink, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(coreScheme).WithoutConversion()
	cfg.ContentType = runtime.ContentTypeJSON
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return eventSink{}, err
		}
	}
	c, err := rest.RESTClientForConfigAndClient(cfg, httpClient)
	return eventSink{client: c}, err
}

// The broadcaster gives its sink no context; it bounds its retries itself.

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.client.Post().Namespace(e.Namespace).Resource("events").Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.client.Put().Namespace(e.Namespace).Resource("events").Name(e.Name).Body(e).Do(context.Background()).Into(out)
	return out, err
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.client.Patch(types.StrategicMergePatchType).Namespace(e.Namespace).Resource("events").Name(e.Name).
		Body(data).Do(context.Background()).Into(out)
	return out, err
}
