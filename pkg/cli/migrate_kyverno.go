package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
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
	// Decisions say what does not translate. With MirrorPolicies, they
	// concern what the policies leave out: decide before applying them.
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
		APIVersion       string `json:"apiVersion"`
		Kind             string `json:"kind"`
		Name             string `json:"name"`
		Namespace        string `json:"namespace"`
		Synchronize      bool   `json:"synchronize"`
		GenerateExisting *bool  `json:"generateExisting"`
		Clone            *struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"clone"`
		CloneList *struct {
			Namespace string                `json:"namespace"`
			Kinds     []string              `json:"kinds"`
			Selector  *metav1.LabelSelector `json:"selector"`
		} `json:"cloneList"`
	}
)

// Fields of a rule and of its generate block: those the translation
// reads, those that only a person can translate (they narrow or compute
// what Kyverno does), and those that change nothing a MirrorPolicy does.
var (
	kyvernoRuleRead      = []string{"name", "match", "exclude", "generate"}
	kyvernoRuleDecide    = []string{"preconditions", "celPreconditions", "context"}
	kyvernoRuleIgnored   = []string{"skipBackgroundRequests", "reportProperties"}
	kyvernoGenerateRead  = []string{"apiVersion", "kind", "name", "namespace", "synchronize", "generateExisting", "clone", "cloneList"}
	kyvernoGenerateNoted = []string{"orphanDownstreamOnPolicyDelete", "uid"}
)

// kyvernoEachNamespace is the generate.namespace that puts a copy into
// each matched Namespace.
var kyvernoEachNamespace = regexp.MustCompile(`^\{\{\s*request\.object\.metadata\.name\s*\}\}$`)

// TranslateKyverno translates the generate rules of a Kyverno
// ClusterPolicy or Policy; other rules are not for fleetmirror and are
// left out.
func TranslateKyverno(p *unstructured.Unstructured) []KyvernoRule {
	rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	existing, _, _ := unstructured.NestedBool(p.Object, "spec", "generateExisting")
	var out []KyvernoRule
	for _, raw := range rules {
		rule, ok := raw.(map[string]any)
		if !ok || rule["generate"] == nil {
			continue
		}
		r := KyvernoRule{Kind: p.GetKind(), Namespace: p.GetNamespace(), Policy: p.GetName(), MirrorPolicies: []v1alpha1.MirrorPolicy{}}
		r.Rule, _ = rule["name"].(string)
		translateKyvernoRule(&r, rule, existing)
		out = append(out, r)
	}
	return out
}

// translateKyvernoRule fills r from rule. A decision about the source,
// the targets or the copy's name leaves r without MirrorPolicies; one
// about a part Kyverno adds on top (preconditions, one-shot copies)
// keeps them.
func translateKyvernoRule(r *KyvernoRule, rule map[string]any, specExisting bool) {
	var blocked bool
	block := func(format string, args ...any) {
		blocked = true
		r.Decisions = append(r.Decisions, fmt.Sprintf(format, args...))
	}
	for _, k := range sortedKeys(rule) {
		switch {
		case slices.Contains(kyvernoRuleRead, k), slices.Contains(kyvernoRuleIgnored, k):
		case slices.Contains(kyvernoRuleDecide, k):
			r.Decisions = append(r.Decisions, fmt.Sprintf("%s: Kyverno evaluates them for each namespace; a MirrorPolicy has no counterpart, so the printed one mirrors into every namespace the rule matches without them", k))
		default:
			block("%s: a MirrorPolicy has no counterpart", k)
		}
	}
	genRaw, _ := rule["generate"].(map[string]any)
	for _, k := range sortedKeys(genRaw) {
		switch {
		case slices.Contains(kyvernoGenerateRead, k), slices.Contains(kyvernoGenerateNoted, k):
		case k == "data":
			block("generate.data creates an object from the policy's own content, not a copy of an existing object: create a source that holds it, then a MirrorPolicy for it")
		default:
			block("generate.%s: a MirrorPolicy has no counterpart", k)
		}
	}
	if blocked {
		return
	}
	var gen kyvernoGenerate
	var match, exclude kyvernoMatch
	for _, part := range []struct {
		field string
		into  any
	}{{"generate", &gen}, {"match", &match}, {"exclude", &exclude}} {
		if err := strictDecode(rule[part.field], part.into); err != nil {
			block("%s: %v", part.field, err)
		}
	}
	if blocked {
		return
	}
	if v := kyvernoVariables(rule["match"], rule["exclude"], gen.Name, gen.Kind, gen.APIVersion, gen.Clone, gen.CloneList); v != "" {
		block("uses the variable %s: its value is known only when Kyverno runs the rule", v)
	}
	if blocked {
		return
	}

	// Where the copies go.
	spec := v1alpha1.MirrorPolicySpec{}
	entries, selector, decisions := kyvernoTargets(match)
	for _, d := range decisions {
		block("match: %s", d)
	}
	for _, d := range kyvernoExclude(exclude, entries) {
		block("exclude: %s", d)
	}
	switch {
	case kyvernoEachNamespace.MatchString(strings.TrimSpace(gen.Namespace)):
	case strings.Contains(gen.Namespace, "{{"):
		block("generate.namespace %q uses a variable: only {{request.object.metadata.name}}, each matched namespace, translates", gen.Namespace)
	case gen.Namespace == "":
		block("generate.namespace is empty: Kyverno copies into the policy's namespace; a MirrorPolicy copies into the namespaces it targets")
	default:
		block("generate.namespace %q: Kyverno copies into that one namespace whenever the rule matches; a MirrorPolicy copies into the namespaces it targets", gen.Namespace)
	}
	spec.TargetNamespaces = entries
	if selector != "" {
		spec.TargetNamespaceSelector = &selector
	}

	// What is copied.
	var sources []v1alpha1.PolicySource
	switch {
	case gen.Clone != nil && gen.CloneList != nil:
		block("generate has both clone and cloneList")
	case gen.Clone != nil:
		r.SourceNamespace = gen.Clone.Namespace
		src, err := kyvernoKind(gen.APIVersion + "/" + gen.Kind)
		if gen.APIVersion == "" || gen.Kind == "" {
			err = fmt.Errorf("generate.apiVersion and generate.kind must name the kind of clone")
		}
		switch {
		case err != nil:
			block("%v", err)
		case gen.Name != gen.Clone.Name:
			block("generate.name %q differs from clone.name %q: a mirror keeps its source's name (transform rules cannot change metadata.name)", gen.Name, gen.Clone.Name)
		default:
			src.Names = []string{gen.Clone.Name}
			sources = append(sources, src)
		}
	case gen.CloneList != nil:
		r.SourceNamespace = gen.CloneList.Namespace
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
	if errs := validation.IsDNS1123Label(r.SourceNamespace); r.SourceNamespace != "" && len(errs) > 0 {
		block("the source namespace %q is not a valid namespace name", r.SourceNamespace)
	}
	if blocked {
		return
	}

	// How the copies are kept.
	if gen.Synchronize {
		r.Notes = append(r.Notes, "synchronize: true: the copies follow their source, as a mirror always does")
	} else {
		r.Decisions = append(r.Decisions, "synchronize is false: Kyverno copied once and never updates the copies; a mirror follows its source")
	}
	if existing := gen.GenerateExisting; (existing == nil && !specExisting) || (existing != nil && !*existing) {
		r.Notes = append(r.Notes, "generateExisting is off: Kyverno copied only into namespaces created after the policy; the MirrorPolicy also mirrors into the namespaces that exist already")
	}
	if slices.Contains(spec.TargetNamespaces, annotations.KeywordAll) {
		r.Notes = append(r.Notes, fmt.Sprintf("%s skips the source's own namespace, the agent's --excluded-namespaces (default %s) and namespaces labelled %s=false",
			annotations.KeywordAll, strings.Join(targets.DefaultExcludedNamespaces, ", "), annotations.LabelAllowMirrors))
	}
	r.Notes = append(r.Notes, "the agent does not adopt the copies Kyverno made: a target holding one is a conflict until that copy is deleted")

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
		if req.TransformErr != nil {
			block("the translation is invalid: %v", req.TransformErr)
		}
		r.MirrorPolicies = append(r.MirrorPolicies, p)
	}
	if blocked {
		r.MirrorPolicies = []v1alpha1.MirrorPolicy{}
	}
}

// kyvernoTargets translates the namespaces a rule matches into target
// entries and a namespace selector, or says why it cannot: fleetmirror
// targets namespaces, so the trigger must be the creation of a Namespace.
func kyvernoTargets(m kyvernoMatch) (entries []string, selector string, decisions []string) {
	filters, d := kyvernoFilters(m)
	if d != "" {
		return nil, "", []string{d}
	}
	var all bool
	var selectors []string
	for _, f := range filters {
		if d := kyvernoNamespaceFilter(f); d != "" {
			decisions = append(decisions, d)
			continue
		}
		res := f.Resources
		names := kyvernoNames(res)
		switch {
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
		return nil, "", decisions
	case all:
		return []string{annotations.KeywordAll}, "", nil
	case len(selectors) > 1:
		return nil, "", []string{fmt.Sprintf("the selectors %s are alternatives; a MirrorPolicy has one selector", strings.Join(selectors, " or "))}
	case len(selectors) == 1:
		selector = selectors[0]
	}
	return entries, selector, nil
}

// kyvernoExclude says what of an exclude block does not translate. The
// only exclusions that do are names the agent excludes by default, from
// every target.
func kyvernoExclude(m kyvernoMatch, entries []string) []string {
	filters, d := kyvernoFilters(m)
	if d != "" {
		return []string{d}
	}
	var decisions []string
	for _, f := range filters {
		if d := kyvernoNamespaceFilter(f); d != "" {
			decisions = append(decisions, d)
			continue
		}
		names := kyvernoNames(f.Resources)
		if len(names) == 0 || f.Resources.Selector != nil {
			decisions = append(decisions, "target entries have no negation; only the names of the agent's default --excluded-namespaces ("+strings.Join(targets.DefaultExcludedNamespaces, ", ")+") translate")
			continue
		}
		for _, n := range names {
			if !slices.Contains(targets.DefaultExcludedNamespaces, n) || slices.Contains(entries, n) {
				decisions = append(decisions, fmt.Sprintf("names: %q: target entries have no negation; label the namespace %s=false, or list the namespaces to target", n, annotations.LabelAllowMirrors))
			}
		}
	}
	return decisions
}

// kyvernoFilters are the resource filters of a match or exclude block,
// any of which matches; the empty block has none.
func kyvernoFilters(m kyvernoMatch) ([]kyvernoFilter, string) {
	legacy := m.Resources != nil || len(m.Subjects)+len(m.Roles)+len(m.ClusterRoles) > 0
	switch {
	case len(m.All) > 1 || (len(m.All) > 0 && (len(m.Any) > 0 || legacy)) || (len(m.Any) > 0 && legacy):
		return nil, "all: the filters must hold together; only alternatives (any) translate"
	case len(m.All) == 1:
		return m.All, ""
	case legacy:
		return []kyvernoFilter{m.kyvernoFilter}, ""
	}
	return m.Any, ""
}

// kyvernoNamespaceFilter says why filter does not select namespaces by
// their names or labels alone, or "" when it does.
func kyvernoNamespaceFilter(f kyvernoFilter) string {
	res := f.Resources
	switch {
	case len(f.Subjects)+len(f.Roles)+len(f.ClusterRoles) > 0:
		return "subjects, roles and clusterRoles select who makes the request; a MirrorPolicy does not look at who creates a namespace"
	case res == nil:
		return "a filter without resources"
	case len(res.Kinds) == 0 || slices.ContainsFunc(res.Kinds, func(k string) bool { return k != "Namespace" && k != "v1/Namespace" }):
		return fmt.Sprintf("kinds %v: Kyverno copies when such an object is created or changed; a MirrorPolicy copies into namespaces, so only kinds [Namespace] translate", res.Kinds)
	case len(res.Namespaces) > 0 || res.NamespaceSelector != nil || len(res.Annotations) > 0:
		return "namespaces, namespaceSelector and annotations have no counterpart for namespaces; use names or selector"
	case len(res.Operations) > 0 && !slices.Contains(res.Operations, "CREATE"):
		return fmt.Sprintf("operations %v: without CREATE, Kyverno copies only when a namespace changes", res.Operations)
	}
	return ""
}

// kyvernoNames are the names of a filter, both spellings.
func kyvernoNames(res *kyvernoResources) []string {
	names := slices.Clone(res.Names)
	if res.Name != "" {
		names = append(names, res.Name)
	}
	return names
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
			return "", fmt.Errorf("Kyverno reads '.' as any one character; write '?' for that")
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
	h.Write([]byte(r.Namespace + "/" + orig))
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
