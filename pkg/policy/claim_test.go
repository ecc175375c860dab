package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

func TestNames(t *testing.T) {
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	byName := &v1alpha1.MirrorPolicy{Spec: v1alpha1.MirrorPolicySpec{Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"db", "cache"}}}}
	bySelector := &v1alpha1.MirrorPolicy{Spec: v1alpha1.MirrorPolicySpec{Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}
	deleting := byName.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	invalid := byName.DeepCopy()
	invalid.Spec.Source.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	for _, tt := range []struct {
		name   string
		p      *v1alpha1.MirrorPolicy
		gvk    schema.GroupVersionKind
		object string
		labels map[string]string
		want   bool
	}{
		{"named", byName, secret, "cache", nil, true},
		{"not named", byName, secret, "other", map[string]string{"app": "db"}, false},
		{"other kind", byName, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "db", nil, false},
		{"other version", byName, schema.GroupVersionKind{Version: "v2", Kind: "Secret"}, "db", nil, false},
		{"selected", bySelector, secret, "any", map[string]string{"app": "db", "x": "y"}, true},
		{"not selected", bySelector, secret, "any", map[string]string{"app": "web"}, false},
		{"being deleted", deleting, secret, "db", nil, false},
		{"invalid spec names nothing", invalid, secret, "db", map[string]string{"a": "b"}, false},
	} {
		if got := Names(tt.p, tt.gvk, tt.object, tt.labels); got != tt.want {
			t.Errorf("%s: Names = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFirst(t *testing.T) {
	at := func(name string, sec int) *v1alpha1.MirrorPolicy {
		return &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(int64(1000+sec), 0)}}
	}
	for _, tt := range []struct {
		name      string
		ps        []*v1alpha1.MirrorPolicy
		want      string
		wantOther []string
	}{
		{"none", nil, "", nil},
		{"one", []*v1alpha1.MirrorPolicy{at("a", 0)}, "a", []string{}},
		{"oldest first, whatever the order given", []*v1alpha1.MirrorPolicy{at("young", 5), at("old", 1), at("mid", 3)}, "old", []string{"mid", "young"}},
		{"same second: by name", []*v1alpha1.MirrorPolicy{at("zeta", 2), at("alpha", 2)}, "alpha", []string{"zeta"}},
	} {
		first, rest := First(tt.ps)
		got := ""
		if first != nil {
			got = first.Name
		}
		others := []string{}
		for _, p := range rest {
			others = append(others, p.Name)
		}
		if got != tt.want || (tt.wantOther != nil && !slices.Equal(others, tt.wantOther)) {
			t.Errorf("%s: First = %q %v, want %q %v", tt.name, got, others, tt.want, tt.wantOther)
		}
	}
}

// Whatever a policy's source holds, Source either refuses it with the
// field's name or returns the kind the policy names, and Names never
// matches what Source refuses.
func FuzzSource(f *testing.F) {
	f.Add("v1", "Secret", "db,cache", "", "")
	f.Add("apps/v1", "Deployment", "", "app", "web")
	f.Add("apps/v1/x", "secret", "", "", "")
	f.Add("", "", "a", "bad key!", "v")
	f.Fuzz(func(t *testing.T, apiVersion, kind, names, key, value string) {
		spec := v1alpha1.MirrorPolicySpec{Source: v1alpha1.PolicySource{APIVersion: apiVersion, Kind: kind}}
		if names != "" {
			spec.Source.Names = strings.Split(names, ",")
		}
		if key != "" {
			spec.Source.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
		}
		gvk, sel, err := Source(&spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "spec.source") {
				t.Errorf("error %q does not name the field", err)
			}
			p := &v1alpha1.MirrorPolicy{Spec: spec}
			if len(spec.Source.Names) > 0 && Names(p, gvk, spec.Source.Names[0], map[string]string{key: value}) {
				t.Errorf("a policy refused (%v) names an object", err)
			}
			return
		}
		if gvk.Kind != kind || gvk.GroupVersion().String() != apiVersion {
			t.Errorf("Source(%q, %q) = %v", apiVersion, kind, gvk)
		}
		if (sel != nil) != (spec.Source.Selector != nil) {
			t.Errorf("selector %v for %v", sel, spec.Source.Selector)
		}
	})
}

// Whatever a policy's trigger holds, Trigger either refuses it with the
// field's name or returns the kind it names, and refuses it beside
// entries of other clusters.
func FuzzTrigger(f *testing.F) {
	f.Add("v1", "ConfigMap", "", "create-secret", "true")
	f.Add("apps/v1", "Deployment", "east/all", "", "")
	f.Add("v1/x", "configmap", "", "bad key!", "v")
	f.Fuzz(func(t *testing.T, apiVersion, kind, entries, key, value string) {
		spec := v1alpha1.MirrorPolicySpec{Trigger: &v1alpha1.PolicyTrigger{APIVersion: apiVersion, Kind: kind}}
		if entries != "" {
			spec.TargetNamespaces = strings.Split(entries, ",")
		}
		if key != "" {
			spec.Trigger.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
		}
		gvk, sel, ok, err := Trigger(&spec)
		if !ok {
			t.Fatal("a trigger was not seen")
		}
		remote := strings.Contains(entries, "/")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "spec.trigger") {
				t.Errorf("error %q does not name the field", err)
			}
			return
		}
		if remote {
			t.Errorf("a trigger beside CLUSTER/NS entries %q was taken", entries)
		}
		if gvk.Kind != kind || gvk.GroupVersion().String() != apiVersion {
			t.Errorf("Trigger(%q, %q) = %v", apiVersion, kind, gvk)
		}
		if (sel != nil) != (spec.Trigger.Selector != nil) {
			t.Errorf("selector %v for %v", sel, spec.Trigger.Selector)
		}
	})
}

// The agent refuses a source's apiVersion and kind with the patterns the
// CRD's schema states: what the API server accepts, the agent reads.
func TestPatternsAreTheCRDs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "fleetmirror.io_mirrorpolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatal(err)
	}
	for _, of := range []string{"source", "trigger"} {
		props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties[of].Properties
		for field, re := range map[string]string{"apiVersion": APIVersionPattern.String(), "kind": KindPattern.String()} {
			if got := props[field].Pattern; got != re {
				t.Errorf("spec.%s.%s: the CRD's pattern %q, the agent's %q", of, field, got, re)
			}
		}
	}
}
