package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetmirror/fleetmirror/pkg/cli"
)

// isKyvernoPolicy says whether obj is a Kyverno ClusterPolicy or Policy
// (any version of kyverno.io): the replay translates it instead of
// applying it.
func isKyvernoPolicy(obj *unstructured.Unstructured) bool {
	gv := obj.GroupVersionKind()
	return gv.Group == "kyverno.io" && (gv.Kind == "ClusterPolicy" || gv.Kind == "Policy")
}

// kyvernoOnly says why obj belongs to Kyverno's own machinery and has
// nothing to do in the replay, or "" when it is an object of the test:
//   - everything else of kyverno.io (UpdateRequests, ...) and Kyverno's
//     reports (wgpolicyk8s.io, reports.kyverno.io);
//   - ClusterRoles and ClusterRoleBindings labelled rbac.kyverno.io/...:
//     the permissions Kyverno's controllers need to clone; the agent
//     has its own.
//
// A Kyverno policy is not Kyverno-only: it is translated.
func kyvernoOnly(obj *unstructured.Unstructured) string {
	gv := obj.GroupVersionKind()
	switch {
	case isKyvernoPolicy(obj):
		return ""
	case gv.Group == "kyverno.io" || strings.HasSuffix(gv.Group, ".kyverno.io") || gv.Group == "wgpolicyk8s.io":
		return "Kyverno's own " + gv.Kind
	case gv.Group == "rbac.authorization.k8s.io" && strings.HasPrefix(gv.Kind, "Cluster"):
		for k := range obj.GetLabels() {
			if strings.HasPrefix(k, "rbac.kyverno.io/") {
				return "permissions for Kyverno's controllers (" + gv.Kind + " " + obj.GetName() + ")"
			}
		}
	}
	return ""
}

// policyKey names a Kyverno policy: KIND [NAMESPACE/]NAME.
func policyKey(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + " " + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// translation is what migrate makes of one Kyverno policy.
type translation struct {
	rules []cli.KyvernoRule
	// refused is migrate's reason when a rule has decisions and no
	// MirrorPolicies: the policy does not come across.
	refused string
	// decisions are those of the refused rules, one by one.
	decisions []string
}

// translate runs migrate's own translation on a Kyverno policy.
func translate(obj *unstructured.Unstructured) translation {
	t := translation{rules: cli.TranslateKyverno(obj)}
	var why []string
	for _, r := range t.rules {
		if len(r.MirrorPolicies) == 0 && len(r.Decisions) > 0 {
			t.decisions = append(t.decisions, r.Decisions...)
			why = append(why, fmt.Sprintf("rule %s: %s", r.Rule, strings.Join(r.Decisions, "; ")))
		}
	}
	t.refused = strings.Join(why, " | ")
	return t
}

// mentions says whether migrate's notes or decisions on any rule name s.
func (t translation) mentions(s string) bool {
	for _, r := range t.rules {
		for _, m := range append(append([]string{}, r.Notes...), r.Decisions...) {
			if strings.Contains(m, s) {
				return true
			}
		}
	}
	return false
}

// cloneRules returns the generate rules of a Kyverno policy that copy
// existing objects (clone or cloneList, also inside foreach).
func cloneRules(obj *unstructured.Unstructured) []map[string]any {
	rules, _, _ := unstructured.NestedSlice(obj.Object, "spec", "rules")
	var out []map[string]any
	for _, raw := range rules {
		rule, _ := raw.(map[string]any)
		gen, _ := rule["generate"].(map[string]any)
		if gen == nil {
			continue
		}
		clones := gen["clone"] != nil || gen["cloneList"] != nil
		each, _ := gen["foreach"].([]any)
		for _, e := range each {
			if m, _ := e.(map[string]any); m != nil && (m["clone"] != nil || m["cloneList"] != nil) {
				clones = true
			}
		}
		if clones {
			out = append(out, rule)
		}
	}
	return out
}

// matchKinds are the kinds a rule's match block names, in any of its
// forms (any, all, the legacy resources), as written.
func matchKinds(rule map[string]any) []string {
	match, _ := rule["match"].(map[string]any)
	filters := []any{match}
	for _, k := range []string{"any", "all"} {
		l, _ := match[k].([]any)
		filters = append(filters, l...)
	}
	var kinds []string
	for _, f := range filters {
		fm, _ := f.(map[string]any)
		ks, _, _ := unstructured.NestedStringSlice(fm, "resources", "kinds")
		kinds = append(kinds, ks...)
	}
	return kinds
}

// triggerOf says what makes Kyverno copy in the policies: "Namespace"
// when every clone rule matches only Namespaces, else the other kinds;
// "" when none clones.
func triggerOf(policies []*unstructured.Unstructured) string {
	other := map[string]bool{}
	var clones bool
	for _, p := range policies {
		for _, r := range cloneRules(p) {
			clones = true
			for _, k := range matchKinds(r) {
				if k != "Namespace" && k != "v1/Namespace" {
					other[k] = true
				}
			}
		}
	}
	switch {
	case !clones:
		return ""
	case len(other) == 0:
		return "Namespace"
	}
	kinds := make([]string, 0, len(other))
	for k := range other {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return strings.Join(kinds, ",")
}

// Parts of a decision that name the policy's own values.
var (
	quoted    = regexp.MustCompile(`"(\\.|[^"\\])*"`)
	listed    = regexp.MustCompile(`\[[^\]]*\]`)
	variables = regexp.MustCompile(`\{\{[^}]*\}\}`)
)

// reasonKind is a decision without the values it names, so that the same
// reason given for two policies reads the same: what the totals count.
func reasonKind(decision string) string {
	s := variables.ReplaceAllString(decision, "{{…}}")
	s = quoted.ReplaceAllString(s, `"…"`)
	s = listed.ReplaceAllString(s, "[…]")
	s, _, _ = strings.Cut(s, "; ")
	if r := []rune(s); len(r) > 100 {
		return string(r[:99]) + "…"
	}
	return s
}
