package shard_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/shard"
)

// TestLeaseIsNotRateLimited: the hub's client-side rate limit
// (--kube-api-qps) never holds back a shard Lease renewal. The replica
// renews every leaseDuration/8; with a limit of one request every 2 s, a
// limited Lease client would let the Lease go stale (a renewal waits past
// the renew deadline, or the limiter refuses to wait that long) and the
// replica would stop serving.
func TestLeaseIsNotRateLimited(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, grp, id = "ratelimit-system", "ratelimit", "limited"
	for _, n := range []string{ns, "ratelimit-clusters"} {
		g.Expect(fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	}
	startReplica(t, id, false, "--namespace="+ns, "--cluster-secrets-namespace=ratelimit-clusters",
		"--shard-group="+grp, "--kube-api-qps=0.5", "--kube-api-burst=1")
	key := client.ObjectKey{Namespace: ns, Name: grp + "-" + id}
	age := func(g Gomega) time.Duration {
		l := &coordinationv1.Lease{}
		g.Expect(fleet.Hub.Client.Get(ctx, key, l)).To(Succeed())
		g.Expect(l.Spec.RenewTime).NotTo(BeNil())
		return time.Since(l.Spec.RenewTime.Time)
	}
	// Serving the hub's own cluster, its only one.
	g.Eventually(func(g Gomega) {
		g.Expect(groupClaims(g, ns, grp, id)).To(HaveKeyWithValue(id, []string{fleet.Hub.Name}))
	}).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(Succeed())
	// Renewed within the renew deadline all along (the API server's
	// renewTime has microseconds; the margin covers the read).
	g.Consistently(func(g Gomega) {
		g.Expect(age(g)).To(BeNumerically("<", shard.RenewDeadline(leaseDuration)), "the Lease went stale")
		g.Expect(groupClaims(g, ns, grp, id)).To(HaveKeyWithValue(id, []string{fleet.Hub.Name}))
	}).WithTimeout(3 * leaseDuration).WithPolling(100 * time.Millisecond).Should(Succeed())
}
