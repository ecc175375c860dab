package cli_test

import (
	stdslices "slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/policy"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Parts of the generate rules of TestTranslateKyvernoShapes, in YAML at
// the level of a rule's fields.
const (
	matchNamespaces = "match: {any: [{resources: {kinds: [Namespace]}}]}"
	generateRegcred = `generate:
  apiVersion: v1
  kind: Secret
  name: regcred
  namespace: "{{request.object.metadata.name}}"
  synchronize: true
  clone: {namespace: platform, name: regcred}`
)

// Parts of rules triggered by a ConfigMap (or another kind than
// Namespace): Kyverno's example, a Secret cloned when a ConfigMap test-org
// labelled create-secret: "true" is created, into its namespace.
const (
	matchTestOrg      = "match: {any: [{resources: {kinds: [ConfigMap], names: [test-org], selector: {matchLabels: {create-secret: \"true\"}}}}]}"
	intoTriggers      = "namespace: \"{{ request.object.metadata.namespace }}\""
	intoEachNamespace = "namespace: \"{{request.object.metadata.name}}\""
)

// onTrigger is generateRegcred into the trigger's namespace, with each
// pair of old and new strings replaced.
func onTrigger(replace ...string) string {
	g := regenerate(intoEachNamespace, intoTriggers)
	for i := 0; i+1 < len(replace); i += 2 {
		g = strings.Replace(g, replace[i], replace[i+1], 1)
	}
	return g
}

// shape is a rule named copy made of parts, each a YAML block at the level
// of the rule's fields; a part replaces the default match or generate
// when it starts with the same key.
func shape(parts ...string) string {
	if !hasPart(parts, "match:") {
		parts = append([]string{matchNamespaces}, parts...)
	}
	if !hasPart(parts, "generate:") {
		parts = append(parts, generateRegcred)
	}
	text := "- name: copy\n"
	for _, p := range parts {
		text += "  " + strings.ReplaceAll(p, "\n", "\n  ") + "\n"
	}
	return "  " + strings.ReplaceAll(strings.TrimSuffix(text, "\n"), "\n", "\n  ") + "\n"
}

func hasPart(parts []string, prefix string) bool {
	for _, p := range parts {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// regenerate is generateRegcred with old replaced by with.
func regenerate(old, with string) string {
	return strings.Replace(generateRegcred, old, with, 1)
}

// TestTranslateKyvernoShapes pins what migrate makes of each shape of a
// Kyverno generate rule: the MirrorPolicies (all in platform, the source
// namespace), and the decisions and notes, each by a part of its text.
// A case with decisions and policies prints them to decide on; decisions
// without policies refuse the rule.
func TestTranslateKyvernoShapes(t *testing.T) {
	regcred := v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"regcred"}}
	shared := &metav1.LabelSelector{MatchLabels: map[string]string{"share": "true"}}
	ptr := func(s string) *string { return &s }
	all := []string{"all"}
	// A synchronized clone keeps its copies when its rule or policy goes,
	// as Kyverno does.
	orphan := v1alpha1.DeletionPolicyOrphan
	// A synchronized copy adopts Kyverno's clones of its source; one kept
	// when the policy goes is taken back when it is applied again.
	adoptKyverno, takeBack := []string{"kyverno"}, []string{"kyverno", "fleetmirror"}
	// Kyverno's example trigger: the ConfigMap test-org labelled
	// create-secret: "true".
	testOrg := &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"test-org"},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"create-secret": "true"}}}
	// What every trigger translation says: the permission the agent needs.
	watches := "trigger: the agent watches the ConfigMap objects (their metadata) to find the namespaces that hold a trigger, so it needs list and watch on them, or the MirrorPolicy reports KindNotMirrored: the member chart grants both on the kinds it mirrors"
	type want struct {
		policies                  map[string]v1alpha1.MirrorPolicySpec
		decisions, notes, without []string
	}
	for _, tc := range []struct {
		name string
		// namespace makes the policy a Policy of that namespace.
		namespace string
		rule      string
		want      want
	}{
		// What translates.
		{
			name: "clone into every namespace",
			rule: shape(),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}},
				notes:    []string{"synchronize: true with clone: the copies follow their source; deleting the rule or the policy leaves them, as Kyverno does", "generateExisting is off", "all skips the source's own namespace", "adopt: kyverno: the copies Kyverno made", "adopt: fleetmirror: the copies a deleted MirrorPolicy"},
			},
		}, {
			name: "names and globs in two filters",
			rule: shape("match:\n  any:\n  - resources: {kinds: [Namespace], names: [team-*, prod]}\n  - resources: {kinds: [v1/Namespace], names: [\"ns-?-x\"]}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"team-*", "prod", "ns-?-x"}}}},
		}, {
			name: "the name * in the legacy match.resources",
			rule: shape("match: {resources: {kinds: [Namespace], names: [\"*\"]}}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}}},
		}, {
			name: "namespaces, which Kyverno matches against a Namespace's name",
			rule: shape("match: {any: [{resources: {kinds: [Namespace], namespaces: [team-*]}}]}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"team-*"}}}},
		}, {
			name: "a label selector",
			rule: shape("match:\n  any:\n  - resources:\n      kinds: [Namespace]\n      selector:\n        matchLabels: {env: prod}\n        matchExpressions: [{key: team, operator: In, values: [a, b]}]"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaceSelector: ptr("env=prod,team in (a,b)")}}},
		}, {
			name: "cloneList of two kinds",
			rule: shape("generate:\n  namespace: \"{{ request.object.metadata.name }}\"\n  synchronize: true\n  generateExisting: true\n  cloneList:\n    namespace: platform\n    kinds: [v1/Secret, apps/v1/Deployment]\n    selector: {matchLabels: {share: \"true\"}}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{
				"sync-copy-secret":     {Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Selector: shared}, TargetNamespaces: all, Adopt: adoptKyverno},
				"sync-copy-deployment": {Source: v1alpha1.PolicySource{APIVersion: "apps/v1", Kind: "Deployment", Selector: shared}, TargetNamespaces: all, Adopt: adoptKyverno},
			}},
		}, {
			name: "a copy under another name",
			rule: shape(regenerate("name: regcred", "name: pull-secret")),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all, TargetName: "pull-secret"}}},
		}, {
			name: "synchronize: false",
			rule: shape(regenerate("synchronize: true", "synchronize: false")),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, TargetNamespaces: all, CopyOnce: true, Adopt: adoptKyverno}},
				notes:    []string{"synchronize: false: copyOnce", "a copy Kyverno made of the source counts as the copy made once"},
			},
		}, {
			name: "synchronize left out is false",
			rule: shape(regenerate("  synchronize: true\n", "")),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, TargetNamespaces: all, CopyOnce: true, Adopt: adoptKyverno}}},
		}, {
			name: "orphanDownstreamOnPolicyDelete",
			rule: shape(regenerate("synchronize: true", "synchronize: true\n  orphanDownstreamOnPolicyDelete: true")),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, TargetNamespaces: all, DeletionPolicy: v1alpha1.DeletionPolicyOrphan, Adopt: takeBack}},
				notes:    []string{"orphanDownstreamOnPolicyDelete: the copies follow their source; deleting the MirrorPolicy leaves them"},
			},
		}, {
			name: "orphanDownstreamOnPolicyDelete: false, the default, still keeps a clone's copies",
			rule: shape(regenerate("synchronize: true", "synchronize: true\n  orphanDownstreamOnPolicyDelete: false")),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}}},
		}, {
			name: "orphanDownstreamOnPolicyDelete without synchronize: copies made once are kept anyway",
			rule: shape(regenerate("synchronize: true", "synchronize: false\n  orphanDownstreamOnPolicyDelete: true")),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, TargetNamespaces: all, CopyOnce: true, Adopt: adoptKyverno}}},
		}, {
			name: "uid is left out",
			rule: shape(regenerate("synchronize: true", "synchronize: true\n  uid: 0b6f4b6c-0000-4000-8000-000000000000")),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}},
				notes:    []string{"generate.uid is left out"},
			},
		}, {
			name: "a context variable with a fixed value is substituted",
			rule: shape("context: [{name: source, variable: {value: regcred}}]", regenerate("name: regcred", "name: \"{{source}}\"")),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}}},
		}, {
			name: "exclude of the source namespace and the agent's default exclusions",
			rule: shape("exclude: {any: [{resources: {namespaces: [kube-system, platform, kube-public]}}]}"),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all, ExcludeNamespaces: []string{"kube-system", "kube-public"}}},
				notes:    []string{"exclude: kube-system, by spec.excludeNamespaces", "exclude: platform holds the source", "exclude: kube-public, by spec.excludeNamespaces"},
			},
		}, {
			name: "exclude of other names from every namespace",
			rule: shape("exclude: {any: [{resources: {namespaces: [kube-system, platform, kyverno]}}, {resources: {kinds: [Namespace], names: [legacy]}}]}"),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all,
					ExcludeNamespaces: []string{"kube-system", "kyverno", "legacy"}}},
				notes: []string{"exclude: kube-system", "exclude: platform", "exclude: kyverno, by spec.excludeNamespaces", "exclude: legacy, by spec.excludeNamespaces"},
			},
		}, {
			name: "exclude of names from names and a selector",
			rule: shape("match:\n  any:\n  - resources: {kinds: [Namespace], names: [a, b, team-*]}\n  - resources: {kinds: [Namespace], selector: {matchLabels: {env: prod}}}",
				"exclude: {any: [{resources: {names: [b]}}]}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"a", "team-*"},
				TargetNamespaceSelector: ptr("env=prod"), ExcludeNamespaces: []string{"b"}}}},
		}, {
			name: "exclude of other kinds never excludes a Namespace",
			rule: shape("exclude: {any: [{resources: {kinds: [Pod], names: [x]}}]}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}}},
		}, {
			name: "exclude by namespaceSelector never excludes a Namespace",
			rule: shape("exclude: {any: [{resources: {namespaceSelector: {matchLabels: {a: b}}}}]}"),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}},
				notes:    []string{"Kyverno does not apply namespaceSelector to a Namespace"},
			},
		}, {
			name: "exclude by one label",
			rule: shape("exclude: {any: [{resources: {kinds: [Namespace], selector: {matchLabels: {env: dev}}}}, {resources: {selector: {matchExpressions: [{key: legacy, operator: Exists}]}}}]}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack,
				TargetNamespaceSelector: ptr("kubernetes.io/metadata.name notin (kube-node-lease,kube-public,kube-system),env!=dev,!legacy")}}},
		}, {
			name: "a Role: printed, with the flag the agent needs",
			rule: shape(regenerate("apiVersion: v1\n  kind: Secret", "apiVersion: rbac.authorization.k8s.io/v1\n  kind: Role")),
			want: want{
				policies:  map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: v1alpha1.PolicySource{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Names: []string{"regcred"}}, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}},
				decisions: []string{"Role hands out privileges: the member agent refuses to mirror it unless it runs with --allow-privilege-kinds"},
			},
		}, {
			name: "a ServiceAccount in a cloneList with a Secret",
			rule: shape("generate:\n  namespace: \"{{request.object.metadata.name}}\"\n  synchronize: true\n  cloneList: {namespace: platform, kinds: [v1/Secret, v1/ServiceAccount], selector: {matchLabels: {share: \"true\"}}}"),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{
					"sync-copy-secret":         {Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Selector: shared}, TargetNamespaces: all, Adopt: adoptKyverno},
					"sync-copy-serviceaccount": {Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "ServiceAccount", Selector: shared}, TargetNamespaces: all, Adopt: adoptKyverno},
				},
				decisions: []string{"ServiceAccount hands out privileges"},
			},
		}, {
			name: "a kind the agent does not discover",
			rule: shape(regenerate("kind: Secret", "kind: PersistentVolumeClaim")),
			want: want{
				policies:  map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "PersistentVolumeClaim", Names: []string{"regcred"}}, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all}},
				decisions: []string{"does not discover PersistentVolumeClaim for mirroring (its built-in deny list); it mirrors one only when --resource-types names the kind"},
			},
		},

		// Triggers other than a Namespace: copies into the namespaces that
		// hold a matching object.
		{
			name: "a ConfigMap by name and label triggers a copy into its namespace",
			rule: shape(matchTestOrg, onTrigger()),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all, Trigger: testOrg}},
				notes: []string{watches, "for another kind, grant them to the agent's ServiceAccount (rbac.extraRules)",
					"trigger: ConfigMap is the built-in v1 ConfigMap: a kind without its API group also matches, in Kyverno, a ConfigMap of any other group",
					"synchronize: true with a trigger: a namespace's copy is deleted once no ConfigMap there matches the trigger (deleted, or changed so that it no longer matches)",
					"a trigger in platform, the source's namespace, makes no copy there: the copy would have the source's name and replace it, and the agent never overwrites a source",
					"all skips the source's own namespace", "generateExisting is off: Kyverno copied only for the triggers created or changed after the policy"},
				without: []string{"Kyverno ties a copy to the one object", "all takes in the source's own namespace"},
			},
		}, {
			name: "a trigger of GROUP/VERSION/KIND in some namespaces",
			rule: shape("match: {any: [{resources: {kinds: [apps/v1/Deployment], namespaces: [team-*, prod], operations: [UPDATE, CREATE]}}]}", onTrigger()),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"team-*", "prod"},
					Trigger: &v1alpha1.PolicyTrigger{APIVersion: "apps/v1", Kind: "Deployment"}}},
				notes:   []string{"trigger: the agent watches the Deployment.apps objects", "Kyverno ties a copy to the one object that triggered it, so with several in a namespace it may delete the copy while another is still there"},
				without: []string{"is the built-in", "makes no copy there"},
			},
		}, {
			name: "a trigger in the one namespace generate.namespace names",
			rule: shape("match: {any: [{resources: {kinds: [v1/ConfigMap], names: [test-org], namespaces: [prod]}}]}", onTrigger(intoTriggers, "namespace: prod")),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"prod"},
				Trigger: &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"test-org"}}}}},
		}, {
			name:      "a Policy copies into its own namespace",
			namespace: "platform",
			rule:      shape(matchTestOrg, onTrigger(intoTriggers, "namespace: platform", "name: regcred", "name: pull-secret")),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"platform"}, TargetName: "pull-secret", Trigger: testOrg}},
				notes:    []string{watches},
				without:  []string{"makes no copy there"},
			},
		}, {
			name:      "a Policy copies into the trigger's namespace, its own",
			namespace: "platform",
			rule:      shape(strings.Replace(matchTestOrg, "names: [test-org], ", "namespaces: [plat*], ", 1), onTrigger("name: regcred", "name: pull-secret")),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"platform"}, TargetName: "pull-secret",
				Trigger: &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Selector: testOrg.Selector}}}},
		}, {
			name: "a trigger, synchronize: false",
			rule: shape(matchTestOrg, onTrigger("synchronize: true", "synchronize: false")),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, CopyOnce: true, Adopt: adoptKyverno, TargetNamespaces: all, Trigger: testOrg}},
				notes:    []string{watches, "synchronize: false: copyOnce: each copy is made once and then left to its namespace (not updated, not made again once deleted, kept when the source, the MirrorPolicy or the trigger goes)"},
				without:  []string{"synchronize: true with a trigger"},
			},
		}, {
			name: "a trigger, a copy under another name, also beside its source",
			rule: shape(matchTestOrg, onTrigger("name: regcred", "name: pull-secret")),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all, TargetName: "pull-secret", Trigger: testOrg}},
				notes:    []string{watches, "all skips the agent's --excluded-namespaces", "all takes in the source's own namespace too: the copies have another name (targetName)"},
				without:  []string{"makes no copy there", "all skips the source's own namespace"},
			},
		}, {
			name: "a trigger, alternatives by name",
			rule: shape("match:\n  any:\n  - resources: {kinds: [ConfigMap], names: [a]}\n  - resources: {kinds: [v1/ConfigMap], name: b}", onTrigger()),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all,
					Trigger: &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"a", "b"}}}},
				notes: []string{"Kyverno ties a copy to the one object that triggered it"},
			},
		}, {
			name: "a trigger, exclusions by namespace and by label",
			rule: shape(matchTestOrg, onTrigger(),
				"exclude: {any: [{resources: {namespaces: [legacy-*, platform]}}, {resources: {kinds: [ConfigMap], selector: {matchLabels: {frozen: \"true\"}}}}, {resources: {kinds: [Secret], names: [x]}}]}"),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all, ExcludeNamespaces: []string{"legacy-*"},
					Trigger: &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"test-org"}, Selector: &metav1.LabelSelector{
						MatchLabels:      map[string]string{"create-secret": "true"},
						MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "frozen", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"true"}}},
					}}}},
				notes:   []string{"exclude: legacy-*, by spec.excludeNamespaces", "exclude: platform holds the source", "exclude: by label, the trigger's selector create-secret=true,frozen notin (true)"},
				without: []string{"makes no copy there"},
			},
		}, {
			name: "cloneList on a trigger",
			rule: shape(matchTestOrg, "generate:\n  "+intoTriggers+"\n  synchronize: true\n  cloneList: {namespace: platform, kinds: [v1/Secret], selector: {matchLabels: {share: \"true\"}}}"),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Selector: shared}, Adopt: adoptKyverno, TargetNamespaces: all, Trigger: testOrg}},
				notes:    []string{watches, "a trigger in platform, the source's namespace, makes no copy there"},
			},
		}, {
			name: "a trigger of the kind copied",
			rule: shape("match: {any: [{resources: {kinds: [Secret], names: [regcred]}}]}", onTrigger()),
			want: want{
				policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all,
					Trigger: &v1alpha1.PolicyTrigger{APIVersion: "v1", Kind: "Secret", Names: []string{"regcred"}}}},
				notes: []string{"the trigger's kind is the kind copied: a copy that matches the trigger itself is a trigger too"},
			},
		},

		// What is refused, and why.
		{
			name: "a variable in generate.name",
			rule: shape(regenerate("name: regcred", "name: \"{{request.object.metadata.labels.secret}}\"")),
			want: want{decisions: []string{`generate.name "{{request.object.metadata.labels.secret}}" uses the variable {{request.object.metadata.labels.secret}}: the copies' name is known only when Kyverno runs the rule`}},
		}, {
			name: "a variable in the source",
			rule: shape(regenerate("clone: {namespace: platform, name: regcred}", "clone: {namespace: platform, name: \"{{request.object.metadata.labels.secret}}\"}")),
			want: want{decisions: []string{"uses the variable {{request.object.metadata.labels.secret}}: its value is known only when Kyverno runs the rule"}},
		}, {
			name: "a generate.name that is no object name",
			rule: shape(regenerate("name: regcred", "name: Pull_Secret")),
			want: want{decisions: []string{`generate.name "Pull_Secret" is not a valid object name`}},
		}, {
			name: "clone without namespace",
			rule: shape(regenerate("clone: {namespace: platform, name: regcred}", "clone: {name: regcred}")),
			want: want{decisions: []string{"the rule names no source namespace (clone.namespace or cloneList.namespace): Kyverno refuses such a cloneList of a namespaced kind, and looks the source of such a clone up as a cluster-scoped object, finding none; a MirrorPolicy without a namespace would copy out of whatever namespace kubectl apply uses"}},
		}, {
			name: "cloneList without namespace",
			rule: shape("generate:\n  namespace: \"{{request.object.metadata.name}}\"\n  synchronize: true\n  cloneList: {kinds: [v1/Secret], selector: {matchLabels: {share: \"true\"}}}"),
			want: want{decisions: []string{"the rule names no source namespace"}},
		}, {
			name: "a cluster-scoped kind",
			rule: shape(regenerate("apiVersion: v1\n  kind: Secret", "apiVersion: rbac.authorization.k8s.io/v1\n  kind: ClusterRole")),
			want: want{decisions: []string{"ClusterRole is cluster-scoped: a MirrorPolicy copies namespaced objects of its own namespace into other namespaces"}},
		}, {
			name: "a cluster-scoped kind without clone.namespace, as Kyverno writes it",
			rule: shape(strings.Replace(regenerate("apiVersion: v1\n  kind: Secret", "apiVersion: rbac.authorization.k8s.io/v1\n  kind: ClusterRoleBinding"), "namespace: platform, ", "", 1)),
			want: want{decisions: []string{"ClusterRoleBinding is cluster-scoped"}},
		}, {
			name: "MirrorPolicies are never mirrored",
			rule: shape(regenerate("apiVersion: v1\n  kind: Secret", "apiVersion: fleetmirror.io/v1alpha1\n  kind: MirrorPolicy")),
			want: want{decisions: []string{"MirrorPolicy objects are never mirrored"}},
		}, {
			name: "preconditions",
			rule: shape("preconditions: {all: [{key: \"{{request.object.metadata.labels.tier}}\", operator: Equals, value: gold}]}"),
			want: want{decisions: []string{"preconditions: Kyverno tests them on each namespace when it runs the rule; a MirrorPolicy has no conditions"}},
		}, {
			name: "context lookups and expressions",
			rule: shape("context:\n- {name: cm, configMap: {name: c, namespace: platform}}\n- {name: nm, variable: {jmesPath: request.object.metadata.name}}\n- {name: d, variable: {value: x, default: y}}"),
			want: want{decisions: []string{"context: cm is looked up (configMap)", "context: nm is computed when Kyverno runs the rule", "context: d is computed"}},
		}, {
			name: "generate.data",
			rule: shape("generate:\n  apiVersion: v1\n  kind: ConfigMap\n  name: defaults\n  namespace: \"{{request.object.metadata.name}}\"\n  data: {data: {a: b}}"),
			want: want{decisions: []string{"generate.data creates an object"}},
		}, {
			name: "foreach",
			rule: shape("generate:\n  generateExisting: true\n  foreach: [{list: request.object.data, namespace: x}]"),
			want: want{decisions: []string{"generate.foreach: a MirrorPolicy has no counterpart"}},
		}, {
			name: "a namespace from a label",
			rule: shape(regenerate("request.object.metadata.name", "request.object.metadata.labels.team")),
			want: want{decisions: []string{`generate.namespace "{{request.object.metadata.labels.team}}" uses a variable`}},
		}, {
			name: "a fixed namespace",
			rule: shape(regenerate("\"{{request.object.metadata.name}}\"", "prod")),
			want: want{decisions: []string{`generate.namespace "prod": Kyverno copies into that one namespace`}},
		}, {
			name: "names that do not translate",
			rule: shape("match: {any: [{resources: {kinds: [Namespace], names: [team.a, \"ns-?\", all, Team]}}]}"),
			want: want{decisions: []string{
				`match: names: "team.a": in Kyverno's patterns '.'`,
				`match: names: "ns-?": at the end of a pattern`,
				`match: names: "all": in fleetmirror, all is a keyword`,
				`match: names: "Team": 'T' is no character`,
			}},
		}, {
			name: "a trigger with preconditions",
			rule: shape(matchTestOrg, onTrigger(), "preconditions: {all: []}"),
			want: want{decisions: []string{"preconditions: Kyverno tests them"}},
		}, {
			name: "a Namespace and another kind",
			rule: shape("match: {any: [{resources: {kinds: [Namespace, ConfigMap]}}]}"),
			want: want{decisions: []string{"match: kinds [Namespace ConfigMap]: a trigger is one kind; Kyverno copies when a Namespace or an object of another kind is created or changed"}},
		}, {
			name: "a Namespace and another kind in two filters",
			rule: shape("match: {any: [{resources: {kinds: [Namespace]}}, {resources: {kinds: [ConfigMap]}}]}", onTrigger()),
			want: want{decisions: []string{"match: kinds [Namespace ConfigMap]: a trigger is one kind"}},
		}, {
			name: "two trigger kinds",
			rule: shape("match: {any: [{resources: {kinds: [ConfigMap, apps/v1/Deployment], names: [test-org]}}]}", onTrigger()),
			want: want{decisions: []string{"match: kinds [ConfigMap apps/v1/Deployment]: a trigger is one kind; Kyverno copies when an object of any of them is created or changed"}},
		}, {
			name: "wildcards and a '.' in a trigger's names",
			rule: shape("match: {any: [{resources: {kinds: [ConfigMap], names: [test-*, \"org-?\", app.config]}}]}", onTrigger()),
			want: want{decisions: []string{
				`match: names: "test-*": a wildcard; a trigger names its objects exactly`,
				`match: names: "org-?": a wildcard`,
				`match: names: "app.config": in Kyverno's patterns '.' is any one character, so it also matches other names`,
			}},
		}, {
			name: "a wildcard in a trigger's selector",
			rule: shape("match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {team: \"a*\"}}}}]}", onTrigger()),
			want: want{decisions: []string{"match: selector: team=a*: Kyverno's wildcards in labels have no counterpart in a label selector"}},
		}, {
			name: "a fixed namespace, triggers anywhere",
			rule: shape(matchTestOrg, onTrigger(intoTriggers, "namespace: prod")),
			want: want{decisions: []string{`generate.namespace "prod": Kyverno copies into prod whenever a trigger appears in any namespace match allows; a trigger narrows the targets to the namespaces that hold one, so only a match restricted to namespaces: [prod] translates`}},
		}, {
			name: "a fixed namespace, triggers in it and in another",
			rule: shape("match: {any: [{resources: {kinds: [ConfigMap], namespaces: [prod, staging]}}]}", onTrigger(intoTriggers, "namespace: prod")),
			want: want{decisions: []string{`generate.namespace "prod": Kyverno copies into prod whenever a trigger appears`}},
		}, {
			name: "the name of a trigger as the namespace",
			rule: shape(matchTestOrg),
			want: want{decisions: []string{`generate.namespace "{{request.object.metadata.name}}" uses a variable: with a trigger of kind ConfigMap, only {{request.object.metadata.namespace}}, the trigger's namespace, translates`}},
		}, {
			name:      "a Policy copying into another namespace",
			namespace: "platform",
			rule:      shape(matchTestOrg, onTrigger(intoTriggers, "namespace: prod", "name: regcred", "name: pull-secret")),
			want:      want{decisions: []string{`generate.namespace "prod": a Policy copies only into its own namespace, platform (Kyverno refuses another); only platform or {{request.object.metadata.namespace}} translates`}},
		}, {
			name:      "a Policy cloning from another namespace",
			namespace: "default",
			rule:      shape(matchTestOrg, onTrigger(intoTriggers, "namespace: default", "name: regcred", "name: pull-secret")),
			want:      want{decisions: []string{"the source namespace platform: a Policy in default clones only objects of its own namespace (Kyverno refuses another)"}},
		}, {
			name:      "a Policy whose triggers are in other namespaces",
			namespace: "platform",
			rule:      shape("match: {any: [{resources: {kinds: [ConfigMap], namespaces: [team-*]}}]}", onTrigger("name: regcred", "name: pull-secret")),
			want:      want{decisions: []string{"match: namespaces [team-*] leave out platform, the Policy's namespace, the only one whose objects trigger it: the rule copies nothing"}},
		}, {
			name:      "a Policy whose copy would be its source",
			namespace: "platform",
			rule:      shape(matchTestOrg, onTrigger()),
			want:      want{decisions: []string{"the triggers can only be in platform, which holds the source, and the copies have the source's name: the copy would be its source"}},
		}, {
			name: "trigger kinds without a group, cluster-scoped, a subresource",
			rule: shape("match:\n  any:\n  - resources: {kinds: [Widget]}\n  - resources: {kinds: [v1/Widget]}\n  - resources: {kinds: [Node]}\n  - resources: {kinds: [Pod/exec]}\n  - resources: {kinds: [v2/Deployment]}", onTrigger()),
			want: want{decisions: []string{
				`match: kinds: "Widget" has no API group: Kyverno matches a Widget of any group; write GROUP/VERSION/KIND`,
				`match: kinds: "v1/Widget" has no API group`,
				`match: kinds: "Node": Node is cluster-scoped`,
				`match: kinds: "Pod/exec": a subresource`,
				`match: kinds: "v2/Deployment": the built-in Deployment is apps/v1`,
			}},
		}, {
			name: "a trigger by namespaceSelector, annotations, on CREATE alone, by who",
			rule: shape("match:\n  any:\n  - resources: {kinds: [ConfigMap], namespaceSelector: {matchLabels: {a: b}}}\n  - resources: {kinds: [ConfigMap], annotations: {a: b}}\n  - resources: {kinds: [ConfigMap], operations: [CREATE]}\n  - resources: {kinds: [ConfigMap]}\n    subjects: [{kind: User, name: alice}]", onTrigger()),
			want: want{decisions: []string{
				"match: namespaceSelector: Kyverno tests the labels of a trigger's namespace",
				"match: annotations: a trigger selects its objects by name or label",
				"match: operations [CREATE]: Kyverno copies on these requests only",
				"match: subjects, roles and clusterRoles select who makes the request; a MirrorPolicy does not look at who creates its trigger",
			}},
		}, {
			name: "trigger alternatives of different selectors",
			rule: shape("match:\n  any:\n  - resources: {kinds: [ConfigMap], names: [a], selector: {matchLabels: {tier: gold}}}\n  - resources: {kinds: [ConfigMap], names: [b]}", onTrigger()),
			want: want{decisions: []string{"match: the filters differ in namespaces or selector: a trigger has one selector"}},
		}, {
			name: "a trigger excluded by name",
			rule: shape(matchTestOrg, onTrigger(), "exclude: {any: [{resources: {kinds: [ConfigMap], names: [old]}}]}"),
			want: want{decisions: []string{"exclude: names: a trigger has no exclusion by name"}},
		}, {
			name: "namespaceSelector, names and namespaces, annotations, who",
			rule: shape("match:\n  any:\n  - resources: {kinds: [Namespace], namespaceSelector: {matchLabels: {a: b}}}\n  - resources: {kinds: [Namespace], names: [a], namespaces: [b]}\n  - resources: {kinds: [Namespace], annotations: {a: b}}\n  - resources: {kinds: [Namespace]}\n    subjects: [{kind: User, name: alice}]"),
			want: want{decisions: []string{
				"match: namespaceSelector: Kyverno does not apply it to a Namespace",
				"match: names and namespaces together",
				"match: annotations: a MirrorPolicy selects namespaces by name or label",
				"match: subjects, roles and clusterRoles",
			}},
		}, {
			name: "names and a selector in one filter; two selectors",
			rule: shape("match:\n  any:\n  - resources: {kinds: [Namespace], names: [a], selector: {matchLabels: {env: prod}}}\n  - resources: {kinds: [Namespace], selector: {matchLabels: {env: prod}}}\n  - resources: {kinds: [Namespace], selector: {matchLabels: {env: staging}}}"),
			want: want{decisions: []string{"match: names and selector together"}},
		}, {
			name: "two selectors",
			rule: shape("match:\n  any:\n  - resources: {kinds: [Namespace], selector: {matchLabels: {env: prod}}}\n  - resources: {kinds: [Namespace], selector: {matchLabels: {env: staging}}}"),
			want: want{decisions: []string{"match: the selectors env=prod or env=staging are alternatives"}},
		}, {
			name: "exclude of a glob from every namespace",
			rule: shape("exclude: {any: [{resources: {namespaces: [kyverno-*]}}]}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: all, ExcludeNamespaces: []string{"kyverno-*"}}}},
		}, {
			name: "exclude of a name a glob entry includes",
			rule: shape("match: {any: [{resources: {kinds: [Namespace], names: [team-*]}}]}", "exclude: {any: [{resources: {names: [team-legacy]}}]}"),
			want: want{policies: map[string]v1alpha1.MirrorPolicySpec{"sync-copy": {Source: regcred, DeletionPolicy: orphan, Adopt: takeBack, TargetNamespaces: []string{"team-*"}, ExcludeNamespaces: []string{"team-legacy"}}}},
		}, {
			name: "exclude of everything matched",
			rule: shape("match: {any: [{resources: {kinds: [Namespace], names: [a]}}]}", "exclude: {any: [{resources: {names: [a]}}]}"),
			want: want{decisions: []string{"exclude: it excludes every namespace the rule matches"}},
		}, {
			name: "exclude of everything matched, by name and by label",
			rule: shape("match: {any: [{resources: {kinds: [Namespace], names: [a]}}]}", "exclude: {any: [{resources: {names: [a]}}, {resources: {selector: {matchLabels: {env: dev}}}}]}"),
			want: want{decisions: []string{"exclude: it excludes every namespace the rule matches"}},
		}, {
			name: "exclude.all of two filters",
			rule: shape("exclude: {all: [{resources: {names: [a]}}, {resources: {names: [b]}}]}"),
			want: want{decisions: []string{"exclude: all: Kyverno excludes a namespace only when every filter matches it"}},
		}, {
			name: "exclude by two labels together",
			rule: shape("exclude: {any: [{resources: {selector: {matchLabels: {env: dev, team: a}}}}]}"),
			want: want{decisions: []string{"exclude: selector: a namespace is excluded when it matches all of the selector's requirements"}},
		}, {
			name: "exclude by label from names",
			rule: shape("match: {any: [{resources: {kinds: [Namespace], names: [a]}}]}", "exclude: {any: [{resources: {selector: {matchLabels: {env: dev}}}}]}"),
			want: want{decisions: []string{"exclude: selector: excluding by label the namespaces that [a] name has no counterpart"}},
		}, {
			name: "cloneList without selector, with kinds that do not translate",
			rule: shape("generate:\n  namespace: \"{{request.object.metadata.name}}\"\n  synchronize: true\n  cloneList: {namespace: platform, kinds: [Secret, \"v1/*\"]}"),
			want: want{decisions: []string{"cloneList has no selector", `cloneList.kinds: "Secret" has no version`, `cloneList.kinds: "v1/*": a wildcard kind`}},
		}, {
			name: "a rule part the translation does not know",
			rule: shape("mutate: {patchStrategicMerge: {}}"),
			want: want{decisions: []string{"mutate: a MirrorPolicy has no counterpart"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rules := cli.TranslateKyverno(kyvernoPolicy(t, tc.namespace, "sync", tc.rule))
			g.Expect(rules).To(HaveLen(1))
			r := rules[0]
			g.Expect(r.Rule).To(Equal("copy"))
			got := map[string]v1alpha1.MirrorPolicySpec{}
			for _, p := range r.MirrorPolicies {
				g.Expect(p.Namespace).To(Equal("platform"))
				g.Expect(policy.Request(&p.Spec).Problems).To(BeEmpty())
				got[p.Name] = p.Spec
			}
			if tc.want.policies == nil {
				g.Expect(got).To(BeEmpty(), "%q", r.Decisions)
			} else {
				g.Expect(got).To(Equal(tc.want.policies), "%q", r.Decisions)
			}
			g.Expect(r.Decisions).To(HaveLen(len(tc.want.decisions)), "%q", r.Decisions)
			for i, d := range tc.want.decisions {
				g.Expect(r.Decisions[i]).To(ContainSubstring(d))
			}
			for _, n := range tc.want.notes {
				g.Expect(r.Notes).To(ContainElement(ContainSubstring(n)))
			}
			for _, n := range tc.want.without {
				g.Expect(r.Notes).NotTo(ContainElement(ContainSubstring(n)))
			}
		})
	}
}

