package charts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// renderNotes renders a chart's NOTES.txt, which helm template leaves out:
// it renders a copy of the chart where the notes are a define, included by
// a manifest.
func renderNotes(t *testing.T, chart string, vals map[string]any) string {
	t.Helper()
	return renderReleaseNotes(t, releaseName, chart, vals)
}

// renderReleaseNotes is renderNotes for a release of another name.
func renderReleaseNotes(t *testing.T, release, chart string, vals map[string]any) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), chart)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "charts", chart))); err != nil {
		t.Fatal(err)
	}
	return copiedChartNotes(t, release, dir, vals)
}

// copiedChartNotes renders the NOTES.txt of the chart in dir, a copy that it
// changes.
func copiedChartNotes(t *testing.T, release, dir string, vals map[string]any) string {
	t.Helper()
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "templates", "NOTES.txt")); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"_notes_test.tpl": `{{- define "notesUnderTest" -}}` + string(notes) + `{{- end }}`,
		"notes-test.yaml": "notes: {{ include \"notesUnderTest\" . | toJson }}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, "templates", name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := templateRelease(t, release, dir, vals, "--show-only", "templates/notes-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ms := parseManifests(t, out)
	if len(ms) != 1 {
		t.Fatalf("want the notes, got %v", ms.names())
	}
	return ms[0].Map["notes"].(string)
}

func TestNotes(t *testing.T) {
	for _, tc := range []struct {
		chart   string
		vals    map[string]any
		want    []string
		wantNot []string
	}{
		{"member", nil,
			[]string{"rollout status deployment/fm-fleetmirror-member", "fleetmirror.io/target-namespaces=fleetmirror-try", "Mirrored kinds: Secret.v1, ConfigMap.v1", "port-forward service/fm-fleetmirror-member-metrics 8080"},
			[]string{"WARNING", "register-cluster"}},
		{"member", values("hubAccess.enabled", true, "config.clusterName", "member-1", "config.resourceTypes", []any{}),
			[]string{"kubectl fleetmirror register-cluster member-1", "--token-secret fm-fleetmirror-member-hub-token", "config.resourceTypes is empty: the agent discovers kinds", `fleetmirror.io/aggregate-to-fm-fleetmirror-member: "true"`},
			nil},
		{"hub", nil,
			[]string{"rollout status deployment/fm-fleetmirror-hub", "Registration Secrets are read in namespace fleetmirror-system", "grep ^fleetmirror_hub_"},
			[]string{"WARNING", "Grafana"}},
		{"hub", values("config.allowKubeconfigPlugins", true, "dashboards.enabled", true, "config.clusterSecretsNamespace", "clusters"),
			[]string{"WARNING: config.allowKubeconfigPlugins is true", "Registration Secrets are read in namespace clusters", "fm-fleetmirror-hub-dashboards"},
			nil},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			notes := renderNotes(t, tc.chart, tc.vals)
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(notes, w) {
					t.Errorf("NOTES have %q:\n%s", w, notes)
				}
			}
		})
	}
}

// TestNotesNameTheRelease checks that the notes name the objects as the
// Deployment does, whatever the release name: one that holds the chart name
// is the full name by itself.
func TestNotesNameTheRelease(t *testing.T) {
	for _, c := range charts {
		for release, full := range map[string]string{
			"fleetmirror-" + c.dir:             "fleetmirror-" + c.dir,
			"prod-fleetmirror-" + c.dir + "-a": "prod-fleetmirror-" + c.dir + "-a",
			"prod":                             "prod-fleetmirror-" + c.dir,
		} {
			t.Run(c.dir+"/"+release, func(t *testing.T) {
				out, err := templateRelease(t, release, filepath.Join(root, "charts", c.dir), nil)
				if err != nil {
					t.Fatal(err)
				}
				var deploy []string
				for _, o := range parseManifests(t, out).Kinds("Deployment") {
					deploy = append(deploy, o.Name)
				}
				if !slices.Equal(deploy, []string{full}) {
					t.Fatalf("Deployments %v, want %s", deploy, full)
				}
				notes := renderReleaseNotes(t, release, c.dir, nil)
				for _, w := range []string{"installed as " + full + " ", "deployment/" + full + "\n", "service/" + full + "-metrics "} {
					if !strings.Contains(notes, w) {
						t.Errorf("NOTES lack %q:\n%s", w, notes)
					}
				}
				if strings.Contains(notes, "<member release>-fleetmirror-member") {
					t.Errorf("NOTES guess the member's full name from its release name:\n%s", notes)
				}
			})
		}
	}
}

// TestLintWithEverythingOn runs helm lint --strict with every optional
// object rendered (make helm-lint lints the defaults).
func TestLintWithEverythingOn(t *testing.T) {
	common := []string{
		"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "podDisruptionBudget.enabled=true", "--set", "replicaCount=2",
	}
	for _, c := range charts {
		args := slices.Concat([]string{"lint", "--strict", filepath.Join(root, "charts", c.dir)}, common)
		if c.dir == "member" {
			args = append(args, "--set", "hubAccess.enabled=true")
		} else {
			args = append(args, "--set", "dashboards.enabled=true")
		}
		if out, err := exec.Command(helm(t), args...).CombinedOutput(); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestExtraRulesAreAppended(t *testing.T) {
	extra := rbacv1.PolicyRule{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: []string{"get"}}
	for _, c := range charts {
		ms := render(t, c.dir, values("rbac.extraRules", []any{map[string]any{"apiGroups": []any{"example.com"}, "resources": []any{"widgets"}, "verbs": []any{"get"}}}))
		rules := clusterRoleRules(t, ms, "fleetmirror-"+c.dir)
		if got := rules[len(rules)-1]; got.APIGroups[0] != extra.APIGroups[0] || got.Resources[0] != extra.Resources[0] {
			t.Errorf("%s: last rule %+v, want %+v", c.dir, got, extra)
		}
	}
}
