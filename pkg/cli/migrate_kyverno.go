package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
	"github.com/fleetmirror/fleetmirror/pkg/policy"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// Kyverno's policy kinds, kyverno.io/v1: ClusterPolicy (cluster-scoped)
// and Policy (namespaced).
var (
	kyvernoClusterPolicies = schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}
	kyvernoPolicies        = schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "policies"}
)

// KyvernoRule is one Kyverno generate rule and the MirrorPolicies that do
// what it does. migrate prints them; it never creates them.
type KyvernoRule struct {
	// Kind is ClusterPolicy or Policy; Namespace is the Policy's.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Policy    string `json:"policy"`
	Rule      string `json:"rule"`
	// SourceNamespace holds the objects the rule copies (clone.namespace
	// or cloneList.namespace): where the MirrorPolicies go.
	SourceNamespace string `json:"sourceNamespace,omitempty"`
	// MirrorPolicies are the translation, one per kind the rule copies.
	// Empty when the rule's source or targets have no exact translation.
	MirrorPolicies []v1alpha1.MirrorPolicy `json:"mirrorPolicies"`
	Notes          []string                `json:"notes,omitempty"`
	// Decisions say why the rule does not translate. With MirrorPolicies,
	// they say what the member agent needs to mirror the kind (a flag):
	// decide before applying them.
	Decisions []string `json:"decisions,omitempty"`
}

// scanKyverno reads Kyverno's ClusterPolicies and Policies (those of
// namespace, unless it is "") and adds the translation of their generate
// rules to mig: with a namespace, only the rules that copy from it. A
// cluster without Kyverno's CRDs has nothing to translate; one where the
// user may not list them gets a note.
func (c *Migrator) scanKyverno(ctx context.Context, namespace string, mig *Migration) error {
	for _, res := range []schema.GroupVersionResource{kyvernoClusterPolicies, kyvernoPolicies} {
		ns := namespace
		if res == kyvernoClusterPolicies {
			ns = ""
		}
		items, err := c.listObjects(ctx, res, ns)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsForbidden(err):
			mig.Notes = append(mig.Notes, fmt.Sprintf("Kyverno %s were not read: %v", res.Resource, err))
			continue
		case err != nil:
			return fmt.Errorf("listing %s: %w", res.GroupResource(), err)
		}
		for i := range items {
			for _, r := range TranslateKyverno(&items[i]) {
				if namespace == "" || r.SourceNamespace == namespace || r.Namespace == namespace {
					mig.Kyverno = append(mig.Kyverno, r)
				}
			}
		}
	}
	sort.SliceStable(mig.Kyverno, func(i, j int) bool {
		a, b := mig.Kyverno[i], mig.Kyverno[j]
		return a.Kind+"/"+a.Namespace+"/"+a.Policy+"/"+a.Rule < b.Kind+"/"+b.Namespace+"/"+b.Policy+"/"+b.Rule
	})
	return nil
}

