package desired

import (
	"encoding/base64"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/transform"
)

func source() *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{
			"name": "db", "namespace": "platform", "uid": "u-1", "resourceVersion": "42",
			"labels": map[string]any{"app": "db", annotations.LabelEnabled: "true", "kubemirror.raczylo.com/enabled": "true"},
			"annotations": map[string]any{
				"team": "pay", annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: "a",
				"meta.helm.sh/release-name": "db", "kubectl.kubernetes.io/last-applied-configuration": "{}",
				"replicator.v1.mittwald.de/replicate-to": "a", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled": "true",
			},
			"finalizers":      []any{"x/y"},
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "o-1"}},
		},
		"type":   "Opaque",
		"data":   map[string]any{"k": "dg=="},
		"status": map[string]any{"ignored": true},
	}}
	return u
}

func TestBuild(t *testing.T) {
	m, _, err := Build(source(), Target{Cluster: "eu-1", Namespace: "team-a"}, Options{SourceCluster: "eu-1", ManagedBy: "member", Strip: glob.MustParseList(DefaultStrip...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetNamespace() != "team-a" || m.GetName() != "db" || m.GetKind() != "Secret" {
		t.Fatalf("identity wrong: %s %s/%s", m.GetKind(), m.GetNamespace(), m.GetName())
	}
	wantLabels := map[string]string{"app": "db", annotations.LabelMirror: "true", annotations.LabelManagedBy: "member"}
	if got := m.GetLabels(); len(got) != len(wantLabels) || got["app"] != "db" || got[annotations.LabelMirror] != "true" || got[annotations.LabelManagedBy] != "member" {
		t.Errorf("labels = %v, want %v", got, wantLabels)
	}
	a := m.GetAnnotations()
	for k, v := range map[string]string{"team": "pay", annotations.AnnotationSource: "eu-1/platform/db", annotations.AnnotationSourceUID: "u-1", annotations.AnnotationSourceResourceVersion: "42"} {
		if a[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, a[k], v)
		}
	}
	// A peer tool's keys on a mirror would make it a source of that tool.
	for _, k := range []string{annotations.AnnotationSync, annotations.AnnotationTargetNamespaces, "meta.helm.sh/release-name", "kubectl.kubernetes.io/last-applied-configuration",
		"replicator.v1.mittwald.de/replicate-to", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled"} {
		if _, ok := a[k]; ok {
			t.Errorf("annotation %s was copied", k)
		}
	}
	if a[annotations.AnnotationContentHash] != Hash(m) {
		t.Errorf("stamped hash %s differs from the hash of the mirror %s", a[annotations.AnnotationContentHash], Hash(m))
	}
	for _, f := range []string{"status"} {
		if _, ok := m.Object[f]; ok {
			t.Errorf("field %s copied", f)
		}
	}
	if len(m.GetFinalizers()) > 0 || len(m.GetOwnerReferences()) > 0 || m.GetUID() != "" || m.GetResourceVersion() != "" {
		t.Errorf("metadata leaked: %v", m.Object["metadata"])
	}
	// The mirror shares no memory with the source.
	m.Object["data"].(map[string]any)["k"] = "changed"
	if source().Object["data"].(map[string]any)["k"] != "dg==" {
		t.Fatal("mirror shares data with the source")
	}
}

func TestHashCoversWhatIsPropagated(t *testing.T) {
	build := func(src *unstructured.Unstructured) *unstructured.Unstructured {
		m, _, err := Build(src, Target{Namespace: "a"}, Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	base := Hash(build(source()))
	tests := []struct {
		name    string
		mutate  func(u *unstructured.Unstructured)
		changes bool
	}{
		{"data", func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"k": "eA=="} }, true},
		{"label", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"app": "other"}) }, true},
		{"annotation", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a["team"] = "x"
			u.SetAnnotations(a)
		}, true},
		{"type", func(u *unstructured.Unstructured) { u.Object["type"] = "kubernetes.io/tls" }, true},
		{"status only", func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"x": 1} }, false},
		{"control annotation only", func(u *unstructured.Unstructured) {
			a := u.GetAnnotations()
			a[annotations.AnnotationStatus] = "1/1"
			u.SetAnnotations(a)
		}, false},
		{"resourceVersion only", func(u *unstructured.Unstructured) { u.SetResourceVersion("43") }, false},
	}
	for _, tt := range tests {
		src := source()
		tt.mutate(src)
		if changed := Hash(build(src)) != base; changed != tt.changes {
			t.Errorf("%s: hash changed = %v, want %v", tt.name, changed, tt.changes)
		}
	}
}

