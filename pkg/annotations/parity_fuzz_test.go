package annotations

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The keys of renamed, copy-once, orphaned and excluding sources: whatever
// their values, a value taken is a valid one, and one refused is said.
func FuzzParityKeys(f *testing.F) {
	f.Add("regcred", "true", "Orphan", "kube-system, team-*")
	f.Add("Not_A_Name", "yes", "orphan", "Team_A,,a/b")
	f.Add("", "false", "Delete", "")
	f.Fuzz(func(t *testing.T, name, once, deletion, exclude string) {
		r := Parse(map[string]string{LabelEnabled: "true"}, map[string]string{
			AnnotationSync: "true", AnnotationTargetNamespaces: "all",
			AnnotationTargetName: name, AnnotationCopyOnce: once, AnnotationDeletionPolicy: deletion, AnnotationExcludeNamespaces: exclude,
		})
		problems := strings.Join(r.Problems, "\n")
		if r.TargetName != "" && len(validation.IsDNS1123Subdomain(r.TargetName)) > 0 {
			t.Errorf("target name %q taken", r.TargetName)
		}
		if r.TargetName == "" && !strings.Contains(problems, AnnotationTargetName) {
			t.Errorf("target name %q refused without a word", name)
		}
		if r.CopyOnce != (once == "true") || (once != "true" && once != "false") != strings.Contains(problems, AnnotationCopyOnce) {
			t.Errorf("copy-once %q read as %v, problems %q", once, r.CopyOnce, problems)
		}
		if r.Orphan != (deletion == DeletionPolicyOrphan) || (deletion != DeletionPolicyOrphan && deletion != DeletionPolicyDelete) != strings.Contains(problems, AnnotationDeletionPolicy) {
			t.Errorf("deletion-policy %q read as orphan %v, problems %q", deletion, r.Orphan, problems)
		}
		for _, g := range r.ExcludeNamespaces {
			for _, part := range strings.FieldsFunc(g.String(), func(c rune) bool { return c == '*' || c == '?' }) {
				if strings.Trim(part, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
					t.Errorf("exclusion %q taken", g)
				}
			}
		}
	})
}
