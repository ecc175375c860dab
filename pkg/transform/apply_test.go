package transform

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kjson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// target is the Target of the tests: a mirror of platform/app-config from
// the hub into prod-eu on cluster eu-1.
var target = Target{
	TargetNamespace: "prod-eu",
	TargetCluster:   "eu-1",
	TargetName:      "app-config",
	SourceNamespace: "platform",
	SourceCluster:   "hub",
	SourceName:      "app-config",
	Labels:          map[string]string{"team": "payments"},
	Annotations:     map[string]string{"example.com/owner": "alice"},
}

const configMap = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: prod-eu
  labels: {app: web}
data:
  LOG_LEVEL: debug
  DEBUG: "1"
  tls.crt: old
`

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: prod-eu}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - {name: app, image: app:v0}
      - {name: sidecar, image: proxy:v0}
`

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

var secret = `
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: prod-eu}
type: Opaque
data:
  user: ` + b64("admin") + `
  password: ` + b64("hunter2") + `
`

func TestApply(t *testing.T) {
	tests := []struct {
		name   string
		rules  string
		obj    string
		target *Target // nil: target
		secret bool
		// edit turns obj into the wanted object (YAML merged into obj as
		// merge: paths of null are deleted).
		want     string
		wantErrs []string // one substring per error, in order
	}{
		{
			name:  "issue example on a ConfigMap",
			rules: issueExample,
			obj:   configMap,
			want: `
data: {LOG_LEVEL: error, API_URL: "https://prod-eu.api.example.com", DEBUG: null}
metadata: {labels: {environment: production}}
`,
			// The last rule matches prod-* and the object has no spec: lists
			// are never created.
			wantErrs: []string{"rules[4] (spec.template.spec.containers[0].image): spec.template.spec.containers[0]: cannot index a missing value"},
		},
		{
			name:  "template into a list item",
			rules: "rules:\n- {path: 'spec.template.spec.containers[0].image', template: 'registry.{{.TargetCluster}}.example.com/app:v1', namespacePattern: prod-*}",
			obj:   deployment,
			want:  "spec: {template: {spec: {containers: [{name: app, image: registry.eu-1.example.com/app:v1}, {name: sidecar, image: 'proxy:v0'}]}}}",
		},
		{
			name:  "value of every type",
			rules: "rules:\n- {path: spec.replicas, value: 3}\n- {path: spec.paused, value: true}\n- {path: spec.strategy, value: {type: Recreate}}\n- {path: spec.ratio, value: 0.5}\n- {path: spec.list, value: [a, 1]}",
			obj:   deployment,
			want:  "spec: {replicas: 3, paused: true, strategy: {type: Recreate}, ratio: 0.5, list: [a, 1]}",
		},
		{
			name:  "value creates missing maps",
			rules: "rules:\n- {path: spec.a.b.c, value: x}",
			obj:   configMap,
			want:  "spec: {a: {b: {c: x}}}",
		},
		{
			name:     "value through a string fails",
			rules:    "rules:\n- {path: data.LOG_LEVEL.x, value: x}",
			obj:      configMap,
			wantErrs: []string{"data.LOG_LEVEL.x: cannot set a key in a string"},
		},
		{
			name:  "index past the end fails and changes nothing, other rules apply",
			rules: "rules:\n- {path: data.A, value: a}\n- {path: 'spec.template.spec.containers[2].image', value: x}\n- {path: 'spec.new.containers[0]', value: x}\n- {path: data.B, value: b}",
			obj:   deployment,
			want:  "data: {A: a, B: b}",
			wantErrs: []string{
				"rules[1] (spec.template.spec.containers[2].image): spec.template.spec.containers[2]: index out of range, the list has 2 items",
				"rules[2] (spec.new.containers[0]): spec.new.containers[0]: cannot index a missing value (lists are not created)",
			},
		},
		{
			name:  "index into a list of lists",
			rules: "rules:\n- {path: 'spec.m[1][0]', value: z}",
			obj:   "spec: {m: [[a], [b, c]]}",
			want:  "spec: {m: [[a], [z, c]]}",
		},
		{
			name:  "keys with dots",
			rules: "rules:\n- {path: 'data[\"tls.crt\"]', value: new}\n- {path: 'metadata.annotations[\"example.com/x\"]', template: '{{.SourceCluster}}/{{.SourceNamespace}}/{{.SourceName}}'}",
			obj:   configMap,
			want:  "data: {tls.crt: new}\nmetadata: {annotations: {example.com/x: hub/platform/app-config}}",
		},
		{
			name:  "merge into an existing map",
			rules: "rules:\n- {path: metadata.labels, merge: {environment: production, app: api}}",
			obj:   configMap,
			want:  "metadata: {labels: {environment: production, app: api}}",
		},
		{
			name:  "merge into a missing map creates it",
			rules: "rules:\n- {path: metadata.annotations, merge: {a: b}}\n- {path: spec.x.z, merge: {c: d}}",
			obj:   configMap,
			want:  "metadata: {annotations: {a: b}}\nspec: {x: {z: {c: d}}}",
		},
		{
			name:  "merge is recursive, null deletes, lists are replaced",
			rules: "rules:\n- {path: spec, merge: {replicas: null, template: {metadata: {labels: {a: b}}, spec: {containers: []}}, new: {x: 1, gone: null}}}",
			obj:   deployment,
			want:  "spec: {replicas: null, template: {metadata: {labels: {a: b}}, spec: {containers: []}}, new: {x: 1}}",
		},
		{
			name:     "merge into a string fails",
			rules:    "rules:\n- {path: data.LOG_LEVEL, merge: {a: b}}",
			obj:      configMap,
			wantErrs: []string{"data.LOG_LEVEL: cannot merge a map into a string"},
		},
		{
			name:  "delete a key, a missing key, below a missing map, a list item, past a list's end",
			rules: "rules:\n- {path: data.DEBUG, delete: true}\n- {path: data.NOPE, delete: true}\n- {path: spec.a.b, delete: true}\n- {path: 'spec.template.spec.containers[0]', delete: true}\n- {path: 'spec.template.spec.containers[5]', delete: true}\n- {path: 'data[\"tls.crt\"]', delete: true}",
			obj:   configMap + "spec: {template: {spec: {containers: [a, b, c]}}}\n",
			want:  "data: {DEBUG: null, tls.crt: null}\nspec: {template: {spec: {containers: [b, c]}}}",
		},
		{
			name:     "delete through a string fails",
			rules:    "rules:\n- {path: data.DEBUG.x, delete: true}",
			obj:      configMap,
			wantErrs: []string{"data.DEBUG.x: cannot delete a key from a string"},
		},
		{
			name:  "template sees every Target field",
			rules: "rules:\n- path: data.all\n  template: '{{.TargetNamespace}} {{.TargetCluster}} {{.TargetName}} {{.SourceNamespace}} {{.SourceCluster}} {{.SourceName}} {{.Labels.team}} {{index .Annotations \"example.com/owner\"}} [{{.Labels.missing}}]'",
			obj:   configMap,
			want:  "data: {all: 'prod-eu eu-1 app-config platform hub app-config payments alice []'}",
		},
		{
			name:  "namespacePattern limits a rule",
			rules: "rules:\n- {path: data.a, value: prod, namespacePattern: 'prod-*'}\n- {path: data.b, value: dev, namespacePattern: 'dev-*'}\n- {path: data.c, value: one, namespacePattern: 'prod-??'}",
			obj:   configMap,
			want:  "data: {a: prod, c: one}",
		},
		{
			name:  "clusterPattern limits a rule, both patterns must match",
			rules: "rules:\n- {path: data.a, value: eu, clusterPattern: 'eu-*'}\n- {path: data.b, value: us, clusterPattern: 'us-*'}\n- {path: data.c, value: both, clusterPattern: 'eu-*', namespacePattern: 'dev-*'}",
			obj:   configMap,
			want:  "data: {a: eu}",
		},
		{
			name:   "clusterPattern does not match a target without a cluster",
			rules:  "rules:\n- {path: data.a, value: x, clusterPattern: '*-1'}\n- {path: data.b, value: y, clusterPattern: '*'}",
			obj:    configMap,
			target: &Target{TargetNamespace: "prod-eu"},
			want:   "data: {b: y}",
		},
		{
			name:   "Secret: value and template are encoded, delete works",
			rules:  "rules:\n- {path: data.password, value: s3cret}\n- {path: data.url, template: 'https://{{.TargetNamespace}}'}\n- {path: data.port, value: 5432}\n- {path: data.user, delete: true}\n- {path: 'data[\"tls.key\"]', template: '{{ \"a2V5\" | b64dec }}'}",
			obj:    secret,
			secret: true,
			want:   "data: {password: " + b64("s3cret") + ", url: " + b64("https://prod-eu") + ", port: " + b64("5432") + ", user: null, tls.key: " + b64("key") + "}",
		},
		{
			name:   "Secret: merge into data and replace data",
			rules:  "rules:\n- {path: data, merge: {a: x, user: null, \"on\": true}}\n- {path: metadata.labels, merge: {a: not-encoded}}",
			obj:    secret,
			secret: true,
			want:   "data: {a: " + b64("x") + ", user: null, 'on': " + b64("true") + "}\nmetadata: {labels: {a: not-encoded}}",
		},
		{
			name:   "Secret: value for the whole data map",
			rules:  "rules:\n- {path: data, value: {only: one}}",
			obj:    secret,
			secret: true,
			want:   "data: {only: " + b64("one") + ", user: null, password: null}",
		},
		{
			name:   "Secret: what does not fit data's shape fails",
			rules:  "rules:\n- {path: data.a.b, value: x}\n- {path: data, template: x}\n- {path: data.a, merge: {b: c}}\n- {path: data.a, value: {b: c}}\n- {path: data, value: [x]}\n- {path: data, merge: {a: {b: c}}}",
			obj:    secret,
			secret: true,
			wantErrs: []string{
				"rules[0] (data.a.b): a Secret's data holds strings",
				"rules[1] (data): a template yields a string",
				"rules[2] (data.a): a Secret's data.KEY holds a string",
				"rules[3] (data.a): a Secret's data values are strings, not a map",
				"rules[4] (data): a Secret's data must be a map, not a list",
				`rules[5] (data): key "a": a Secret's data values are strings`,
			},
		},
		{
			name:  "not a Secret: data is not encoded",
			rules: "rules:\n- {path: data.password, value: s3cret}",
			obj:   secret,
			want:  "data: {password: s3cret}",
		},
		{
			name:     "failing template is reported with its index, the rest apply",
			rules:    "rules:\n- {path: data.a, template: '{{ \"%%%\" | b64dec }}'}\n- {path: data.b, value: ok}",
			obj:      configMap,
			want:     "data: {b: ok}",
			wantErrs: []string{`rules[0] (data.a): template: template:1:11: executing "template" at <b64dec>: error calling b64dec: illegal base64 data at input byte 0`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.rules, DefaultLimits(), reservedKeys)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tg := target
			if tt.target != nil {
				tg = *tt.target
			}
			obj := decode(t, tt.obj)
			want := decode(t, tt.obj)
			mergeInto(want, decode(t, tt.want))
			errs := r.Apply(obj, tg, tt.secret)
			checkErrs(t, errs, tt.wantErrs)
			if diff := cmp.Diff(want, obj); diff != "" {
				t.Errorf("object after Apply (-want +got):\n%s", diff)
			}
		})
	}
}

