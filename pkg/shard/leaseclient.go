package shard

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// leaseClient is what the shard Leases ask of the API server, with the
// signatures of client-go's typed Lease client: leaseREST sends the same
// requests that client does, without the scheme of every built-in type its
// package links (clusters.TypedREST says why).
type leaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// newLeaseClient is the client of the shard Leases in namespace, built from
// cfg without its client-side rate limit: a replica sends a renewal or two
// per retry period, and one held back by a limiter (shared with the hub's
// other requests, or refusing to wait past the renewal's deadline) would
// stop the replica serving for no reason the API server gave. The leader
// election Lease's client does the same (pkg/leader).
func newLeaseClient(cfg *rest.Config, namespace string) (leaseClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	c, err := clusters.TypedREST(cfg, coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme)
	if err != nil {
		return nil, err
	}
	return &leaseREST{rest: c, namespace: namespace}, nil
}

// leaseREST is leaseClient over a REST client. Like client-go's typed
// client it asks for protobuf, which the API server serves for Leases.
type leaseREST struct {
	rest      *rest.RESTClient
	namespace string
}

func (c *leaseREST) request(verb string) *rest.Request {
	return c.rest.Verb(verb).UseProtobufAsDefault().Namespace(c.namespace).Resource("leases")
}

func (c *leaseREST) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, c.request("GET").Name(name).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
}

func (c *leaseREST) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	return out, c.request("GET").VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
}

func (c *leaseREST) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.request("GET").VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

func (c *leaseREST) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, c.request("POST").VersionedParams(&opts, metav1.ParameterCodec).Body(lease).Do(ctx).Into(out)
}

func (c *leaseREST) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, c.request("PUT").Name(lease.Name).VersionedParams(&opts, metav1.ParameterCodec).Body(lease).Do(ctx).Into(out)
}

func (c *leaseREST) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.request("DELETE").Name(name).Body(&opts).Do(ctx).Error()
}

// timeout is the client-side bound of a list or watch that asks the
// server for one, as client-go's typed clients set it.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
