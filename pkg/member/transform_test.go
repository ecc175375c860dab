package member_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// Issue 5: transforms per target namespace, strict mode, invalid and
// adversarial rules.
func TestTransforms(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "tr", nil, "src", "prod-a", "dev-b")

	src := sourceSecret(ns[0], "cfg", ns[1]+","+ns[2], map[string]string{"LOG_LEVEL": "debug", "DEBUG": "1", "API_URL": "x"})
	src.Annotations[annotations.AnnotationTransform] = `rules:
  - path: data.LOG_LEVEL
    value: "error"
    namespacePattern: "*-prod-*"
  - path: data.API_URL
    template: "https://{{.TargetNamespace}}.api.example.com"
  - path: data.DEBUG
    delete: true
  - path: metadata.labels
    merge: {environment: production}
`
	create(t, src)
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, m *corev1.Secret) {
		g.Expect(m.Data).To(Equal(map[string][]byte{"LOG_LEVEL": []byte("error"), "API_URL": []byte("https://" + ns[1] + ".api.example.com")}))
		g.Expect(m.Labels).To(HaveKeyWithValue("environment", "production"))
	})
	eventuallySecret(t, ns[2], "cfg", func(g Gomega, m *corev1.Secret) {
		g.Expect(string(m.Data["LOG_LEVEL"])).To(Equal("debug"))
	})

	// A failing rule: skipped with a warning, or the target skipped in strict mode.
	failing := sourceSecret(ns[0], "failing", ns[1], map[string]string{"k": "v"})
	failing.Annotations[annotations.AnnotationTransform] = `rules:
  - path: data.k
    template: "{{ b64dec .TargetNamespace }}"
  - path: data.other
    value: "set"
`
	create(t, failing)
	eventuallySecret(t, ns[1], "failing", func(g Gomega, m *corev1.Secret) {
		g.Expect(string(m.Data["k"])).To(Equal("v"))
		g.Expect(string(m.Data["other"])).To(Equal("set"))
	})
	eventuallyEvent(t, ns[0], "failing", "TransformFailed", "rules[0]")

	strict := sourceSecret(ns[0], "strict", ns[1], map[string]string{"k": "v"})
	strict.Annotations[annotations.AnnotationTransform] = failing.Annotations[annotations.AnnotationTransform]
	strict.Annotations[annotations.AnnotationTransformStrict] = "true"
	create(t, strict)
	g.Eventually(status(strict), timeout, poll).Should(Equal("0/1 namespaces synced; 1 skipped by transform"))
	consistentlyAbsent(t, ns[1], "strict")

	// Rules that do not parse, including a loop, write nothing.
	for name, rules := range map[string]string{
		"looping":  "rules:\n  - path: data.k\n    template: \"{{ range 1000000000 }}x{{ end }}\"\n",
		"garbage":  "rules: [",
		"too-many": "rules:\n" + strings.Repeat("  - path: data.k\n    value: x\n", 51),
	} {
		bad := sourceSecret(ns[0], name, ns[2], map[string]string{"k": "v"})
		bad.Annotations[annotations.AnnotationTransform] = rules
		create(t, bad)
		eventuallyEvent(t, ns[0], name, "InvalidTransform", "Nothing written")
	}
	for _, name := range []string{"looping", "garbage", "too-many"} {
		consistentlyAbsent(t, ns[2], name)
	}
}
