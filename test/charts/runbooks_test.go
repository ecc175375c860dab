package charts_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runbooks is where every alert's runbook_url points.
const runbooks = "https://github.com/fleetmirror/fleetmirror/blob/main/docs/runbooks.md#"

type alertFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertHasARunbookAndATest: every alert of both charts links its
// own section of docs/runbooks.md, that section exists (and no section
// without an alert), and a promtool test sees the alert fire.
func TestEveryAlertHasARunbookAndATest(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(doc), -1) {
		sections = append(sections, m[1])
	}
	var alerts []string
	for _, c := range charts {
		var rules alertFile
		readYAML(t, filepath.Join("charts", c.dir, "files", "fleetmirror.rules.yaml"), &rules)
		var tests ruleTests
		readYAML(t, filepath.Join("charts", c.dir, "files", "fleetmirror.rules_test.yaml"), &tests)
		fires := map[string]bool{}
		for _, tc := range tests.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				}
			}
		}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				alerts = append(alerts, r.Alert)
				if want := runbooks + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
					t.Errorf("%s: alert %s has runbook_url %q, want %q", c.dir, r.Alert, r.Annotations["runbook_url"], want)
				}
				if !slices.Contains(sections, r.Alert) {
					t.Errorf("%s: alert %s has no section \"## %s\" in docs/runbooks.md", c.dir, r.Alert, r.Alert)
				}
				if !fires[r.Alert] {
					t.Errorf("%s: no promtool test sees alert %s fire", c.dir, r.Alert)
				}
			}
		}
	}
	for _, s := range sections {
		if !slices.Contains(alerts, s) {
			t.Errorf("docs/runbooks.md has a section for %s, which no chart alerts on", s)
		}
	}
}
