package e2e

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// testPullMetrics has a source on the hub's cluster pulled into another
// namespace there (the hub's member agent serves it) and into member-a
// (the hub serves it), and checks that the pull metrics of both move.
func testPullMetrics(t *testing.T) {
	g := NewWithT(t)
	mkNamespaces(t, "pull-src", hubC)
	mkNamespaces(t, "pull-dst", hubC, memA)
	hubMember := members[hubC.Name]
	before := scrapeAll(g, hubMember, hubAgent)

	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pull-src", Name: "pull-probe",
			Labels:      map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationAllowPullInto: "pull-dst, member-a/pull-dst"}},
		StringData: map[string]string{"k": "v"},
	}
	createUnmanaged(t, hubC, src)
	pulls := []struct {
		agent *agent
		into  *fleettest.Cluster
		from  string
	}{{hubMember, hubC, "pull-src/pull-probe"}, {hubAgent, memA, hubC.Name + "/pull-src/pull-probe"}}
	for _, p := range pulls {
		createUnmanaged(t, p.into, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "pull-dst", Name: "pull-probe",
			Labels:      map[string]string{annotations.LabelPull: "true"},
			Annotations: map[string]string{annotations.AnnotationMirrorFrom: p.from}}})
		eventuallyExists(t, p.into, secret("pull-dst", "pull-probe"), func(g Gomega, s *corev1.Secret) {
			g.Expect(s.Data).To(HaveKeyWithValue("k", []byte("v")))
		})
		was, _ := value(before[p.agent], "fleetmirror_pull_operations_total", "kind", "Secret", "cluster", p.into.Name, "result", "written")
		g.Eventually(func(g Gomega) {
			families, err := p.agent.scrape()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sample(families, "fleetmirror_pull_operations_total", "kind", "Secret", "cluster", p.into.Name, "result", "written")).To(BeNumerically(">", was))
			g.Expect(sample(families, "fleetmirror_pull_mirrors", "kind", "Secret", "cluster", p.into.Name, "state", "InSync")).To(BeNumerically(">=", 1))
		}, timeout, poll).Should(Succeed(), p.agent.name)
	}
}