// TestApplyCopiesValues checks that objects never share a rule's values:
// changing one mirror must not change the rules or the next mirror.
func TestApplyCopiesValues(t *testing.T) {
	r, err := Parse("rules:\n- {path: spec.v, value: {a: [1]}}\n- {path: spec.m, merge: {b: {c: d}}}", DefaultLimits(), reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]any{}
	checkErrs(t, r.Apply(first, target, false), nil)
	first["spec"].(map[string]any)["v"].(map[string]any)["a"].([]any)[0] = "changed"
	first["spec"].(map[string]any)["m"].(map[string]any)["b"].(map[string]any)["c"] = "changed"
	second := map[string]any{}
	checkErrs(t, r.Apply(second, target, false), nil)
	want := decode(t, "spec: {v: {a: [1]}, m: {b: {c: d}}}")
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("second object (-want +got):\n%s", diff)
	}
}

func TestApplyObjectTooLarge(t *testing.T) {
	l := Limits{MaxOutput: 1000}
	// 900 bytes of template output under a 1000 byte limit, into an
	// object that already has 200.
	r, err := Parse("rules:\n- {path: data.a, template: '{{ replace \"x\" \"xxxxxxxxxx\" \""+strings.Repeat("x", 90)+"\" }}'}\n- {path: data.b, value: ok}", l, reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	obj := decode(t, configMap)
	errs := r.Apply(obj, target, false)
	if len(errs) != 1 || !errors.Is(errs[0], ErrObjectTooLarge) {
		t.Fatalf("Apply = %v, want one ErrObjectTooLarge", errs)
	}

	// An object over the limit before any rule is too large as well.
	big := decode(t, configMap)
	big["data"].(map[string]any)["big"] = strings.Repeat("<", 200) // 6 bytes each in JSON
	r, err = Parse("rules:\n- {path: data.b, value: ok}", l, reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	if errs := r.Apply(big, target, false); len(errs) != 1 || !errors.Is(errs[0], ErrObjectTooLarge) {
		t.Fatalf("Apply = %v, want one ErrObjectTooLarge", errs)
	}
}

func TestApplyNil(t *testing.T) {
	var r *Rules
	if errs := r.Apply(map[string]any{}, target, false); errs != nil {
		t.Errorf("nil Rules: %v", errs)
	}
	r, err := Parse("rules:\n- {path: data.a, value: x}", DefaultLimits(), reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	if errs := r.Apply(nil, target, false); len(errs) != 1 {
		t.Errorf("nil object: %v", errs)
	}
	// Typed nil maps inside an object are missing maps.
	obj := map[string]any{"data": map[string]any(nil), "spec": map[string]any(nil)}
	r, err = Parse("rules:\n- {path: data.a, value: x}\n- {path: spec, merge: {b: y}}\n- {path: spec.c, delete: true}", DefaultLimits(), reservedKeys)
	if err != nil {
		t.Fatal(err)
	}
	checkErrs(t, r.Apply(obj, target, false), nil)
	if diff := cmp.Diff(decode(t, "data: {a: x}\nspec: {b: y}"), obj); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestJSONSize checks the size walker against encoding/json.
func TestJSONSize(t *testing.T) {
	obj := decode(t, deployment)
	obj["weird"] = []any{"<&>\u2028\x01\"\\\n\t\b\f\xff é", int64(-12), 1.5e300, 0.1, true, nil, map[string]any{}, []any{}, map[string]string{"a": "b"}}
	b, err := kjson.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if n, over := jsonSize(obj, 1<<20); n != len(b) || over {
		t.Errorf("jsonSize = %d, %v; json.Marshal writes %d bytes", n, over, len(b))
	}
	if _, over := jsonSize(obj, len(b)-1); !over {
		t.Errorf("jsonSize with a limit one byte short is not over")
	}
}

// decode decodes YAML into an unstructured object as the API machinery
// would: integers as int64.
func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := kjson.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func checkErrs(t *testing.T, errs []error, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("Apply returned %d errors %v, want %d %q", len(errs), errs, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
		}
	}
}
