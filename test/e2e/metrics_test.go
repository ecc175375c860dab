package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// The metrics of the running agents match docs/metrics.md and move with
// what happens in the fleet; the series of a cluster that leaves go away.
func TestMetrics(t *testing.T) {
	documented := readMetricsDoc(t)
	ghost := &fleettest.Cluster{Name: "ghost"}
	broken := &fleettest.Cluster{Name: "broken"}
	t.Cleanup(func() {
		// Later tests count the hub's clusters: never leave these behind.
		for _, c := range []*fleettest.Cluster{ghost, broken} {
			if err := fleettest.Unregister(context.Background(), hubC.Client, systemNS, c); err != nil {
				t.Error(err)
			}
		}
	})

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"mirroring moves the sync metrics", testSyncMetrics},
		{"a source that keeps failing opens its circuit breaker", testCircuitBreaker},
		{"pull mirrors move the pull metrics", testPullMetrics},
		{"the hub reports its clusters", testClusterMetrics},
		{"an unreachable cluster and a broken registration are reported", func(t *testing.T) {
			testUnreachableCluster(t, ghost, broken)
		}},
		{"every documented metric is exported", func(t *testing.T) { testDocumented(t, documented) }},
		{"a cluster that leaves loses its series", func(t *testing.T) { testClusterLeaves(t, ghost, broken) }},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return // later steps build on earlier ones
		}
	}
}

// testSyncMetrics makes one hub Secret produce, in the hub's member agent
// and in the hub alike, a mirror written, a conflict and an invalid target
// entry, and checks that their counters move.
func testSyncMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mkNamespaces(t, "platform", hubC)
	mkNamespaces(t, "team-a", hubC)
	mkNamespaces(t, "team-b", hubC)
	mkNamespaces(t, "shared", memA, memB)
	for _, theirs := range []struct {
		cluster   *fleettest.Cluster
		namespace string
	}{{hubC, "team-b"}, {memA, "shared"}} {
		createUnmanaged(t, theirs.cluster, secret(theirs.namespace, "metrics-probe"))
	}

	hubMember := members[hubC.Name]
	before := scrapeAll(g, hubMember, hubAgent)
	src := &corev1.Secret{
		ObjectMeta: sourceMeta("platform", "metrics-probe", "team-a, team-b, */shared, not/a/target"),
		StringData: map[string]string{"k": "v"},
	}
	// A rule that fails for every target (the namespace is no base64): it
	// is skipped and counted, the mirrors are written without it.
	src.Annotations[annotations.AnnotationTransform] = "rules:\n  - path: data.k\n    template: \"{{ b64dec .TargetNamespace }}\"\n"
	g.Expect(hubC.Client.Create(ctx, src)).To(Succeed())
	g.Eventually(status(hubC, src), timeout, poll).Should(Equal("1/2 namespaces synced; 1 conflict | remote: 2 clusters, 1/2 synced; 1 conflict"))

	moved := []struct {
		agent  *agent
		metric string
		labels []string
	}{
		{hubMember, "fleetmirror_sync_operations_total", []string{"kind", "Secret", "cluster", "hub", "result", "created"}},
		{hubMember, "fleetmirror_propagation_seconds", []string{"kind", "Secret", "source_cluster", "hub", "cluster", "hub"}},
		{hubMember, "fleetmirror_sync_operations_total", []string{"kind", "Secret", "cluster", "hub", "result", "conflict"}},
		{hubMember, "fleetmirror_conflicts_total", []string{"kind", "Secret", "cluster", "hub"}},
		{hubMember, "fleetmirror_invalid_annotations_total", []string{"kind", "Secret"}},
		{hubAgent, "fleetmirror_sync_operations_total", []string{"kind", "Secret", "cluster", "member-b", "result", "created"}},
		{hubAgent, "fleetmirror_sync_operations_total", []string{"kind", "Secret", "cluster", "member-a", "result", "conflict"}},
		{hubAgent, "fleetmirror_conflicts_total", []string{"kind", "Secret", "cluster", "member-a"}},
		{hubAgent, "fleetmirror_propagation_seconds", []string{"kind", "Secret", "source_cluster", "hub", "cluster", "member-b"}},
		{hubAgent, "fleetmirror_invalid_annotations_total", []string{"kind", "Secret"}},
		{hubMember, "fleetmirror_transform_errors_total", []string{"kind", "Secret"}},
		{hubAgent, "fleetmirror_transform_errors_total", []string{"kind", "Secret"}},
	}
	for _, m := range moved {
		was, _ := value(before[m.agent], m.metric, m.labels...)
		g.Eventually(func() (float64, error) {
			families, err := m.agent.scrape()
			v, _ := value(families, m.metric, m.labels...)
			return v, err
		}, timeout, poll).Should(BeNumerically(">", was), "%s %s%v", m.agent.name, m.metric, m.labels)
	}

	g.Expect(hubC.Client.Delete(ctx, src)).To(Succeed())
	eventuallyGone(t, hubC, src)
}

