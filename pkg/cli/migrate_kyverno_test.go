package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/policy"
)

// kyvernoPolicy is a ClusterPolicy (a Policy when namespace is set) named
// name, with rules written in YAML.
func kyvernoPolicy(t testing.TB, namespace, name, rules string) *unstructured.Unstructured {
	t.Helper()
	kind := "ClusterPolicy"
	if namespace != "" {
		kind = "Policy"
	}
	var obj map[string]any
	text := "apiVersion: kyverno.io/v1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  namespace: " + namespace + "\nspec:\n  rules:\n" + rules
	if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return &unstructured.Unstructured{Object: obj}
}

// cloneGenerate is the generate block of cloneRule.
const cloneGenerate = "apiVersion: v1\n      kind: Secret\n      name: regcred\n      namespace: \"{{request.object.metadata.name}}\"\n      synchronize: true\n      clone:\n        namespace: platform\n        name: regcred\n"

// cloneRule is a rule that copies platform/regcred into each namespace
// that match selects, as Kyverno's documentation writes it; extra is
// added to the rule, generate holds its generate fields.
func cloneRule(match, extra, generate string) string {
	if generate == "" {
		generate = cloneGenerate
	}
	if match == "" {
		match = "any:\n      - resources:\n          kinds: [Namespace]\n"
	}
	return "  - name: copy\n    match:\n      " + match + extra + "    generate:\n      " + generate
}

// TestKyvernoPolicyNames: every MirrorPolicy name is a DNS subdomain, and
// rules whose names differ get policies whose names differ.
func TestKyvernoPolicyNames(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]string{}
	for _, names := range [][2]string{
		{"sync", "copy"}, {"Sync_Secrets", "Copy Regcred"}, {"sync-secrets", "copy-regcred"},
		{"sync", "Copy"}, {"a", strings.Repeat("r", 300)}, {"a", strings.Repeat("r", 301)}, {"x", "--"},
	} {
		rules := cli.TranslateKyverno(kyvernoPolicy(t, "", names[0], strings.Replace(cloneRule("", "", ""), "name: copy", "name: "+names[1], 1)))
		g.Expect(rules).To(HaveLen(1))
		g.Expect(rules[0].MirrorPolicies).To(HaveLen(1), "%q", rules[0].Decisions)
		name := rules[0].MirrorPolicies[0].Name
		g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty(), name)
		g.Expect(seen).NotTo(HaveKey(name), "%v", names)
		seen[name] = names[0] + "/" + names[1]
	}
	g.Expect(seen).To(HaveKey("sync-copy"))
}

