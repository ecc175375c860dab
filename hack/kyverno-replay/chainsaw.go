package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// What a chainsaw test (chainsaw.kyverno.io/v1alpha1 Test) and a step
// template (StepTemplate) hold, as far as the replay reads them.
type (
	chainsawTest struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Bindings []binding      `json:"bindings"`
			Steps    []chainsawStep `json:"steps"`
		} `json:"spec"`
	}
	chainsawStep struct {
		Name     string       `json:"name"`
		Bindings []binding    `json:"bindings"`
		Try      []chainsawOp `json:"try"`
		Catch    []chainsawOp `json:"catch"`
		Finally  []chainsawOp `json:"finally"`
		Cleanup  []chainsawOp `json:"cleanup"`
		Use      *struct {
			Template string `json:"template"`
			With     struct {
				Bindings []binding `json:"bindings"`
			} `json:"with"`
		} `json:"use"`
	}
	stepTemplate struct {
		Spec struct {
			Bindings []binding    `json:"bindings"`
			Try      []chainsawOp `json:"try"`
			Catch    []chainsawOp `json:"catch"`
			Finally  []chainsawOp `json:"finally"`
			Cleanup  []chainsawOp `json:"cleanup"`
		} `json:"spec"`
	}
	binding struct {
		Name  string `json:"name"`
		Value any    `json:"value"`
	}
	// chainsawOp is one operation of a step: exactly one field is set.
	chainsawOp struct {
		Apply  *resourceOp `json:"apply"`
		Create *resourceOp `json:"create"`
		Update *resourceOp `json:"update"`
		Patch  *resourceOp `json:"patch"`
		Assert *resourceOp `json:"assert"`
		Error  *resourceOp `json:"error"`
		Delete *resourceOp `json:"delete"`
		Sleep  *struct {
			Duration string `json:"duration"`
		} `json:"sleep"`
		Script *struct {
			Content string `json:"content"`
		} `json:"script"`
		Command *struct {
			Entrypoint string   `json:"entrypoint"`
			Args       []string `json:"args"`
		} `json:"command"`
	}
	resourceOp struct {
		File     string         `json:"file"`
		Resource map[string]any `json:"resource"`
		Ref      map[string]any `json:"ref"`
		Bindings []binding      `json:"bindings"`
		Expect   []struct {
			Check map[string]any `json:"check"`
		} `json:"expect"`
	}
)

// The kinds of op the runner knows.
const (
	opApply  = "apply"
	opCreate = "create"
	opUpdate = "update"
	opPatch  = "patch"
	opAssert = "assert"
	opError  = "error"
	opDelete = "delete"
	opSleep  = "sleep"
	// opSkip is an operation on Kyverno's own machinery (UpdateRequests):
	// it has nothing to do here.
	opSkip = "skip"
	// opShell is a script run by bash with kubectl and jq against the
	// replay's API server: one that reads or patches ordinary objects.
	opShell = "shell"
	// opUnsupported is one the replay cannot run; the test stops there.
	opUnsupported = "unsupported"
)

// op is one operation of a test, flattened out of its steps and their step
// templates, with its files read and its bindings substituted.
type op struct {
	// step names the step for reports: its name, or its position.
	step string
	kind string
	// script is an opShell's bash script.
	script string
	// file is where the objects came from ("" for an inline resource).
	file    string
	objects []*unstructured.Unstructured
	// expectError: chainsaw's expect check ($error != null): true, the
	// write must be refused.
	expectError bool
	// ignoreNotFound: a delete of something that may be gone already.
	ignoreNotFound bool
	// why says what a skip or unsupported op is.
	why string
}