// testCircuitBreaker makes every write of a source fail, in the hub's
// member agent and in the hub alike, until its breaker opens; deleting the
// source closes it.
func testCircuitBreaker(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mkNamespaces(t, "platform", hubC)
	for _, c := range []*fleettest.Cluster{hubC, memB} {
		mkNamespaces(t, "mirrors-denied", c)
		denyMirrors(t, c, "mirrors-denied")
	}
	hubMember := members[hubC.Name]
	open := func(a *agent) func() (float64, error) {
		return func() (float64, error) {
			families, err := a.scrape()
			v, _ := value(families, "fleetmirror_circuit_breaker_open", "kind", "Secret")
			return v, err
		}
	}
	before := map[*agent]float64{}
	for _, a := range []*agent{hubMember, hubAgent} {
		v, err := open(a)()
		g.Expect(err).NotTo(HaveOccurred())
		before[a] = v
	}

	src := &corev1.Secret{
		ObjectMeta: sourceMeta("platform", "breaker-probe", "mirrors-denied, member-b/mirrors-denied"),
		StringData: map[string]string{"k": "v"},
	}
	g.Expect(hubC.Client.Create(ctx, src)).To(Succeed())
	for _, a := range []*agent{hubMember, hubAgent} {
		g.Eventually(open(a), timeout, poll).Should(Equal(before[a]+1), "%s: breakers open", a.name)
	}
	g.Eventually(status(hubC, src), timeout, poll).Should(SatisfyAll(
		HavePrefix("0/1 namespaces synced; 1 failed"), ContainSubstring(" | remote: 1 cluster, 0/1 synced; 1 failed")))

	g.Expect(hubC.Client.Delete(ctx, src)).To(Succeed())
	eventuallyGone(t, hubC, src)
	for _, a := range []*agent{hubMember, hubAgent} {
		g.Eventually(open(a), timeout, poll).Should(Equal(before[a]), "%s: breakers open", a.name)
	}
}

// denyMirrors makes the API server of c refuse every Secret mirror in
// namespace ns, with a ValidatingAdmissionPolicy, and waits until it does.
func denyMirrors(t *testing.T, c *fleettest.Cluster, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := "e2e-deny-mirrors-in-" + ns
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
				}}},
			},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "the e2e test denies mirrors here"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{annotations.LabelMirror: "true"}},
			},
		},
	}
	createUnmanaged(t, c, policy)
	createUnmanaged(t, c, binding)
	// The policy takes effect within a second or so; a dry run tells when.
	probe := secret(ns, "admission-probe")
	probe.Labels = map[string]string{annotations.LabelMirror: "true"}
	g.Eventually(func() error {
		return c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
	}, timeout, poll).Should(MatchError(ContainSubstring("denies mirrors")))
}

// testClusterMetrics checks that the hub counts and reaches its clusters.
func testClusterMetrics(t *testing.T) {
	g := NewWithT(t)
	families := scrapeAll(g, hubAgent)[hubAgent]
	for _, c := range fleet.Clusters() {
		g.Expect(sample(families, "fleetmirror_hub_cluster_up", "cluster", c.Name)).To(Equal(1.0), "fleetmirror_hub_cluster_up{cluster=%q}", c.Name)
	}
	g.Expect(sample(families, "fleetmirror_hub_registered_clusters")).To(Equal(3.0))
}

// testUnreachableCluster registers ghost, whose API server does not answer,
// and broken, whose kubeconfig does not parse.
func testUnreachableCluster(t *testing.T, ghost, broken *fleettest.Cluster) {
	g := NewWithT(t)
	ctx := context.Background()
	refusedBefore, _ := value(scrapeAll(g, hubAgent)[hubAgent], "fleetmirror_hub_registration_errors_total", "reason", "invalid")

	kc, err := unreachableKubeconfig(memA)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fleettest.RegisterPlain(ctx, hubC.Client, systemNS, ghost, kc, nil)).To(Succeed())
	g.Expect(fleettest.RegisterPlain(ctx, hubC.Client, systemNS, broken, []byte("not: [a kubeconfig"), nil)).To(Succeed())

	g.Eventually(func(g Gomega) {
		families, err := hubAgent.scrape()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sample(families, "fleetmirror_hub_registered_clusters")).To(Equal(4.0), "broken is not registered")
		g.Expect(sample(families, "fleetmirror_hub_cluster_up", "cluster", ghost.Name)).To(Equal(0.0))
		g.Expect(sample(families, "fleetmirror_hub_cluster_probe_failures_total", "cluster", ghost.Name)).To(BeNumerically(">", 0))
		g.Expect(sample(families, "fleetmirror_hub_registration_errors_total", "reason", "invalid")).To(BeNumerically(">", refusedBefore))
	}, timeout, poll).Should(Succeed())
}

