package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	template "github.com/DataDog/datadog-agent/pkg/template/text"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	kjson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// Rules is a parsed fleetmirror.io/transform annotation. It is immutable
// and safe for concurrent use by several Apply calls.
type Rules struct {
	rules  []rule
	limits Limits
}

// document is the YAML form of the annotation. Fields are matched strictly:
// an unknown or duplicated field is an error, so a typo never silently
// turns a rule off.
type document struct {
	Rules []ruleSpec `json:"rules"`
}

// ruleSpec is one rule as written. Exactly one of Value, Template, Merge
// and Delete is set.
type ruleSpec struct {
	Path             string          `json:"path"`
	Value            json.RawMessage `json:"value,omitempty"`
	Template         *string         `json:"template,omitempty"`
	Merge            json.RawMessage `json:"merge,omitempty"`
	Delete           *bool           `json:"delete,omitempty"`
	NamespacePattern string          `json:"namespacePattern,omitempty"`
	ClusterPattern   string          `json:"clusterPattern,omitempty"`
}

// action is what a rule does at its path.
type action int

const (
	actionValue action = iota
	actionTemplate
	actionMerge
	actionDelete
)

// rule is one validated rule.
type rule struct {
	index  int // position in the annotation, for messages
	path   fieldPath
	action action
	// value is the decoded value of a value rule, merge the map of a merge
	// rule; both are deep-copied into each object.
	value any
	merge map[string]any
	// size is the JSON size of value or merge: what the rule can add.
	size int
	tmpl *template.Template
	// text is the template text, kept to render the rule back to YAML.
	text string
	// namespacePattern and clusterPattern limit the rule; the zero Glob
	// (no pattern) does not.
	namespacePattern glob.Glob
	clusterPattern   glob.Glob
}

// Parse parses and validates the text of a fleetmirror.io/transform
// annotation:
//
//	rules:
//	  - path: data.LOG_LEVEL
//	    value: "error"
//	  - path: data.API_URL
//	    template: "https://{{.TargetNamespace}}.api.example.com"
//	  - path: metadata.labels
//	    merge: {environment: production}
//	  - path: data.DEBUG
//	    delete: true
//	  - path: spec.template.spec.containers[0].image
//	    template: "registry.{{.TargetCluster}}.example.com/app:v1"
//	    namespacePattern: "prod-*"
//
// Everything that can be checked without an object is checked here: the
// limits on size and rule count, unknown fields, paths, patterns, and
// templates (syntax, unknown functions, and the forbidden actions range,
// template, define and block), and that no rule writes a label or
// annotation key under reservedKeyPrefix (the caller's own keys; "" reserves
// none). Errors name the rule by its index, rules[i], and all rule errors
// are reported together.
func Parse(text string, l Limits, reservedKeyPrefix string) (*Rules, error) {
	l = l.withDefaults()
	if len(text) > l.MaxBytes {
		return nil, fmt.Errorf("rules are %d bytes, over the limit of %d", len(text), l.MaxBytes)
	}
	// Decode the rules one by one, so that an error in one, an unknown
	// field included, names it.
	var doc struct {
		Rules []json.RawMessage `json:"rules"`
	}
	if err := yaml.UnmarshalStrict([]byte(text), &doc); err != nil {
		return nil, fmt.Errorf("rules are not valid: %w", err)
	}
	if len(doc.Rules) > l.MaxRules {
		return nil, fmt.Errorf("%d rules, over the limit of %d", len(doc.Rules), l.MaxRules)
	}
	r := &Rules{limits: l, rules: make([]rule, 0, len(doc.Rules))}
	var errs []error
	for i, raw := range doc.Rules {
		var spec ruleSpec
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		err := dec.Decode(&spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules[%d]: %w", i, err))
			continue
		}
		ru, err := compile(spec, l, reservedKeyPrefix)
		if err != nil {
			errs = append(errs, fmt.Errorf("rules[%d]: %w", i, err))
			continue
		}
		ru.index = i
		r.rules = append(r.rules, ru)
	}
	if len(errs) > 0 {
		return nil, kerrors.NewAggregate(errs)
	}
	return r, nil
}