// Control keys added to a live mirror by hand are drift: the live hash no
// longer equals the stamped one, so the mirror is written again. Our own
// stamps, whatever their values, are bookkeeping and are no drift.
func TestHashSeesControlKeysAddedToAMirror(t *testing.T) {
	m, _, err := Build(source(), Target{Namespace: "a"}, Options{SourceCluster: "c", ManagedBy: "member"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stamped := m.GetAnnotations()[annotations.AnnotationContentHash]
	tests := []struct {
		name   string
		mutate func(u *unstructured.Unstructured)
		drift  bool
	}{
		{"enabled label", func(u *unstructured.Unstructured) { setLabel(u, annotations.LabelEnabled, "true") }, true},
		{"target annotation", func(u *unstructured.Unstructured) { setAnnotation(u, annotations.AnnotationTargetNamespaces, "all") }, true},
		{"sync annotation", func(u *unstructured.Unstructured) { setAnnotation(u, annotations.AnnotationSync, "true") }, true},
		{"unknown control label", func(u *unstructured.Unstructured) { setLabel(u, annotations.Prefix+"anything", "x") }, true},
		{"source resourceVersion stamp", func(u *unstructured.Unstructured) {
			setAnnotation(u, annotations.AnnotationSourceResourceVersion, "99")
		}, false},
		{"managed-by stamp", func(u *unstructured.Unstructured) { setLabel(u, annotations.LabelManagedBy, "hub") }, false},
	}
	for _, tt := range tests {
		live := m.DeepCopy()
		tt.mutate(live)
		if drift := Hash(live) != stamped; drift != tt.drift {
			t.Errorf("%s: drift = %v, want %v", tt.name, drift, tt.drift)
		}
	}
}

func setLabel(u *unstructured.Unstructured, k, v string) {
	l := u.GetLabels()
	l[k] = v
	u.SetLabels(l)
}

func setAnnotation(u *unstructured.Unstructured, k, v string) {
	a := u.GetAnnotations()
	a[k] = v
	u.SetAnnotations(a)
}

func TestOwned(t *testing.T) {
	ours := map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: "member"}
	ref := map[string]string{annotations.AnnotationSource: "c/ns/n"}
	tests := []struct {
		name   string
		labels map[string]string
		annots map[string]string
		want   bool
	}{
		{"ours", ours, ref, true},
		{"no labels, same name", nil, ref, false},
		{"other writer", map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: "hub"}, ref, false},
		{"other source", ours, map[string]string{annotations.AnnotationSource: "c/ns/other"}, false},
		{"no source reference", ours, nil, false},
	}
	for _, tt := range tests {
		if got := Owned(tt.labels, tt.annots, "member", "c/ns/n"); got != tt.want {
			t.Errorf("%s: Owned = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRefusal(t *testing.T) {
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	for _, tt := range []struct {
		typ    string
		mirror bool
		refuse bool
	}{
		{"Opaque", false, false},
		{"kubernetes.io/service-account-token", false, true},
		{"bootstrap.kubernetes.io/token", false, true},
		{"helm.sh/release.v1", false, true},
		{"Opaque", true, true},
	} {
		u := source()
		u.Object["type"] = tt.typ
		if tt.mirror {
			u.SetLabels(map[string]string{annotations.LabelMirror: "true"})
		}
		if got := Refusal(secret, u) != ""; got != tt.refuse {
			t.Errorf("type %s mirror %v: refused = %v, want %v", tt.typ, tt.mirror, got, tt.refuse)
		}
	}
	if Refusal(schema.GroupVersionKind{Group: "fleetmirror.io", Version: "v1alpha1", Kind: "MirrorPolicy"}, source()) == "" {
		t.Error("a MirrorPolicy may be mirrored: its copies would copy the objects of their namespaces out")
	}
}

func TestBuildWithTransform(t *testing.T) {
	rules, err := transform.Parse(`rules:
  - path: data.k
    template: "{{.TargetNamespace}}-{{.TargetCluster}}"
  - path: metadata.labels
    merge: {env: prod}
  - path: data.k
    value: "prod-only"
    namespacePattern: "prod-*"
  - path: data.missing[0]
    value: x
`, transform.DefaultLimits(), annotations.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		target   Target
		strict   bool
		wantData string
		wantErr  bool
	}{
		{"template and merge", Target{Cluster: "eu-1", Namespace: "team-a"}, false, "team-a-eu-1", false},
		{"pattern rule", Target{Cluster: "eu-1", Namespace: "prod-1"}, false, "prod-only", false},
		{"strict skips the target", Target{Cluster: "eu-1", Namespace: "team-a"}, true, "", true},
	}
	for _, tt := range tests {
		m, ruleErrs, err := Build(source(), tt.target, Options{SourceCluster: "hub", ManagedBy: "hub"}, &annotations.Transform{Rules: rules, Strict: tt.strict})
		if len(ruleErrs) != 1 {
			t.Errorf("%s: rule errors = %v, want the one failing rule", tt.name, ruleErrs)
		}
		if (err != nil) != tt.wantErr {
			t.Fatalf("%s: err = %v, want error %v", tt.name, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		got, _, _ := unstructured.NestedString(m.Object, "data", "k")
		if dec, _ := base64.StdEncoding.DecodeString(got); string(dec) != tt.wantData {
			t.Errorf("%s: data.k = %q (decoded %q), want %q", tt.name, got, dec, tt.wantData)
		}
		if m.GetLabels()["env"] != "prod" || m.GetLabels()[annotations.LabelMirror] != "true" {
			t.Errorf("%s: labels = %v", tt.name, m.GetLabels())
		}
		if m.GetAnnotations()[annotations.AnnotationContentHash] != Hash(m) {
			t.Errorf("%s: the hash does not cover the transformed mirror", tt.name)
		}
	}
}
