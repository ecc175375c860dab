package main

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// memTree is a tree of files in memory.
type memTree map[string]string

func (m memTree) read(p string) ([]byte, error) {
	s, ok := m[p]
	if !ok {
		return nil, fmt.Errorf("%s: no such file", p)
	}
	return []byte(s), nil
}

func (m memTree) files(dir string) ([]string, error) {
	var out []string
	for p := range m {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// summary is an op as the tests compare it: kind, step, objects as
// KIND NAMESPACE/NAME, and what else is set.
func summary(o op) string {
	s := o.step + ": " + o.kind
	for _, obj := range o.objects {
		s += " " + obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	if o.expectError {
		s += " (expect error)"
	}
	if o.ignoreNotFound {
		s += " (ignore not found)"
	}
	if o.why != "" {
		s += " [" + o.why + "]"
	}
	return s
}

const templates = "t/_step-templates"

var stepTemplates = memTree{
	templates + "/create-policy.yaml": `
apiVersion: chainsaw.kyverno.io/v1alpha1
kind: StepTemplate
spec:
  try:
  - create:
      file: ($file)
`,
	templates + "/cluster-policy-ready.yaml": `
apiVersion: chainsaw.kyverno.io/v1alpha1
kind: StepTemplate
spec:
  try:
  - assert:
      template: true
      resource:
        apiVersion: kyverno.io/v1
        kind: ClusterPolicy
        metadata:
          name: ($name)
        status:
          conditions:
          - {reason: Succeeded, status: "True", type: Ready}
`,
}

func TestParseTest(t *testing.T) {
	cases := []struct {
		name  string
		test  string
		files map[string]string
		want  []string
	}{{
		name: "templates with bindings, files of several documents, ref, sleep",
		test: `
spec:
  steps:
  - name: step-01
    try:
    - apply: {file: source.yaml}
  - name: create policy
    use:
      template: ../_step-templates/create-policy.yaml
      with:
        bindings: [{name: file, value: policy.yaml}]
  - name: ready
    use:
      template: ../_step-templates/cluster-policy-ready.yaml
      with:
        bindings: [{name: name, value: pol}]
  - try:
    - sleep: {duration: 3s}
    - delete:
        ref: {apiVersion: v1, kind: Secret, name: s, namespace: ns}
    - error: {file: source.yaml}
`,
		files: map[string]string{
			"source.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\n",
			"policy.yaml": "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: pol}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\n",
		},
		want: []string{
			"step-01: apply Secret ns/s",
			"create policy: create ClusterPolicy /pol ConfigMap default/cm",
			"ready: assert ClusterPolicy /pol",
			"step 4: sleep",
			"step 4: delete Secret ns/s",
			"step 4: error Secret ns/s",
		},
	}, {
		name: "an expected refusal, in chainsaw's words and in the shell's",
		test: `
spec:
  steps:
  - name: s
    try:
    - apply:
        file: bad.yaml
        expect:
        - check:
            ($error != null): true
    - script:
        content: "if kubectl apply -f bad.yaml\nthen \n  echo \"failed\"\n  exit 1 \nelse \n  echo ok\n  exit 0\nfi\n"
`,
		files: map[string]string{"bad.yaml": "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: bad}\n"},
		want: []string{
			"s: apply ClusterPolicy /bad (expect error)",
			"s: apply ClusterPolicy /bad (expect error)",
		},
	}, {
		name: "the trivial scripts and commands; the others are unsupported",
		test: `
spec:
  steps:
  - name: s
    try:
    - command: {entrypoint: kubectl, args: [delete, ur, -A, --all]}
    - script:
        content: |
          kubectl delete ur -A --all
          kubectl delete -f cloned.yaml --ignore-not-found=true
    - script:
        content: kubectl get secret -o json | jq -e '.metadata.ownerReferences == null'
    - script:
        content: 'kubectl apply -f update-name.yaml 2>&1 | grep -q "Warning: no synchronization"'
    - script:
        content: curl http://example
    - wait: {for: {condition: {name: Ready}}}
`,
		files: map[string]string{"cloned.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: c, namespace: target}\n"},
		want: []string{
			"s: skip [deletes Kyverno's UpdateRequests]",
			"s: delete Secret target/c (ignore not found)",
			"s: shell",
			"s: unsupported [script needs Kyverno: kubectl apply -f update-name.yaml 2>&1 | grep -q \"Warning: no synchronization\"]",
			"s: unsupported [script: curl http://example]",
			"s: unsupported [an operation the replay does not know]",
		},
	}, {
		name: "JMESPath the replay does not evaluate",
		test: `
spec:
  steps:
  - name: s
    try:
    - assert:
        resource:
          apiVersion: v1
          kind: Secret
          metadata: {name: s, namespace: n}
          (length(data)): 1
    - assert:
        resource:
          apiVersion: v1
          kind: Secret
          metadata: {name: ($missing), namespace: n}
    - apply:
        file: x.yaml
        expect:
        - check: {($error): "forbidden"}
`,
		want: []string{
			"s: unsupported [assert : JMESPath key (length(data)) is not evaluated by the replay]",
			"s: unsupported [assert : no binding missing]",
			"s: unsupported [apply: expect check map[($error):forbidden]]",
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := memTree{"t/x/chainsaw-test.yaml": c.test}
			for k, v := range stepTemplates {
				tr[k] = v
			}
			for k, v := range c.files {
				tr["t/x/"+k] = v
			}
			_, ops, err := parseTest(tr, "t/x")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range ops {
				got = append(got, summary(o))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ops:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

func TestTriggerAndKyvernoOnly(t *testing.T) {
	policy := func(kinds ...string) *unstructured.Unstructured {
		var rules []any
		for _, k := range kinds {
			rules = append(rules, map[string]any{
				"name":     "r",
				"match":    map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{k}}}}},
				"generate": map[string]any{"clone": map[string]any{"name": "s", "namespace": "d"}},
			})
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "p"},
			"spec": map[string]any{"rules": rules},
		}}
	}
	data := policy("ConfigMap")
	unstructured.RemoveNestedField(data.Object["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any), "generate", "clone")
	for _, c := range []struct {
		name     string
		policies []*unstructured.Unstructured
		want     string
	}{
		{"namespaces only", []*unstructured.Unstructured{policy("Namespace", "v1/Namespace")}, "Namespace"},
		{"another kind in a rule", []*unstructured.Unstructured{policy("Namespace"), policy("ConfigMap", "Secret")}, "ConfigMap,Secret"},
		{"no clone rule", []*unstructured.Unstructured{data}, ""},
	} {
		if got := triggerOf(c.policies); got != c.want {
			t.Errorf("%s: triggerOf = %q, want %q", c.name, got, c.want)
		}
	}

	for _, c := range []struct {
		doc  string
		skip bool
	}{
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: k, labels: {rbac.kyverno.io/aggregate-to-background-controller: \"true\"}}", true},
		{"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: mine}", false},
		{"apiVersion: kyverno.io/v2\nkind: UpdateRequest\nmetadata: {name: ur}", true},
		{"apiVersion: wgpolicyk8s.io/v1alpha2\nkind: PolicyReport\nmetadata: {name: r}", true},
		{"apiVersion: kyverno.io/v2beta1\nkind: ClusterPolicy\nmetadata: {name: p}", false},
		{"apiVersion: v1\nkind: Secret\nmetadata: {name: s}", false},
	} {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(c.doc), &m); err != nil {
			t.Fatal(err)
		}
		if got := kyvernoOnly(&unstructured.Unstructured{Object: m}) != ""; got != c.skip {
			t.Errorf("kyvernoOnly(%s) skips: %v, want %v", c.doc, got, c.skip)
		}
	}
}

func TestReasonKind(t *testing.T) {
	for _, c := range []struct{ decision, want string }{
		{`match: kinds [Secret]: Kyverno copies when such an object is created or changed; a MirrorPolicy copies into namespaces`,
			`match: kinds […]: Kyverno copies when such an object is created or changed`},
		{`generate.namespace "{{ request.object.metadata.annotations.\"a/b\" }}" uses a variable: only {{request.object.metadata.name}}, each matched namespace, translates`,
			`generate.namespace "…" uses a variable: only {{…}}, each matched namespace, translates`},
		{`generate.name "footarget" differs from clone.name "foosource": a mirror keeps its source's name`,
			`generate.name "…" differs from clone.name "…": a mirror keeps its source's name`},
		{`generate: not translated: json: unknown field "orphanDownstreamOnPolicyDelete"`,
			`generate: not translated: json: unknown field "…"`},
	} {
		if got := reasonKind(c.decision); got != c.want {
			t.Errorf("reasonKind(%q) = %q, want %q", c.decision, got, c.want)
		}
	}
}