// setRuleField sets a field of the first rule of p, below fields; a
// number among them is an index into a list.
func setRuleField(t testing.TB, p *unstructured.Unstructured, value []string, fields ...string) {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	at := rules[0]
	for _, f := range fields[:len(fields)-1] {
		if i, err := strconv.Atoi(f); err == nil {
			at = at.([]any)[i]
		} else {
			at = at.(map[string]any)[f]
		}
	}
	list := make([]any, len(value))
	for i, v := range value {
		list[i] = v
	}
	at.(map[string]any)[fields[len(fields)-1]] = list
	if err := unstructured.SetNestedSlice(p.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
}

// translatedSpec translates p, a policy of one generate rule, and returns
// the spec of its first MirrorPolicy, or nil when the rule gets none; it
// fails when the rule gets neither a MirrorPolicy nor a decision.
func translatedSpec(t *testing.T, p *unstructured.Unstructured, what string) *v1alpha1.MirrorPolicySpec {
	t.Helper()
	rules := cli.TranslateKyverno(p)
	switch {
	case len(rules) != 1:
		t.Fatalf("%s: %d rules", what, len(rules))
	case len(rules[0].MirrorPolicies) > 0:
		return &rules[0].MirrorPolicies[0].Spec
	case len(rules[0].Decisions) == 0:
		t.Fatalf("%s: neither a policy nor a decision", what)
	}
	return nil
}

// FuzzKyvernoKinds: a kind of cloneList.kinds either translates into the
// same API version and kind, valid for a MirrorPolicy, or is a decision.
func FuzzKyvernoKinds(f *testing.F) {
	for _, k := range []string{"v1/Secret", "apps/v1/Deployment", "Secret", "v1/*", "a/b/c/D", "/Secret", "v1/", "networking.k8s.io/v1beta1/Ingress", "v1/Pod:status"} {
		f.Add(k)
	}
	base := kyvernoPolicy(f, "", "sync", cloneRule("", "", "namespace: \"{{request.object.metadata.name}}\"\n      cloneList:\n        namespace: platform\n        selector: {matchLabels: {share: \"true\"}}\n"))
	f.Fuzz(func(t *testing.T, kind string) {
		p := base.DeepCopy()
		setRuleField(t, p, []string{kind}, "generate", "cloneList", "kinds")
		spec := translatedSpec(t, p, kind)
		if spec == nil {
			return
		}
		src := spec.Source
		if src.APIVersion+"/"+src.Kind != kind {
			t.Fatalf("%q became %s/%s", kind, src.APIVersion, src.Kind)
		}
		gv, err := schema.ParseGroupVersion(src.APIVersion)
		if err != nil || gv.Version == "" {
			t.Fatalf("%q: API version %q: %v", kind, src.APIVersion, err)
		}
	})
}

// FuzzKyvernoTrigger: a kind and a name of a match block of another kind
// than Namespace translate into a trigger of that kind, valid for a
// MirrorPolicy, that takes exactly that name; or they are a decision.
func FuzzKyvernoTrigger(f *testing.F) {
	for _, seed := range [][2]string{
		{"ConfigMap", "test-org"}, {"v1/ConfigMap", "a.b"}, {"apps/v1/Deployment", "web"}, {"v1/Deployment", "x"}, {"Widget", "x"},
		{"example.com/v1alpha1/Widget", "w-1"}, {"Node", "n"}, {"Pod/exec", "p"}, {"v1/*", "x"}, {"ConfigMap", "test-*"}, {"Secret", "Upper"},
	} {
		f.Add(seed[0], seed[1])
	}
	base := kyvernoPolicy(f, "", "sync", cloneRule("any:\n      - resources:\n          kinds: [ConfigMap]\n          names: [x]\n", "",
		strings.Replace(cloneGenerate, "metadata.name", "metadata.namespace", 1)))
	name := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	f.Fuzz(func(t *testing.T, kind, n string) {
		p := base.DeepCopy()
		setRuleField(t, p, []string{kind}, "match", "any", "0", "resources", "kinds")
		setRuleField(t, p, []string{n}, "match", "any", "0", "resources", "names")
		spec := translatedSpec(t, p, kind+" "+n)
		if spec == nil {
			return
		}
		tr := spec.Trigger
		if tr == nil {
			t.Fatalf("%q named %q: no trigger", kind, n)
		}
		if _, _, _, err := policy.Trigger(spec); err != nil {
			t.Fatalf("%q named %q became %s/%s: %v", kind, n, tr.APIVersion, tr.Kind, err)
		}
		if kind != tr.Kind && !strings.HasSuffix(kind, "/"+tr.Kind) {
			t.Fatalf("%q became %s/%s", kind, tr.APIVersion, tr.Kind)
		}
		if len(tr.Names) != 1 || tr.Names[0] != n || !name.MatchString(n) {
			t.Fatalf("the name %q became %q", n, tr.Names)
		}
	})
}

// kyvernoMatches is Kyverno's matching of names (kyverno/ext/wildcard):
// * any run of characters, . any one character, ? any one character or,
// once the name is used up, none.
func kyvernoMatches(pattern, name string) bool {
	if pattern == "" {
		return name == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(name); i++ {
			if kyvernoMatches(pattern[1:], name[i:]) {
				return true
			}
		}
		return false
	case '?':
		if name == "" {
			return kyvernoMatches(pattern[1:], name)
		}
		return kyvernoMatches(pattern[1:], name[1:])
	case '.':
		return name != "" && kyvernoMatches(pattern[1:], name[1:])
	}
	return name != "" && name[0] == pattern[0] && kyvernoMatches(pattern[1:], name[1:])
}

// FuzzKyvernoNames: a name pattern of a match block translates into a
// target entry that selects exactly the namespaces Kyverno matches, or is
// a decision.
func FuzzKyvernoNames(f *testing.F) {
	for _, seed := range [][2]string{
		{"team-*", "team-a"}, {"ns-?", "ns-"}, {"ns-?-x", "ns-1-x"}, {"*", "x"}, {"a.b", "axb"},
		{"all", "all"}, {"*?", "a"}, {"?*a", "a"}, {"a*b?c", "abxc"}, {"Team", "team"},
	} {
		f.Add(seed[0], seed[1])
	}
	base := kyvernoPolicy(f, "", "sync", cloneRule("any:\n      - resources:\n          kinds: [Namespace]\n          names: [x]\n", "", ""))
	f.Fuzz(func(t *testing.T, pattern, name string) {
		// Names from a few letters, so that patterns match some.
		name = strings.Map(func(r rune) rune { return rune("ab-1x"[int(r)%5]) }, name)
		p := base.DeepCopy()
		setRuleField(t, p, []string{pattern}, "match", "any", "0", "resources", "names")
		spec := translatedSpec(t, p, pattern)
		if spec == nil || len(validation.IsDNS1123Label(name)) > 0 {
			return
		}
		req := annotations.Parse(nil, policy.Annotations(spec))
		if len(req.Local) != 1 || len(req.Problems) > 0 {
			t.Fatalf("%q became %q: %q", pattern, spec.TargetNamespaces, req.Problems)
		}
		if ours, theirs := req.Local[0].Match(name), kyvernoMatches(pattern, name); ours != theirs {
			t.Fatalf("%q became %q: on %q, Kyverno matches %v and fleetmirror %v", pattern, spec.TargetNamespaces, name, theirs, ours)
		}
	})
}

// TestMigrateKyverno runs migrate against an API server with Kyverno's
// CRDs and four ClusterPolicies: one clones a Secret into namespaces by
// name, one under another name and kept when the policy goes, one clones
// by label into namespaces by label, and one has a copy made once beside
// two rules that do not translate. The printed MirrorPolicies are what kubectl apply would
// accept, and nothing is created.
func TestMigrateKyverno(t *testing.T) {
	k8s := setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	src := newNamespaces(t, "kyv-src")[0]

	// Without Kyverno's CRDs there is nothing to translate.
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := k8s.Get(ctx, client.ObjectKey{Name: "clusterpolicies.kyverno.io"}, crd); apierrors.IsNotFound(err) {
		out, err := run("migrate", "-A")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).NotTo(ContainSubstring("Kyverno"))
	}

	_, err := fleettest.InstallPolicyCRD(api.Hub.Config, filepath.Join("pkg", "cli", "testdata", "kyverno-crds.yaml"))
	g.Expect(err).NotTo(HaveOccurred())

	generate := func(source string) string {
		return "apiVersion: v1\n      kind: Secret\n      name: regcred\n      namespace: \"{{request.object.metadata.name}}\"\n      synchronize: true\n      clone:\n        namespace: " + source + "\n        name: regcred\n"
	}
	policies := []*unstructured.Unstructured{
		kyvernoPolicy(t, "", src+"-clone", cloneRule("any:\n      - resources:\n          kinds: [Namespace]\n          names: [team-*, prod]\n", "", generate(src))),
		kyvernoPolicy(t, "", src+"-keep", strings.Replace(cloneRule("", "",
			strings.Replace(strings.Replace(generate(src), "name: regcred\n", "name: pull-secret\n", 1), "synchronize: true", "synchronize: true\n      orphanDownstreamOnPolicyDelete: true", 1)), "name: copy", "name: renamed", 1)),
		kyvernoPolicy(t, "", src+"-list", cloneRule("any:\n      - resources:\n          kinds: [Namespace]\n          selector: {matchLabels: {env: prod}}\n", "",
			"namespace: \"{{request.object.metadata.name}}\"\n      synchronize: true\n      cloneList:\n        namespace: "+src+"\n        kinds: [v1/Secret, v1/ConfigMap]\n        selector: {matchLabels: {share: \"true\"}}\n")),
		kyvernoPolicy(t, "", src+"-vars",
			strings.Replace(cloneRule("", "", strings.Replace(generate(src), "namespace: "+src, "namespace: \"{{request.object.metadata.labels.source}}\"", 1)), "name: copy", "name: per-team", 1)+
				strings.Replace(cloneRule("", "", strings.Replace(generate(src), "synchronize: true", "synchronize: false", 1)), "name: copy", "name: one-shot", 1)+
				"  - name: defaults\n    match: {any: [{resources: {kinds: [Namespace]}}]}\n    generate:\n      apiVersion: v1\n      kind: ConfigMap\n      name: defaults\n      namespace: \"{{request.object.metadata.name}}\"\n      data: {data: {a: b}}\n"),
	}
	for _, p := range policies {
		p.SetNamespace("")
		g.Expect(k8s.Create(ctx, p)).To(Succeed())
	}
	t.Cleanup(func() {
		for _, p := range policies {
			_ = k8s.Delete(ctx, p)
		}
	})
	before := resourceVersions(g, k8s)

	// The text: the rules, what needs a decision, and a YAML stream of
	// MirrorPolicies.
	out, err := run("migrate", "-n", src)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("ClusterPolicy " + src + "-clone, rule copy (kyverno generate) => MirrorPolicy " + src + "/" + src + "-clone-copy\n  note: synchronize: true"))
	g.Expect(out).To(ContainSubstring("ClusterPolicy " + src + "-vars, rule one-shot (kyverno generate) => MirrorPolicy " + src + "/" + src + "-vars-one-shot\n  note: synchronize: false: copyOnce"))
	g.Expect(out).NotTo(ContainSubstring("rule per-team"), "its source namespace is a variable: not one of -n")
	g.Expect(out).To(ContainSubstring("5 MirrorPolicies from 4 Kyverno generate rules, 0 need a decision.\n"))
	g.Expect(out).To(HaveSuffix("0 objects to migrate, 0 need a decision, 0 copies made by the old tools (the agent adopts them once their source carries fleetmirror.io/adopt).\n"))
	yamlStream := out[strings.Index(out, "\n---\n")+1 : strings.LastIndex(out, "---\n")]
	printed := map[string]v1alpha1.MirrorPolicy{}
	for _, doc := range strings.Split(yamlStream, "---\n")[1:] {
		var p v1alpha1.MirrorPolicy
		g.Expect(yaml.UnmarshalStrict([]byte(doc), &p)).To(Succeed(), doc)
		g.Expect(p.Namespace).To(Equal(src))
		printed[p.Name] = p
	}
	g.Expect(printed).To(HaveLen(5))
	g.Expect(printed).To(HaveKeyWithValue(src+"-keep-renamed", HaveField("Spec", v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"regcred"}},
		TargetNamespaces: []string{"all"},
		TargetName:       "pull-secret",
		DeletionPolicy:   v1alpha1.DeletionPolicyOrphan,
		Adopt:            []string{"kyverno", "fleetmirror"},
	})))
	g.Expect(printed).To(HaveKeyWithValue(src+"-clone-copy", HaveField("Spec", v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"regcred"}},
		TargetNamespaces: []string{"team-*", "prod"},
		DeletionPolicy:   v1alpha1.DeletionPolicyOrphan,
		Adopt:            []string{"kyverno", "fleetmirror"},
	})))
	selector := "env=prod"
	share := &metav1.LabelSelector{MatchLabels: map[string]string{"share": "true"}}
	g.Expect(printed).To(HaveKeyWithValue(src+"-list-copy-configmap", HaveField("Spec", v1alpha1.MirrorPolicySpec{
		Source:                  v1alpha1.PolicySource{APIVersion: "v1", Kind: "ConfigMap", Selector: share},
		TargetNamespaceSelector: &selector,
		Adopt:                   []string{"kyverno"},
	})))
	g.Expect(printed).To(HaveKeyWithValue(src+"-list-copy-secret", HaveField("Spec.Source.Kind", "Secret")))
	g.Expect(printed).To(HaveKeyWithValue(src+"-vars-one-shot", HaveField("Spec", v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"regcred"}},
		TargetNamespaces: []string{"all"},
		CopyOnce:         true,
		Adopt:            []string{"kyverno"},
	})))

	// The API server takes each of them as printed (a dry run: migrate
	// creates none, and neither does this test).
	for name, p := range printed {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k8s.Create(ctx, &unstructured.Unstructured{Object: obj}, client.DryRunAll)).To(Succeed(), name)
	}

	// -o json, every namespace: the rules that need a decision are there
	// with their reasons.
	var mig cli.Migration
	out, err = run("migrate", "-A", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(json.Unmarshal([]byte(out), &mig)).To(Succeed(), out)
	rules := map[string]cli.KyvernoRule{}
	for _, r := range mig.Kyverno {
		rules[r.Policy+"/"+r.Rule] = r
	}
	g.Expect(rules).To(HaveKeyWithValue(src+"-vars/per-team", And(
		HaveField("MirrorPolicies", BeEmpty()),
		HaveField("Decisions", ConsistOf(ContainSubstring("uses the variable {{request.object.metadata.labels.source}}"))))))
	g.Expect(rules).To(HaveKeyWithValue(src+"-vars/defaults", And(
		HaveField("MirrorPolicies", BeEmpty()),
		HaveField("Decisions", ConsistOf(ContainSubstring("generate.data"))))))
	g.Expect(rules).To(HaveKeyWithValue(src+"-list/copy", And(HaveField("Decisions", BeEmpty()), HaveField("MirrorPolicies", HaveLen(2)))))

	// Nothing was written, and no MirrorPolicy exists.
	g.Expect(resourceVersions(g, k8s)).To(Equal(before))
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MirrorPolicyList"))
	g.Expect(k8s.List(ctx, list)).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
}
