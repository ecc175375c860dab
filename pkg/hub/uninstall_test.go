package hub_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/shard"
)

// The hub's uninstall mode with a member cluster down: everything the
// hub reaches is cleaned (its own cluster and the other member: mirrors
// deleted, statuses removed), and the run fails naming the cluster it
// could not reach, where the statuses and mirrors stay (nothing there holds
// a deletion: the hub puts no finalizer on sources). A
// second run once the cluster is back cleans it too. A fleet of its own:
// an uninstall cleans whole clusters.
func TestUninstallWithAMemberDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fleetOfItsOwn(t, "down", "up")
	home, down, up := f.Hub, f.Cluster("down"), f.Cluster("up")

	// A source in each cluster; each has mirrors in the two others.
	sources := map[*fleettest.Cluster]*corev1.Secret{}
	for _, c := range f.Clusters() {
		s := sourceSecret("src", "from-"+c.Name, "*/shared", map[string]string{"k": "v"})
		g.Expect(c.Client.Create(ctx, s)).To(Succeed())
		sources[c] = s
	}
	// Our labels but no source reference: not ours.
	lookalike := fleettest.Secret("shared", "unreferenced")
	lookalike.Labels = map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByHub}
	g.Expect(up.Client.Create(ctx, lookalike)).To(Succeed())

	agent := startHubOn(home)
	mirrorsIn := func(c *fleettest.Cluster) []client.Object {
		var out []client.Object
		for src, s := range sources {
			if src != c {
				out = append(out, fleettest.Secret("shared", s.Name))
			}
		}
		return out
	}
	for _, c := range f.Clusters() {
		for _, m := range mirrorsIn(c) {
			fleettest.EventuallyExists(t, wait, c, m, nil)
		}
		g.Eventually(status(c, sources[c]), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
		g.Expect(finalizers(c, sources[c])()).To(BeEmpty())
	}
	agent.stop()
	g.Expect(down.Stop()).To(Succeed())
	t.Cleanup(func() { _ = down.Restart() })

	uninstall := func() error {
		r := startHubOn(home, "--uninstall", "--uninstall-timeout=20s")
		var err error
		g.Eventually(r.done, timeout, poll).Should(Receive(&err))
		return err
	}
	err := uninstall()
	g.Expect(err).To(MatchError(And(
		ContainSubstring("cluster down not reached"), ContainSubstring(annotations.AnnotationStatus),
		Not(ContainSubstring("cluster hub")), Not(ContainSubstring("cluster up")))))
	t.Logf("the first uninstall says: %v", err)
	for _, c := range []*fleettest.Cluster{home, up} {
		for _, m := range mirrorsIn(c) {
			g.Expect(fleettest.Lookup(c, m)).To(BeNil(), "%s: mirror %s", c.Name, m.GetName())
		}
		released(g, c, sources[c])
	}
	got, err := fleettest.Lookup(up, lookalike)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(BeNil())
	g.Expect(got.ResourceVersion).To(Equal(lookalike.ResourceVersion), "an object that is not ours was written")

	// The cluster that was down kept everything; once back, a second run
	// cleans it.
	g.Expect(down.Restart()).To(Succeed())
	g.Expect(status(down, sources[down])()).To(Equal("remote: 2 clusters, 2/2 synced"))
	for _, m := range mirrorsIn(down) {
		g.Expect(fleettest.Lookup(down, m)).NotTo(BeNil(), "mirror %s in the cluster that was down", m.GetName())
	}
	g.Expect(uninstall()).To(Succeed())
	for _, m := range mirrorsIn(down) {
		g.Expect(fleettest.Lookup(down, m)).To(BeNil(), "mirror %s", m.GetName())
	}
	released(g, down, sources[down])
}

// finalizers returns the finalizers of obj in c, as kubectl shows them.
func finalizers(c *fleettest.Cluster, obj client.Object) func() []string {
	return func() []string {
		got, err := fleettest.Lookup(c, obj)
		if err != nil || got == nil {
			return nil
		}
		return got.GetFinalizers()
	}
}

