package main

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestContains(t *testing.T) {
	actual := `
apiVersion: v1
kind: Secret
metadata:
  name: regcred
  namespace: ns
  labels: {a: "1", b: "2"}
data: {foo: YmFy}
type: Opaque
spec:
  replicas: 3
  ports: [{port: 80, name: http}, {port: 443}]
`
	cases := []struct {
		name, expected string
		// want is "" when actual contains expected, else a part of the
		// difference reported.
		want string
	}{
		{"subset of maps", "metadata: {name: regcred, labels: {a: \"1\"}}\ndata: {foo: YmFy}", ""},
		{"int and int64 compare by value", "spec: {replicas: 3}", ""},
		{"list elements by position, each a subset", "spec: {ports: [{port: 80}, {port: 443}]}", ""},
		{"missing key", "metadata: {labels: {c: \"3\"}}", ".metadata.labels.c: missing"},
		{"other value", "data: {foo: YmF6}", `.data.foo: want "YmF6", have "YmFy"`},
		{"list of another length", "spec: {ports: [{port: 80}]}", ".spec.ports: want 1 elements, have 2"},
		{"list element differs", "spec: {ports: [{port: 80}, {port: 8443}]}", ".spec.ports[1].port: want 8443, have 443"},
		{"scalar where an object is", "data: plain", `.data: want "plain"`},
		{"object where a scalar is", "type: {a: b}", ".type: want an object"},
	}
	var a map[string]any
	if err := yaml.Unmarshal([]byte(actual), &a); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e map[string]any
			if err := yaml.Unmarshal([]byte(c.expected), &e); err != nil {
				t.Fatal(err)
			}
			got := contains(e, a)
			switch {
			case c.want == "" && got != "":
				t.Errorf("contains = %q, want a match", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("contains = %q, want it to say %q", got, c.want)
			}
		})
	}
}
