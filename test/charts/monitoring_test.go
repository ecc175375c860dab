package charts_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Record string `json:"record"`
			Alert  string `json:"alert"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

func TestPrometheusRuleHoldsTheRulesFile(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			ms := render(t, c.dir, values("metrics.prometheusRule.enabled", true, "metrics.prometheusRule.labels", map[string]any{"release": "kps"}))
			o := ms.Get(t, "PrometheusRule", "fleetmirror-"+c.dir)
			var file map[string]any
			readYAML(t, filepath.Join("charts", c.dir, "files", "fleetmirror.rules.yaml"), &file)
			if !reflect.DeepEqual(o.Map["spec"], file) {
				t.Errorf("PrometheusRule spec is not files/fleetmirror.rules.yaml")
			}
			labels := o.Map["metadata"].(map[string]any)["labels"].(map[string]any)
			if labels["release"] != "kps" || o.Map["apiVersion"] != "monitoring.coreos.com/v1" {
				t.Errorf("PrometheusRule %v", o.Map["metadata"])
			}
		})
	}
}

func TestServiceMonitorSetsTheRulesJob(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			ms := render(t, c.dir, values("metrics.serviceMonitor.enabled", true, "metrics.serviceMonitor.labels", map[string]any{"release": "kps"},
				"metrics.serviceMonitor.relabelings", []any{map[string]any{"action": "labeldrop", "regex": "pod"}}))
			sm := ms.Get(t, "ServiceMonitor", "fleetmirror-"+c.dir).Map
			spec := sm["spec"].(map[string]any)
			ep := spec["endpoints"].([]any)[0].(map[string]any)
			relabel := ep["relabelings"].([]any)
			first := relabel[0].(map[string]any)
			if ep["port"] != "metrics" || first["targetLabel"] != "job" || first["replacement"] != c.binary || len(relabel) != 2 {
				t.Errorf("endpoint %v, want port metrics and job %s first", ep, c.binary)
			}
			// The rules select the same job.
			b, err := os.ReadFile(filepath.Join(root, "charts", c.dir, "files", "fleetmirror.rules.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), `job="`+c.binary+`"`) {
				t.Errorf("rules do not select job %s", c.binary)
			}
			var svc corev1.Service
			ms.Get(t, "Service", "-metrics").Decode(t, &svc)
			sel := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
			for k, v := range sel {
				if svc.Labels[k] != v {
					t.Errorf("ServiceMonitor selects %s=%v, which the metrics Service does not have", k, v)
				}
			}
			if svc.Spec.Ports[0].Name != "metrics" {
				t.Errorf("Service port %q", svc.Spec.Ports[0].Name)
			}
		})
	}
}

// TestDashboardConfigMap: each chart ships its dashboard (the hub's fleet
// view, the member's own) in a ConfigMap for Grafana's sidecar, unchanged.
func TestDashboardConfigMap(t *testing.T) {
	for _, c := range []struct{ chart, file string }{
		{"hub", "fleetmirror-fleet.json"},
		{"member", "fleetmirror-member.json"},
	} {
		t.Run(c.chart, func(t *testing.T) {
			ms := render(t, c.chart, values("dashboards.enabled", true, "dashboards.annotations", map[string]any{"grafana_folder": "fleetmirror"}))
			var cm corev1.ConfigMap
			ms.Get(t, "ConfigMap", "-dashboards").Decode(t, &cm)
			if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "fleetmirror" {
				t.Errorf("ConfigMap metadata %+v", cm.ObjectMeta)
			}
			want, err := os.ReadFile(filepath.Join(root, "charts", c.chart, "dashboards", c.file))
			if err != nil {
				t.Fatal(err)
			}
			got := cm.Data[c.file]
			if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
				t.Errorf("dashboard in the ConfigMap differs from dashboards/%s", c.file)
			}
			var d struct {
				UID    string `json:"uid"`
				Panels []any  `json:"panels"`
			}
			if err := json.Unmarshal([]byte(got), &d); err != nil || d.UID == "" || len(d.Panels) == 0 {
				t.Errorf("dashboard JSON: %v (uid %q, %d panels)", err, d.UID, len(d.Panels))
			}
		})
	}
}

// dashboardQueries returns every PromQL query of a Grafana dashboard:
// panel targets (rows included) and template variable queries.
func dashboardQueries(t *testing.T, rel string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Query      any    `json:"query"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	var out []string
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		switch q := v.Query.(type) {
		case string:
			out = append(out, q)
		case map[string]any:
			s, _ := q["query"].(string)
			out = append(out, s)
		}
		out = append(out, v.Definition)
	}
	return out
}

type dashPanel struct {
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

var (
	promString   = regexp.MustCompile(`"(\\.|[^"\\])*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	grafanaVar   = regexp.MustCompile(`\$\{?\w+\}?`)
	labelValues  = regexp.MustCompile(`label_values\(\s*([^,)]+)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan", "humanize"}
)

// metricNames returns the metric names a PromQL expression reads.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		return []string{strings.TrimSpace(m[1])}
	}
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = grafanaVar.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.') {
			continue // part of a number, e.g. 1e3
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function
		}
		if slices.Contains(promKeywords, strings.ToLower(name)) {
			continue
		}
		out = append(out, name)
	}
	return out
}

