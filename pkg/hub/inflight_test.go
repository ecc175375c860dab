package hub_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// TestClusterMaxInFlight: member-b answers writes slowly. One source on
// the hub targets twelve of its namespaces, and the hub may write sixteen
// mirrors of a source at once in each cluster (--write-parallelism) with
// four workers; with --cluster-max-in-flight=2, member-b never has more
// than two of the hub's writes in flight at once, and every mirror still
// arrives, the source's change too.
func TestClusterMaxInFlight(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	proxy := hubThroughProxy(t)
	h := startHub("--cluster-max-in-flight=2", "--write-parallelism=16", "--workers=4")
	t.Cleanup(func() { h.stop() })

	src, prefix := uniq("src"), uniq("slow")
	mkNamespaces(t, src, hubC)
	var targets []string
	for i := range 12 {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		mkNamespaces(t, ns, memB)
		targets = append(targets, ns)
	}
	proxy.SlowWrites(150 * time.Millisecond)
	s := sourceSecret(src, "bounded", memB.Name+"/"+prefix+"-*", map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())
	for _, ns := range targets {
		eventuallySecret(t, memB, ns, "bounded", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v1")))
		})
	}
	change(t, hubC, s, func() { s.StringData = map[string]string{"k": "v2"} })
	for _, ns := range targets {
		eventuallySecret(t, memB, ns, "bounded", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
		})
	}
	// Two at once: the bound was reached, and held.
	g.Expect(proxy.MostWritesInFlight()).To(Equal(2), "the most writes in flight to member-b at once")
	proxy.SlowWrites(0)
	g.Expect(hubC.Client.Delete(ctx, s)).To(Succeed())
	for _, ns := range targets {
		eventuallyGone(t, memB, ns, "bounded")
	}
}
