package member_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/controller"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// Item 8: Secrets of the types that are bound to their namespace or to a
// tool's bookkeeping are never mirrored, whatever their annotations say;
// the source gets a SourceRefused warning, no finalizer and no status.
func TestNeverMirroredSecretTypes(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "refused", nil, "src", "a")
	cases := []struct {
		name string
		typ  corev1.SecretType
		set  func(*corev1.Secret)
	}{
		{"sa-token", corev1.SecretTypeServiceAccountToken, func(s *corev1.Secret) {
			s.Annotations[corev1.ServiceAccountNameKey] = "default"
		}},
		{"bootstrap-token", corev1.SecretTypeBootstrapToken, func(s *corev1.Secret) {
			s.Data = map[string][]byte{"token-id": []byte("abcdef"), "token-secret": []byte("0123456789abcdef")}
		}},
		{"helm-release", "helm.sh/release.v1", func(s *corev1.Secret) {
			s.Data = map[string][]byte{"release": []byte("H4sI")}
		}},
	}
	var sources []*corev1.Secret
	for _, c := range cases {
		s := sourceSecret(ns[0], c.name, ns[1], nil)
		s.Type = c.typ
		c.set(s)
		create(t, s)
		sources = append(sources, s)
	}
	// A regular Secret beside them is mirrored: the agent is working here.
	create(t, sourceSecret(ns[0], "regular", ns[1], map[string]string{"k": "v"}))
	eventuallySecret(t, ns[1], "regular", nil)

	for _, c := range cases {
		eventuallyEvent(t, ns[0], c.name, controller.ReasonSourceRefused, "Secrets of type "+string(c.typ)+" are never mirrored")
		ev := eventsFor(ns[0], c.name, controller.ReasonSourceRefused)
		g.Expect(ev).To(HaveLen(1))
		g.Expect(ev[0].Type).To(Equal(corev1.EventTypeWarning))
	}
	g.Consistently(func() []string {
		var got []string
		for _, c := range cases {
			got = append(got, secretsIn(c.name, ns[1])...)
		}
		return got
	}, settle, poll).Should(BeEmpty())
	for _, s := range sources {
		g.Expect(status(s)()).To(BeEmpty(), "%s: no status annotation", s.Name)
		g.Expect(s.Finalizers).NotTo(ContainElement(member.Finalizer), "%s: no finalizer", s.Name)
		g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelEnabled, "true"))
	}
}
