package charts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSchemaRejectsBadValues checks that helm template fails, naming the
// problem, for typos and wrong types, which Helm would otherwise ignore.
func TestSchemaRejectsBadValues(t *testing.T) {
	cases := []struct {
		name  string
		vals  map[string]any
		match string // in helm's error
	}{
		{"typo at the top", values("replicaCont", 2), "replicaCont"},
		{"typo in config", values("config.maxTarget", 5), "maxTarget"},
		{"typo in a nested section", values("metrics.serviceMonitor.enable", true), "enable"},
		{"typo in log settings", values("config.log.lvl", "debug"), "lvl"},
		{"wrong type: string for int", values("replicaCount", "two"), "replicaCount"},
		{"wrong type: string for bool", values("leaderElection.enabled", "yes"), "enabled"},
		{"wrong type: string for list", values("config.resourceTypes", "Secret.v1,ConfigMap.v1"), "resourceTypes"},
		{"wrong type: quoted number", values("config.maxTargets", "100"), "maxTargets"},
		{"below minimum", values("config.maxTargets", 0), "maxTargets"},
		{"not a duration", values("config.resyncPeriod", "10 minutes"), "resyncPeriod"},
		{"comma inside a list entry", values("config.excludedNamespaces", []any{"a,b"}), "excludedNamespaces"},
		{"bad log encoder", values("config.log.encoder", "xml"), "encoder"},
		{"bad port", values("metrics.port", 70000), "port"},
		{"bad pull policy", values("image.pullPolicy", "Sometimes"), "pullPolicy"},
		{"typo in uninstall", values("uninstall.keepMirror", true), "keepMirror"},
		{"uninstall timeout below minimum", values("uninstall.timeoutSeconds", 0), "timeoutSeconds"},
		{"wrong type: uninstall switch", values("uninstall.enabled", "no"), "enabled"},
	}
	hubOnly := []struct {
		name  string
		vals  map[string]any
		match string
	}{
		{"bad orphan policy", values("config.unregisteredSourceMirrors", "maybe"), "unregisteredSourceMirrors"},
		{"member value in the hub", values("hubAccess.enabled", true), "hubAccess"},
	}
	memberOnly := []struct {
		name  string
		vals  map[string]any
		match string
	}{
		{"hub value in the member", values("config.clusterSecretsNamespace", "x"), "clusterSecretsNamespace"},
		{"typo in hubAccess", values("hubAccess.enable", true), "enable"},
		{"wrong type: MirrorPolicy roles switch", values("rbac.aggregateClusterRoles", "yes"), "aggregateClusterRoles"},
	}
	for _, c := range charts {
		all := slices.Clone(cases)
		if c.dir == "hub" {
			all = append(all, hubOnly...)
		} else {
			all = append(all, memberOnly...)
		}
		for _, tc := range all {
			t.Run(c.dir+"/"+tc.name, func(t *testing.T) {
				_, err := templateChart(t, c.dir, tc.vals)
				if err == nil {
					t.Fatalf("helm template accepted %v", tc.vals)
				}
				if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.match) {
					t.Errorf("error does not name the schema and %q: %v", tc.match, err)
				}
			})
		}
		t.Run(c.dir+"/--set typo", func(t *testing.T) {
			if _, err := templateChart(t, c.dir, nil, "--set", "leaderElection.enbled=false"); err == nil {
				t.Error("--set with a typo accepted")
			}
		})
	}
}

// TestSchemaAcceptsGlobal checks that the charts work as subcharts: a
// parent passes its global values, of any shape, to every subchart.
func TestSchemaAcceptsGlobal(t *testing.T) {
	global := map[string]any{"imageRegistry": "registry.example.com", "storageClass": "fast", "nested": map[string]any{"any": []any{1, "two"}}}
	for _, c := range charts {
		if _, err := templateChart(t, c.dir, map[string]any{"global": global}); err != nil {
			t.Errorf("%s: global values refused: %v", c.dir, err)
		}
		if _, err := templateChart(t, c.dir, map[string]any{"global": "not an object"}); err == nil {
			t.Errorf("%s: a global value that is not an object accepted", c.dir)
		}
	}
}

// readmeKeys returns the values listed in the table of a chart's README.
func readmeKeys(t *testing.T, chart string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "charts", chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// TestREADMEListsEveryValue checks the README's table against values.yaml
// both ways: every value (or an object value holding it) has a row, and
// every row is a value.
func TestREADMEListsEveryValue(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			var vals map[string]any
			readYAML(t, filepath.Join("charts", c.dir, "values.yaml"), &vals)
			keys := readmeKeys(t, c.dir)
			if len(keys) < 50 {
				t.Fatalf("README lists only %d values", len(keys))
			}
			for _, leaf := range leaves("", vals) {
				documented := false
				for p := leaf; p != ""; p = parent(p) {
					if slices.Contains(keys, p) {
						documented = true
						break
					}
				}
				if !documented {
					t.Errorf("value %s is not in charts/%s/README.md; run hack/chart-docs.sh", leaf, c.dir)
				}
			}
			for _, k := range keys {
				if !hasPath(vals, k) {
					t.Errorf("README lists %s, which values.yaml does not have", k)
				}
			}
		})
	}
}

// TestREADMEIsGenerated runs the generator in check mode: the table is
// exactly what values.yaml's comments say, and every value has a comment.
func TestREADMEIsGenerated(t *testing.T) {
	cmd := exec.Command("go", "run", "./hack/chart-docs", "-check", "charts/member", "charts/hub")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/chart-docs -check: %v\n%s", err, out)
	}
}

func parent(p string) string {
	i := strings.LastIndex(p, ".")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func hasPath(m map[string]any, path string) bool {
	var cur any = m
	for _, part := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = mm[part]; !ok {
			return false
		}
	}
	return true
}

// TestSchemaMatchesValues checks that every property the schema declares
// is in values.yaml (so no value escapes the README), and every value in
// values.yaml is declared (helm lint also fails on that).
func TestSchemaMatchesValues(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			var vals, schema map[string]any
			readYAML(t, filepath.Join("charts", c.dir, "values.yaml"), &vals)
			readYAML(t, filepath.Join("charts", c.dir, "values.schema.json"), &schema)
			var walk func(prefix string, s map[string]any, v any)
			walk = func(prefix string, s map[string]any, v any) {
				if s["additionalProperties"] != false {
					return
				}
				props, _ := s["properties"].(map[string]any)
				vm, _ := v.(map[string]any)
				for name, sub := range props {
					p := strings.TrimPrefix(prefix+"."+name, ".")
					child, ok := vm[name]
					if !ok {
						t.Errorf("schema declares %s, which values.yaml does not have (so the README does not document it)", p)
						continue
					}
					walk(p, sub.(map[string]any), child)
				}
				if s["patternProperties"] != nil {
					return
				}
				for name := range vm {
					if _, ok := props[name]; !ok {
						t.Errorf("values.yaml has %s.%s, which the schema does not declare", prefix, name)
					}
				}
			}
			if schema["additionalProperties"] != false {
				t.Fatal("the schema accepts unknown top-level values")
			}
			walk("", schema, vals)
		})
	}
}
