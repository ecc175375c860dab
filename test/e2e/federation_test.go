package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// federationTimeout bounds the wait for a series to travel from an agent
// through its member's Prometheus (scrape, then rules) to the hub's.
const federationTimeout = 45 * time.Second

// The monitoring of docs/federation.md on loopback: a Prometheus per member
// scrapes its agent as job fleetmirror-member, with the member chart's rules
// and its cluster as external label; the hub's Prometheus scrapes the hub
// with the hub chart's rules and federates the members' recorded series with
// the scrape job the document gives. A member's recorded series reach the
// hub with their job and the right cluster label.
func TestFederation(t *testing.T) {
	// The pinned prometheus of hack/prometheus.sh (make test builds it
	// first): a missing binary is a failure, never a skip.
	promDir, err := fleettest.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	promBin := filepath.Join(promDir, "prometheus")
	begin := time.Now()
	root, err := fleettest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	federate := documentedFederateJob(t, filepath.Join(root, "docs", "federation.md"))
	dir := keepDirOnFailure(t, "fleetmirror-federation-")
	g := NewWithT(t)
	ctx := context.Background()

	// Something for member-a's agent to count: a mirror written in member-a.
	mkNamespaces(t, "federation-src", memA)
	mkNamespaces(t, "federation-dst", memA)
	src := &corev1.ConfigMap{
		ObjectMeta: sourceMeta("federation-src", "federation-probe", "federation-dst"),
		Data:       map[string]string{"k": "v"},
	}
	g.Expect(memA.Client.Create(ctx, src)).To(Succeed())
	t.Cleanup(func() {
		if err := memA.Client.Delete(ctx, src); err != nil {
			t.Error(err)
			return
		}
		eventuallyGone(t, memA, configMap("federation-dst", src.Name))
		eventuallyGone(t, memA, src)
	})
	eventuallyExists(t, memA, configMap("federation-dst", src.Name), func(g Gomega, cm *corev1.ConfigMap) {
		expectMirror(g, cm, annotations.ManagedByMember, "member-a/federation-src/federation-probe")
	})

	var procs []*agent
	stopAtCleanup(t, &procs)
	start := func(name string, config map[string]any) *agent {
		t.Helper()
		p, err := startPrometheus(promBin, filepath.Join(dir, name), name, config)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
		return p
	}
	var targets []any
	memberProms := map[string]*agent{}
	for _, c := range []*fleettest.Cluster{memA, memB} {
		p := start("prometheus-"+c.Name, map[string]any{
			"global": map[string]any{
				"scrape_interval":     "1s",
				"evaluation_interval": "1s",
				"external_labels":     map[string]any{"cluster": c.Name},
			},
			"rule_files": []any{filepath.Join(root, "charts", "member", "files", "fleetmirror.rules.yaml")},
			"scrape_configs": []any{map[string]any{
				"job_name":       "fleetmirror-member",
				"static_configs": []any{map[string]any{"targets": []any{members[c.Name].metricsAddr}}},
			}},
		})
		memberProms[c.Name] = p
		targets = append(targets, map[string]any{"targets": []any{p.metricsAddr}, "labels": map[string]any{"cluster": c.Name}})
	}
	// The document's job, reaching the members on loopback: plain HTTP, no
	// authentication, the e2e suite's pace.
	delete(federate, "basic_auth")
	federate["scheme"] = "http"
	federate["scrape_interval"] = "1s"
	federate["scrape_timeout"] = "1s"
	federate["static_configs"] = targets
	hubProm := start("prometheus-hub", map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": []any{filepath.Join(root, "charts", "hub", "files", "fleetmirror.rules.yaml")},
		"scrape_configs": []any{
			map[string]any{
				"job_name":       "fleetmirror-hub",
				"static_configs": []any{map[string]any{"targets": []any{hubAgent.metricsAddr}}},
			},
			federate,
		},
	})
	readyCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for _, p := range procs {
		if err := waitPrometheusReady(readyCtx, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("Prometheus servers ready in %s", time.Since(begin).Round(time.Millisecond))

	t.Run("each member's Prometheus labels its recorded series with its cluster", func(t *testing.T) {
		for name, p := range memberProms {
			NewWithT(t).Eventually(func(g Gomega) {
				families, err := scrapeFederate(p, `{__name__="cluster:fleetmirror_agent_up:sum"}`)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(federated(families, "cluster:fleetmirror_agent_up:sum", "job", "fleetmirror-member", "cluster", name)).To(Equal([]float64{1}))
			}, federationTimeout, poll).Should(Succeed(), "/federate of %s", p.name)
		}
	})

	t.Run("the hub's Prometheus holds the members' recorded series", func(t *testing.T) {
		g := NewWithT(t)
		// The series the agent labels with its own cluster.
		g.Eventually(func(g Gomega) {
			series, err := query(hubProm, `cluster:fleetmirror_sync_operations:rate5m{kind="ConfigMap", result="created", cluster="member-a"}`)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(series).To(HaveLen(1))
			g.Expect(series[0].Metric).To(Equal(map[string]string{
				"__name__": "cluster:fleetmirror_sync_operations:rate5m",
				"job":      "fleetmirror-member",
				"cluster":  "member-a",
				"kind":     "ConfigMap",
				"result":   "created",
			}))
		}, federationTimeout, poll).Should(Succeed())
		// The series that get their cluster from the member's external label.
		g.Eventually(func(g Gomega) {
			series, err := query(hubProm, `cluster:fleetmirror_agent_up:sum{job="fleetmirror-member"}`)
			g.Expect(err).NotTo(HaveOccurred())
			up := map[string]string{}
			for _, s := range series {
				up[s.Metric["cluster"]] = s.Value
			}
			g.Expect(up).To(Equal(map[string]string{"member-a": "1", "member-b": "1"}))
		}, federationTimeout, poll).Should(Succeed())
		// The hub's own recorded series, apart from the members' by job.
		g.Eventually(func(g Gomega) {
			series, err := query(hubProm, `cluster:fleetmirror_hub_cluster_up:max{job="fleetmirror-hub"}`)
			g.Expect(err).NotTo(HaveOccurred())
			up := map[string]string{}
			for _, s := range series {
				up[s.Metric["cluster"]] = s.Value
			}
			g.Expect(up).To(HaveKeyWithValue("member-a", "1"))
			g.Expect(up).To(HaveKeyWithValue("member-b", "1"))
		}, federationTimeout, poll).Should(Succeed())
		// honor_labels kept the members' labels as they were.
		series, err := query(hubProm, `{__name__=~"cluster:fleetmirror_.+", exported_job!=""} or {__name__=~"cluster:fleetmirror_.+", exported_cluster!=""}`)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(series).To(BeEmpty(), "series renamed on federation")
	})
	t.Logf("whole test: %s", time.Since(begin).Round(time.Millisecond))
}

// documentedFederateJob returns the hub's federation scrape job that
// docs/federation.md gives, from its YAML example, after checking that it
// federates the recorded series and keeps their labels.
func documentedFederateJob(t *testing.T, path string) map[string]any {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1) {
		var config struct {
			ScrapeConfigs []map[string]any `json:"scrape_configs"`
		}
		if err := yaml.Unmarshal(m[1], &config); err != nil {
			continue
		}
		for _, job := range config.ScrapeConfigs {
			if job["job_name"] != "fleetmirror-federate" {
				continue
			}
			match, _ := job["params"].(map[string]any)["match[]"].([]any)
			if job["metrics_path"] != "/federate" || job["honor_labels"] != true || len(match) == 0 {
				t.Fatalf("%s: the fleetmirror-federate job must read /federate with match[] and honor_labels: true, got %v", path, job)
			}
			return job
		}
	}
	t.Fatalf("%s: no YAML example with the scrape job fleetmirror-federate", path)
	return nil
}