// released checks that src in c holds neither the hub's finalizer nor its
// status.
func released(g Gomega, c *fleettest.Cluster, src client.Object) {
	got, err := fleettest.Lookup(c, src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.GetFinalizers()).NotTo(ContainElement(hub.Finalizer), "%s: source %s", c.Name, src.GetName())
	g.Expect(got.GetAnnotations()).NotTo(HaveKey(annotations.AnnotationStatus), "%s: source %s", c.Name, src.GetName())
}

// The replicas of a sharded hub hold shard Leases, not the leader election
// Lease: the uninstall waits until none renews its Lease any more (the
// replicas stopped), writing nothing meanwhile, then cleans every cluster,
// not only a shard of them, and deletes the replicas' Leases, and only
// those.
func TestShardedUninstallWaitsForTheReplicas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := fleetOfItsOwn(t, "one", "two")
	src := sourceSecret("src", "everywhere", "*/shared", map[string]string{"k": "v"})
	g.Expect(f.Hub.Client.Create(ctx, src)).To(Succeed())
	sharded := []string{"--shards=auto", "--shard-lease-duration=4s"}
	replicas := []*running{
		startHubOn(f.Hub, append(sharded, "--shard-id=a")...),
		startHubOn(f.Hub, append(sharded, "--shard-id=b")...),
	}
	// The replicas first divide the clusters, which takes a few lease
	// durations on a busy machine.
	settle := fleettest.Wait{Timeout: 2 * time.Minute, Poll: poll}
	for _, m := range f.Members {
		fleettest.EventuallyExists(t, settle, m, fleettest.Secret("shared", src.Name), nil)
	}
	g.Eventually(status(f.Hub, src), timeout, poll).Should(ContainSubstring("remote:"))

	r := startHubOn(f.Hub, append(sharded, "--shard-id=uninstall", "--uninstall", "--uninstall-timeout=1m")...)
	g.Consistently(r.done, 3*time.Second, poll).ShouldNot(Receive(), "the uninstall ran while the replicas served")
	for _, m := range f.Members {
		g.Expect(fleettest.Lookup(m, fleettest.Secret("shared", src.Name))).NotTo(BeNil())
	}
	for _, rep := range replicas {
		rep.stop()
	}
	// Leases that are not the replicas': another hub's in the namespace,
	// and one with the group's label not named after its holder.
	lease := func(name, group, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: name, Labels: map[string]string{shard.LabelGroup: group}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}
	}
	others := []*coordinationv1.Lease{lease("other-hub-a", "other-hub", "a"), lease("fleetmirror-hub-lookalike", "fleetmirror-hub", "someone")}
	for _, l := range others {
		g.Expect(f.Hub.Client.Create(ctx, l)).To(Succeed())
	}
	var err error
	g.Eventually(r.done, timeout, poll).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range f.Members {
		g.Expect(fleettest.Lookup(m, fleettest.Secret("shared", src.Name))).To(BeNil(), "mirror in %s", m.Name)
	}
	released(g, f.Hub, src)
	var left coordinationv1.LeaseList
	g.Expect(f.Hub.Client.List(ctx, &left, client.InNamespace(systemNS))).To(Succeed())
	var names []string
	for _, l := range left.Items {
		names = append(names, l.Name)
	}
	g.Expect(names).To(ConsistOf(others[0].Name, others[1].Name), "the replicas' Leases are left, or others' deleted")
}

// fleetOfItsOwn starts a hub and members for one test, with the suite's
// namespaces and the members registered: an uninstall cleans whole
// clusters, which must not touch the other tests' objects.
func fleetOfItsOwn(t *testing.T, members ...string) *fleettest.Fleet {
	t.Helper()
	f, err := fleettest.Start("", members...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, c := range f.Clusters() {
		for _, ns := range []string{systemNS, secretsNS, "src", "shared"} {
			fleettest.CreateNamespaces(t, ns, nil, c)
		}
	}
	for _, m := range f.Members {
		if err := fleettest.RegisterPlain(context.Background(), f.Hub.Client, secretsNS, m, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
