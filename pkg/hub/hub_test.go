package hub_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

func TestHubSourceReachesEveryOtherCluster(t *testing.T) {
	g := NewWithT(t)
	src, shared := srcAndShared(t, hubC, hubC, memA, memB)
	s := sourceSecret(src, "creds", "*/"+shared, map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())

	for _, c := range fleet.Members {
		m := eventuallySecret(t, c, shared, "creds", nil)
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v1")))
		g.Expect(m.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByHub))
		g.Expect(m.Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, "hub/"+src+"/creds"))
	}
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	g.Expect(s.Finalizers).To(BeEmpty(), "the hub holds no finalizer on a source")
	got, err := getSecret(hubC, shared, "creds")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeNil(), "the hub never writes into the source's own cluster")

	// Update reaches every cluster.
	change(t, hubC, s, func() { s.Data["k"] = []byte("v2") })
	for _, c := range fleet.Members {
		eventuallySecret(t, c, shared, "creds", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
		})
	}

	// Drift in a remote cluster is corrected; a deleted mirror comes back.
	m := eventuallySecret(t, memA, shared, "creds", nil)
	change(t, memA, m, func() { m.Data["k"] = []byte("hacked") })
	eventuallySecret(t, memA, shared, "creds", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
	})
	g.Expect(memB.Client.Delete(context.Background(), eventuallySecret(t, memB, shared, "creds", nil))).To(Succeed())
	eventuallySecret(t, memB, shared, "creds", nil)

	// Deleting the source removes every remote mirror, then the source.
	g.Expect(hubC.Client.Delete(context.Background(), s)).To(Succeed())
	for _, c := range fleet.Members {
		eventuallyGone(t, c, shared, "creds")
	}
	eventuallyGone(t, hubC, src, "creds")
}

func TestMemberSourceAndClusterPatterns(t *testing.T) {
	g := NewWithT(t)
	src, app, team := uniq("src"), uniq("app-"), uniq("team")
	mkNamespaces(t, src, memA)
	mkNamespaces(t, app, hubC, memA, memB)
	mkNamespaces(t, team, hubC, memA, memB)
	s := sourceSecret(src, "cfg", "member-?/app-*, hub/"+team, map[string]string{"k": "v"})
	g.Expect(memA.Client.Create(context.Background(), s)).To(Succeed())

	eventuallySecret(t, memB, app, "cfg", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, "member-a/"+src+"/cfg"))
	})
	eventuallySecret(t, hubC, team, "cfg", nil)
	g.Eventually(status(memA, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))
	for _, miss := range []struct {
		c  string
		ns string
	}{{"member-a", app}, {"hub", app}, {"member-b", team}, {"member-a", team}} {
		got, err := getSecret(fleet.Cluster(miss.c), miss.ns, "cfg")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(BeNil(), "no mirror expected in %s/%s", miss.c, miss.ns)
	}

	// Narrowing the entries removes the mirrors no longer targeted.
	change(t, memA, s, func() { s.Annotations[annotations.AnnotationTargetNamespaces] = "hub/" + team })
	eventuallyGone(t, memB, app, "cfg")
	eventuallySecret(t, hubC, team, "cfg", nil)
}

func TestClusterSelector(t *testing.T) {
	g := NewWithT(t)
	src, sel := uniq("src"), uniq("sel")
	mkNamespaces(t, src, hubC)
	mkNamespaces(t, sel, memA, memB)
	s := sourceSecret(src, "prod-only", "*/"+sel, map[string]string{"k": "v"})
	s.Annotations[annotations.AnnotationTargetClusterSelector] = "env=prod"
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	eventuallySecret(t, memB, sel, "prod-only", nil)
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))
	got, err := getSecret(memA, sel, "prod-only")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(BeNil(), "member-a carries no env=prod label")
}

func TestRemoteConflictLeavesUnmanagedObjectAlone(t *testing.T) {
	g := NewWithT(t)
	src, shared := srcAndShared(t, hubC, memA, memB)
	theirs := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: shared, Name: "taken"},
		StringData: map[string]string{"owner": "someone else"},
	}
	g.Expect(memA.Client.Create(context.Background(), theirs)).To(Succeed())
	rv := theirs.ResourceVersion

	s := sourceSecret(src, "taken", "*/"+shared, map[string]string{"k": "v"})
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	eventuallySecret(t, memB, shared, "taken", nil)
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 1/2 synced; 1 conflict"))
	g.Eventually(func() []string { return eventMessages(hubC, src, "taken", "TargetConflict") }, timeout, poll).
		Should(ContainElement(ContainSubstring("not managed by fleetmirror")))

	still, err := getSecret(memA, shared, "taken")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(still.ResourceVersion).To(Equal(rv))
	g.Expect(still.Data).To(Equal(map[string][]byte{"owner": []byte("someone else")}))

	// Deleting the source never deletes what it does not own.
	g.Expect(hubC.Client.Delete(context.Background(), s)).To(Succeed())
	eventuallyGone(t, memB, shared, "taken")
	eventuallyGone(t, hubC, src, "taken")
	still, err = getSecret(memA, shared, "taken")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(still).NotTo(BeNil())
	g.Expect(still.ResourceVersion).To(Equal(rv))
}
