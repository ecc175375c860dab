package hub_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// Issue 5: templated Secrets across clusters; editing the rules updates
// every mirror.
func TestTransformAcrossClusters(t *testing.T) {
	g := NewWithT(t)
	src, shared := srcAndShared(t, hubC, memA, memB)
	s := sourceSecret(src, "api", "*/"+shared, map[string]string{"url": "http://example", "token": "t"})
	s.Annotations[annotations.AnnotationTransform] = `rules:
  - path: data.url
    template: "https://{{.TargetCluster}}.{{.TargetNamespace}}.api.example.com"
  - path: data["ca.crt"]
    value: "from {{ .SourceCluster }}"
  - path: metadata.labels
    merge: {region: "eu"}
    clusterPattern: "member-b"
`
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	for _, c := range fleet.Members {
		eventuallySecret(t, c, shared, "api", func(g Gomega, m *corev1.Secret) {
			g.Expect(string(m.Data["url"])).To(Equal("https://" + c.Name + "." + shared + ".api.example.com"))
			g.Expect(string(m.Data["ca.crt"])).To(Equal("from {{ .SourceCluster }}"), "value rules are literal")
			g.Expect(string(m.Data["token"])).To(Equal("t"))
			if c.Name == "member-b" {
				g.Expect(m.Labels).To(HaveKeyWithValue("region", "eu"))
			} else {
				g.Expect(m.Labels).NotTo(HaveKey("region"))
			}
		})
	}

	change(t, hubC, s, func() {
		s.Annotations[annotations.AnnotationTransform] = `rules:
  - path: data.url
    template: "{{ upper .TargetCluster }}"
`
	})
	for _, c := range fleet.Members {
		eventuallySecret(t, c, shared, "api", func(g Gomega, m *corev1.Secret) {
			g.Expect(string(m.Data["url"])).To(Equal(map[string]string{"member-a": "MEMBER-A", "member-b": "MEMBER-B"}[c.Name]))
			g.Expect(m.Data).NotTo(HaveKey("ca.crt"))
			g.Expect(m.Labels).NotTo(HaveKey("region"))
		})
	}
}
