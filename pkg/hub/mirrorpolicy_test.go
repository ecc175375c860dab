package hub_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// A MirrorPolicy in a member cluster, served by the member agent there for
// its own namespaces and by the hub for its CLUSTER/NS entries, as the
// annotations are: each writes its own mirrors and its own part of the
// policy's status, neither writes the source, and deleting the policy
// removes the mirrors of both.
func TestPolicyAcrossClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, local, remote, owned := policyScene(t)
	p := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "share"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db"}},
		TargetNamespaces: []string{local, "member-b/" + remote},
	}}
	g.Expect(memA.Client.Create(ctx, p)).To(Succeed())

	byMember := eventuallySecret(t, memA, local, "db", nil)
	g.Expect(byMember.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByMember))
	byHub := eventuallySecret(t, memB, remote, "db", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v1")))
	})
	g.Expect(byHub.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByHub))
	g.Expect(byHub.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, "member-a/"+src+"/db"))

	// Both parts of the status, each applied by its writer, side by side.
	g.Eventually(func(g Gomega) {
		got := &v1alpha1.MirrorPolicy{}
		g.Expect(memA.Client.Get(ctx, objKey(p), got)).To(Succeed())
		g.Expect(got.Status.TargetsSynced).To(Equal(int32(1)))
		g.Expect(got.Status.RemoteTargetsSynced).To(Equal(int32(1)))
		for _, typ := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionRemoteReady} {
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, typ)).To(BeTrue(), "%s in %v", typ, got.Status.Conditions)
		}
		for _, typ := range []string{v1alpha1.ConditionDegraded, v1alpha1.ConditionRemoteDegraded} {
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, typ)).To(BeTrue(), "%s in %v", typ, got.Status.Conditions)
		}
	}, timeout, poll).Should(Succeed())

	// No fighting: once both are done, neither rewrites the policy, its
	// mirrors or the source, which nobody but its owner ever wrote.
	g.Expect(memA.Client.Get(ctx, objKey(owned), owned)).To(Succeed())
	g.Expect(owned.Finalizers).To(BeEmpty())
	g.Expect(owned.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
	versions := func() []string {
		got := &v1alpha1.MirrorPolicy{}
		_ = memA.Client.Get(ctx, objKey(p), got)
		_ = memA.Client.Get(ctx, objKey(owned), owned)
		m, _ := getSecret(memB, remote, "db")
		return []string{got.ResourceVersion, owned.ResourceVersion, m.ResourceVersion}
	}
	before := versions()
	g.Consistently(versions, 3*time.Second, 200*time.Millisecond).Should(Equal(before))

	// The owner's update reaches both.
	change(t, memA, owned, func() { owned.StringData = map[string]string{"k": "v2"} })
	for _, at := range []struct {
		c  *fleettest.Cluster
		ns string
	}{{memA, local}, {memB, remote}} {
		eventuallySecret(t, at.c, at.ns, "db", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
		})
	}

	// Deleted, the policy takes every mirror with it.
	g.Expect(memA.Client.Delete(ctx, p)).To(Succeed())
	eventuallyGone(t, memA, local, "db")
	eventuallyGone(t, memB, remote, "db")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(memA.Client.Get(ctx, objKey(p), &v1alpha1.MirrorPolicy{}))
	}, timeout, poll).Should(BeTrue())
}

// policyScene readies member-a for a MirrorPolicy served across clusters:
// the CRD, a hub started after it (one that looked before the CRD existed
// learns of it only at its next discovery) and a member agent until the
// test ends; and the namespaces of the sources and of the local and remote
// targets, with the Secret src/db its owner wrote.
func policyScene(t *testing.T) (src, local, remote string, owned *corev1.Secret) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(fleettest.InstallPolicyCRD(memA.Config)).Error().NotTo(HaveOccurred())
	hubAgent.stop()
	hubAgent = startHub()
	t.Cleanup(startMember(t, memA))
	src, local, remote = uniq("src"), uniq("local"), uniq("remote")
	mkNamespaces(t, src, memA)
	mkNamespaces(t, local, memA)
	mkNamespaces(t, remote, memB)
	owned = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db"}, StringData: map[string]string{"k": "v1"}}
	g.Expect(memA.Client.Create(context.Background(), owned)).To(Succeed())
	return src, local, remote, owned
}
