package leader

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// record is the part of a Lease that leader election reads and writes:
// client-go's LeaderElectionRecord less the coordinated election fields
// (strategy, preferredHolder), which it does not write either.
type record struct {
	holder      string
	seconds     int32 // leaseDurationSeconds
	acquired    time.Time
	renewed     time.Time
	transitions int32
}

// recordOf reads the record of a Lease; absent fields are zero, as in
// client-go's LeaseSpecToLeaderElectionRecord.
func recordOf(spec *coordinationv1.LeaseSpec) record {
	var r record
	if spec.HolderIdentity != nil {
		r.holder = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		r.seconds = *spec.LeaseDurationSeconds
	}
	if spec.AcquireTime != nil {
		r.acquired = spec.AcquireTime.Time
	}
	if spec.RenewTime != nil {
		r.renewed = spec.RenewTime.Time
	}
	if spec.LeaseTransitions != nil {
		r.transitions = *spec.LeaseTransitions
	}
	return r
}

// spec is the Lease spec that stores r. Every field is set, the empty
// holder of a released Lease included, as client-go's
// LeaderElectionRecordToLeaseSpec does; a spec written this way replaces
// the whole previous one.
func (r record) spec() coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       &r.holder,
		LeaseDurationSeconds: &r.seconds,
		AcquireTime:          &metav1.MicroTime{Time: r.acquired},
		RenewTime:            &metav1.MicroTime{Time: r.renewed},
		LeaseTransitions:     &r.transitions,
	}
}

// equal reports whether r and o are the same record. Times are compared as
// instants: one read from the API server is in the local zone, one just
// written still carries nanoseconds and a monotonic reading. (client-go
// compares the records' JSON, which has whole seconds; comparing
// microseconds notices every renewal, not one per second.)
func (r record) equal(o record) bool {
	return r.holder == o.holder && r.seconds == o.seconds && r.transitions == o.transitions &&
		r.acquired.Equal(o.acquired) && r.renewed.Equal(o.renewed)
}

// expired reports whether a Lease that was last seen to change at
// observed, on this replica's clock, and that holds for seconds, may be
// taken over at now. A Lease of 0 seconds is expired at once, as in
// client-go.
func expired(observed, now time.Time, seconds int32) bool {
	return !observed.Add(time.Duration(seconds) * time.Second).After(now)
}

// claim is the record a candidate writes to take the Lease (current, read
// from the API server) as identity at now, or to renew it when it holds it
// already: a renewal keeps acquireTime and leaseTransitions, a takeover
// sets acquireTime and counts one transition more.
func claim(current record, identity string, seconds int32, now time.Time) record {
	next := record{holder: identity, seconds: seconds, acquired: now, renewed: now, transitions: current.transitions + 1}
	if current.holder == identity {
		next.acquired, next.transitions = current.acquired, current.transitions
	}
	return next
}

// released is the record a leader writes to step down: no holder, a lease
// of one second and the transitions kept, exactly what client-go writes, so
// that waiting replicas of either implementation take over at their next
// try.
func released(current record, now time.Time) record {
	return record{seconds: 1, acquired: now, renewed: now, transitions: current.transitions}
}

// leaseGVR is the resource of Leases.
var leaseGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// leaseClient reads and writes one Lease through the dynamic client: the
// typed coordination client would bring in client-go's whole scheme (see
// the package comment).
type leaseClient struct {
	leases    dynamic.ResourceInterface // Leases of the namespace
	namespace string
	name      string
}

// newLeaseClient builds the client of Lease namespace/name. Like client-go's
// resourcelock.NewFromKubeconfig, it bounds each request to
// max(1s, renewDeadline/2), so that one hung request cannot use up the
// whole renewal deadline, and adds "leader-election" to the user agent.
// Unlike it, the client has no client-side rate limit: it sends a request
// or two per retry period, and a renewal held back by a limiter (shared
// with the agent's other requests, or refusing to wait past the renewal's
// deadline) would lose the lease for no reason the API server gave.
func newLeaseClient(cfg *rest.Config, namespace, name string, renewDeadline time.Duration) (*leaseClient, error) {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(time.Second, renewDeadline/2)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	return &leaseClient{leases: dyn.Resource(leaseGVR).Namespace(namespace), namespace: namespace, name: name}, nil
}

// String is how logs name the Lease.
func (c *leaseClient) String() string { return c.namespace + "/" + c.name }

// get reads the Lease.
func (c *leaseClient) get(ctx context.Context) (*coordinationv1.Lease, error) {
	u, err := c.leases.Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// create creates the Lease with r; it fails with AlreadyExists when another
// replica created it first.
func (c *leaseClient) create(ctx context.Context, r record) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name},
		Spec:       r.spec(),
	}
	u, err := toUnstructured(lease)
	if err != nil {
		return nil, err
	}
	if u, err = c.leases.Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// update writes r into current, the Lease as last read or written. The
// write carries current's resourceVersion: it fails with Conflict when the
// Lease changed since.
func (c *leaseClient) update(ctx context.Context, current *coordinationv1.Lease, r record) (*coordinationv1.Lease, error) {
	lease := current.DeepCopy()
	lease.Spec = r.spec()
	u, err := toUnstructured(lease)
	if err != nil {
		return nil, err
	}
	if u, err = c.leases.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// delete deletes current, the Lease as last read, if it is still that
// version of that object: it fails with Conflict when the Lease changed
// since.
func (c *leaseClient) delete(ctx context.Context, current *coordinationv1.Lease) error {
	return c.leases.Delete(ctx, c.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
		UID: &current.UID, ResourceVersion: &current.ResourceVersion}})
}

// toUnstructured converts a Lease for the dynamic client, which needs its
// apiVersion and kind in the object.
func toUnstructured(lease *coordinationv1.Lease) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(lease)
	if err != nil {
		return nil, fmt.Errorf("encoding Lease: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(coordinationv1.SchemeGroupVersion.String())
	u.SetKind("Lease")
	return u, nil
}

// fromUnstructured converts what the dynamic client returned into a Lease.
func fromUnstructured(u *unstructured.Unstructured) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), lease); err != nil {
		return nil, fmt.Errorf("decoding Lease: %w", err)
	}
	return lease, nil
}
