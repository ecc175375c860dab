package hub_test

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// The hub serves target-name and copy-once in other clusters as the
// member agent does in its own: copies under the other name, made once,
// left to their namespace, remembered (the hub's CLUSTER/NS entries in
// fleetmirror.io/copied), and left as plain objects when the source goes.
func TestRenamedCopyOnceAcrossClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, shared := srcAndShared(t, hubC, memA, memB)
	s := sourceSecret(src, "app-token", "member-a/"+shared+",member-b/"+shared, map[string]string{"v": "1"})
	s.Annotations[annotations.AnnotationTargetName] = "regcred"
	s.Annotations[annotations.AnnotationCopyOnce] = "true"
	g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())
	for _, c := range fleet.Members {
		eventuallySecret(t, c, shared, "regcred", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByHub))
			g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, "hub/"+src+"/app-token"))
			g.Expect(m.Data).To(HaveKeyWithValue("v", []byte("1")))
		})
	}
	copied := func() string {
		got := &corev1.Secret{}
		if err := hubC.Client.Get(ctx, objKey(s), got); err != nil {
			return err.Error()
		}
		return got.Annotations[annotations.AnnotationCopied]
	}
	g.Eventually(copied, timeout, poll).Should(Equal("member-a/" + shared + ",member-b/" + shared))

	// A copy deleted in member-b is not made again, the source's change
	// is not propagated; a third cluster's target proves the hub looked.
	g.Expect(memB.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shared, Name: "regcred"}})).To(Succeed())
	eventuallyGone(t, memB, shared, "regcred")
	more := uniq("more")
	mkNamespaces(t, more, memA)
	change(t, hubC, s, func() {
		s.StringData = map[string]string{"v": "2"}
		s.Annotations[annotations.AnnotationTargetNamespaces] += ",member-a/" + more
	})
	eventuallySecret(t, memA, more, "regcred", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("v", []byte("2")))
	})
	g.Eventually(copied, timeout, poll).Should(ContainSubstring("member-a/" + more))
	g.Expect(getSecret(memB, shared, "regcred")).To(BeNil(), "a deleted copy is not made again")
	eventuallySecret(t, memA, shared, "regcred", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(HaveKeyWithValue("v", []byte("1")), "a copy made once is not updated")
	})

	// The source goes: its copies stay, plain objects.
	g.Expect(hubC.Client.Delete(ctx, s)).To(Succeed())
	for _, ns := range []string{shared, more} {
		eventuallySecret(t, memA, ns, "regcred", func(g Gomega, m *corev1.Secret) {
			for k := range m.Labels {
				g.Expect(strings.HasPrefix(k, annotations.Prefix)).To(BeFalse(), "label %s", k)
			}
			for k := range m.Annotations {
				g.Expect(strings.HasPrefix(k, annotations.Prefix)).To(BeFalse(), "annotation %s", k)
			}
		})
	}
}

// A policy of a member cluster with targetName, copyOnce and
// deletionPolicy Orphan, served across clusters by the hub: the renamed
// copy lands in the other cluster, the hub's entry of status.copied sits
// beside the member agent's, and deleting the policy leaves the copies.
func TestPolicyParityAcrossClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, local, remote, _ := policyScene(t)
	p := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "parity"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db"}},
		TargetNamespaces: []string{local, "member-b/" + remote},
		TargetName:       "db-copy",
		CopyOnce:         true,
		DeletionPolicy:   v1alpha1.DeletionPolicyOrphan,
	}}
	g.Expect(memA.Client.Create(ctx, p)).To(Succeed())
	eventuallySecret(t, memA, local, "db-copy", nil)
	eventuallySecret(t, memB, remote, "db-copy", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByHub))
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v1")))
	})
	g.Eventually(func(g Gomega) {
		got := &v1alpha1.MirrorPolicy{}
		g.Expect(memA.Client.Get(ctx, objKey(p), got)).To(Succeed())
		g.Expect(got.Status.Copied).To(ConsistOf(local+"/db", "member-b/"+remote+"/db"))
	}, timeout, poll).Should(Succeed())

	g.Expect(memA.Client.Delete(ctx, p)).To(Succeed())
	for _, at := range []struct {
		c  *fleettest.Cluster
		ns string
	}{{memA, local}, {memB, remote}} {
		eventuallySecret(t, at.c, at.ns, "db-copy", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Labels).NotTo(HaveKey(annotations.LabelMirror))
			g.Expect(m.Annotations).NotTo(HaveKey(annotations.AnnotationSource))
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v1")))
		})
	}
}

// A synchronized copy the hub released in another cluster (deletion
// policy Orphan) records where it came from, claims nothing, and is taken
// back by a policy of the same source that adopts fleetmirror's copies:
// the same object, the hub's mirror again, following the source.
func TestReleasedCopyTakenBackAcrossClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	src, _, remote, owned := policyScene(t)
	p, made := remotePolicy(t, src, remote, func(s *v1alpha1.MirrorPolicySpec) {
		s.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
		s.Adopt = []string{"fleetmirror"}
	})

	g.Expect(memA.Client.Delete(ctx, p)).To(Succeed())
	eventuallySecret(t, memB, remote, "db", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Labels).NotTo(HaveKey(annotations.LabelMirror))
		g.Expect(m.Annotations).NotTo(HaveKey(annotations.AnnotationSource))
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationReleasedFrom, HaveSuffix("/"+src+"/db")))
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationReleasedFromUID, string(owned.UID)))
	})
	fleettest.Change(t, wait, memA, owned, func(s *corev1.Secret) { s.StringData = map[string]string{"k": "v2"} })

	again := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: p.Name}, Spec: p.Spec}
	g.Expect(memA.Client.Create(ctx, again)).To(Succeed())
	eventuallySecret(t, memB, remote, "db", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByHub))
		g.Expect(m.Annotations).NotTo(HaveKey(annotations.AnnotationReleasedFrom))
		g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v2")))
		g.Expect(m.UID).To(Equal(made.UID), "taken back, not made again")
	})
}

// keepAdditions holds in other clusters too: the hub's mirror keeps a key
// a person added there, and still follows its source.
func TestKeepAdditionsAcrossClusters(t *testing.T) {
	src, _, remote, owned := policyScene(t)
	remotePolicy(t, src, remote, func(s *v1alpha1.MirrorPolicySpec) { s.KeepAdditions = true })
	fleettest.Change(t, wait, memB, fleettest.Secret(remote, "db"), func(m *corev1.Secret) { m.Data["mine"] = []byte("x") })
	fleettest.Change(t, wait, memA, owned, func(s *corev1.Secret) { s.StringData = map[string]string{"k": "v2"} })
	eventuallySecret(t, memB, remote, "db", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(Equal(map[string][]byte{"k": []byte("v2"), "mine": []byte("x")}))
	})
}

// remotePolicy creates a MirrorPolicy of the Secret db in src into
// member-b/remote, changed by edit, and returns it with the hub's mirror
// once it is there.
func remotePolicy(t *testing.T, src, remote string, edit func(*v1alpha1.MirrorPolicySpec)) (*v1alpha1.MirrorPolicy, *corev1.Secret) {
	t.Helper()
	p := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "remote"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db"}},
		TargetNamespaces: []string{"member-b/" + remote},
	}}
	edit(&p.Spec)
	NewWithT(t).Expect(memA.Client.Create(context.Background(), p)).To(Succeed())
	return p, eventuallySecret(t, memB, remote, "db", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByHub))
	})
}