// parseTest reads the chainsaw test in dir and returns its operations in
// order. An operation the replay cannot run becomes an opUnsupported op,
// so that the steps before it still run.
func parseTest(t tree, dir string) (name string, ops []op, err error) {
	raw, err := t.read(path.Join(dir, "chainsaw-test.yaml"))
	if err != nil {
		return "", nil, err
	}
	var ct chainsawTest
	if err := yaml.Unmarshal(raw, &ct); err != nil {
		return "", nil, fmt.Errorf("chainsaw-test.yaml: %v", err)
	}
	testBindings, err := bindingValues(nil, ct.Spec.Bindings)
	if err != nil {
		return "", nil, err
	}
	for i, s := range ct.Spec.Steps {
		label := s.Name
		if label == "" {
			label = fmt.Sprintf("step %d", i+1)
		}
		b, err := bindingValues(testBindings, s.Bindings)
		if err != nil {
			return "", nil, err
		}
		// catch runs only on failure (diagnostics) and cleanup after the
		// test: the replay's own cleanup deletes what the test made.
		try, finally := s.Try, s.Finally
		if s.Use != nil {
			if len(try) > 0 {
				return "", nil, fmt.Errorf("%s: both use and try", label)
			}
			if b, err = bindingValues(b, s.Use.With.Bindings); err != nil {
				return "", nil, err
			}
			tplRaw, err := t.read(path.Clean(path.Join(dir, s.Use.Template)))
			if err != nil {
				return "", nil, fmt.Errorf("%s: %v", label, err)
			}
			var tpl stepTemplate
			if err := yaml.Unmarshal(tplRaw, &tpl); err != nil {
				return "", nil, fmt.Errorf("%s: %s: %v", label, s.Use.Template, err)
			}
			// The caller's bindings win over the template's defaults.
			defaults, err := bindingValues(nil, tpl.Spec.Bindings)
			if err != nil {
				return "", nil, err
			}
			for k, v := range b {
				defaults[k] = v
			}
			b = defaults
			try, finally = tpl.Spec.Try, tpl.Spec.Finally
		}
		for _, o := range append(append([]chainsawOp{}, try...), finally...) {
			ops = append(ops, parseOp(t, dir, label, o, b))
		}
	}
	return ct.Metadata.Name, ops, nil
}

// bindingValues adds bs to a copy of outer; a binding's value may refer to
// an outer one.
func bindingValues(outer map[string]any, bs []binding) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range outer {
		out[k] = v
	}
	for _, b := range bs {
		v, err := substitute(b.Value, out)
		if err != nil {
			return nil, fmt.Errorf("binding %s: %v", b.Name, err)
		}
		out[b.Name] = v
	}
	return out, nil
}

// parseOp turns one chainsaw operation into an op.
func parseOp(t tree, dir, step string, o chainsawOp, b map[string]any) op {
	unsupported := func(format string, args ...any) op {
		return op{step: step, kind: opUnsupported, why: fmt.Sprintf(format, args...)}
	}
	var kind string
	var r *resourceOp
	for _, c := range []struct {
		kind string
		r    *resourceOp
	}{
		{opApply, o.Apply}, {opCreate, o.Create}, {opUpdate, o.Update}, {opPatch, o.Patch},
		{opAssert, o.Assert}, {opError, o.Error}, {opDelete, o.Delete},
	} {
		if c.r != nil {
			kind, r = c.kind, c.r
			break
		}
	}
	switch {
	case r != nil:
	case o.Sleep != nil:
		// Kyverno's tests sleep to let its background controller catch up;
		// the runner waits by polling instead, so a sleep is short.
		return op{step: step, kind: opSleep}
	case o.Command != nil:
		return parseScript(t, dir, step, strings.Join(append([]string{o.Command.Entrypoint}, o.Command.Args...), " "), b)
	case o.Script != nil:
		return parseScript(t, dir, step, o.Script.Content, b)
	default:
		return unsupported("an operation the replay does not know")
	}
	res := op{step: step, kind: kind}
	for _, e := range r.Expect {
		if v, ok := e.Check["($error != null)"]; ok && v == true && len(e.Check) == 1 {
			res.expectError = true
			continue
		}
		return unsupported("%s: expect check %v", kind, e.Check)
	}
	ob, err := bindingValues(b, r.Bindings)
	if err != nil {
		return unsupported("%s: %v", kind, err)
	}
	var docs []map[string]any
	switch {
	case r.File != "":
		f, err := substitute(r.File, ob)
		if err != nil {
			return unsupported("%s: file: %v", kind, err)
		}
		fs, _ := f.(string)
		res.file = fs
		raw, err := t.read(path.Clean(path.Join(dir, fs)))
		if err != nil {
			return unsupported("%s: %v", kind, err)
		}
		if docs, err = yamlDocs(raw); err != nil {
			return unsupported("%s: %s: %v", kind, fs, err)
		}
	case r.Resource != nil:
		docs = []map[string]any{r.Resource}
	case r.Ref != nil:
		docs = []map[string]any{refObject(r.Ref)}
	default:
		return unsupported("%s without file, resource or ref", kind)
	}
	for _, d := range docs {
		v, err := substitute(d, ob)
		if err != nil {
			return unsupported("%s %s: %v", kind, res.file, err)
		}
		res.objects = append(res.objects, &unstructured.Unstructured{Object: v.(map[string]any)})
	}
	return res
}

// refObject is the object a delete's ref names (apiVersion, kind, name,
// namespace, labels).
func refObject(ref map[string]any) map[string]any {
	obj := map[string]any{"apiVersion": ref["apiVersion"], "kind": ref["kind"]}
	meta := map[string]any{}
	for _, k := range []string{"name", "namespace", "labels"} {
		if v, ok := ref[k]; ok {
			meta[k] = v
		}
	}
	obj["metadata"] = meta
	return obj
}

