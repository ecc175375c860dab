package shard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/shard"
)

// A replica that takes over the clusters of a silent one reads the silent
// replica's Lease from the API server once per step, however many
// clusters it claimed (the takeover of 355 clusters waited for 700 reads
// in a row), and still finds a Lease renewed behind its watch's back.
func TestSilentLeaseReadOncePerStep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, grp = "lease-reads", "reads"
	g.Expect(fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	clusters := make([]string, 50)
	for i := range clusters {
		clusters[i] = fmt.Sprintf("member-%02d", i)
	}
	dead := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: grp + "-dead",
		Labels:      map[string]string{shard.LabelGroup: grp},
		Annotations: map[string]string{shard.AnnotationClaims: strings.Join(clusters, ",")}}}
	g.Expect(fleet.Hub.Client.Create(ctx, dead)).To(Succeed())

	var reads atomic.Int32
	cfg := rest.CopyConfig(fleet.Hub.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingReads{next: rt, path: "/leases/" + dead.Name, n: &reads}
	})
	l, err := shard.NewStepLeases(cfg, ns, grp, "self", leaseDuration)
	g.Expect(err).NotTo(HaveOccurred())
	l.ObserveSilent(dead)

	g.Expect(l.ClaimedByOther(ctx, clusters)).To(HaveEach(BeFalse()), "claimed by a replica silent for two lease durations")
	g.Expect(reads.Load()).To(Equal(int32(1)), "reads of the silent Lease in one step")

	// Renewed, and not seen by the watch: the next step reads it again,
	// once, and then knows it live.
	dead.Spec.HolderIdentity = new("dead")
	g.Expect(fleet.Hub.Client.Update(ctx, dead)).To(Succeed())
	g.Expect(l.ClaimedByOther(ctx, clusters)).To(HaveEach(BeTrue()), "claimed by a replica that renewed its Lease")
	g.Expect(reads.Load()).To(Equal(int32(2)), "reads of the silent Lease in two steps")
}

// countingReads counts the GETs of one path.
type countingReads struct {
	next http.RoundTripper
	path string
	n    *atomic.Int32
}

func (c countingReads) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, c.path) && !strings.Contains(r.URL.RawQuery, "watch") {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

func (c countingReads) WrappedRoundTripper() http.RoundTripper { return c.next }
