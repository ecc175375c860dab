package hub_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
)

// pullMirror is a Secret in ns of its cluster asking for the content of
// from.
func pullMirror(ns, name, from string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{annotations.LabelPull: "true"},
			Annotations: map[string]string{annotations.AnnotationMirrorFrom: from}},
		Data: map[string][]byte{"own": []byte("mine")},
	}
}

// A pull mirror in one member cluster receives the content of a source in
// another through the hub, where the source allows its cluster and
// namespace; elsewhere the hub says why not. It never writes NS/NAME pull
// mirrors: the member agent of their cluster serves those.
func TestPullAcrossClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, dst := uniq("pullsrc"), uniq("pulldst")
	mkNamespaces(t, src, memA)
	mkNamespaces(t, dst, hubC, memA, memB)
	source := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db",
			Labels:      map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationAllowPullInto: "member-b/" + dst}},
		StringData: map[string]string{"password": "v1"},
	}
	g.Expect(memA.Client.Create(ctx, source)).To(Succeed())
	ref := "member-a/" + src + "/db"

	pulled := pullMirror(dst, "db", ref)
	g.Expect(memB.Client.Create(ctx, pulled)).To(Succeed())
	got := eventuallySecret(t, memB, dst, "db", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(Equal(map[string][]byte{"password": []byte("v1"), "own": []byte("mine")}))
		g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "InSync: pulled from "+ref))
	})
	g.Expect(got.UID).To(Equal(pulled.UID))
	g.Expect(got.Labels).To(Equal(map[string]string{annotations.LabelPull: "true"}))
	var managers []string
	for _, mf := range got.ManagedFields {
		managers = append(managers, mf.Manager)
	}
	g.Expect(managers).To(ContainElements(hub.FieldManager+"-pull", hub.FieldManager))
	g.Eventually(func() []string { return eventMessages(memB, dst, "db", controller.ReasonPulled) }, timeout, poll).
		Should(ContainElement("Wrote the content of " + ref))

	// A change of the source crosses over.
	change(t, memA, source, func() { source.Data["password"] = []byte("v2") })
	eventuallySecret(t, memB, dst, "db", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("v2")))
	})

	// Into a cluster the source does not allow: refused, nothing written
	// but the status.
	other := pullMirror(dst, "db", ref)
	g.Expect(hubC.Client.Create(ctx, other)).To(Succeed())
	eventuallyWarning(t, hubC, dst, "db", controller.ReasonPullNotAllowed, "does not allow pulls into hub/"+dst)
	g.Eventually(status(hubC, other), timeout, poll).Should(HavePrefix("NotAllowed: "))

	// From the pull mirror's own cluster: the member agent's form.
	own := pullMirror(dst, "own", ref)
	g.Expect(memA.Client.Create(ctx, own)).To(Succeed())
	eventuallyWarning(t, memA, dst, "own", controller.ReasonPullRefused, "names the pull mirror's own cluster member-a; write "+src+"/db")

	// NS/NAME is the member agent's: the hub leaves it alone.
	local := pullMirror(dst, "local", src+"/db")
	g.Expect(memB.Client.Create(ctx, local)).To(Succeed())
	g.Consistently(func() string {
		s, _ := fleettest.Lookup(memB, fleettest.Secret(dst, "local"))
		return s.ResourceVersion
	}, "2s", poll).Should(Equal(local.ResourceVersion))

	for _, s := range []*corev1.Secret{other, own} {
		c := map[bool]*fleettest.Cluster{true: hubC, false: memA}[s == other]
		live, err := fleettest.Lookup(c, fleettest.Secret(s.Namespace, s.Name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(live.Data).To(Equal(map[string][]byte{"own": []byte("mine")}), "no content in a refused pull mirror")
	}

	// The source deleted: the pull mirror keeps its content, with a
	// Warning in its own cluster.
	g.Expect(memA.Client.Delete(ctx, source)).To(Succeed())
	eventuallyWarning(t, memB, dst, "db", controller.ReasonPullSourceMissing, "does not exist")
	g.Eventually(status(memB, pulled), timeout, poll).Should(HaveSuffix("the content pulled last is kept"))
	kept, err := getSecret(memB, dst, "db")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept.Data).To(HaveKeyWithValue("password", []byte("v2")))
}

// eventuallyWarning waits for an Event with reason about ns/name in c whose
// message holds part.
func eventuallyWarning(t *testing.T, c *fleettest.Cluster, ns, name, reason, part string) {
	t.Helper()
	NewWithT(t).Eventually(func() string {
		return strings.Join(eventMessages(c, ns, name, reason), "\n")
	}, timeout, poll).Should(ContainSubstring(part))
}

// The source's cluster stops answering: the pull mirror keeps the content
// it has, says why nothing arrives, and catches up once the cluster is
// back.
func TestPullFromUnreachableCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, dst := uniq("pullsrc"), uniq("pulldst")
	mkNamespaces(t, src, memA)
	mkNamespaces(t, dst, memB)
	source := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db",
			Labels:      map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationAllowPullInto: "member-b/" + dst}},
		StringData: map[string]string{"password": "v1"},
	}
	g.Expect(memA.Client.Create(ctx, source)).To(Succeed())
	ref := "member-a/" + src + "/db"
	pulled := pullMirror(dst, "db", ref)
	g.Expect(memB.Client.Create(ctx, pulled)).To(Succeed())
	eventuallySecret(t, memB, dst, "db", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("v1")))
	})

	// member-a hangs (the hub reaches it through partA); the source
	// changes meanwhile, written straight to member-a.
	partA.Hang()
	healed := false
	t.Cleanup(func() {
		if !healed {
			if err := partA.Heal(); err != nil {
				t.Error(err)
			}
		}
	})
	change(t, memA, source, func() { source.Data["password"] = []byte("v2") })
	eventuallyWarning(t, memB, dst, "db", controller.ReasonClusterUnreachable, "the cluster member-a of the source "+ref+" is unreachable")
	g.Eventually(status(memB, pulled), timeout, poll).Should(And(HavePrefix("Unreachable: "), HaveSuffix("the content pulled last is kept")))
	kept, err := getSecret(memB, dst, "db")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept.Data).To(HaveKeyWithValue("password", []byte("v1")), "the content pulled last stays")

	g.Expect(partA.Heal()).To(Succeed())
	healed = true
	eventuallySecret(t, memB, dst, "db", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("v2")))
		g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "InSync: pulled from "+ref))
	})
}
