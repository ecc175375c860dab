package member_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// Item 6: a Secret of the target name that is not ours stays byte for byte
// as it was, the source reports the conflict, and deleting the source does
// not delete it.
func TestUnmanagedObjectIsNotTouched(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "unmanaged", nil, "src", "taken", "free")
	theirs := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "creds", Labels: map[string]string{"owner": "someone"}},
		Data:       map[string][]byte{"password": []byte("theirs")},
	}
	create(t, theirs)
	before := secretState(ns[1], "creds")()

	src := sourceSecret(ns[0], "creds", ns[1]+","+ns[2], map[string]string{"password": "ours"})
	create(t, src)
	eventuallySecret(t, ns[2], "creds", nil)
	g.Eventually(status(src), timeout, poll).Should(Equal("1/2 namespaces synced; 1 conflict"))
	eventuallyEvent(t, ns[0], "creds", controller.ReasonTargetConflict, ns[1]+"/creds exists and is not managed by fleetmirror")

	g.Consistently(secretState(ns[1], "creds"), settle, poll).Should(Equal(before))
	got, _ := getSecret(ns[1], "creds")
	g.Expect(got.Data).To(Equal(theirs.Data))
	g.Expect(got.Labels).To(Equal(map[string]string{"owner": "someone"}))
	g.Expect(got.Annotations).To(BeEmpty())

	// Deleting the source removes its own mirror only.
	if err := k8s.Delete(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	eventuallyGone(t, src)
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[2], Name: "creds"}})
	g.Expect(secretState(ns[1], "creds")()).To(Equal(before))
}

// Item 6: objects that look like mirrors but are not this source's are not
// touched: our labels with another source reference, and a hub mirror of
// the very same source reference.
func TestForeignMirrorsAreNotTouched(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "foreign", nil, "src", "other-ref", "hub", "free")
	ours := map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByMember}
	otherRef := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "app", Labels: ours,
			Annotations: map[string]string{annotations.AnnotationSource: clusterName + "/" + ns[0] + "/another-name"}},
		Data: map[string][]byte{"k": []byte("other")},
	}
	create(t, otherRef)
	hubs := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns[2], Name: "app",
			Labels:      map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByHub},
			Annotations: map[string]string{annotations.AnnotationSource: clusterName + "/" + ns[0] + "/app"}},
		Data: map[string][]byte{"k": []byte("hub")},
	}
	create(t, hubs)
	before := []string{secretState(ns[1], "app")(), secretState(ns[2], "app")()}

	src := sourceSecret(ns[0], "app", ns[1]+","+ns[2]+","+ns[3], map[string]string{"k": "ours"})
	create(t, src)
	eventuallySecret(t, ns[3], "app", nil)
	g.Eventually(status(src), timeout, poll).Should(Equal("1/3 namespaces synced; 2 conflicts"))
	eventuallyEvent(t, ns[0], "app", controller.ReasonTargetConflict, ns[1]+"/app already mirrors "+clusterName+"/"+ns[0]+"/another-name")
	eventuallyEvent(t, ns[0], "app", controller.ReasonTargetConflict, ns[2]+"/app")

	state := func() []string { return []string{secretState(ns[1], "app")(), secretState(ns[2], "app")()} }
	g.Consistently(state, settle, poll).Should(Equal(before))

	// Switching the source off removes only its own mirror.
	change(t, src, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationSync] = "false" })
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[3], Name: "app"}})
	g.Eventually(func() []string {
		_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(src), src)
		return src.Finalizers
	}, timeout, poll).ShouldNot(ContainElement(member.Finalizer))
	g.Consistently(state, settle, poll).Should(Equal(before))
}