// compile validates one rule.
func compile(spec ruleSpec, l Limits, reservedKeyPrefix string) (rule, error) {
	if spec.Path == "" {
		return rule{}, fmt.Errorf("path is required")
	}
	p, err := parsePath(spec.Path)
	if err != nil {
		return rule{}, err
	}
	ru := rule{path: p}
	for _, pat := range []struct {
		text string
		into *glob.Glob
	}{{spec.NamespacePattern, &ru.namespacePattern}, {spec.ClusterPattern, &ru.clusterPattern}} {
		if pat.text == "" {
			continue
		}
		if *pat.into, err = glob.Parse(pat.text); err != nil {
			return rule{}, err
		}
	}

	var set []string
	if spec.Value != nil {
		set = append(set, "value")
	}
	if spec.Template != nil {
		set = append(set, "template")
	}
	if spec.Merge != nil {
		set = append(set, "merge")
	}
	if spec.Delete != nil {
		set = append(set, "delete")
	}
	if len(set) != 1 {
		return rule{}, fmt.Errorf("a rule needs exactly one of value, template, merge or delete, found %d (%s)", len(set), strings.Join(set, ", "))
	}

	switch {
	case spec.Value != nil:
		ru.action = actionValue
		if ru.size = len(spec.Value); ru.size > l.MaxOutput {
			return rule{}, fmt.Errorf("value is %d bytes, over the limit of %d", ru.size, l.MaxOutput)
		}
		if err := kjson.Unmarshal(spec.Value, &ru.value); err != nil {
			return rule{}, fmt.Errorf("value: %w", err)
		}
		if ru.value == nil {
			return rule{}, fmt.Errorf("value is null: use delete: true to remove a field")
		}
	case spec.Template != nil:
		ru.action = actionTemplate
		ru.text = *spec.Template
		if ru.tmpl, err = parseTemplate(ru.text); err != nil {
			return rule{}, fmt.Errorf("template: %w", err)
		}
	case spec.Merge != nil:
		ru.action = actionMerge
		if ru.size = len(spec.Merge); ru.size > l.MaxOutput {
			return rule{}, fmt.Errorf("merge is %d bytes, over the limit of %d", ru.size, l.MaxOutput)
		}
		var v any
		if err := kjson.Unmarshal(spec.Merge, &v); err != nil {
			return rule{}, fmt.Errorf("merge: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return rule{}, fmt.Errorf("merge must be a map, not %s", describe(v))
		}
		ru.merge = m
	case spec.Delete != nil:
		ru.action = actionDelete
		if !*spec.Delete {
			return rule{}, fmt.Errorf("delete must be true")
		}
	}

	if err := checkWritable(p, ru.value, ru.merge, reservedKeyPrefix); err != nil {
		return rule{}, err
	}
	return ru, nil
}

// reserved are the fields a rule may not touch, nor any field below or
// above them: they are the mirror's identity (apiVersion, kind, name,
// namespace), written by the API server, or would hand the mirror to
// someone else (ownerReferences, finalizers). status is never mirrored.
var reserved = func() []fieldPath {
	var out []fieldPath
	for _, s := range []string{
		"apiVersion", "kind", "status",
		"metadata.name", "metadata.namespace", "metadata.generateName",
		"metadata.uid", "metadata.resourceVersion", "metadata.generation",
		"metadata.creationTimestamp", "metadata.deletionTimestamp",
		"metadata.deletionGracePeriodSeconds", "metadata.selfLink",
		"metadata.managedFields", "metadata.ownerReferences", "metadata.finalizers",
	} {
		p, err := parsePath(s)
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	return out
}()

// checkWritable rejects rules that would touch a reserved field or a label
// or annotation key under reservedKeyPrefix (the agent's own keys: the
// source reference, the hash and the mirror labels that prove ownership),
// whether by path or by a key inside a value or merge map.
func checkWritable(p fieldPath, value any, merge map[string]any, reservedKeyPrefix string) error {
	for _, r := range reserved {
		if p.hasPrefix(r) || r.hasPrefix(p) {
			return fmt.Errorf("path %s: %s is managed by the agent or the API server", p, r)
		}
	}
	if isControlKey(p, reservedKeyPrefix) {
		return fmt.Errorf("path %s: keys under %s belong to the agent", p, reservedKeyPrefix)
	}
	m, _ := value.(map[string]any)
	if merge != nil {
		m = merge
	}
	for k := range m {
		if isControlKey(append(p[:len(p):len(p)], segment{key: k}), reservedKeyPrefix) {
			return fmt.Errorf("path %s: key %q: keys under %s belong to the agent", p, k, reservedKeyPrefix)
		}
	}
	return nil
}

// isControlKey reports whether p is metadata.labels[K] or
// metadata.annotations[K] with K under reservedKeyPrefix.
func isControlKey(p fieldPath, reservedKeyPrefix string) bool {
	return reservedKeyPrefix != "" && len(p) == 3 && p[0] == segment{key: "metadata"} &&
		(p[1] == segment{key: "labels"} || p[1] == segment{key: "annotations"}) &&
		!p[2].isIndex && strings.HasPrefix(p[2].key, reservedKeyPrefix)
}

// matches reports whether the rule applies to target t.
func (ru *rule) matches(t Target) bool {
	return matchGlob(ru.namespacePattern, t.TargetNamespace) && matchGlob(ru.clusterPattern, t.TargetCluster)
}

// matchGlob matches s against g; no pattern (the zero Glob) matches
// everything.
func matchGlob(g glob.Glob, s string) bool {
	return g == (glob.Glob{}) || g.Match(s)
}

// marshal renders r back to the annotation's YAML, in canonical form.
// Parse(r.marshal()) yields rules equal to r; the fuzz test checks it.
func (r *Rules) marshal() (string, error) {
	var doc document
	for _, ru := range r.rules {
		spec := ruleSpec{Path: ru.path.String(), NamespacePattern: ru.namespacePattern.String(), ClusterPattern: ru.clusterPattern.String()}
		var err error
		switch ru.action {
		case actionValue:
			spec.Value, err = json.Marshal(ru.value)
		case actionTemplate:
			spec.Template = &ru.text
		case actionMerge:
			spec.Merge, err = json.Marshal(ru.merge)
		case actionDelete:
			t := true
			spec.Delete = &t
		}
		if err != nil {
			return "", err
		}
		doc.Rules = append(doc.Rules, spec)
	}
	out, err := yaml.Marshal(doc)
	return string(out), err
}