// startPrometheus starts a Prometheus server on a free loopback port with
// config, its data and log in dir. The returned process's metricsAddr is
// the server's address.
func startPrometheus(bin, dir, name string, config map[string]any) (*agent, error) {
	addr, err := fleettest.FreeAddr()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return nil, err
	}
	configFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configFile, data, 0o600); err != nil {
		return nil, err
	}
	p := &agent{name: name, logPath: filepath.Join(dir, "prometheus.log"), metricsAddr: addr}
	return p, startProcess(p, bin,
		"--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
	)
}

// waitPrometheusReady waits until the server's /-/ready answers 200.
func waitPrometheusReady(ctx context.Context, p *agent) error {
	return p.waitOK(ctx, "http://"+p.metricsAddr+"/-/ready")
}

// scrapeFederate reads the series of the Prometheus server that match the
// selector from its /federate, as a federating server sees them.
func scrapeFederate(p *agent, selector string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var body bytes.Buffer
	u := "http://" + p.metricsAddr + "/federate?" + url.Values{"match[]": {selector}}.Encode()
	code, err := fleettest.HTTPGet(ctx, u, &body)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %s", u, code, body.String())
	}
	return fleettest.ParseMetrics(&body)
}

// federated returns the values of the series of family name, as /federate
// serves them (untyped), whose labels include the given label/value pairs.
func federated(families map[string]*dto.MetricFamily, name string, labelPairs ...string) []float64 {
	var out []float64
	for _, m := range families[name].GetMetric() {
		if fleettest.HasLabels(m, labelPairs...) {
			out = append(out, m.GetUntyped().GetValue())
		}
	}
	return out
}

// promSeries is one element of an instant vector from the query API.
type promSeries struct {
	Metric map[string]string
	Value  string
}

// query evaluates an instant vector query on the Prometheus server.
func query(p *agent, q string) ([]promSeries, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var body bytes.Buffer
	u := "http://" + p.metricsAddr + "/api/v1/query?" + url.Values{"query": {q}}.Encode()
	code, err := fleettest.HTTPGet(ctx, u, &body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("query %s: status %d: %w: %s", q, code, err, body.String())
	}
	if resp.Status != "success" || resp.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: status %d, %s: %s (result type %q)", q, code, resp.Status, resp.Error, resp.Data.ResultType)
	}
	out := make([]promSeries, 0, len(resp.Data.Result))
	for _, r := range resp.Data.Result {
		v, _ := r.Value[1].(string)
		out = append(out, promSeries{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// String shows a series in PromQL notation, for failure messages.
func (s promSeries) String() string {
	var labels []string
	for k, v := range s.Metric {
		if k != "__name__" {
			labels = append(labels, fmt.Sprintf("%s=%q", k, v))
		}
	}
	slices.Sort(labels)
	return fmt.Sprintf("%s{%s} %s", s.Metric["__name__"], strings.Join(labels, ", "), s.Value)
}