// The scripts of Kyverno's generate tests that the replay runs: the
// UpdateRequests they delete are Kyverno's own queue; a delete of a file;
// an apply that must be refused, in the shell's words.
var (
	scriptDeleteURs   = regexp.MustCompile(`^kubectl delete (ur|updaterequests?)( -A| --all-namespaces| --all)*$`)
	scriptDeleteFile  = regexp.MustCompile(`^kubectl delete -f (\S+)( --ignore-not-found(=true)?)?$`)
	scriptApplyRefuse = regexp.MustCompile(`(?s)^if kubectl apply -f (\S+)\s*then\s.*exit 1\s*else\s.*exit 0\s*fi$`)
)

// parseScript translates the few scripts Kyverno's tests use that mean
// something without a shell; any other is unsupported.
func parseScript(t tree, dir, step, content string, b map[string]any) op {
	content = strings.TrimSpace(content)
	if m := scriptApplyRefuse.FindStringSubmatch(content); m != nil {
		o := parseOp(t, dir, step, chainsawOp{Apply: &resourceOp{File: m[1]}}, b)
		o.expectError = true
		return o
	}
	var lines []string
	for _, l := range strings.Split(content, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	var out op
	for _, l := range lines {
		switch m := scriptDeleteFile.FindStringSubmatch(l); {
		case scriptDeleteURs.MatchString(l):
		case m != nil && out.kind == "":
			out = parseOp(t, dir, step, chainsawOp{Delete: &resourceOp{File: m[1]}}, b)
			out.ignoreNotFound = m[2] != ""
		default:
			return shellScript(step, content)
		}
	}
	if out.kind == "" {
		return op{step: step, kind: opSkip, why: "deletes Kyverno's UpdateRequests"}
	}
	return out
}

// kyvernoScriptWords mark a script that needs Kyverno itself: its
// admission warnings, its CRDs (a policy applied with kubectl) or its
// queue; such a script cannot run here.
var kyvernoScriptWords = regexp.MustCompile(`warning:|kyverno|clusterpolic|updaterequest|\bur\b|policy`)

// shellQuoted matches a shell string in single or double quotes.
var shellQuoted = regexp.MustCompile(`'[^']*'|"[^"]*"`)

// shellScript is a script of kubectl and jq on ordinary objects, run by
// bash as chainsaw runs it, or unsupported when it needs Kyverno itself or
// other tools.
func shellScript(step, content string) op {
	if kyvernoScriptWords.MatchString(strings.ToLower(content)) {
		return op{step: step, kind: opUnsupported, why: "script needs Kyverno: " + firstLine(content)}
	}
	// The commands of the script, its quoted strings (jq programs) left out.
	unquoted := shellQuoted.ReplaceAllString(content, "''")
	for _, f := range strings.FieldsFunc(unquoted, func(r rune) bool { return r == '|' || r == '\n' || r == ';' || r == '&' }) {
		if words := strings.Fields(f); len(words) > 0 && words[0] != "kubectl" && words[0] != "jq" {
			return op{step: step, kind: opUnsupported, why: "script: " + firstLine(content)}
		}
	}
	return op{step: step, kind: opShell, script: content}
}

func firstLine(s string) string {
	l, _, more := strings.Cut(s, "\n")
	if more {
		l += " ..."
	}
	return l
}

// yamlDocs splits a YAML stream into its non-empty documents.
func yamlDocs(raw []byte) ([]map[string]any, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []map[string]any
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}

// substitute replaces each string "($name)" in v by the binding name, the
// one JMESPath expression of Kyverno's generate tests and step templates.
// Other expressions, in keys or values, are not evaluated: they are an
// error, and the test is unsupported.
func substitute(v any, b map[string]any) (any, error) {
	switch v := v.(type) {
	case string:
		if !strings.HasPrefix(v, "(") || !strings.HasSuffix(v, ")") {
			return v, nil
		}
		expr := strings.TrimSpace(v[1 : len(v)-1])
		if name, ok := strings.CutPrefix(expr, "$"); ok && bindingName.MatchString(name) {
			if val, ok := b[name]; ok {
				return val, nil
			}
			return nil, fmt.Errorf("no binding %s", name)
		}
		return nil, fmt.Errorf("JMESPath expression %s is not evaluated by the replay", v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if strings.HasPrefix(k, "(") || strings.HasPrefix(k, "~") {
				return nil, fmt.Errorf("JMESPath key %s is not evaluated by the replay", k)
			}
			s, err := substitute(e, b)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			s, err := substitute(e, b)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	return v, nil
}

var bindingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
