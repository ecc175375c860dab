package member_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
)

// A mirror is never a source. Control keys added by hand to one of our
// mirrors are reverted like any other edit; an object that carries mirror
// labels and the enabled label, ours or not, gets a SourceRefused warning
// that says why, and nothing is written to it or mirrored from it.
func TestMirrorsPosingAsSources(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "posing", nil, "src", "dst", "other")
	src := sourceSecret(ns[0], "creds", ns[1], map[string]string{"k": "v"})
	create(t, src)
	mirror := eventuallySecret(t, ns[1], "creds", nil)

	// Source annotations and a control label added to our mirror by hand
	// are drift: the mirror is written back as it was built.
	change(t, mirror, func(m *corev1.Secret) {
		m.Annotations[annotations.AnnotationSync] = "true"
		m.Annotations[annotations.AnnotationTargetNamespaces] = ns[2]
		m.Labels[annotations.Prefix+"team"] = "x"
	})
	eventuallySecret(t, ns[1], "creds", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Annotations).NotTo(HaveKey(annotations.AnnotationSync))
		g.Expect(m.Annotations).NotTo(HaveKey(annotations.AnnotationTargetNamespaces))
		g.Expect(m.Labels).NotTo(HaveKey(annotations.Prefix + "team"))
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, clusterName+"/"+ns[0]+"/creds"))
	})

	// The enabled label on our mirror is reverted too.
	change(t, mirror, func(m *corev1.Secret) { m.Labels[annotations.LabelEnabled] = "true" })
	eventuallySecret(t, ns[1], "creds", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Labels).NotTo(HaveKey(annotations.LabelEnabled))
	})

	// A mirror of another writer, labelled and annotated as a source, is
	// refused out loud and left exactly as it is.
	posing := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns[1], Name: "posing",
			Labels: map[string]string{
				annotations.LabelEnabled:   "true",
				annotations.LabelMirror:    "true",
				annotations.LabelManagedBy: annotations.ManagedByHub,
			},
			Annotations: map[string]string{
				annotations.AnnotationSync:             "true",
				annotations.AnnotationTargetNamespaces: ns[2],
				annotations.AnnotationSource:           "elsewhere/team/posing",
			},
		},
		StringData: map[string]string{"k": "v"},
	}
	create(t, posing)
	eventuallyEvent(t, ns[1], "posing", controller.ReasonSourceRefused, "it is itself a mirror (label fleetmirror.io/mirror=true) of elsewhere/team/posing")
	ev := eventsFor(ns[1], "posing", controller.ReasonSourceRefused)
	g.Expect(ev).To(HaveLen(1))
	g.Expect(ev[0].Type).To(Equal(corev1.EventTypeWarning))
	consistentlyAbsent(t, ns[2], "posing")
	rv := posing.ResourceVersion
	g.Expect(k8s.Get(t.Context(), objectKey(posing), posing)).To(Succeed())
	g.Expect(posing.ResourceVersion).To(Equal(rv), "nothing is written to an object that is not ours")
	g.Expect(posing.Finalizers).To(BeEmpty())

	// The agent's own mirror and source were not disturbed by any of it.
	g.Eventually(status(src), timeout, poll).Should(Equal("1/1 namespaces synced"))
}