// listObjects pages through the objects of resource in namespace ("" for
// all, or a cluster-scoped resource).
func (c *Migrator) listObjects(ctx context.Context, resource schema.GroupVersionResource, namespace string) ([]unstructured.Unstructured, error) {
	var items []unstructured.Unstructured
	opts := metav1.ListOptions{Limit: 500}
	for {
		var (
			l   *unstructured.UnstructuredList
			err error
		)
		if namespace != "" {
			l, err = c.dyn.Resource(resource).Namespace(namespace).List(ctx, opts)
		} else {
			l, err = c.dyn.Resource(resource).List(ctx, opts)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, l.Items...)
		if l.GetContinue() == "" {
			return items, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// The parts of a Kyverno rule that the translation reads, as
// kyverno.io/v1 spells them.
type (
	kyvernoMatch struct {
		Any []kyvernoFilter `json:"any"`
		All []kyvernoFilter `json:"all"`
		kyvernoFilter
	}
	kyvernoFilter struct {
		Resources    *kyvernoResources `json:"resources"`
		Subjects     []any             `json:"subjects"`
		Roles        []string          `json:"roles"`
		ClusterRoles []string          `json:"clusterRoles"`
	}
	kyvernoResources struct {
		Kinds             []string              `json:"kinds"`
		Name              string                `json:"name"`
		Names             []string              `json:"names"`
		Namespaces        []string              `json:"namespaces"`
		Annotations       map[string]string     `json:"annotations"`
		Selector          *metav1.LabelSelector `json:"selector"`
		NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
		Operations        []string              `json:"operations"`
	}
	kyvernoGenerate struct {
		APIVersion                     string `json:"apiVersion"`
		Kind                           string `json:"kind"`
		Name                           string `json:"name"`
		Namespace                      string `json:"namespace"`
		UID                            string `json:"uid"`
		Synchronize                    bool   `json:"synchronize"`
		OrphanDownstreamOnPolicyDelete bool   `json:"orphanDownstreamOnPolicyDelete"`
		GenerateExisting               *bool  `json:"generateExisting"`
		Clone                          *struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"clone"`
		CloneList *struct {
			Namespace string                `json:"namespace"`
			Kinds     []string              `json:"kinds"`
			Selector  *metav1.LabelSelector `json:"selector"`
		} `json:"cloneList"`
	}
	// kyvernoContextEntry is one entry of a rule's context. Only a
	// variable with a fixed value translates: its value is substituted.
	kyvernoContextEntry struct {
		Name     string `json:"name"`
		Variable *struct {
			Value    any    `json:"value"`
			JMESPath string `json:"jmesPath"`
			Default  any    `json:"default"`
		} `json:"variable"`
	}
)

// Fields of a rule and of its generate block: those the translation
// reads, and those that change nothing a MirrorPolicy does. Any other
// field refuses the rule.
var (
	kyvernoRuleRead     = []string{"name", "match", "exclude", "generate", "context"}
	kyvernoRuleIgnored  = []string{"skipBackgroundRequests", "reportProperties"}
	kyvernoGenerateRead = []string{"apiVersion", "kind", "name", "namespace", "uid", "synchronize", "orphanDownstreamOnPolicyDelete", "generateExisting", "clone", "cloneList"}
)

// kyvernoEachNamespace is the generate.namespace that puts a copy into
// each matched Namespace.
var kyvernoEachNamespace = regexp.MustCompile(`^\{\{\s*request\.object\.metadata\.name\s*\}\}$`)

// kyvernoTriggerNamespace is the generate.namespace that puts a copy into
// the namespace of the object that triggered the rule.
var kyvernoTriggerNamespace = regexp.MustCompile(`^\{\{\s*request\.object\.metadata\.namespace\s*\}\}$`)

// TranslateKyverno translates the generate rules of a Kyverno
// ClusterPolicy or Policy; other rules are not for fleetmirror and are
// left out.
func TranslateKyverno(p *unstructured.Unstructured) []KyvernoRule {
	rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	var spec kyvernoPolicySpec
	spec.generateExisting, _, _ = unstructured.NestedBool(p.Object, "spec", "generateExisting")
	spec.useServerSideApply, _, _ = unstructured.NestedBool(p.Object, "spec", "useServerSideApply")
	var out []KyvernoRule
	for _, raw := range rules {
		rule, ok := raw.(map[string]any)
		if !ok || rule["generate"] == nil {
			continue
		}
		r := KyvernoRule{Kind: p.GetKind(), Namespace: p.GetNamespace(), Policy: p.GetName(), MirrorPolicies: []v1alpha1.MirrorPolicy{}}
		r.Rule, _ = rule["name"].(string)
		translateKyvernoRule(&r, rule, spec)
		out = append(out, r)
	}
	return out
}

// kyvernoPolicySpec are the fields of a policy's spec that its generate
// rules read.
type kyvernoPolicySpec struct {
	// generateExisting is the default of the rules' generateExisting.
	generateExisting bool
	// useServerSideApply: Kyverno writes the copies with server-side
	// apply, so fields other writers add to a copy are kept.
	useServerSideApply bool
}

// translateKyvernoRule fills r from rule. A rule translates only when the
// MirrorPolicies do exactly what it does (up to the differences
// docs/migration.md names); otherwise r gets no MirrorPolicies and a
// decision that says why. A decision that keeps the MirrorPolicies says
// what to do before applying them.
func translateKyvernoRule(r *KyvernoRule, rule map[string]any, policySpec kyvernoPolicySpec) {
	var blocked bool
	block := func(format string, args ...any) {
		blocked = true
		r.Decisions = append(r.Decisions, fmt.Sprintf(format, args...))
	}
	values, problems := kyvernoContext(rule["context"])

	// Where the copies go, first: the namespaces a rule triggered by a
	// Namespace matches, or the objects of another kind (a trigger) whose
	// namespaces get the copies.
	var match, exclude kyvernoMatch
	matchErr := strictDecode(kyvernoSubstitute(rule["match"], values), &match)
	excludeErr := strictDecode(kyvernoSubstitute(rule["exclude"], values), &exclude)
	v := kyvernoVariables(match, exclude)
	switch {
	case matchErr != nil:
		block("match: %v", matchErr)
	case excludeErr != nil:
		block("exclude: %v", excludeErr)
	case v != "":
		block("match or exclude uses the variable %s: its value is known only when Kyverno runs the rule", v)
	}
	var t kyvernoTargetSet
	var trig *kyvernoTrigger
	if matchErr == nil && v == "" {
		var decisions []string
		if kyvernoTriggered(match) {
			trig, decisions = kyvernoTriggerOf(match)
		} else {
			t, decisions = kyvernoTargets(match)
		}
		for _, d := range decisions {
			block("match: %s", d)
		}
	}

	// What else the rule says. The source namespace is known even for a
	// rule refused, so that migrate -n lists it with its namespace.
	var gen kyvernoGenerate
	if err := json.Unmarshal(mustJSON(kyvernoSubstitute(rule["generate"], values)), &gen); err != nil {
		block("generate: %v", err) // a field of the wrong type; unknown ones are refused below
	} else if ns := gen.sourceNamespace(); !strings.Contains(ns, "{{") {
		r.SourceNamespace = ns
	}
	for _, k := range sortedKeys(rule) {
		switch {
		case slices.Contains(kyvernoRuleRead, k), slices.Contains(kyvernoRuleIgnored, k):
		case k == "preconditions" || k == "celPreconditions":
			block("%s: Kyverno tests them on each namespace when it runs the rule; a MirrorPolicy has no conditions: say which namespaces in match (names, a label selector) and migrate again", k)
		default:
			block("%s: a MirrorPolicy has no counterpart", k)
		}
	}
	genRaw, _ := rule["generate"].(map[string]any)
	for _, k := range sortedKeys(genRaw) {
		switch {
		case slices.Contains(kyvernoGenerateRead, k):
		case k == "data":
			block("generate.data creates an object from the policy's own content, not a copy of an existing object: create a source that holds it, then a MirrorPolicy for it")
		default:
			block("generate.%s: a MirrorPolicy has no counterpart", k)
		}
	}
	for _, p := range problems {
		block("context: %s", p)
	}
	if blocked {
		return
	}
	// A copy under another name may go beside its source, into its
	// namespace; one under the source's name never does.
	renamed := gen.Clone != nil && gen.Name != "" && gen.Name != gen.Clone.Name
	own := r.SourceNamespace
	if renamed {
		own = ""
	}
	var notes, decisions []string
	if trig != nil {
		var d string
		if t, d = trig.targets(r, gen.Namespace); d != "" {
			block("%s", d)
		} else {
			notes, decisions = t.excludeTrigger(exclude, trig, own)
		}
	} else {
		notes, decisions = t.exclude(exclude, own)
	}
	for _, d := range decisions {
		block("exclude: %s", d)
	}
	r.Notes = append(r.Notes, notes...)
	if blocked {
		return
	}
	if v := kyvernoVariables(gen.Name); v != "" {
		block("generate.name %q uses the variable %s: the copies' name is known only when Kyverno runs the rule, and a MirrorPolicy names its copies once (spec.targetName)", gen.Name, v)
	}
	if v := kyvernoVariables(gen.Kind, gen.APIVersion, gen.Clone, gen.CloneList); v != "" {
		block("uses the variable %s: its value is known only when Kyverno runs the rule", v)
	}
	if blocked {
		return
	}

	// What is copied, and from where.
	var sources []v1alpha1.PolicySource
	spec := v1alpha1.MirrorPolicySpec{}
	switch {
	case gen.Clone != nil && gen.CloneList != nil:
		block("generate has both clone and cloneList")
	case gen.Clone != nil:
		src, err := kyvernoKind(gen.APIVersion + "/" + gen.Kind)
		if gen.APIVersion == "" || gen.Kind == "" {
			err = fmt.Errorf("generate.apiVersion and generate.kind must name the kind of clone")
		}
		switch {
		case err != nil:
			block("%v", err)
		case gen.Clone.Name == "":
			block("clone.name is empty: it names no object to copy")
		case gen.Name == "":
			block("generate.name is empty: Kyverno refuses such a rule (the name of the copies)")
		case gen.Name != gen.Clone.Name:
			if errs := validation.IsDNS1123Subdomain(gen.Name); len(errs) > 0 {
				block("generate.name %q is not a valid object name: %s", gen.Name, errs[0])
			}
			// Copies under another name: the one source, each copy named
			// as Kyverno names it.
			spec.TargetName = gen.Name
			fallthrough
		default:
			src.Names = []string{gen.Clone.Name}
			sources = append(sources, src)
		}
	case gen.CloneList != nil:
		if gen.Name != "" {
			block("generate.name %q with cloneList: the copies of a cloneList keep their sources' names", gen.Name)
		}
		if gen.CloneList.Selector == nil || len(gen.CloneList.Selector.MatchLabels)+len(gen.CloneList.Selector.MatchExpressions) == 0 {
			block("cloneList has no selector: it copies every object of its kinds, and a MirrorPolicy names its sources by name or by a selector that selects something")
		} else if w := kyvernoSelectorWildcard(gen.CloneList.Selector); w != "" {
			block("cloneList.selector: %s", w)
		}
		if len(gen.CloneList.Kinds) == 0 {
			block("cloneList.kinds is empty")
		}
		for _, k := range gen.CloneList.Kinds {
			src, err := kyvernoKind(k)
			if err != nil {
				block("cloneList.kinds: %v", err)
				continue
			}
			src.Selector = gen.CloneList.Selector.DeepCopy()
			sources = append(sources, src)
		}
	default:
		block("generate has neither clone nor cloneList")
	}
	for _, src := range sources {
		refusal, blocks := kyvernoKindRefusal(src, r.SourceNamespace)
		switch {
		case refusal == "":
		case blocks:
			block("%s", refusal)
		default:
			r.Decisions = append(r.Decisions, refusal)
		}
	}
	switch errs := validation.IsDNS1123Label(r.SourceNamespace); {
	case blocked:
	case r.SourceNamespace == "":
		block("the rule names no source namespace (clone.namespace or cloneList.namespace): Kyverno refuses such a cloneList of a namespaced kind, and looks the source of such a clone up as a cluster-scoped object, finding none; a MirrorPolicy without a namespace would copy out of whatever namespace kubectl apply uses")
	case len(errs) > 0:
		block("the source namespace %q is not a valid namespace name", r.SourceNamespace)
	case r.Namespace != "" && r.SourceNamespace != r.Namespace:
		block("the source namespace %s: a Policy in %s clones only objects of its own namespace (Kyverno refuses another)", r.SourceNamespace, r.Namespace)
	}

	switch {
	case trig != nil:
		// Where a trigger's copies go was decided with its targets.
		spec.Trigger = trig.trigger.DeepCopy()
		r.Notes = append(r.Notes, trig.notes(sources, spec.TargetName, gen.Synchronize)...)
		switch {
		case own == "" || !t.reaches(own):
		case slices.Equal(t.entries, []string{own}) && t.selector == "":
			block("the triggers can only be in %s, which holds the source, and the copies have the source's name: the copy would be its source, and the agent never overwrites a source, so the MirrorPolicy would copy nothing", own)
		default:
			r.Notes = append(r.Notes, fmt.Sprintf("a trigger in %s, the source's namespace, makes no copy there: the copy would have the source's name and replace it, and the agent never overwrites a source", own))
		}
	case kyvernoEachNamespace.MatchString(strings.TrimSpace(gen.Namespace)):
	case strings.Contains(gen.Namespace, "{{"):
		block("generate.namespace %q uses a variable: only {{request.object.metadata.name}}, each matched namespace, translates", gen.Namespace)
	case gen.Namespace == "":
		block("generate.namespace is empty: Kyverno copies into the policy's namespace (or makes a cluster-scoped copy); a MirrorPolicy copies into the namespaces it targets")
	default:
		block("generate.namespace %q: Kyverno copies into that one namespace whenever the rule matches; a MirrorPolicy copies into the namespaces it targets", gen.Namespace)
	}
	spec.TargetNamespaces = t.entries
	spec.ExcludeNamespaces = t.excluded
	if t.selector != "" {
		spec.TargetNamespaceSelector = &t.selector
	}
	if blocked {
		return
	}

	// How the copies are kept.
	switch {
	case !gen.Synchronize:
		spec.CopyOnce = true
		kept := "the source or the MirrorPolicy goes"
		if trig != nil {
			kept = "the source, the MirrorPolicy or the trigger goes"
		}
		r.Notes = append(r.Notes, "synchronize: false: copyOnce: each copy is made once and then left to its namespace (not updated, not made again once deleted, kept when "+kept+")")
	case gen.OrphanDownstreamOnPolicyDelete:
		spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
		r.Notes = append(r.Notes, "synchronize: true with orphanDownstreamOnPolicyDelete: the copies follow their source; deleting the MirrorPolicy leaves them as plain objects (deletionPolicy: Orphan)")
	case gen.Clone != nil:
		// Kyverno keeps the copy of a synchronized clone when its rule or
		// policy goes: its conformance tests cpol-clone-sync-delete-policy
		// and -delete-rule assert it, after kyverno/kyverno#1401 (the
		// policy is not the copy's source of truth; the cloned object is).
		spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
		r.Notes = append(r.Notes, "synchronize: true with clone: the copies follow their source; deleting the rule or the policy leaves them, as Kyverno does (deletionPolicy: Orphan)")
	default:
		added := ", and a key added to a copy is removed"
		if policySpec.useServerSideApply {
			added = ""
		}
		r.Notes = append(r.Notes, "synchronize: true: the copies follow their source"+added+"; deleting the MirrorPolicy deletes them (set deletionPolicy: Orphan to keep them)")
	}
	if gen.UID != "" {
		r.Notes = append(r.Notes, "generate.uid is left out: it is the UID of one object Kyverno made, which no copy of the agent has")
	}
	if policySpec.useServerSideApply && gen.Synchronize {
		// Kyverno applies the copy with its own field manager: what
		// another manager added stays, what the source sets is applied.
		spec.KeepAdditions = true
		r.Notes = append(r.Notes, "useServerSideApply: keepAdditions: keys and labels other writers add to a copy stay; those the source has keep the source's values")
	}
	if existing := gen.GenerateExisting; (existing == nil && !policySpec.generateExisting) || (existing != nil && !*existing) {
		if trig != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("generateExisting is off: Kyverno copied only for the triggers created or changed after the policy; the MirrorPolicy also copies into the namespaces that hold a %s matching the trigger already", trig.trigger.Kind))
		} else {
			r.Notes = append(r.Notes, "generateExisting is off: Kyverno copied only into namespaces created after the policy; the MirrorPolicy also copies into the namespaces that exist already")
		}
	}
	if slices.Contains(spec.TargetNamespaces, annotations.KeywordAll) {
		skips := "the source's own namespace, the agent's"
		if renamed {
			skips = "the agent's"
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s skips %s --excluded-namespaces (default %s) and namespaces labelled %s=false",
			annotations.KeywordAll, skips, strings.Join(targets.DefaultExcludedNamespaces, ", "), annotations.LabelAllowMirrors))
		if renamed {
			r.Notes = append(r.Notes, fmt.Sprintf("%s takes in the source's own namespace too: the copies have another name (targetName), so the copy there goes beside its source", annotations.KeywordAll))
		}
	}
	// Kyverno's clones carry their source's UID: the agent takes over
	// exactly those of this source, in one write each; for a copy made
	// once, Kyverno's is that copy, counted and never written.
	spec.Adopt = []string{string(peers.Kyverno)}
	if spec.CopyOnce {
		r.Notes = append(r.Notes, "adopt: kyverno: a copy Kyverno made of the source counts as the copy made once: it is left as it is, and not made again")
	} else {
		r.Notes = append(r.Notes, "adopt: kyverno: the copies Kyverno made of the source (its generate.kyverno.io/source-uid label) become the MirrorPolicy's mirrors, the same objects, once Kyverno's policy is gone")
		if spec.DeletionPolicy == v1alpha1.DeletionPolicyOrphan {
			// Kyverno takes its copies back when the policy is installed
			// again; the agent takes back the copies it released.
			spec.Adopt = append(spec.Adopt, string(peers.Fleetmirror))
			r.Notes = append(r.Notes, "adopt: fleetmirror: the copies a deleted MirrorPolicy of the source left behind are taken back when it is applied again, as Kyverno does when its policy is installed again")
		}
	}

	for _, src := range sources {
		p := v1alpha1.MirrorPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MirrorPolicy"},
			ObjectMeta: metav1.ObjectMeta{Namespace: r.SourceNamespace, Name: kyvernoPolicyName(r, src, len(sources) > 1)},
			Spec:       *spec.DeepCopy(),
		}
		p.Spec.Source = src
		req := policy.Request(&p.Spec)
		for _, problem := range req.Problems {
			block("the translation is invalid: %s", problem)
		}
		if _, _, _, err := policy.Trigger(&p.Spec); err != nil {
			block("the translation is invalid: %v", err)
		}
		if req.TransformErr != nil {
			block("the translation is invalid: %v", req.TransformErr)
		}
		r.MirrorPolicies = append(r.MirrorPolicies, p)
	}
	if blocked {
		r.MirrorPolicies = []v1alpha1.MirrorPolicy{}
	}
}

// sourceNamespace is where the objects the rule copies are.
func (g *kyvernoGenerate) sourceNamespace() string {
	switch {
	case g.Clone != nil:
		return g.Clone.Namespace
	case g.CloneList != nil:
		return g.CloneList.Namespace
	}
	return ""
}

// kyvernoContext returns the fixed values of a rule's context by name,
// and what in it does not translate: a lookup (configMap, apiCall,
// imageRegistry, globalReference) or a JMESPath expression is evaluated
// when Kyverno runs the rule.
func kyvernoContext(raw any) (map[string]string, []string) {
	list, _ := raw.([]any)
	values := map[string]string{}
	var problems []string
	for _, item := range list {
		m, _ := item.(map[string]any)
		var e kyvernoContextEntry
		if err := json.Unmarshal(mustJSON(m), &e); err != nil || e.Name == "" {
			problems = append(problems, fmt.Sprintf("an entry without a name: %v", m))
			continue
		}
		var lookups []string
		for _, k := range sortedKeys(m) {
			if k != "name" && k != "variable" {
				lookups = append(lookups, k)
			}
		}
		value, isString := "", false
		if e.Variable != nil {
			value, isString = e.Variable.Value.(string)
		}
		switch {
		case len(lookups) > 0:
			problems = append(problems, fmt.Sprintf("%s is looked up (%s) when Kyverno runs the rule; a MirrorPolicy has no counterpart", e.Name, strings.Join(lookups, ", ")))
		case e.Variable == nil || e.Variable.JMESPath != "" || e.Variable.Default != nil || !isString || strings.Contains(value, "{{"):
			problems = append(problems, fmt.Sprintf("%s is computed when Kyverno runs the rule; only a variable with a fixed text value translates (it is substituted)", e.Name))
		default:
			values[e.Name] = value
		}
	}
	return values, problems
}

// kyvernoSubstitute returns v (a part of a rule) with each {{NAME}} of a
// context variable in values replaced by its value, as Kyverno does.
func kyvernoSubstitute(v any, values map[string]string) any {
	if len(values) == 0 || v == nil {
		return v
	}
	s := string(mustJSON(v))
	for name, value := range values {
		ref := regexp.MustCompile(`\{\{\s*` + regexp.QuoteMeta(name) + `\s*\}\}`)
		quoted := mustJSON(value)
		s = ref.ReplaceAllLiteralString(s, string(quoted[1:len(quoted)-1]))
	}
	var out any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return v
	}
	return out
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// kyvernoClusterScoped are the built-in cluster-scoped kinds a rule may
// clone: a MirrorPolicy copies objects of its namespace into other
// namespaces, so none of them can be mirrored.
var kyvernoClusterScoped = []schema.GroupKind{
	{Kind: "Namespace"}, {Kind: "Node"}, {Kind: "PersistentVolume"},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, {Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"},
	{Group: "storage.k8s.io", Kind: "StorageClass"}, {Group: "storage.k8s.io", Kind: "CSIDriver"},
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}, {Group: "node.k8s.io", Kind: "RuntimeClass"},
	{Group: "networking.k8s.io", Kind: "IngressClass"},
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"},
	{Group: "kyverno.io", Kind: "ClusterPolicy"},
}

// kyvernoKindRefusal says why the agent would not mirror src as the
// member agent runs by default, or "" when it would; blocks says that no
// flag changes that.
func kyvernoKindRefusal(src v1alpha1.PolicySource, namespace string) (reason string, blocks bool) {
	gv, _ := schema.ParseGroupVersion(src.APIVersion)
	gk := schema.GroupKind{Group: gv.Group, Kind: src.Kind}
	switch {
	case slices.Contains(kyvernoClusterScoped, gk):
		return fmt.Sprintf("%s is cluster-scoped: a MirrorPolicy copies namespaced objects of its own namespace into other namespaces, so no MirrorPolicy can copy a %s", src.Kind, src.Kind), true
	case gk.Group == "fleetmirror.io":
		return fmt.Sprintf("%s objects are never mirrored: a copy would let the editors of its source's namespace copy objects out of each target", src.Kind), true
	case slices.Contains(clusters.PrivilegeKinds, gk):
		return fmt.Sprintf("%s hands out privileges: the member agent refuses to mirror it unless it runs with --allow-privilege-kinds, which lets whoever may create a MirrorPolicy in %s grant what it carries in every target", src.Kind, namespace), false
	case slices.Contains(clusters.DeniedKinds, gk):
		return fmt.Sprintf("the member agent does not discover %s for mirroring (its built-in deny list); it mirrors one only when --resource-types names the kind", src.Kind), false
	}
	return "", false
}

// kyvernoTargetSet is where a rule's copies go: target entries and a
// namespace selector, which add up, as a MirrorPolicy has them.
type kyvernoTargetSet struct {
	entries  []string
	selector string
	// excluded are never targets (spec.excludeNamespaces).
	excluded []string
	// sourceExcluded: exclude names the source's namespace, which holds
	// no copy of the source's name anyway.
	sourceExcluded bool
}

// kyvernoTargets translates the namespaces a rule triggered by Namespaces
// matches into targets, or says why it cannot.
func kyvernoTargets(m kyvernoMatch) (kyvernoTargetSet, []string) {
	filters, d := kyvernoFilters(m, "match")
	if d != "" {
		return kyvernoTargetSet{}, []string{d}
	}
	var all bool
	var entries, selectors, decisions []string
	for _, f := range filters {
		if d := kyvernoNamespaceFilter(f); d != "" {
			decisions = append(decisions, d)
			continue
		}
		res := f.Resources
		names, d := kyvernoNames(res)
		switch {
		case d != "":
			decisions = append(decisions, d)
		case len(names) > 0 && res.Selector != nil:
			decisions = append(decisions, "names and selector together select the namespaces that match both; target entries and a selector add up")
		case res.Selector != nil:
			sel, err := metav1.LabelSelectorAsSelector(res.Selector)
			if w := kyvernoSelectorWildcard(res.Selector); w != "" {
				err = fmt.Errorf("%s", w)
			}
			switch {
			case err != nil:
				decisions = append(decisions, fmt.Sprintf("selector: %v", err))
			case sel.Empty():
				all = true
			default:
				selectors = append(selectors, sel.String())
			}
		case len(names) == 0:
			all = true
		}
		for _, n := range names {
			e, err := kyvernoNamePattern(n)
			if err != nil {
				decisions = append(decisions, fmt.Sprintf("names: %q: %v", n, err))
				continue
			}
			if !slices.Contains(entries, e) {
				entries = append(entries, e)
			}
		}
	}
	switch {
	case len(decisions) > 0:
		return kyvernoTargetSet{}, decisions
	case all:
		return kyvernoTargetSet{entries: []string{annotations.KeywordAll}}, nil
	case len(selectors) > 1:
		return kyvernoTargetSet{}, []string{fmt.Sprintf("the selectors %s are alternatives; a MirrorPolicy has one selector", strings.Join(selectors, " or "))}
	case len(selectors) == 1:
		return kyvernoTargetSet{entries: entries, selector: selectors[0]}, nil
	}
	return kyvernoTargetSet{entries: entries}, nil
}

// kyvernoTrigger is what a match block whose kind is not Namespace says:
// the objects that trigger the rule, and the namespaces they may be in.
type kyvernoTrigger struct {
	trigger v1alpha1.PolicyTrigger
	// namespaces are match's namespaces as target entries, and as match
	// spells them; nil when match takes objects in every namespace.
	namespaces, rawNamespaces []string
	// groupless: match names the kind without its API group, which
	// Kyverno matches in every group.
	groupless bool
}

// kyvernoTriggered reports whether a filter of m selects a kind other
// than Namespace: the rule is triggered by such objects.
func kyvernoTriggered(m kyvernoMatch) bool {
	filters, d := kyvernoFilters(m, "match")
	return d == "" && slices.ContainsFunc(filters, func(f kyvernoFilter) bool {
		return f.Resources != nil && slices.ContainsFunc(f.Resources.Kinds, func(k string) bool { return !kyvernoNamespaceKind(k) })
	})
}

// kyvernoTriggerOf translates a match block whose kind is not Namespace
// into a trigger (spec.trigger), or says why it cannot. Alternatives
// (any) translate when they differ only in the names they take.
func kyvernoTriggerOf(m kyvernoMatch) (*kyvernoTrigger, []string) {
	filters, d := kyvernoFilters(m, "match")
	if d != "" {
		return nil, []string{d}
	}
	var (
		decisions, kinds, names []string
		anyName                 bool
		first                   *kyvernoResources
	)
	for _, f := range filters {
		res := f.Resources
		switch {
		case len(f.Subjects)+len(f.Roles)+len(f.ClusterRoles) > 0:
			decisions = append(decisions, "subjects, roles and clusterRoles select who makes the request; a MirrorPolicy does not look at who creates its trigger")
			continue
		case res == nil:
			decisions = append(decisions, "a filter without resources")
			continue
		case len(res.Kinds) == 0:
			decisions = append(decisions, "a filter without kinds: a trigger is one kind")
			continue
		}
		for _, k := range res.Kinds {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
		switch {
		case res.NamespaceSelector != nil:
			decisions = append(decisions, "namespaceSelector: Kyverno tests the labels of a trigger's namespace when the trigger is created or changed, while a MirrorPolicy's targetNamespaceSelector follows them; no counterpart")
		case len(res.Annotations) > 0:
			decisions = append(decisions, "annotations: a trigger selects its objects by name or label, not by annotation")
		case !kyvernoCreateAndUpdate(res.Operations):
			decisions = append(decisions, fmt.Sprintf("operations %v: Kyverno copies on these requests only; a MirrorPolicy copies into a namespace while an object there matches the trigger: only CREATE and UPDATE together (or no operations) translate", res.Operations))
		}
		filterNames := slices.Clone(res.Names)
		if res.Name != "" {
			filterNames = append(filterNames, res.Name)
		}
		anyName = anyName || len(filterNames) == 0
		for _, n := range filterNames {
			if d := kyvernoTriggerName(n); d != "" {
				decisions = append(decisions, d)
			} else if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		switch {
		case first == nil:
			first = res
		case !slices.Equal(first.Namespaces, res.Namespaces) || !reflect.DeepEqual(first.Selector, res.Selector):
			decisions = append(decisions, "the filters differ in namespaces or selector: a trigger has one selector, and the namespaces are the policy's targets; only alternatives that differ in their names translate")
		}
	}
	if first == nil {
		return nil, decisions
	}

	tr := &kyvernoTrigger{}
	if slices.ContainsFunc(kinds, kyvernoNamespaceKind) {
		decisions = append(decisions, fmt.Sprintf("kinds %v: a trigger is one kind; Kyverno copies when a Namespace or an object of another kind is created or changed", kinds))
	} else {
		var gvks []schema.GroupVersionKind
		for _, k := range kinds {
			gvk, groupless, err := kyvernoTriggerKind(k)
			if err != nil {
				decisions = append(decisions, fmt.Sprintf("kinds: %v", err))
				continue
			}
			if !slices.Contains(gvks, gvk) {
				gvks = append(gvks, gvk)
			}
			tr.groupless = tr.groupless || groupless
		}
		switch {
		case len(gvks) > 1:
			decisions = append(decisions, fmt.Sprintf("kinds %v: a trigger is one kind; Kyverno copies when an object of any of them is created or changed", kinds))
		case len(gvks) == 1:
			tr.trigger.APIVersion, tr.trigger.Kind = gvks[0].GroupVersion().String(), gvks[0].Kind
		}
	}
	if !anyName {
		if len(names) > 16 {
			decisions = append(decisions, fmt.Sprintf("names: %d names; spec.trigger.names holds at most 16", len(names)))
		}
		tr.trigger.Names = names
	}
	if sel := first.Selector; sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		switch w := kyvernoSelectorWildcard(sel); {
		case w != "":
			decisions = append(decisions, "selector: "+w)
		case err != nil:
			decisions = append(decisions, fmt.Sprintf("selector: %v", err))
		case !s.Empty():
			tr.trigger.Selector = sel.DeepCopy()
		}
	}
	for _, n := range first.Namespaces {
		e, err := kyvernoNamePattern(n)
		if err != nil {
			decisions = append(decisions, fmt.Sprintf("namespaces: %q: %v", n, err))
			continue
		}
		if !slices.Contains(tr.namespaces, e) {
			tr.namespaces = append(tr.namespaces, e)
		}
	}
	if slices.Contains(tr.namespaces, annotations.KeywordAll) {
		tr.namespaces = nil // "*": every namespace
	}
	if tr.namespaces != nil {
		tr.rawNamespaces = slices.Clone(first.Namespaces)
	}
	if len(decisions) > 0 {
		return nil, decisions
	}
	return tr, nil
}

// kyvernoCreateAndUpdate reports whether operations, of a match filter,
// are Kyverno's for a trigger that is there: none (every request), or
// CREATE and UPDATE alone.
func kyvernoCreateAndUpdate(operations []string) bool {
	return len(operations) == 0 || slices.Contains(operations, "CREATE") && slices.Contains(operations, "UPDATE") &&
		!slices.ContainsFunc(operations, func(o string) bool { return o != "CREATE" && o != "UPDATE" })
}

// kyvernoTriggerName says why n, a name of match, is no name of a
// trigger's objects; "" when it is one.
func kyvernoTriggerName(n string) string {
	switch {
	case strings.ContainsAny(n, "*?"):
		return fmt.Sprintf("names: %q: a wildcard; a trigger names its objects exactly", n)
	case strings.Contains(n, "."):
		return fmt.Sprintf("names: %q: in Kyverno's patterns '.' is any one character, so it also matches other names; a trigger names its objects exactly", n)
	}
	if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
		return fmt.Sprintf("names: %q is no name spec.trigger.names takes: %s", n, errs[0])
	}
	return ""
}

// kyvernoBuiltinKinds are the API versions of the built-in namespaced
// kinds a match names without their group (ConfigMap, v1/ConfigMap):
// Kyverno matches such a kind in every group, and the trigger takes the
// built-in one. A kind of several served versions is not among them.
var kyvernoBuiltinKinds = map[string]schema.GroupVersion{
	"ConfigMap": {Version: "v1"}, "Secret": {Version: "v1"}, "Service": {Version: "v1"}, "ServiceAccount": {Version: "v1"},
	"Pod": {Version: "v1"}, "PersistentVolumeClaim": {Version: "v1"}, "Endpoints": {Version: "v1"}, "LimitRange": {Version: "v1"},
	"ResourceQuota": {Version: "v1"}, "ReplicationController": {Version: "v1"}, "PodTemplate": {Version: "v1"},
	"Deployment": {Group: "apps", Version: "v1"}, "StatefulSet": {Group: "apps", Version: "v1"}, "DaemonSet": {Group: "apps", Version: "v1"},
	"ReplicaSet": {Group: "apps", Version: "v1"}, "ControllerRevision": {Group: "apps", Version: "v1"},
	"Job": {Group: "batch", Version: "v1"}, "CronJob": {Group: "batch", Version: "v1"},
	"Ingress": {Group: "networking.k8s.io", Version: "v1"}, "NetworkPolicy": {Group: "networking.k8s.io", Version: "v1"},
	"Role": {Group: "rbac.authorization.k8s.io", Version: "v1"}, "RoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1"},
	"PodDisruptionBudget": {Group: "policy", Version: "v1"}, "EndpointSlice": {Group: "discovery.k8s.io", Version: "v1"},
	"Lease": {Group: "coordination.k8s.io", Version: "v1"},
}

// kyvernoVersion is a version as Kyverno's kind selectors tell it from a
// group or a kind.
var kyvernoVersion = regexp.MustCompile(`^(v\d+((alpha|beta)\d+)?|\*)$`)

// kyvernoTriggerKind parses a kind of a match block as Kyverno does
// (KIND, VERSION/KIND or GROUP/VERSION/KIND) into the kind of a trigger;
// groupless says that match named no API group, and the kind is the
// built-in one of that name.
func kyvernoTriggerKind(s string) (gvk schema.GroupVersionKind, groupless bool, err error) {
	parts := strings.Split(s, "/")
	kind := parts[len(parts)-1]
	clusterScoped := func(kind string) error {
		return fmt.Errorf("%q: %s is cluster-scoped: the namespaces that hold a trigger get the copies, and a %s is in none", s, kind, kind)
	}
	switch {
	case strings.ContainsAny(s, "*?"):
		return gvk, false, fmt.Errorf("%q: a wildcard kind; a trigger is one kind", s)
	case strings.Contains(kind, ".") || len(parts) == 2 && !kyvernoVersion.MatchString(parts[0]) || len(parts) == 3 && kyvernoVersion.MatchString(parts[0]):
		return gvk, false, fmt.Errorf("%q: a subresource; a trigger is an object", s)
	case len(parts) > 3:
		return gvk, false, fmt.Errorf("%q: write KIND, VERSION/KIND or GROUP/VERSION/KIND, such as apps/v1/Deployment", s)
	case len(parts) == 3:
		src, err := kyvernoKind(s)
		if err != nil {
			return gvk, false, err
		}
		gv, _ := schema.ParseGroupVersion(src.APIVersion)
		if gvk = gv.WithKind(src.Kind); slices.Contains(kyvernoClusterScoped, gvk.GroupKind()) {
			return gvk, false, clusterScoped(kind)
		}
		return gvk, false, nil
	}
	gv, ok := kyvernoBuiltinKinds[kind]
	switch {
	case slices.ContainsFunc(kyvernoClusterScoped, func(c schema.GroupKind) bool { return c.Kind == kind }):
		return gvk, false, clusterScoped(kind)
	case !ok:
		return gvk, false, fmt.Errorf("%q has no API group: Kyverno matches a %s of any group; write GROUP/VERSION/KIND", s, kind)
	case len(parts) == 2 && parts[0] != gv.Version:
		return gvk, false, fmt.Errorf("%q: the built-in %s is %s; write GROUP/VERSION/KIND", s, kind, gv.WithKind(kind).GroupVersion())
	}
	return gv.WithKind(kind), true, nil
}

// targets are the namespaces the copies of a rule triggered by tr go
// to: those its triggers may be in, narrowed to generate.namespace
// (namespace); or why generate.namespace has no such translation.
func (tr *kyvernoTrigger) targets(r *KyvernoRule, namespace string) (kyvernoTargetSet, string) {
	each := kyvernoTriggerNamespace.MatchString(strings.TrimSpace(namespace))
	if p := r.Namespace; p != "" {
		// A Policy sees only the objects of its namespace, and copies
		// only into it.
		switch {
		case !each && namespace != p:
			return kyvernoTargetSet{}, fmt.Sprintf("generate.namespace %q: a Policy copies only into its own namespace, %s (Kyverno refuses another); only %s or {{request.object.metadata.namespace}} translates", namespace, p, p)
		case tr.namespaces != nil && !glob.MustParseList(tr.namespaces...).Match(p):
			return kyvernoTargetSet{}, fmt.Sprintf("match: namespaces %v leave out %s, the Policy's namespace, the only one whose objects trigger it: the rule copies nothing", tr.rawNamespaces, p)
		}
		return kyvernoTargetSet{entries: []string{p}}, ""
	}
	switch {
	case each && tr.namespaces == nil:
		return kyvernoTargetSet{entries: []string{annotations.KeywordAll}}, ""
	case each:
		return kyvernoTargetSet{entries: slices.Clone(tr.namespaces)}, ""
	case strings.Contains(namespace, "{{"):
		return kyvernoTargetSet{}, fmt.Sprintf("generate.namespace %q uses a variable: with a trigger of kind %s, only {{request.object.metadata.namespace}}, the trigger's namespace, translates", namespace, tr.trigger.Kind)
	case namespace == "":
		return kyvernoTargetSet{}, "generate.namespace is empty: Kyverno copies into the policy's namespace (or makes a cluster-scoped copy); a MirrorPolicy copies into the namespaces it targets"
	case slices.Equal(tr.rawNamespaces, []string{namespace}) && !strings.ContainsAny(namespace, "*?"):
		return kyvernoTargetSet{entries: []string{namespace}}, ""
	}
	return kyvernoTargetSet{}, fmt.Sprintf("generate.namespace %q: Kyverno copies into %s whenever a trigger appears in any namespace match allows; a trigger narrows the targets to the namespaces that hold one, so only a match restricted to namespaces: [%s] translates", namespace, namespace, namespace)
}

// notes say what a MirrorPolicy with tr's trigger needs, and where it
// differs from Kyverno, for sources copied under targetName (or their own
// names) and synchronized or not.
func (tr *kyvernoTrigger) notes(sources []v1alpha1.PolicySource, targetName string, sync bool) []string {
	t := tr.trigger
	gv, _ := schema.ParseGroupVersion(t.APIVersion)
	kind := schema.GroupKind{Group: gv.Group, Kind: t.Kind}
	notes := []string{fmt.Sprintf("trigger: the agent watches the %s objects (their metadata) to find the namespaces that hold a trigger, so it needs list and watch on them, or the MirrorPolicy reports KindNotMirrored: the member chart grants both on the kinds it mirrors (config.resourceTypes; Secrets and ConfigMaps when unset); for another kind, grant them to the agent's ServiceAccount (rbac.extraRules)", kind)}
	if tr.groupless {
		notes = append(notes, fmt.Sprintf("trigger: %s is the built-in %s %s: a kind without its API group also matches, in Kyverno, a %s of any other group", t.Kind, t.APIVersion, t.Kind, t.Kind))
	}
	if sync {
		n := fmt.Sprintf("synchronize: true with a trigger: a namespace's copy is deleted once no %s there matches the trigger (deleted, or changed so that it no longer matches), as Kyverno deletes a synchronized copy with its trigger", t.Kind)
		if len(t.Names) != 1 {
			n += "; Kyverno ties a copy to the one object that triggered it, so with several in a namespace it may delete the copy while another is still there"
		}
		notes = append(notes, n)
	}
	for _, src := range sources {
		sgv, _ := schema.ParseGroupVersion(src.APIVersion)
		copies := src.Names
		if targetName != "" {
			copies = []string{targetName}
		}
		if (schema.GroupKind{Group: sgv.Group, Kind: src.Kind}) == kind &&
			(len(t.Names) == 0 || len(copies) == 0 || slices.ContainsFunc(copies, func(n string) bool { return slices.Contains(t.Names, n) })) {
			notes = append(notes, fmt.Sprintf("the trigger's kind is the kind copied: a copy that matches the trigger itself is a trigger too, and keeps its namespace a target after the %s that triggered it goes", t.Kind))
			break
		}
	}
	return notes
}

// reaches reports whether t may target sourceNamespace, the source's:
// whether a trigger there may make a copy, but for the source's name.
func (t *kyvernoTargetSet) reaches(sourceNamespace string) bool {
	if t.sourceExcluded || glob.MustParseList(t.excluded...).Match(sourceNamespace) {
		return false
	}
	return t.selector != "" || slices.ContainsFunc(t.entries, func(e string) bool { return e == annotations.KeywordAll || glob.MustParse(e).Match(sourceNamespace) })
}

// excludeTrigger takes what an exclude block excludes out of t and tr:
// the objects it excludes by namespace leave their namespaces out of the
// targets (a namespace without a trigger gets no copy), those it
// excludes by one label requirement leave tr's selector. It returns notes
// on what translated and decisions on what did not.
func (t *kyvernoTargetSet) excludeTrigger(m kyvernoMatch, tr *kyvernoTrigger, sourceNamespace string) (notes, decisions []string) {
	filters, d := kyvernoFilters(m, "exclude")
	if d != "" {
		return nil, []string{d}
	}
	gv, _ := schema.ParseGroupVersion(tr.trigger.APIVersion)
	gvk := gv.WithKind(tr.trigger.Kind)
	var names, requirements []string
	for _, f := range filters {
		res := f.Resources
		switch {
		case len(f.Subjects)+len(f.Roles)+len(f.ClusterRoles) > 0:
			decisions = append(decisions, "subjects, roles and clusterRoles select who makes the request; a MirrorPolicy does not look at who creates its trigger")
			continue
		case res == nil || kyvernoEmptyResources(res):
			continue // Kyverno excludes nothing with an empty filter
		}
		if len(res.Kinds) > 0 {
			if k := slices.IndexFunc(res.Kinds, func(k string) bool { return strings.ContainsAny(k, "*?") }); k >= 0 {
				decisions = append(decisions, fmt.Sprintf("kinds %v: the wildcard %q may match %s; write its kind", res.Kinds, res.Kinds[k], gvk.Kind))
				continue
			}
			if !slices.ContainsFunc(res.Kinds, func(k string) bool { return kyvernoKindSelects(k, gvk) }) {
				continue // it never excludes a trigger
			}
		}
		switch {
		case res.NamespaceSelector != nil:
			decisions = append(decisions, "namespaceSelector: Kyverno tests the labels of a trigger's namespace when the trigger is created or changed; no counterpart")
		case len(res.Annotations) > 0:
			decisions = append(decisions, "annotations: a trigger selects its objects by name or label, not by annotation")
		case len(res.Operations) > 0:
			decisions = append(decisions, fmt.Sprintf("operations %v: the exclusion depends on the request; a MirrorPolicy does not look at requests", res.Operations))
		case res.Name != "" || len(res.Names) > 0:
			decisions = append(decisions, "names: a trigger has no exclusion by name; name the objects that trigger the rule in match")
		case len(res.Namespaces) > 0 && res.Selector != nil:
			decisions = append(decisions, "namespaces and selector together exclude the objects that match both; a MirrorPolicy has no counterpart")
		case res.Selector != nil:
			req, d := kyvernoNegation(res.Selector)
			if d != "" {
				decisions = append(decisions, d)
			} else {
				requirements = append(requirements, req)
			}
		case len(res.Namespaces) > 0:
			names = append(names, res.Namespaces...)
		default:
			decisions = append(decisions, fmt.Sprintf("the filter excludes every %s: the rule copies nothing", gvk.Kind))
		}
	}
	if len(decisions) > 0 {
		return nil, decisions
	}
	more, undone := t.excludeNames(names, "namespaces", sourceNamespace)
	notes, decisions = append(notes, more...), append(decisions, undone...)
	if len(requirements) > 0 {
		sel := tr.trigger.Selector
		if sel == nil {
			sel = &metav1.LabelSelector{}
		}
		for _, req := range requirements {
			parsed, err := labels.ParseToRequirements(req)
			if err != nil {
				decisions = append(decisions, fmt.Sprintf("selector: %v", err))
				continue
			}
			for _, r := range parsed {
				sel.MatchExpressions = append(sel.MatchExpressions, kyvernoRequirement(r))
			}
		}
		tr.trigger.Selector = sel
		s, _ := metav1.LabelSelectorAsSelector(sel)
		notes = append(notes, fmt.Sprintf("exclude: by label, the trigger's selector %s", s))
	}
	if len(decisions) == 0 && len(t.entries) == 0 && t.selector == "" {
		decisions = append(decisions, "it excludes every namespace the rule matches: the rule copies nothing")
	}
	return notes, decisions
}

// excludeNames takes the namespaces names (Kyverno's patterns, from the
// exclude block's field) out of t, and returns notes on what translated
// and decisions on what did not.
func (t *kyvernoTargetSet) excludeNames(names []string, field, sourceNamespace string) (notes, decisions []string) {
	for _, n := range names {
		e, err := kyvernoNamePattern(n)
		if err != nil {
			decisions = append(decisions, fmt.Sprintf("%s: %q: %v", field, n, err))
			continue
		}
		note, d := t.excludeName(e, sourceNamespace)
		if d != "" {
			decisions = append(decisions, d)
		} else if note != "" {
			notes = append(notes, note)
		}
	}
	return notes, decisions
}

// kyvernoRequirement is r as a label selector's requirement.
func kyvernoRequirement(r labels.Requirement) metav1.LabelSelectorRequirement {
	op := map[selection.Operator]metav1.LabelSelectorOperator{
		selection.Equals: metav1.LabelSelectorOpIn, selection.DoubleEquals: metav1.LabelSelectorOpIn, selection.In: metav1.LabelSelectorOpIn,
		selection.NotEquals: metav1.LabelSelectorOpNotIn, selection.NotIn: metav1.LabelSelectorOpNotIn,
		selection.Exists: metav1.LabelSelectorOpExists, selection.DoesNotExist: metav1.LabelSelectorOpDoesNotExist,
	}[r.Operator()]
	return metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op, Values: r.ValuesUnsorted()}
}

// kyvernoKindSelects reports whether k, a kind of a filter as Kyverno
// spells it, selects the objects of gvk.
func kyvernoKindSelects(k string, gvk schema.GroupVersionKind) bool {
	parts := strings.Split(k, "/")
	switch len(parts) {
	case 1:
		return parts[0] == gvk.Kind
	case 2:
		return parts[1] == gvk.Kind && parts[0] == gvk.Version
	case 3:
		return parts[2] == gvk.Kind && parts[1] == gvk.Version && parts[0] == gvk.Group
	}
	return false
}

// kyvernoNameLabel is the label the API server sets on every namespace to
// its name: a selector on it excludes namespaces by name.
const kyvernoNameLabel = "kubernetes.io/metadata.name"

// exclude takes the namespaces an exclude block excludes out of t, where
// that has an exact equivalent. A MirrorPolicy's targets have no
// negation, but the source's namespace is never a target, all skips the
// agent's default --excluded-namespaces, a plain name can be left out of
// the names, and a selector can leave out names (on kubernetes.io/metadata.name)
// or the namespaces one label requirement selects. It returns notes on
// what translated and decisions on what did not.
func (t *kyvernoTargetSet) exclude(m kyvernoMatch, sourceNamespace string) (notes, decisions []string) {
	filters, d := kyvernoFilters(m, "exclude")
	if d != "" {
		return nil, []string{d}
	}
	var names, requirements []string
	for _, f := range filters {
		res := f.Resources
		switch {
		case len(f.Subjects)+len(f.Roles)+len(f.ClusterRoles) > 0:
			decisions = append(decisions, "subjects, roles and clusterRoles select who makes the request; a MirrorPolicy does not look at who creates a namespace")
			continue
		case res == nil || kyvernoEmptyResources(res):
			continue // Kyverno excludes nothing with an empty filter
		case len(res.Kinds) > 0 && !slices.ContainsFunc(res.Kinds, kyvernoNamespaceKind):
			if k := slices.IndexFunc(res.Kinds, func(k string) bool { return strings.ContainsAny(k, "*?") }); k >= 0 {
				decisions = append(decisions, fmt.Sprintf("kinds %v: the wildcard %q may match Namespace; write Namespace", res.Kinds, res.Kinds[k]))
			}
			continue // it never excludes a Namespace
		case res.NamespaceSelector != nil:
			notes = append(notes, "exclude: a filter with namespaceSelector is left out: Kyverno does not apply namespaceSelector to a Namespace, so it excludes none")
			continue
		case len(res.Annotations) > 0:
			decisions = append(decisions, "annotations: a MirrorPolicy selects namespaces by name or label, not by annotation")
			continue
		case len(res.Operations) > 0:
			decisions = append(decisions, fmt.Sprintf("operations %v: the exclusion depends on the request; a MirrorPolicy does not look at requests", res.Operations))
			continue
		}
		filterNames, d := kyvernoNames(res)
		switch {
		case d != "":
			decisions = append(decisions, d)
		case len(filterNames) > 0 && res.Selector != nil:
			decisions = append(decisions, "names and selector together exclude the namespaces that match both; a MirrorPolicy has no counterpart")
		case res.Selector != nil:
			req, d := kyvernoNegation(res.Selector)
			if d != "" {
				decisions = append(decisions, d)
			} else {
				requirements = append(requirements, req)
			}
		case len(filterNames) == 0:
			decisions = append(decisions, "the filter excludes every namespace: the rule copies nothing")
		default:
			names = append(names, filterNames...)
		}
	}
	if len(decisions) > 0 {
		return nil, decisions
	}
	more, undone := t.excludeNames(names, "names", sourceNamespace)
	notes, decisions = append(notes, more...), append(decisions, undone...)
	if len(requirements) > 0 {
		if d := t.narrow(requirements); d != "" {
			decisions = append(decisions, d)
		} else {
			notes = append(notes, fmt.Sprintf("exclude: by label, the selector %s", t.selector))
		}
	}
	if len(decisions) == 0 && len(t.entries) == 0 && t.selector == "" {
		decisions = append(decisions, "it excludes every namespace the rule matches: the rule copies nothing")
	}
	return notes, decisions
}

// excludeName leaves the namespaces of n (a name or a glob, as a target
// entry spells it) out of t: a target entry that names one of them goes,
// and spec.excludeNamespaces holds n, which takes them out of whatever the
// other entries or the selector match, exactly as Kyverno's exclusion does.
func (t *kyvernoTargetSet) excludeName(n, sourceNamespace string) (note, decision string) {
	g := glob.MustParse(n)
	switch {
	case n == annotations.KeywordAll:
		return "", "it excludes every namespace: the rule copies nothing"
	case g.Literal() && n == sourceNamespace:
		t.sourceExcluded = true
		return fmt.Sprintf("exclude: %s holds the source, which a MirrorPolicy never copies into", n), ""
	}
	// A namespace named by an entry and excluded would be reported as
	// refused on the policy: leave the entry out instead.
	t.entries = slices.DeleteFunc(t.entries, func(e string) bool { return glob.MustParse(e).Literal() && g.Match(e) })
	if !slices.Contains(t.excluded, n) {
		t.excluded = append(t.excluded, n)
	}
	return fmt.Sprintf("exclude: %s, by spec.excludeNamespaces", n), ""
}

// kyvernoNotIn adds to selector that the name label is none of names,
// merging with such a requirement already there.
func kyvernoNotIn(selector string, names []string) string {
	sel, _ := metav1.ParseToLabelSelector(selector)
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	i := slices.IndexFunc(sel.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
		return r.Key == kyvernoNameLabel && r.Operator == metav1.LabelSelectorOpNotIn
	})
	if i < 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: kyvernoNameLabel, Operator: metav1.LabelSelectorOpNotIn})
		i = len(sel.MatchExpressions) - 1
	}
	values := append(sel.MatchExpressions[i].Values, names...)
	slices.Sort(values)
	sel.MatchExpressions[i].Values = slices.Compact(values)
	s, _ := metav1.LabelSelectorAsSelector(sel)
	return s.String()
}

// narrow adds to t's selector the negated label requirements; with target
// entries it cannot (entries and a selector add up).
func (t *kyvernoTargetSet) narrow(requirements []string) string {
	switch {
	case len(t.entries) == 0 && t.selector == "":
		return "" // the names excluded everything already
	case slices.Equal(t.entries, []string{annotations.KeywordAll}):
		t.entries = nil
		t.selector = kyvernoNotIn("", targets.DefaultExcludedNamespaces)
	case len(t.entries) > 0:
		return fmt.Sprintf("selector: excluding by label the namespaces that %v name has no counterpart: target entries have no negation, and entries and a selector add up", t.entries)
	}
	t.selector = strings.Join(append([]string{t.selector}, requirements...), ",")
	return ""
}

// kyvernoNegation is the label requirement that selects the namespaces
// sel does not select, when sel has one requirement; otherwise it says why
// not.
func kyvernoNegation(sel *metav1.LabelSelector) (string, string) {
	if w := kyvernoSelectorWildcard(sel); w != "" {
		return "", "selector: " + w
	}
	if len(sel.MatchLabels)+len(sel.MatchExpressions) != 1 {
		return "", "selector: a namespace is excluded when it matches all of the selector's requirements; a MirrorPolicy's selector can leave out what one requirement selects, not several together"
	}
	for k, v := range sel.MatchLabels {
		return k + "!=" + v, ""
	}
	r := sel.MatchExpressions[0]
	negated := map[metav1.LabelSelectorOperator]metav1.LabelSelectorOperator{
		metav1.LabelSelectorOpIn: metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpNotIn: metav1.LabelSelectorOpIn,
		metav1.LabelSelectorOpExists: metav1.LabelSelectorOpDoesNotExist, metav1.LabelSelectorOpDoesNotExist: metav1.LabelSelectorOpExists,
	}
	op, ok := negated[r.Operator]
	if !ok {
		return "", fmt.Sprintf("selector: the operator %q is not a label selector's", r.Operator)
	}
	s, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: r.Key, Operator: op, Values: r.Values}}})
	if err != nil {
		return "", fmt.Sprintf("selector: %v", err)
	}
	return s.String(), ""
}

// kyvernoFilters are the resource filters of a match or exclude block
// (part), any of which matches; the empty block has none.
func kyvernoFilters(m kyvernoMatch, part string) ([]kyvernoFilter, string) {
	legacy := m.Resources != nil || len(m.Subjects)+len(m.Roles)+len(m.ClusterRoles) > 0
	switch {
	case len(m.All) > 1 || (len(m.All) > 0 && (len(m.Any) > 0 || legacy)) || (len(m.Any) > 0 && legacy):
		if part == "exclude" {
			return nil, "all: Kyverno excludes a namespace only when every filter matches it; only alternatives (any) translate"
		}
		return nil, "all: the filters must hold together; only alternatives (any) translate"
	case len(m.All) == 1:
		return m.All, ""
	case legacy:
		return []kyvernoFilter{m.kyvernoFilter}, ""
	}
	return m.Any, ""
}

// kyvernoNamespaceKind reports whether a kind of a filter is Namespace.
func kyvernoNamespaceKind(k string) bool { return k == "Namespace" || k == "v1/Namespace" }

// kyvernoEmptyResources reports whether res sets nothing.
func kyvernoEmptyResources(res *kyvernoResources) bool {
	return len(res.Kinds)+len(res.Names)+len(res.Namespaces)+len(res.Annotations)+len(res.Operations) == 0 &&
		res.Name == "" && res.Selector == nil && res.NamespaceSelector == nil
}

// kyvernoNamespaceFilter says why filter of a match block of Namespaces
// does not select namespaces by their names or labels alone, or "" when it
// does.
func kyvernoNamespaceFilter(f kyvernoFilter) string {
	res := f.Resources
	switch {
	case len(f.Subjects)+len(f.Roles)+len(f.ClusterRoles) > 0:
		return "subjects, roles and clusterRoles select who makes the request; a MirrorPolicy does not look at who creates a namespace"
	case res == nil:
		return "a filter without resources"
	case len(res.Kinds) == 0:
		// Another kind in any filter makes the rule one of a trigger
		// (kyvernoTriggered): this one names none.
		return "a filter without kinds: name Namespace, or the one kind of a trigger"
	case res.NamespaceSelector != nil:
		return "namespaceSelector: Kyverno does not apply it to a Namespace, so the filter matches no namespace; select namespaces with selector"
	case len(res.Annotations) > 0:
		return "annotations: a MirrorPolicy selects namespaces by name or label, not by annotation"
	case len(res.Operations) > 0 && !slices.Contains(res.Operations, "CREATE"):
		return fmt.Sprintf("operations %v: without CREATE, Kyverno copies only when a namespace changes", res.Operations)
	}
	return ""
}

// kyvernoNames are the names of a filter: for a Namespace, Kyverno
// matches both names (and name) and namespaces against its name.
func kyvernoNames(res *kyvernoResources) ([]string, string) {
	names := slices.Clone(res.Names)
	if res.Name != "" {
		names = append(names, res.Name)
	}
	switch {
	case len(names) > 0 && len(res.Namespaces) > 0:
		return nil, "names and namespaces together: a Namespace matches when its name matches one of each; a MirrorPolicy has no counterpart"
	case len(res.Namespaces) > 0:
		return slices.Clone(res.Namespaces), ""
	}
	return names, ""
}

// kyvernoNamePattern translates a Kyverno name pattern over namespaces
// into a target entry that matches exactly the same names. Kyverno
// matches with * (any run), ? (one character, or none at the end of the
// pattern) and . (any one character); namespace names hold only
// lowercase letters, digits and '-'.
func kyvernoNamePattern(n string) (string, error) {
	switch n {
	case "*":
		return annotations.KeywordAll, nil
	case "":
		return "", fmt.Errorf("an empty name matches no namespace")
	}
	for _, c := range n {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '*', c == '?':
		case c == '.':
			return "", errors.New("in Kyverno's patterns '.' is any one character; write '?' for that")
		default:
			return "", fmt.Errorf("%q is no character of a namespace name: the pattern matches nothing", c)
		}
	}
	if tail := strings.TrimRight(n, "*?"); strings.Contains(n[len(tail):], "?") {
		return "", fmt.Errorf("at the end of a pattern, Kyverno's '?' also matches no character; list the names, or write a pattern that ends with a letter or digit")
	}
	if n == annotations.KeywordAll || n == annotations.KeywordAllLabeled {
		return "", fmt.Errorf("in fleetmirror, %s is a keyword, not the namespace of that name", n)
	}
	req := annotations.Parse(nil, map[string]string{annotations.AnnotationTargetNamespaces: n})
	if len(req.Problems) > 0 {
		return "", fmt.Errorf("%s", strings.TrimPrefix(req.Problems[0], annotations.AnnotationTargetNamespaces+": "))
	}
	return n, nil
}

// kyvernoKind parses a kind as cloneList.kinds spells it, VERSION/KIND
// or GROUP/VERSION/KIND, into a source without names or selector.
func kyvernoKind(s string) (v1alpha1.PolicySource, error) {
	i := strings.LastIndex(s, "/")
	apiVersion, kind := s[:max(i, 0)], s[i+1:]
	switch {
	case strings.ContainsAny(s, "*?"):
		return v1alpha1.PolicySource{}, fmt.Errorf("%q: a wildcard kind; a MirrorPolicy names one kind", s)
	case i < 0 || apiVersion == "":
		return v1alpha1.PolicySource{}, fmt.Errorf("%q has no version; write VERSION/KIND or GROUP/VERSION/KIND, such as v1/Secret", s)
	case strings.Count(apiVersion, "/") > 1 || strings.Contains(kind, ":"):
		return v1alpha1.PolicySource{}, fmt.Errorf("%q: write VERSION/KIND or GROUP/VERSION/KIND, such as v1/Secret", s)
	case !kyvernoKindName.MatchString(kind):
		return v1alpha1.PolicySource{}, fmt.Errorf("%q: %q is not a kind", s, kind)
	case !kyvernoAPIVersion.MatchString(apiVersion) || len(apiVersion) > 317:
		return v1alpha1.PolicySource{}, fmt.Errorf("%q: %q is not an API version", s, apiVersion)
	}
	return v1alpha1.PolicySource{APIVersion: apiVersion, Kind: kind}, nil
}

// The MirrorPolicy schema's patterns of a kind and an API version.
var (
	kyvernoKindName   = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)
	kyvernoAPIVersion = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// kyvernoSelectorWildcard says which label of sel holds a Kyverno
// wildcard, which a Kubernetes selector does not have; "" when none does.
func kyvernoSelectorWildcard(sel *metav1.LabelSelector) string {
	for k, v := range sel.MatchLabels {
		if strings.ContainsAny(k+v, "*?") {
			return fmt.Sprintf("%s=%s: Kyverno's wildcards in labels have no counterpart in a label selector", k, v)
		}
	}
	return ""
}

// kyvernoVariables returns the first Kyverno variable ({{...}}) in parts,
// or "".
func kyvernoVariables(parts ...any) string {
	b, _ := json.Marshal(parts)
	s := string(b)
	i := strings.Index(s, "{{")
	if i < 0 {
		return ""
	}
	end := strings.Index(s[i:], "}}")
	if end < 0 {
		return s[i:min(len(s), i+40)]
	}
	return s[i : i+end+2]
}

// kyvernoPolicyName is the name of the MirrorPolicy of rule r for src:
// POLICY-RULE (and -KIND when the rule copies several kinds), made a DNS
// subdomain; a name changed on the way gets a hash of the original, so
// that two rules never share one.
func kyvernoPolicyName(r *KyvernoRule, src v1alpha1.PolicySource, withKind bool) string {
	orig := r.Policy + "-" + r.Rule
	if withKind {
		orig += "-" + strings.ToLower(src.Kind)
	}
	var b strings.Builder
	for _, c := range strings.ToLower(orig) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' {
			b.WriteRune(c)
		} else if s := b.String(); s != "" && !strings.HasSuffix(s, "-") && !strings.HasSuffix(s, ".") {
			b.WriteRune('-')
		}
	}
	name := strings.Trim(b.String(), "-.")
	if name == orig && len(name) <= validation.DNS1123SubdomainMaxLength && len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(r.Namespace + "/" + orig)) // a hash.Hash never fails to write
	suffix := fmt.Sprintf("%08x", h.Sum32())
	name = strings.Trim(name[:min(len(name), validation.DNS1123SubdomainMaxLength-len(suffix)-1)], "-.")
	if name == "" {
		return "kyverno-" + suffix
	}
	return name + "-" + suffix
}

// strictDecode decodes v (a part of an unstructured object) into out and
// names a field the translation does not know.
func strictDecode(v, out any) error {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("not translated: %w", err)
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// printKyverno writes the translation of Kyverno's generate rules for
// people: each rule, what needs a decision, then the MirrorPolicies as
// one YAML stream to review and kubectl apply.
func printKyverno(b *strings.Builder, rules []KyvernoRule) error {
	if len(rules) == 0 {
		return nil
	}
	b.WriteString("Kyverno generate rules: migrate prints the MirrorPolicies that do the same and never creates them; review them, then kubectl apply -f them.\n\n")
	var decide []KyvernoRule
	policies := 0
	for _, r := range rules {
		policies += len(r.MirrorPolicies)
		if len(r.Decisions) > 0 {
			decide = append(decide, r)
			continue
		}
		fmt.Fprintf(b, "%s\n", kyvernoHeader(r))
		for _, n := range r.Notes {
			fmt.Fprintf(b, "  note: %s\n", n)
		}
		b.WriteString("\n")
	}
	if len(decide) > 0 {
		b.WriteString("Needs a decision (a rule without => has no MirrorPolicy):\n")
		for _, r := range decide {
			fmt.Fprintf(b, "  %s\n", kyvernoHeader(r))
			for _, d := range r.Decisions {
				fmt.Fprintf(b, "    why: %s\n", d)
			}
			for _, n := range r.Notes {
				fmt.Fprintf(b, "    note: %s\n", n)
			}
		}
		b.WriteString("\n")
	}
	for _, r := range rules {
		for _, p := range r.MirrorPolicies {
			out, err := mirrorPolicyYAML(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(b, "---\n# %s, rule %s\n", kyvernoPolicyRef(r), r.Rule)
			if len(r.Decisions) > 0 {
				b.WriteString("# needs a decision before you apply it: see above\n")
			}
			b.Write(out)
		}
	}
	if policies > 0 {
		b.WriteString("---\n\n")
	}
	fmt.Fprintf(b, "%d MirrorPolicies from %d Kyverno generate rules, %d need a decision.\n", policies, len(rules), len(decide))
	return nil
}

func kyvernoPolicyRef(r KyvernoRule) string {
	if r.Namespace != "" {
		return r.Kind + " " + r.Namespace + "/" + r.Policy
	}
	return r.Kind + " " + r.Policy
}

func kyvernoHeader(r KyvernoRule) string {
	h := fmt.Sprintf("%s, rule %s (kyverno generate)", kyvernoPolicyRef(r), r.Rule)
	for i, p := range r.MirrorPolicies {
		sep := ", "
		if i == 0 {
			sep = " => MirrorPolicy "
		}
		h += sep + p.Namespace + "/" + p.Name
	}
	return h
}

// mirrorPolicyYAML is p as a person writes it: without status and the
// empty creationTimestamp.
func mirrorPolicyYAML(p v1alpha1.MirrorPolicy) ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return yaml.Marshal(obj)
}
