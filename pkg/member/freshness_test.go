package member_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// Item 13: a mirror that claims to hold content from a newer source version
// than exists (its source-resource-version set by hand far ahead) and whose
// data was changed is still corrected: the agent asks the API server
// whether its cache is current and, as it is, overwrites the mirror.
func TestFalseFreshnessClaimIsCorrected(t *testing.T) {
	ns := namespaces(t, "fresh", nil, "src", "a")
	s := sourceSecret(ns[0], "cfg", ns[1], map[string]string{"k": "v"})
	create(t, s)
	m := eventuallySecret(t, ns[1], "cfg", nil)
	NewWithT(t).Eventually(status(s), timeout, poll).Should(Equal("1/1 namespaces synced"))

	change(t, m, func(m *corev1.Secret) {
		m.Annotations[annotations.AnnotationSourceResourceVersion] = "999999999999"
		m.Data["k"] = []byte("forged")
	})
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(Equal(map[string][]byte{"k": []byte("v")}))
		g.Expect(k8s.Get(t.Context(), objectKey(s), s)).To(Succeed())
		g.Expect(m.Annotations).To(HaveKeyWithValue(annotations.AnnotationSourceResourceVersion, s.ResourceVersion))
	})
}
