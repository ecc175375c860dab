package transform

import (
	"fmt"
	"strings"
	"testing"
)

// reservedKeys is the key prefix the agent reserves, annotations.Prefix
// (which this package cannot import: annotations imports it).
const reservedKeys = "fleetmirror.io/"

// issueExample is the example of the fleetmirror.io/transform annotation in
// the issue that specifies it.
const issueExample = `rules:
  - path: data.LOG_LEVEL
    value: "error"
  - path: data.API_URL
    template: "https://{{.TargetNamespace}}.api.example.com"
  - path: metadata.labels
    merge: {environment: production}
  - path: data.DEBUG
    delete: true
  - path: spec.template.spec.containers[0].image
    template: "registry.{{.TargetCluster}}.example.com/app:v1"
    namespacePattern: "prod-*"
`

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []action // on success
		wantErr []string // substrings of the error, all required
	}{
		{name: "issue example", text: issueExample,
			want: []action{actionValue, actionTemplate, actionMerge, actionDelete, actionTemplate}},
		{name: "empty text", text: "", want: []action{}},
		{name: "no rules", text: "rules: []", want: []action{}},
		{name: "value of any type", text: `rules:
- {path: spec.replicas, value: 3}
- {path: spec.x, value: {a: [1, "b", true]}}
- {path: spec.y, value: ""}`, want: []action{actionValue, actionValue, actionValue}},
		{name: "patterns", text: `rules:
- {path: data.x, value: a, namespacePattern: "prod-?", clusterPattern: "[ab]-*"}`, want: []action{actionValue}},
		{name: "functions and builtins", text: `rules:
- path: data.x
  template: '{{ if hasPrefix "prod-" .TargetNamespace }}{{ .TargetNamespace | trimPrefix "prod-" | upper | quote }}{{ else }}{{ default "none" (index .Labels "team") | printf "%s-%d" | lower }}{{ end }}{{ with .SourceName }}{{ len . }}{{ end }}'`,
			want: []action{actionTemplate}},

		{name: "not YAML", text: "rules: [", wantErr: []string{"rules are not valid"}},
		{name: "not a map", text: "- path: x", wantErr: []string{"rules are not valid"}},
		{name: "unknown top-level field", text: "rule: []", wantErr: []string{`unknown field "rule"`}},
		{name: "unknown rule field", text: "rules:\n- {path: data.x, value: a, namespace: b}", wantErr: []string{`rules[0]: json: unknown field "namespace"`}},
		{name: "duplicate field", text: "rules:\n- {path: data.x, value: a, value: b}", wantErr: []string{"rules are not valid"}},
		{name: "wrong type", text: "rules:\n- {path: [data], value: a}", wantErr: []string{"rules[0]: json: cannot unmarshal array"}},
		{name: "no path", text: "rules:\n- {value: a}", wantErr: []string{"rules[0]: path is required"}},
		{name: "bad path", text: "rules:\n- {path: data.x y, value: a}", wantErr: []string{"rules[0]: path", "unexpected ' '"}},
		{name: "no action", text: "rules:\n- {path: data.x}", wantErr: []string{"rules[0]: a rule needs exactly one of value, template, merge or delete, found 0"}},
		{name: "two actions", text: "rules:\n- {path: data.x, value: a, delete: true}", wantErr: []string{"found 2 (value, delete)"}},
		{name: "delete false", text: "rules:\n- {path: data.x, delete: false}", wantErr: []string{"delete must be true"}},
		{name: "null value", text: "rules:\n- {path: data.x, value: null}", wantErr: []string{"value is null"}},
		{name: "merge not a map", text: "rules:\n- {path: data, merge: [a]}", wantErr: []string{"merge must be a map, not a list"}},
		{name: "merge null", text: "rules:\n- {path: data, merge: null}", wantErr: []string{"merge must be a map, not a missing value"}},
		{name: "bad namespace pattern", text: "rules:\n- {path: data.x, value: a, namespacePattern: 'prod-['}", wantErr: []string{`bad pattern "prod-["`}},
		{name: "bad cluster pattern", text: "rules:\n- {path: data.x, value: a, clusterPattern: '\\'}", wantErr: []string{"bad pattern"}},
		{name: "errors name every failing rule", text: "rules:\n- {path: data.a, value: a}\n- {path: data.b}\n- {path: data.c, value: c}\n- {path: '', value: d}",
			wantErr: []string{"rules[1]: a rule needs", "rules[3]: path is required"}},

		{name: "reserved name", text: "rules:\n- {path: metadata.name, value: x}", wantErr: []string{"metadata.name is managed"}},
		{name: "reserved namespace by template", text: "rules:\n- {path: metadata.namespace, template: x}", wantErr: []string{"metadata.namespace is managed"}},
		{name: "reserved below", text: "rules:\n- {path: 'metadata.ownerReferences[0].name', value: x}", wantErr: []string{"ownerReferences is managed"}},
		{name: "reserved above", text: "rules:\n- {path: metadata, merge: {labels: {a: b}}}", wantErr: []string{"is managed"}},
		{name: "reserved kind", text: "rules:\n- {path: kind, delete: true}", wantErr: []string{"kind is managed"}},
		{name: "reserved status", text: "rules:\n- {path: status.x, value: 1}", wantErr: []string{"status is managed"}},
		{name: "reserved finalizers", text: "rules:\n- {path: metadata.finalizers, value: [x]}", wantErr: []string{"finalizers is managed"}},
		{name: "control label by path", text: "rules:\n- {path: 'metadata.labels[\"fleetmirror.io/mirror\"]', delete: true}", wantErr: []string{"belong to the agent"}},
		{name: "control annotation by merge", text: "rules:\n- {path: metadata.annotations, merge: {fleetmirror.io/source: a/b/c}}", wantErr: []string{`key "fleetmirror.io/source"`}},
		{name: "control label by value", text: "rules:\n- {path: metadata.labels, value: {fleetmirror.io/managed-by: me}}", wantErr: []string{"belong to the agent"}},

		{name: "template syntax", text: "rules:\n- {path: data.x, template: '{{ .TargetNamespace '}", wantErr: []string{"rules[0]: template:", "unclosed action"}},
		{name: "template unknown function", text: "rules:\n- {path: data.x, template: '{{ env \"HOME\" }}'}", wantErr: []string{`function "env" not defined`}},
		{name: "template no sprig extras", text: "rules:\n- {path: data.x, template: '{{ now }}'}", wantErr: []string{`function "now" not defined`}},
		{name: "template range", text: "rules:\n- {path: data.x, template: '{{ range .Labels }}x{{ end }}'}", wantErr: []string{"rules[0]: template: range actions are not allowed"}},
		{name: "template range nested in if", text: "rules:\n- {path: data.x, template: '{{ if .A }}{{ else }}{{ with .B }}{{ range .C }}{{ end }}{{ end }}{{ end }}'}", wantErr: []string{"range actions are not allowed"}},
		{name: "template define", text: "rules:\n- {path: data.x, template: '{{ define \"x\" }}a{{ end }}'}", wantErr: []string{"define and block actions are not allowed"}},
		{name: "template define of the root's name", text: "rules:\n- {path: data.x, template: '{{ define \"template\" }}{{ template \"template\" }}{{ end }}'}", wantErr: []string{"not allowed"}},
		{name: "template define of the other name", text: "rules:\n- {path: data.x, template: '{{ define \"define check\" }}x{{ end }}'}", wantErr: []string{"not allowed"}},
		{name: "template block", text: "rules:\n- {path: data.x, template: '{{ block \"x\" . }}a{{ end }}'}", wantErr: []string{"not allowed"}},
		{name: "template template", text: "rules:\n- {path: data.x, template: '{{ template \"x\" }}'}", wantErr: []string{"template and block actions are not allowed"}},

		{name: "51 rules", text: manyRules(51), wantErr: []string{"51 rules, over the limit of 50"}},
		{name: "11 KiB", text: "rules:\n- path: data.x\n  value: " + strings.Repeat("x", 11<<10), wantErr: []string{"over the limit of 10240"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.text, DefaultLimits(), reservedKeys)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse succeeded, want an error containing %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Parse error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := []action{}
			for _, ru := range r.rules {
				got = append(got, ru.action)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("actions = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseAtLimits(t *testing.T) {
	if _, err := Parse(manyRules(50), DefaultLimits(), reservedKeys); err != nil {
		t.Errorf("50 rules: %v", err)
	}
	text := "rules:\n- path: data.x\n  value: "
	text += strings.Repeat("x", 10<<10-len(text))
	if _, err := Parse(text, DefaultLimits(), reservedKeys); err != nil {
		t.Errorf("10 KiB of rules: %v", err)
	}
	if _, err := Parse(manyRules(3), Limits{MaxRules: 2}, reservedKeys); err == nil {
		t.Errorf("3 rules with MaxRules 2: no error")
	}
}

// TestParseYAMLAliases checks that YAML anchors cannot expand 10 KiB of
// rules into a huge value.
func TestParseYAMLAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n- path: data.x\n  value:\n    a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n")
	prev := "a"
	for _, n := range strings.Split("bcdefghi", "") {
		fmt.Fprintf(&b, "    %s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	if _, err := Parse(b.String(), DefaultLimits(), reservedKeys); err == nil {
		t.Fatal("Parse of a billion laughs succeeded")
	}
}

func manyRules(n int) string {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {path: data.k%d, value: v}\n", i)
	}
	return b.String()
}
