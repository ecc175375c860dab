package member_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

func TestCreateCopiesContentAndStripsMetadata(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "create", nil, "src", "a", "b")
	src := sourceSecret(ns[0], "db", ns[1]+", "+ns[2], map[string]string{"user": "admin", "password": "s3cret"})
	src.Labels["app"] = "db"
	src.Annotations["team"] = "payments"
	src.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
	src.Annotations["meta.helm.sh/release-name"] = "db"
	src.Annotations["argocd.argoproj.io/tracking-id"] = "x"
	src.Finalizers = []string{"example.com/keep"}
	src.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: types.UID("0e0e0e0e-0000-0000-0000-000000000001")}}
	create(t, src)

	for _, target := range ns[1:] {
		m := eventuallySecret(t, target, "db", nil)
		g.Expect(m.Data).To(Equal(map[string][]byte{"user": []byte("admin"), "password": []byte("s3cret")}))
		g.Expect(m.Type).To(Equal(corev1.SecretTypeOpaque))
		g.Expect(m.Labels).To(Equal(map[string]string{
			"app": "db", annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByMember,
		}))
		g.Expect(m.Annotations).To(HaveKeyWithValue("team", "payments"))
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, clusterName+"/"+ns[0]+"/db"))
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSourceUID, string(src.UID)))
		g.Expect(m.Annotations).To(HaveKey(annotations.AnnotationContentHash))
		for _, k := range []string{"kubectl.kubernetes.io/last-applied-configuration", "meta.helm.sh/release-name",
			"argocd.argoproj.io/tracking-id", annotations.AnnotationSync, annotations.AnnotationTargetNamespaces} {
			g.Expect(m.Annotations).NotTo(HaveKey(k))
		}
		g.Expect(m.OwnerReferences).To(BeEmpty())
		g.Expect(m.Finalizers).To(BeEmpty())
	}
	g.Eventually(status(src), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Expect(src.Finalizers).To(Equal([]string{"example.com/keep"}), "the agent holds no finalizer on a source")
	eventuallyEvent(t, ns[0], "db", "MirrorsSynced", "Created 2")

	// Let the test namespace go: drop the foreign finalizer.
	change(t, src, func(s *corev1.Secret) { s.Finalizers = nil })
}

func TestConfigMapWithBinaryData(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "cm", nil, "src", "a")
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns[0], Name: "settings",
			Labels:      map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: ns[1]}},
		Data:       map[string]string{"level": "info"},
		BinaryData: map[string][]byte{"blob": {0, 1, 2}},
	}
	create(t, src)
	m := &corev1.ConfigMap{}
	g.Eventually(func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns[1], Name: "settings"}, m)
	}, timeout, poll).Should(Succeed())
	g.Expect(m.Data).To(Equal(src.Data))
	g.Expect(m.BinaryData).To(Equal(src.BinaryData))

	change(t, src, func(c *corev1.ConfigMap) { c.Data["level"] = "debug" })
	g.Eventually(func() string {
		_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: ns[1], Name: "settings"}, m)
		return m.Data["level"]
	}, timeout, poll).Should(Equal("debug"))
}

func TestUpdatePropagates(t *testing.T) {
	ns := namespaces(t, "update", nil, "src", "a", "b")
	src := sourceSecret(ns[0], "api", ns[1]+","+ns[2], map[string]string{"token": "v1"})
	src.Labels["tier"] = "gold"
	create(t, src)
	for _, target := range ns[1:] {
		eventuallySecret(t, target, "api", nil)
	}

	change(t, src, func(s *corev1.Secret) {
		s.Data["token"] = []byte("v2")
		s.Data["extra"] = []byte("new")
		delete(s.Labels, "tier")
		s.Labels["color"] = "blue"
		s.Annotations["note"] = "hello"
	})
	for _, target := range ns[1:] {
		eventuallySecret(t, target, "api", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(Equal(map[string][]byte{"token": []byte("v2"), "extra": []byte("new")}))
			g.Expect(m.Labels).To(HaveKeyWithValue("color", "blue"))
			g.Expect(m.Labels).NotTo(HaveKey("tier"))
			g.Expect(m.Annotations).To(HaveKeyWithValue("note", "hello"))
		})
	}

	change(t, src, func(s *corev1.Secret) { delete(s.Data, "extra") })
	eventuallySecret(t, ns[1], "api", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).NotTo(HaveKey("extra"))
	})
}

func TestDriftIsCorrected(t *testing.T) {
	ns := namespaces(t, "drift", nil, "src", "a")
	src := sourceSecret(ns[0], "cfg", ns[1], map[string]string{"k": "v"})
	src.Labels["app"] = "cfg"
	create(t, src)
	m := eventuallySecret(t, ns[1], "cfg", nil)
	uid := m.UID

	// Data changed and a key added by hand: restored exactly.
	change(t, m, func(s *corev1.Secret) { s.Data["k"] = []byte("hacked"); s.Data["added"] = []byte("x") })
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(Equal(map[string][]byte{"k": []byte("v")}))
	})

	// A propagated label removed by hand: restored.
	change(t, m, func(s *corev1.Secret) { delete(s.Labels, "app") })
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Labels).To(HaveKeyWithValue("app", "cfg"))
		g.Expect(s.UID).To(Equal(uid), "drift is corrected in place")
	})

	// Deleted by hand: created again.
	if err := k8s.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.UID).NotTo(Equal(uid))
		g.Expect(s.Data).To(Equal(map[string][]byte{"k": []byte("v")}))
	})
}

func TestRemoval(t *testing.T) {
	ns := namespaces(t, "removal", nil, "src", "a", "b")
	ctx := context.Background()
	newSource := func(name string) *corev1.Secret {
		s := sourceSecret(ns[0], name, ns[1]+","+ns[2], map[string]string{"k": name})
		create(t, s)
		eventuallySecret(t, ns[1], name, nil)
		eventuallySecret(t, ns[2], name, nil)
		return s
	}
	gone := func(name string) {
		t.Helper()
		for _, target := range ns[1:] {
			eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: name}})
		}
	}

	t.Run("source deleted", func(t *testing.T) {
		s := newSource("deleted")
		if err := k8s.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		gone("deleted")
		eventuallyGone(t, s)
	})
	t.Run("sync false", func(t *testing.T) {
		s := newSource("sync-off")
		change(t, s, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationSync] = "false" })
		gone("sync-off")
		// Our part of the status is cleared after the mirrors are deleted,
		// a write of its own: waited for, not read once.
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(s.Finalizers).NotTo(ContainElement(member.Finalizer))
			g.Expect(s.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
		}, timeout, poll).Should(Succeed())
	})
	t.Run("enabled label removed", func(t *testing.T) {
		s := newSource("unlabelled")
		change(t, s, func(s *corev1.Secret) { delete(s.Labels, annotations.LabelEnabled) })
		gone("unlabelled")
		NewWithT(t).Eventually(func() []string {
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(s), s)
			return s.Finalizers
		}, timeout, poll).ShouldNot(ContainElement(member.Finalizer))
	})
}
