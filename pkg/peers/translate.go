package peers

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/transform"
)

// Role says what an object is to the peer tool it is annotated for.
type Role string

// Roles.
const (
	// RoleSource is an object whose annotations say where the tool copies
	// it, or who may pull it.
	RoleSource Role = "source"
	// RolePull is an object that asks the tool for a source's content
	// (reflector's reflects, replicator's replicate-from).
	RolePull Role = "pull"
	// RoleCopy is a copy the tool made: nothing to migrate. Once its
	// source is migrated with fleetmirror.io/adopt, the agent adopts it.
	RoleCopy Role = "copy"
	// RoleNamespace is a namespace carrying the tool's consent label.
	RoleNamespace Role = "namespace"
)

// Key is one label or annotation.
type Key struct {
	// Label is true for a label, false for an annotation.
	Label bool   `json:"label"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Translation is what migrating one object means.
type Translation struct {
	// Tools are the peer tools the object is annotated for.
	Tools []Tool
	Role  Role
	// Set are the fleetmirror labels and annotations that give the
	// object the result the tool gave it. Empty when Decisions is not.
	Set []Key
	// Old are the tool's labels and annotations on the object that Set
	// replaces, and Finalizers its finalizers; remove-old removes them
	// once every key of Set is on the object. Empty when Decisions is not.
	Old        []Key
	Finalizers []string
	// Notes say what the translation leaves out or changes, exactly.
	Notes []string
	// Decisions say why the object cannot be translated exactly: a person
	// must decide, and nothing is written.
	Decisions []string
}

// Translate reads the peer tools' labels and annotations of obj, an object
// of kind (Secret, ConfigMap, ...). Its Tools is empty when obj is
// annotated for none of them, or is a fleetmirror mirror (the agent's;
// never written by migrate).
func Translate(kind string, obj metav1.Object) Translation {
	if obj.GetLabels()[annotations.LabelMirror] == "true" {
		return Translation{}
	}
	var t Translation
	tools := toolsOf(obj)
	switch len(tools) {
	case 0:
		return t
	case 1:
		switch tools[0] {
		case Reflector:
			t = reflector(obj)
		case Replicator:
			t = replicator(obj)
		case Kubemirror:
			t = kubemirror(kind, obj)
		}
	default:
		names := make([]string, len(tools))
		for i, tl := range tools {
			names[i] = string(tl)
		}
		t = Translation{Role: RoleSource, Decisions: []string{fmt.Sprintf("annotated for %s at once: say which one's result fleetmirror should give", strings.Join(names, " and "))}}
	}
	t.Tools = tools
	t.checkExisting(obj)
	return t.finish()
}

// toolsOf lists the tools whose keys obj carries.
func toolsOf(obj metav1.Object) []Tool {
	var out []Tool
	for _, tl := range Annotated {
		prefix := map[Tool]string{Reflector: ReflectorPrefix, Replicator: ReplicatorPrefix, Kubemirror: KubemirrorPrefix}[tl]
		if hasPrefixKey(obj.GetAnnotations(), prefix) || hasPrefixKey(obj.GetLabels(), prefix) {
			out = append(out, tl)
		}
	}
	return out
}

func hasPrefixKey(m map[string]string, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// oldKeys returns obj's labels and annotations under prefix, sorted.
func oldKeys(obj metav1.Object, prefix string) []Key {
	var out []Key
	for k, v := range obj.GetLabels() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Key{Label: true, Key: k, Value: v})
		}
	}
	for k, v := range obj.GetAnnotations() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Key{Key: k, Value: v})
		}
	}
	sortKeys(out)
	return out
}

// sortKeys sorts labels first, then annotations, each by key.
func sortKeys(keys []Key) {
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Label != keys[j].Label {
			return keys[i].Label
		}
		return keys[i].Key < keys[j].Key
	})
}

func label(k, v string) Key      { return Key{Label: true, Key: k, Value: v} }
func annotation(k, v string) Key { return Key{Key: k, Value: v} }

// checkExisting refuses a translation that an object's own fleetmirror
// keys contradict: one of Set with another value, or a key Set does not
// have, whose effect would join the tool's result.
func (t *Translation) checkExisting(obj metav1.Object) {
	if len(t.Set) == 0 {
		return
	}
	want := map[Key]string{}
	for _, k := range t.Set {
		want[Key{Label: k.Label, Key: k.Key}] = k.Value
	}
	for _, have := range oldKeys(obj, annotations.Prefix) {
		if have.Key == annotations.AnnotationStatus && !have.Label {
			continue // written by the agent
		}
		v, ok := want[Key{Label: have.Label, Key: have.Key}]
		switch {
		case !ok:
			t.Decisions = append(t.Decisions, fmt.Sprintf("it already has %s: %q, which the translation does not set; together they would not give the tool's result", have.Key, have.Value))
		case v != have.Value:
			t.Decisions = append(t.Decisions, fmt.Sprintf("it already has %s: %q; the translation is %q", have.Key, have.Value, v))
		}
	}
}

// finish sorts t and clears what a decision withholds.
func (t Translation) finish() Translation {
	if len(t.Decisions) > 0 {
		t.Set, t.Old, t.Finalizers = nil, nil, nil
	}
	sortKeys(t.Set)
	sortKeys(t.Old)
	return t
}

// sourceKeys are the keys every translated source gets: the enabled
// label, and sync and adopt when it has push targets.
func sourceKeys(push bool, tool Tool) []Key {
	out := []Key{label(annotations.LabelEnabled, "true")}
	if push {
		out = append(out, annotation(annotations.AnnotationSync, "true"), annotation(annotations.AnnotationAdopt, string(tool)))
	}
	return out
}

// pullKeys are the keys of a pull mirror of the source ref (NS/NAME).
func pullKeys(key, ref string) ([]Key, error) {
	ns, name, ok := strings.Cut(strings.TrimSpace(ref), "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return nil, fmt.Errorf("%s: %q is not NAMESPACE/NAME", key, ref)
	}
	return []Key{label(annotations.LabelPull, "true"), annotation(annotations.AnnotationMirrorFrom, ns+"/"+name)}, nil
}

// namespaceSet is a set of namespaces as a tool describes it: every
// namespace, or the names matched by globs plus those a selector selects.
type namespaceSet struct {
	all      bool
	globs    []string
	selector string
}

// literal reports whether the set is names only, no glob and no selector.
func (s namespaceSet) literal() bool {
	if s.all || s.selector != "" {
		return false
	}
	for _, g := range s.globs {
		if strings.ContainsAny(g, "*?") {
			return false
		}
	}
	return true
}

// matchGlob reports whether a glob of s matches name.
func (s namespaceSet) matchGlob(name string) bool {
	for _, g := range s.globs {
		if ok, _ := filepath.Match(g, name); ok {
			return true
		}
	}
	return false
}

// targetKeys are the target-namespaces and target-namespace-selector of s.
func (s namespaceSet) targetKeys() []Key {
	var out []Key
	switch {
	case s.all:
		out = append(out, annotation(annotations.AnnotationTargetNamespaces, annotations.KeywordAll))
	case len(s.globs) > 0:
		out = append(out, annotation(annotations.AnnotationTargetNamespaces, strings.Join(s.globs, ",")))
	}
	if s.selector != "" {
		out = append(out, annotation(annotations.AnnotationTargetNamespaceSelector, s.selector))
	}
	return out
}

// parseSelector parses a label selector the way both tools do (the
// reflector's own parser accepts the same grammar) into its canonical form.
func parseSelector(key, value string) (string, error) {
	if strings.TrimSpace(value) == "" {
		return "", nil
	}
	sel, err := labels.Parse(value)
	if err != nil {
		return "", fmt.Errorf("%s: %q does not parse (%v); the tool selects nothing with it", key, value, err)
	}
	return sel.String(), nil
}

// dotnetBool is .NET's bool.TryParse, which the reflector uses: "true" or
// "false" in any case, around white space.
func dotnetBool(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// reflector translates an object annotated for kubernetes-reflector.
func reflector(obj metav1.Object) Translation {
	a := obj.GetAnnotations()
	old := oldKeys(obj, ReflectorPrefix)
	if ref, ok := a[ReflectorReflects]; ok {
		if dotnetBool(a[ReflectorAutoReflects]) {
			return Translation{Role: RoleCopy}
		}
		t := Translation{Role: RolePull, Old: old}
		if _, ok := a[ReflectorAllowed]; ok {
			t.Decisions = append(t.Decisions, fmt.Sprintf("it reflects %s and is a source itself (%s): the reflector treats it as a reflection only", ref, ReflectorAllowed))
			return t
		}
		keys, err := pullKeys(ReflectorReflects, ref)
		if err != nil {
			t.Decisions = append(t.Decisions, err.Error())
		}
		t.Set = keys
		return t
	}
	t := Translation{Role: RoleSource}
	if !dotnetBool(a[ReflectorAllowed]) {
		t.Notes = append(t.Notes, fmt.Sprintf("%s is not \"true\": the reflector neither copies it nor lets it be pulled; nothing to migrate", ReflectorAllowed))
		return t
	}
	allowed, problems := reflectorSet(a, ReflectorAllowedNamespaces, ReflectorAllowedNamespacesSelector)
	t.Decisions = append(t.Decisions, problems...)
	if allowed.selector != "" {
		t.Decisions = append(t.Decisions, fmt.Sprintf("%s: fleetmirror.io/allow-pull-into takes namespace patterns only, no label selector", ReflectorAllowedNamespacesSelector))
	}
	pull := annotation(annotations.AnnotationAllowPullInto, "*")
	if !allowed.all {
		pull.Value = strings.Join(allowed.globs, ",")
	}
	var targets []Key
	push := dotnetBool(a[ReflectorAutoEnabled])
	if push {
		auto, problems := reflectorSet(a, ReflectorAutoNamespaces, ReflectorAutoNamespacesSelector)
		t.Decisions = append(t.Decisions, problems...)
		set, notes, err := intersect(allowed, auto)
		if err != nil {
			t.Decisions = append(t.Decisions, err.Error())
		}
		t.Notes = append(t.Notes, notes...)
		targets = set.targetKeys()
		push = len(targets) > 0
	}
	t.Set = append(sourceKeys(push, Reflector), targets...)
	if pull.Value != "" {
		t.Set = append(t.Set, pull)
	} else if len(t.Decisions) == 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%s matches no namespace: no pull is allowed", ReflectorAllowedNamespaces))
	}
	t.Old = old
	return t
}

// reflectorSet reads a reflector namespace list and its selector as
// MirroringPropertiesExtensions.MatchNamespace does: every namespace when
// both are empty, or when the selector is white space (which matches
// every namespace); otherwise the names the list matches (none when it
// holds only white space) or the selector selects.
func reflectorSet(a map[string]string, listKey, selectorKey string) (namespaceSet, []string) {
	list, sel := a[listKey], a[selectorKey]
	if list == "" && sel == "" || sel != "" && strings.TrimSpace(sel) == "" {
		return namespaceSet{all: true}, nil
	}
	var s namespaceSet
	var problems []string
	s.globs, problems = regexList(listKey, list, firstMatch)
	parsed, err := parseSelector(selectorKey, sel)
	if err != nil {
		problems = append(problems, err.Error())
	}
	s.selector = parsed
	return s, problems
}

// intersect is where the reflector creates copies: namespaces both sets
// allow. fleetmirror's targets are a union of entries, so the result is
// exact only when one side is every namespace, or names only.
func intersect(allowed, auto namespaceSet) (namespaceSet, []string, error) {
	switch {
	case allowed.all:
		return auto, nil, nil
	case auto.all:
		return allowed, nil, nil
	case auto.literal() && allowed.selector == "":
		return filterNames(auto, allowed, ReflectorAutoNamespaces, ReflectorAllowedNamespaces)
	case allowed.literal() && auto.selector == "":
		return filterNames(allowed, auto, ReflectorAllowedNamespaces, ReflectorAutoNamespaces)
	}
	return namespaceSet{}, nil, fmt.Errorf("the reflector creates copies only in namespaces that both %s and %s (with their selectors) match; fleetmirror's targets are a union of entries, so patterns or selectors on both sides have no exact translation", ReflectorAllowedNamespaces, ReflectorAutoNamespaces)
}

// filterNames keeps the names of names that other matches.
func filterNames(names, other namespaceSet, namesKey, otherKey string) (namespaceSet, []string, error) {
	var kept namespaceSet
	var notes []string
	for _, n := range names.globs {
		if other.matchGlob(n) {
			kept.globs = append(kept.globs, n)
		} else {
			notes = append(notes, fmt.Sprintf("%s is in %s but not allowed by %s: the reflector never copied it there; left out", n, namesKey, otherKey))
		}
	}
	return kept, notes, nil
}

// replicator translates an object annotated for kubernetes-replicator.
func replicator(obj metav1.Object) Translation {
	a := obj.GetAnnotations()
	old := oldKeys(obj, ReplicatorPrefix)
	if ref, ok := a[ReplicatorReplicateFrom]; ok {
		t := Translation{Role: RolePull, Old: old}
		for _, k := range []string{ReplicatorReplicateTo, ReplicatorReplicateToMatching, ReplicatorReplicationAllowed} {
			if _, ok := a[k]; ok {
				t.Decisions = append(t.Decisions, fmt.Sprintf("it is replicated from %s and is a source itself (%s); fleetmirror never mirrors a mirror", ref, k))
			}
		}
		keys, err := pullKeys(ReplicatorReplicateFrom, ref)
		if err != nil {
			t.Decisions = append(t.Decisions, err.Error())
		}
		t.Set = keys
		return t
	}
	_, to := a[ReplicatorReplicateTo]
	_, matching := a[ReplicatorReplicateToMatching]
	_, allows := a[ReplicatorReplicationAllowed]
	if !to && !matching && !allows {
		if _, ok := a[ReplicatorReplicatedFromVersion]; ok {
			return Translation{Role: RoleCopy}
		}
	}
	t := Translation{Role: RoleSource, Old: old}
	for _, k := range []string{ReplicatorStripAnnotations, ReplicatorReplicateOnce} {
		if _, ok := a[k]; ok {
			t.Decisions = append(t.Decisions, fmt.Sprintf("%s is a key of a fork of the replicator, not of mittwald's: fleetmirror cannot tell what it did", k))
		}
	}
	var targets namespaceSet
	if to {
		var problems []string
		targets.globs, problems = regexList(ReplicatorReplicateTo, a[ReplicatorReplicateTo], wrapped)
		t.Decisions = append(t.Decisions, problems...)
	}
	if matching {
		if strings.TrimSpace(a[ReplicatorReplicateToMatching]) == "" {
			t.Decisions = append(t.Decisions, fmt.Sprintf("%s is empty, which selects every namespace; write fleetmirror.io/target-namespaces: all if that is meant", ReplicatorReplicateToMatching))
		} else {
			sel, err := parseSelector(ReplicatorReplicateToMatching, a[ReplicatorReplicateToMatching])
			if err != nil {
				t.Decisions = append(t.Decisions, err.Error())
			}
			targets.selector = sel
		}
	}
	keys := targets.targetKeys()
	push := len(keys) > 0
	t.Set = append(sourceKeys(push, Replicator), keys...)
	if push && goBool(a[ReplicatorKeepOwnerReferences]) {
		t.Decisions = append(t.Decisions, fmt.Sprintf("%s: fleetmirror never copies owner references onto mirrors", ReplicatorKeepOwnerReferences))
	}
	if strip, ok := a[ReplicatorStripLabels]; ok && push {
		if strip != "true" {
			t.Decisions = append(t.Decisions, fmt.Sprintf("%s: %q: the replicator strips labels whenever the key is there, whatever its value; say whether mirrors should carry the source's labels", ReplicatorStripLabels, strip))
		} else {
			// Labels are copied, then the rules run, then the agent stamps
			// its own: the mirror carries none of the source's.
			t.Set = append(t.Set, annotation(annotations.AnnotationTransform, StripLabelsTransform))
		}
	}
	if goBool(a[ReplicatorReplicationAllowed]) {
		list, ok := a[ReplicatorReplicationAllowedNamespaces]
		globs, problems := regexList(ReplicatorReplicationAllowedNamespaces, list, wrapped)
		t.Decisions = append(t.Decisions, problems...)
		switch {
		case len(globs) > 0:
			t.Set = append(t.Set, annotation(annotations.AnnotationAllowPullInto, strings.Join(globs, ",")))
		case !ok:
			t.Notes = append(t.Notes, fmt.Sprintf("%s without %s: the replicator refuses every pull (unless it runs with --allow-all, which migrate cannot see); no pull is allowed", ReplicatorReplicationAllowed, ReplicatorReplicationAllowedNamespaces))
		default:
			t.Notes = append(t.Notes, fmt.Sprintf("%s matches no namespace: no pull is allowed", ReplicatorReplicationAllowedNamespaces))
		}
	}
	if len(t.Set) == 1 && len(t.Decisions) == 0 {
		t.Set, t.Old = nil, nil
		t.Notes = append(t.Notes, "no replicate-to, replicate-to-matching or allowed pull: the replicator does nothing with it; nothing to migrate")
	}
	return t
}

// StripLabelsTransform is the fleetmirror.io/transform that gives
// replicator's strip-labels: mirrors carry none of the source's labels.
const StripLabelsTransform = "rules:\n  - path: metadata.labels\n    delete: true\n"

// goBool is strconv.ParseBool's true, which the replicator uses for
// replication-allowed.
func goBool(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// kubemirror translates an object of kind annotated for kubemirror.
func kubemirror(kind string, obj metav1.Object) Translation {
	a, l := obj.GetAnnotations(), obj.GetLabels()
	if l[KubemirrorMirror] == "true" || a[KubemirrorSourceUID] != "" {
		return Translation{Role: RoleCopy}
	}
	t := Translation{Role: RoleSource}
	if l[KubemirrorEnabled] != "true" || a[KubemirrorSync] != "true" {
		t.Notes = append(t.Notes, fmt.Sprintf("kubemirror mirrors only objects labelled %s=true and annotated %s: \"true\"; nothing to migrate", KubemirrorEnabled, KubemirrorSync))
		return t
	}
	entries, problems := kubemirrorEntries(a[KubemirrorTargetNamespaces])
	t.Decisions = append(t.Decisions, problems...)
	if len(entries) == 0 && len(problems) == 0 {
		t.Notes = append(t.Notes, fmt.Sprintf("%s has no entry: kubemirror mirrors it nowhere", KubemirrorTargetNamespaces))
	}
	t.Set = sourceKeys(len(entries) > 0, Kubemirror)
	if len(entries) > 0 {
		t.Set = append(t.Set, annotation(annotations.AnnotationTargetNamespaces, strings.Join(entries, ",")))
	}
	if rules, ok := a[KubemirrorTransform]; ok {
		if _, err := transform.Parse(rules, transform.DefaultLimits(), annotations.Prefix); err != nil {
			t.Decisions = append(t.Decisions, fmt.Sprintf("%s: fleetmirror refuses these rules (%v), where kubemirror mirrors untransformed content or skips the target", KubemirrorTransform, err))
		} else if kind == "Secret" && mergesSecretData(rules) {
			t.Decisions = append(t.Decisions, fmt.Sprintf("%s: a merge into a Secret's data: kubemirror merges the values as written (base64), fleetmirror encodes them", KubemirrorTransform))
		}
		t.Set = append(t.Set, annotation(annotations.AnnotationTransform, rules))
		// pkg/transformer: strict is "true" or "1".
		if s := a[KubemirrorTransformStrict]; s == "true" || s == "1" {
			t.Set = append(t.Set, annotation(annotations.AnnotationTransformStrict, "true"))
		}
	}
	if v, ok := a[KubemirrorMaxTargets]; ok {
		t.Notes = append(t.Notes, fmt.Sprintf("%s: %q is not read by kubemirror (only its --max-targets flag limits); not carried over, set %s yourself to limit", KubemirrorMaxTargets, v, annotations.AnnotationMaxTargets))
	}
	t.Old = oldKeys(obj, KubemirrorPrefix)
	if slices.Contains(obj.GetFinalizers(), KubemirrorFinalizer) {
		t.Finalizers = []string{KubemirrorFinalizer}
	}
	return t
}

// mergesSecretData reports whether valid rules merge into data: kubemirror
// base64-encodes only value and template results under a Secret's data.
func mergesSecretData(rules string) bool {
	var doc struct {
		Rules []struct {
			Path  string         `json:"path"`
			Merge map[string]any `json:"merge"`
		} `json:"rules"`
	}
	if err := yaml.Unmarshal([]byte(rules), &doc); err != nil {
		return true
	}
	for _, r := range doc.Rules {
		if r.Merge != nil && (r.Path == "data" || strings.HasPrefix(r.Path, "data.") || strings.HasPrefix(r.Path, "data[")) {
			return true
		}
	}
	return false
}

// kubemirrorEntries reads kubemirror's target-namespaces: comma separated
// keywords, names and filepath.Match globs. Ours take the keywords, names
// and globs of * and ?; character classes and escapes do not translate.
func kubemirrorEntries(value string) (entries []string, problems []string) {
	seen := map[string]bool{}
	for _, e := range strings.Split(value, ",") {
		e = strings.TrimSpace(e)
		if e == "" || seen[e] {
			continue
		}
		seen[e] = true
		if e != annotations.KeywordAll && e != annotations.KeywordAllLabeled {
			if strings.ContainsAny(e, `[]\`) {
				problems = append(problems, fmt.Sprintf("%s: entry %q: character classes and escapes have no exact fleetmirror glob", KubemirrorTargetNamespaces, e))
				continue
			}
			if _, err := filepath.Match(e, ""); err != nil {
				// kubemirror skips an invalid pattern.
				problems = append(problems, fmt.Sprintf("%s: entry %q: kubemirror skips it (%v)", KubemirrorTargetNamespaces, e, err))
				continue
			}
			if err := checkEntry(e); err != nil {
				problems = append(problems, fmt.Sprintf("%s: entry %q: %v", KubemirrorTargetNamespaces, e, err))
				continue
			}
		}
		entries = append(entries, e)
	}
	return entries, problems
}

// KubemirrorTargets reports whether an active kubemirror source targets
// namespace by a name or glob entry. kubemirror mirrors into such a
// namespace even when it is labelled allow-mirrors "false"; fleetmirror's
// "false" beats every entry.
func KubemirrorTargets(src metav1.Object, namespace string) bool {
	if src.GetLabels()[KubemirrorEnabled] != "true" || src.GetAnnotations()[KubemirrorSync] != "true" || src.GetNamespace() == namespace {
		return false
	}
	for _, e := range strings.Split(src.GetAnnotations()[KubemirrorTargetNamespaces], ",") {
		e = strings.TrimSpace(e)
		if e == annotations.KeywordAll || e == annotations.KeywordAllLabeled {
			continue
		}
		if ok, _ := filepath.Match(e, namespace); ok {
			return true
		}
	}
	return false
}

// TranslateNamespace translates a namespace's kubemirror allow-mirrors
// label into ours. targetedBy names the kubemirror sources (NS/NAME) that
// target the namespace by name or glob (KubemirrorTargets): an opt-out
// then has no exact translation.
func TranslateNamespace(ns metav1.Object, targetedBy []string) Translation {
	v, ok := ns.GetLabels()[KubemirrorAllowMirrors]
	if !ok {
		return Translation{}
	}
	t := Translation{Tools: []Tool{Kubemirror}, Role: RoleNamespace, Old: []Key{label(KubemirrorAllowMirrors, v)}}
	switch v {
	case "true":
		t.Set = []Key{label(annotations.LabelAllowMirrors, "true")}
	case "false":
		if len(targetedBy) > 0 {
			sorted := slices.Sorted(slices.Values(targetedBy))
			t.Decisions = append(t.Decisions, fmt.Sprintf("it opts out of kubemirror's \"all\" only; %s name it and get mirrors here, which fleetmirror's allow-mirrors \"false\" would refuse", strings.Join(sorted, ", ")))
		}
		t.Set = []Key{label(annotations.LabelAllowMirrors, "false")}
	default:
		t.Old = nil
		t.Notes = append(t.Notes, fmt.Sprintf("%s: %q is neither \"true\" nor \"false\": kubemirror ignores it; nothing to migrate", KubemirrorAllowMirrors, v))
	}
	t.checkExisting(ns)
	return t.finish()
}