func TestMetricNamesParser(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (job, kind) (rate(fleetmirror_conflicts_total{job="x", kind=~"a|b"}[5m])) > 0`:               {"fleetmirror_conflicts_total"},
		`histogram_quantile(0.99, sum by (cluster, le) (cluster:fleetmirror_x:rate5m{cluster=~"$cluster"}))`: {"cluster:fleetmirror_x:rate5m"},
		`count(cluster:a:max == 0) or vector(0)`:                                                             {"cluster:a:max"},
		`a / on (job) group_left b unless c offset 5m`:                                                       {"a", "b", "c"},
		`label_values(cluster:fleetmirror_sync_operations:rate5m, cluster)`:                                  {"cluster:fleetmirror_sync_operations:rate5m"},
		`absent(up{job="fleetmirror-member"} == 1)`:                                                          {"up"},
		"sum by (job, cluster) (x{result=\"error\"})\n/\nsum by (job, cluster) (x)":                          {"x", "x"},
		`max by (job) (fleetmirror_hub_registered_clusters{job="fleetmirror-hub"}) * 1e3`:                    {"fleetmirror_hub_registered_clusters"},
	} {
		if got := metricNames(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}

// TestMonitoringNamesExportedMetrics checks every metric the rules and the
// dashboard read: a recorded series must be recorded by one of the rule
// files, and a raw series must be registered by the binaries (their Go
// source) or be one of controller-runtime's or Prometheus's own.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	// Metric names the binaries register, from their source.
	var goNames []string
	for _, f := range []string{"pkg/metrics/metrics.go", "pkg/hub/metrics.go", "pkg/shard/metrics.go"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`Name:\s*"([a-z0-9_]+)"`).FindAllStringSubmatch(string(b), -1) {
			goNames = append(goNames, m[1])
		}
	}
	if len(goNames) < 10 {
		t.Fatalf("found only %d metric names in the Go source: %v", len(goNames), goNames)
	}
	crDir := moduleDir(t, "sigs.k8s.io/controller-runtime")
	// Metrics other than the binaries' own: where they are defined.
	known := map[string]struct{ file, literal string }{
		"controller_runtime_reconcile_total": {"pkg/internal/controller/metrics/metrics.go", `"controller_runtime_reconcile_total"`},
		"workqueue_depth":                    {"pkg/metrics/workqueue.go", `DepthKey                   = "depth"`},
		"up":                                 {}, // Prometheus's own, per target
	}
	exists := func(name string) bool {
		if slices.Contains(goNames, name) {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(goNames, base) {
				return true
			}
		}
		k, ok := known[name]
		if !ok {
			return false
		}
		if k.file == "" {
			return true
		}
		b, err := os.ReadFile(filepath.Join(crDir, k.file))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return false
		}
		return strings.Contains(string(b), k.literal)
	}

	// Every query, with the file it is in, and every recorded name.
	type query struct{ where, expr string }
	var queries []query
	var recorded []string
	for _, c := range charts {
		rel := filepath.Join("charts", c.dir, "files", "fleetmirror.rules.yaml")
		var rf ruleFile
		readYAML(t, rel, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					recorded = append(recorded, r.Record)
					if !strings.HasPrefix(r.Record, "cluster:fleetmirror_") {
						t.Errorf("%s: recorded name %s is not cluster:fleetmirror_*", rel, r.Record)
					}
				}
				queries = append(queries, query{rel + " " + r.Record + r.Alert, r.Expr})
			}
		}
	}
	dashboards, err := filepath.Glob(filepath.Join(root, "charts", "*", "dashboards", "*.json"))
	if err != nil || len(dashboards) < 2 {
		t.Fatalf("dashboards of the charts: %v (%v)", dashboards, err)
	}
	for _, abs := range dashboards {
		dash, _ := filepath.Rel(root, abs)
		for _, q := range dashboardQueries(t, dash) {
			queries = append(queries, query{dash, q})
		}
	}

	seen := map[string]bool{}
	for _, q := range queries {
		names := metricNames(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric found in %q", q.where, q.expr)
		}
		for _, n := range names {
			seen[n] = true
			switch {
			case strings.Contains(n, ":"):
				if !slices.Contains(recorded, n) {
					t.Errorf("%s reads %s, which no rule records", q.where, n)
				}
			case !exists(n):
				t.Errorf("%s reads %s, which the binaries do not export (pkg/metrics/metrics.go, pkg/hub/metrics.go) and controller-runtime does not define", q.where, n)
			}
		}
	}
	if len(seen) < 20 {
		t.Errorf("found only %d metric names in the rules and the dashboard: %v", len(seen), seen)
	}
	for _, n := range goNames {
		if !seen[n] && !seen[n+"_bucket"] {
			t.Logf("metric %s is used by no rule and no dashboard panel", n)
		}
	}
}

func moduleDir(t *testing.T, module string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}