// testDocumented checks every documented metric against the agents: it is
// exported by exactly the binaries the documentation names, with the
// documented type, and no fleetmirror metric is left undocumented.
func testDocumented(t *testing.T, documented []documentedMetric) {
	agents := append([]*agent{hubAgent}, members[hubC.Name], members[memA.Name], members[memB.Name])
	NewWithT(t).Eventually(func(g Gomega) {
		scraped := scrapeAll(g, agents...)
		for _, d := range documented {
			var inHub, inMember bool
			for _, a := range agents {
				f := scraped[a][d.name]
				if f == nil {
					continue
				}
				g.Expect(strings.ToLower(f.GetType().String())).To(Equal(d.typ), "type of %s exported by %s", d.name, a.name)
				if a == hubAgent {
					inHub = true
				} else {
					inMember = true
				}
			}
			g.Expect(inHub).To(Equal(d.exportedBy != "member"), "%s exported by fleetmirror-hub (docs/metrics.md: %s)", d.name, d.exportedBy)
			g.Expect(inMember).To(Equal(d.exportedBy != "hub"), "%s exported by fleetmirror-member (docs/metrics.md: %s)", d.name, d.exportedBy)
		}
		for _, a := range agents {
			for name := range scraped[a] {
				if strings.HasPrefix(name, "fleetmirror_") {
					g.Expect(slices.ContainsFunc(documented, func(d documentedMetric) bool { return d.name == name })).
						To(BeTrue(), "%s, exported by %s, is missing from docs/metrics.md", name, a.name)
				}
			}
		}
	}, timeout, poll).Should(Succeed())
}

// testClusterLeaves unregisters ghost and broken and checks that no series
// of the hub names ghost any more.
func testClusterLeaves(t *testing.T, ghost, broken *fleettest.Cluster) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(fleettest.Unregister(ctx, hubC.Client, systemNS, ghost)).To(Succeed())
	g.Expect(fleettest.Unregister(ctx, hubC.Client, systemNS, broken)).To(Succeed())
	g.Eventually(func(g Gomega) {
		families, err := hubAgent.scrape()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sample(families, "fleetmirror_hub_registered_clusters")).To(Equal(3.0))
		g.Expect(seriesOf(families, ghost.Name)).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
}

// scrapeAll scrapes every agent given, asserting through g that it works.
func scrapeAll(g Gomega, agents ...*agent) map[*agent]map[string]*dto.MetricFamily {
	out := map[*agent]map[string]*dto.MetricFamily{}
	for _, a := range agents {
		families, err := a.scrape()
		g.Expect(err).NotTo(HaveOccurred())
		out[a] = families
	}
	return out
}

// seriesOf lists the fleetmirror series with a label whose value is cluster.
func seriesOf(families map[string]*dto.MetricFamily, cluster string) []string {
	var out []string
	for name, f := range families {
		if !strings.HasPrefix(name, "fleetmirror_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == cluster {
					out = append(out, fmt.Sprintf("%s{%s=%q}", name, l.GetName(), l.GetValue()))
				}
			}
		}
	}
	return out
}

// unreachableKubeconfig is c's kubeconfig pointed at a loopback port where
// nothing listens: a registered cluster whose API server is gone.
func unreachableKubeconfig(c *fleettest.Cluster) ([]byte, error) {
	data, err := c.Kubeconfig()
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	addr, err := fleettest.FreeAddr()
	if err != nil {
		return nil, err
	}
	for _, cluster := range kc.Clusters {
		cluster.Server = (&url.URL{Scheme: "https", Host: addr}).String()
	}
	return clientcmd.Write(*kc)
}

// documentedMetric is one row of a table in docs/metrics.md.
type documentedMetric struct {
	name       string
	typ        string // counter, gauge or histogram
	exportedBy string // member, hub or both
}

// metricRow matches a table row of docs/metrics.md:
// | `name` | type | labels | exported by | meaning |
var metricRow = regexp.MustCompile("^\\|\\s*`([a-zA-Z_:][a-zA-Z0-9_:]*)`\\s*\\|\\s*(counter|gauge|histogram)\\s*\\|[^|]*\\|\\s*(member|hub|both)\\s*\\|.*\\|\\s*$")

// readMetricsDoc parses the metric tables of docs/metrics.md. Every table
// row starting with a metric name in backticks must follow the layout.
func readMetricsDoc(t *testing.T) []documentedMetric {
	t.Helper()
	root, err := fleettest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []documentedMetric
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if !strings.HasPrefix(text, "| `") {
			continue
		}
		m := metricRow.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("docs/metrics.md:%d: want | `name` | counter, gauge or histogram | labels | member, hub or both | meaning |, got %s", line, text)
		}
		out = append(out, documentedMetric{name: m[1], typ: m[2], exportedBy: m[3]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md documents no metric")
	}
	return out
}

// Every running agent exports fleetmirror_build_info with the version it
// was stamped with, so that a fleet's dashboards show the versions it runs.
func TestBuildInfo(t *testing.T) {
	g := NewWithT(t)
	for _, a := range []*agent{hubAgent, members[memA.Name]} {
		families, err := a.scrape()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sample(families, "fleetmirror_build_info", "version", e2eVersion, "goversion", runtime.Version())).
			To(Equal(1.0), "fleetmirror_build_info of %s", a.name)
		g.Expect(families["fleetmirror_build_info"].GetMetric()).To(HaveLen(1), "series of fleetmirror_build_info of %s", a.name)
	}
}