// TestTranslateKyvernoRulesOfAPolicy: a rule without generate is not for
// migrate; each generate rule of a policy is translated on its own.
func TestTranslateKyvernoRulesOfAPolicy(t *testing.T) {
	g := NewWithT(t)
	p := kyvernoPolicy(t, "", "sync", "  - name: check\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate: {message: x, pattern: {}}\n"+
		shape()+strings.Replace(shape(regenerate("synchronize: true", "synchronize: false")), "name: copy", "name: once", 1))
	rules := cli.TranslateKyverno(p)
	g.Expect(rules).To(HaveLen(2))
	g.Expect(rules[0].MirrorPolicies).To(ConsistOf(HaveField("Spec.CopyOnce", false)))
	g.Expect(rules[1].MirrorPolicies).To(ConsistOf(And(HaveField("Name", "sync-once"), HaveField("Spec.CopyOnce", true))))
}

// FuzzKyvernoExclude: a rule that copies into the namespaces match names
// (or every namespace) except those exclude names translates into targets
// that reach exactly the namespaces Kyverno copies into, leaving out the
// source's namespace and the agent's default exclusions, which fleetmirror
// never targets; or it is a decision.
func FuzzKyvernoExclude(f *testing.F) {
	for _, seed := range [][3]string{
		{"*", "kyverno", "kyverno"}, {"*", "kube-system", "a"}, {"a", "a", "a"}, {"team-*", "team-a", "team-b"},
		{"*", "team-*", "team-x"}, {"ab", "a?", "ab"}, {"*", "platform", "platform"}, {"a-*", "b", "a-1"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	base := kyvernoPolicy(f, "", "sync", shape("match: {any: [{resources: {kinds: [Namespace], names: [x]}}]}", "exclude: {any: [{resources: {names: [y]}}]}"))
	f.Fuzz(func(t *testing.T, include, exclude, name string) {
		name = strings.Map(func(r rune) rune { return rune("ab-1x"[int(r)%5]) }, name)
		if len(validation.IsDNS1123Label(name)) > 0 || name == "platform" || stdslices.Contains(targets.DefaultExcludedNamespaces, name) {
			return
		}
		p := base.DeepCopy()
		setRuleField(t, p, []string{include}, "match", "any", "0", "resources", "names")
		setRuleField(t, p, []string{exclude}, "exclude", "any", "0", "resources", "names")
		spec := translatedSpec(t, p, include+" without "+exclude)
		if spec == nil {
			return
		}
		req := annotations.Parse(nil, policy.Annotations(spec))
		if len(req.Problems) > 0 {
			t.Fatalf("%q without %q: %q", include, exclude, req.Problems)
		}
		ours := (stdslices.ContainsFunc(req.Local, func(p annotations.Pattern) bool { return p.Match(name) }) ||
			req.NamespaceSelector != nil && req.NamespaceSelector.Matches(labels.Set{"kubernetes.io/metadata.name": name})) &&
			!req.ExcludeNamespaces.Match(name)
		theirs := kyvernoMatches(include, name) && !kyvernoMatches(exclude, name)
		if ours != theirs {
			t.Fatalf("%q without %q became %q, selector %q: on %q, Kyverno copies %v and fleetmirror %v",
				include, exclude, spec.TargetNamespaces, ptrString(spec.TargetNamespaceSelector), name, theirs, ours)
		}
	})
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// A policy that writes its copies with server-side apply
// (spec.useServerSideApply) keeps what other writers add to a
// synchronized copy: keepAdditions. A copy made once is left to its
// namespace anyway.
func TestTranslateKyvernoServerSideApply(t *testing.T) {
	g := NewWithT(t)
	for _, ssa := range []bool{false, true} {
		p := kyvernoPolicy(t, "", "sync", shape()+strings.Replace(shape(regenerate("synchronize: true", "synchronize: false")), "name: copy", "name: once", 1))
		g.Expect(unstructured.SetNestedField(p.Object, ssa, "spec", "useServerSideApply")).To(Succeed())
		rules := cli.TranslateKyverno(p)
		g.Expect(rules).To(HaveLen(2))
		g.Expect(rules[0].MirrorPolicies).To(HaveLen(1))
		g.Expect(rules[0].MirrorPolicies[0].Spec.KeepAdditions).To(Equal(ssa))
		if ssa {
			g.Expect(rules[0].Notes).To(ContainElement(ContainSubstring("useServerSideApply: keepAdditions")))
			g.Expect(rules[0].Notes).NotTo(ContainElement(ContainSubstring("a key added to a copy is removed")))
		}
		g.Expect(rules[1].MirrorPolicies).To(HaveLen(1))
		g.Expect(rules[1].MirrorPolicies[0].Spec.CopyOnce).To(BeTrue())
		g.Expect(rules[1].MirrorPolicies[0].Spec.KeepAdditions).To(BeFalse())
	}
}
