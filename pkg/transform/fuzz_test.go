package transform

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"data", "data.LOG_LEVEL", "spec.template.spec.containers[0].image", `data["tls.crt"]`,
		`metadata.annotations["example.com/x"]`, `["a.b"].c[1][2]`, `data["\"\\\x00ü"]`, "a..b", "[0]", "a[01]",
		`data["x`, "a.b/c-d_e", "a[1000000]", `a["\u2028"]`, "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePath(s)
		if err != nil {
			if p != nil {
				t.Fatalf("parsePath(%q) returned a path and an error", s)
			}
			return
		}
		if len(p) == 0 || p[0].isIndex {
			t.Fatalf("parsePath(%q) = %#v: must start with a key", s, p)
		}
		for _, seg := range p {
			if seg.isIndex && (seg.index < 0 || seg.index > maxIndex || seg.key != "") {
				t.Fatalf("parsePath(%q): bad index segment %#v", s, seg)
			}
		}
		canonical := p.String()
		again, err := parsePath(canonical)
		if err != nil {
			t.Fatalf("parsePath(%q) = %#v, whose String %q does not parse: %v", s, p, canonical, err)
		}
		if !equalPaths(p, again) {
			t.Fatalf("parsePath(%q) = %#v, but its String %q parses to %#v", s, p, canonical, again)
		}
		if again.String() != canonical {
			t.Fatalf("String is not canonical: %q, then %q", canonical, again.String())
		}
		// The canonical form is never longer than what was parsed, except
		// for quoting that strconv.Quote may spell differently (\u2028).
		if !strings.Contains(s, `"`) && len(canonical) > len(s) {
			t.Fatalf("canonical %q is longer than %q", canonical, s)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		issueExample,
		"",
		"rules: []",
		"rules:\n- {path: spec.replicas, value: 3}\n- {path: spec.x, value: {a: [1, b, true, null, 1.5]}}",
		"rules:\n- {path: 'data[\"tls.crt\"]', template: '{{ .TargetNamespace | upper | b64enc }}', namespacePattern: 'prod-*', clusterPattern: 'eu-?'}",
		"rules:\n- {path: metadata.labels, merge: {a: b, c: null}}\n- {path: data.DEBUG, delete: true}",
		"rules:\n- {path: data.x, template: '{{ printf \"%s-%05d\" .SourceName 7 }}{{ if .Labels.team }}{{ quote .Labels.team }}{{ end }}'}",
		"rules:\n- {path: data.x, template: '{{ range .Labels }}x{{ end }}'}",
		"rules:\n- {path: data.x, template: '{{ replace \"x\" \"xxxxxxxxxx\" (replace \"x\" \"xxxxxxxxxx\" \"xxxxxxxxxx\") }}'}",
		"rules:\n- {path: 'spec.a[0].b', value: x}\n- {path: 'spec.a[1]', delete: true}",
		"rules:\n- {path: data, merge: {k: v}}",
		"rules:\n- {path: metadata.name, value: x}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := Parse(text, DefaultLimits(), reservedKeys)
		if err != nil {
			return
		}
		if len(r.rules) > r.limits.MaxRules {
			t.Fatalf("%d rules", len(r.rules))
		}
		for i, ru := range r.rules {
			if ru.index != i {
				t.Fatalf("rule %d has index %d", i, ru.index)
			}
			again, err := parsePath(ru.path.String())
			if err != nil || !equalPaths(again, ru.path) {
				t.Fatalf("rules[%d]: path %q does not round-trip: %v", i, ru.path, err)
			}
			if err := checkWritable(ru.path, ru.value, ru.merge, reservedKeys); err != nil {
				t.Fatalf("rules[%d]: accepted a rule that is not writable: %v", i, err)
			}
			ok := map[action]bool{
				actionValue:    ru.value != nil && ru.merge == nil && ru.tmpl == nil,
				actionTemplate: ru.tmpl != nil && ru.value == nil && ru.merge == nil,
				actionMerge:    ru.merge != nil && ru.value == nil && ru.tmpl == nil,
				actionDelete:   ru.value == nil && ru.merge == nil && ru.tmpl == nil,
			}[ru.action]
			if !ok {
				t.Fatalf("rules[%d]: inconsistent rule %+v", i, ru)
			}
		}

		// Rendering the rules back to YAML and parsing that gives the same
		// rules. The canonical YAML may be longer than the input.
		out, err := r.marshal()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		r2, err := Parse(out, Limits{MaxBytes: 1 << 30}, reservedKeys)
		if err != nil {
			t.Fatalf("Parse of marshalled rules %q: %v", out, err)
		}
		if len(r2.rules) != len(r.rules) {
			t.Fatalf("round trip: %d rules, then %d", len(r.rules), len(r2.rules))
		}
		for i := range r.rules {
			a, b := r.rules[i], r2.rules[i]
			if !equalPaths(a.path, b.path) || a.action != b.action || a.text != b.text ||
				a.namespacePattern != b.namespacePattern || a.clusterPattern != b.clusterPattern ||
				!reflect.DeepEqual(a.value, b.value) || !reflect.DeepEqual(a.merge, b.merge) {
				t.Fatalf("round trip changed rules[%d]: %+v, then %+v", i, a, b)
			}
		}

		// Applying never panics, reports every error with its rule, and
		// leaves an object that encodes as JSON.
		for _, secret := range []bool{false, true} {
			obj := map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "n", "labels": map[string]any{"a": "b"}},
				"data":     map[string]any{"LOG_LEVEL": "ZGVidWc=", "DEBUG": "MQ=="},
				"spec":     map[string]any{"list": []any{map[string]any{"x": int64(1)}, "y"}},
			}
			errs := r.Apply(obj, target, secret)
			for _, err := range errs {
				if !strings.HasPrefix(err.Error(), "rules[") && !errors.Is(err, ErrObjectTooLarge) {
					t.Fatalf("error does not name its rule: %v", err)
				}
			}
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatalf("object after Apply does not encode: %v", err)
			}
			if n, over := jsonSize(obj, 1<<30); n != len(b) || over {
				t.Fatalf("jsonSize = %d, json.Marshal wrote %d bytes", n, len(b))
			}
		}
	})
}