// Item 6: of two sources with the same name in different namespaces, the
// one whose mirror exists keeps the target; the other reports a conflict,
// and switching it off or deleting it leaves the first one's mirror alone.
func TestTwoSourcesOneTarget(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "twosrc", nil, "first", "second", "target", "only2")
	first := sourceSecret(ns[0], "shared", ns[2], map[string]string{"from": "first"})
	create(t, first)
	m := eventuallySecret(t, ns[2], "shared", nil)
	owner := clusterName + "/" + ns[0] + "/shared"
	g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, owner))
	mirror := secretState(ns[2], "shared")

	second := sourceSecret(ns[1], "shared", ns[2]+","+ns[3], map[string]string{"from": "second"})
	create(t, second)
	eventuallySecret(t, ns[3], "shared", nil)
	g.Eventually(status(second), timeout, poll).Should(Equal("1/2 namespaces synced; 1 conflict"))
	eventuallyEvent(t, ns[1], "shared", controller.ReasonTargetConflict, ns[2]+"/shared already mirrors "+owner)
	g.Expect(status(first)()).To(Equal("1/1 namespaces synced"))
	kept := mirror()
	g.Consistently(mirror, settle, poll).Should(Equal(kept), "the first source's mirror is not rewritten")

	t.Run("second switched off", func(t *testing.T) {
		change(t, second, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationSync] = "false" })
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[3], Name: "shared"}})
		NewWithT(t).Consistently(mirror, settle, poll).Should(Equal(kept))
	})
	t.Run("second deleted", func(t *testing.T) {
		change(t, second, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationSync] = "true" })
		eventuallySecret(t, ns[3], "shared", nil)
		if err := k8s.Delete(context.Background(), second); err != nil {
			t.Fatal(err)
		}
		eventuallyGone(t, second) // the agent released it: its cleanup ran
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[3], Name: "shared"}})
		NewWithT(t).Consistently(mirror, settle, poll).Should(Equal(kept))
		got, _ := getSecret(ns[2], "shared")
		NewWithT(t).Expect(got.Data).To(HaveKeyWithValue("from", []byte("first")))
	})
}

// Item 6 and 8: a mirror never becomes a source. The source's control labels
// are not copied, and control labels added to a mirror by hand do not make
// it mirror itself anywhere.
func TestMirrorNeverBecomesSource(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "nomirror", nil, "src", "a", "b")
	src := sourceSecret(ns[0], "cfg", ns[1], map[string]string{"k": "v1"})
	create(t, src)
	m := eventuallySecret(t, ns[1], "cfg", nil)
	g.Expect(m.Labels).NotTo(HaveKey(annotations.LabelEnabled))
	g.Expect(m.Annotations).NotTo(HaveKey(annotations.AnnotationSync))
	g.Expect(m.Annotations).NotTo(HaveKey(annotations.AnnotationTargetNamespaces))
	g.Expect(m.Finalizers).To(BeEmpty())

	change(t, m, func(s *corev1.Secret) {
		s.Labels[annotations.LabelEnabled] = "true"
		s.Annotations[annotations.AnnotationSync] = "true"
		s.Annotations[annotations.AnnotationTargetNamespaces] = ns[2]
	})
	// Prove the agent has handled events since the edit: a source created
	// afterwards, targeting the same namespace, is mirrored.
	probe := sourceSecret(ns[0], "probe", ns[2], map[string]string{"k": "probe"})
	create(t, probe)
	eventuallySecret(t, ns[2], "probe", nil)
	consistentlyAbsent(t, ns[2], "cfg")
	// The control keys added by hand are drift: the mirror is written back.
	got := eventuallySecret(t, ns[1], "cfg", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Labels).NotTo(HaveKey(annotations.LabelEnabled))
		g.Expect(s.Annotations).NotTo(HaveKey(annotations.AnnotationSync))
		g.Expect(s.Annotations).NotTo(HaveKey(annotations.AnnotationTargetNamespaces))
	})
	g.Expect(got.Data).To(HaveKeyWithValue("k", []byte("v1")))
	g.Expect(got.Finalizers).To(BeEmpty(), "the agent never holds a finalizer on a mirror")
	g.Expect(got.Annotations).NotTo(HaveKey(annotations.AnnotationStatus), "a mirror gets no status")
	g.Expect(eventsFor(ns[1], "cfg", controller.ReasonMirrorsSynced)).To(BeEmpty())

	// The mirror still follows its source.
	change(t, src, func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(HaveKeyWithValue("k", []byte("v2")))
	})
	g.Expect(secretsIn("cfg", ns[2])).To(BeEmpty())
}
