package peers

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// KubemirrorManagedByLabel is the label kubemirror stamps on its copies
// (value KubemirrorManagedByValue); with KubemirrorMirror it is what
// kubemirror itself takes as proof that a copy is its own.
const (
	KubemirrorManagedByLabel = KubemirrorPrefix + "managed-by"
	KubemirrorManagedByValue = "kubemirror"
)

// Origin is the source a copy must prove it was made from.
type Origin struct {
	Namespace, Name string
	// UID is the source's UID; kubemirror records it on its copies.
	UID types.UID
	// ResourceVersion is the source's resourceVersion as last seen;
	// kubernetes-replicator records the one it copied.
	ResourceVersion string
	// Ref is fleetmirror's source reference (CLUSTER/NS/NAME), which a
	// copy fleetmirror released records.
	Ref string
}

func (o Origin) String() string { return o.Namespace + "/" + o.Name }

// Proof reports whether obj carries tool's own record of being a copy,
// made by the tool itself, of the source o; if not, why says what is
// missing or names the other source. The three tools copy within one
// cluster only: the caller makes sure obj lives in the source's cluster.
//
// What counts, from each tool's source code:
//   - kubernetes-reflector writes ReflectorReflects "NS/NAME",
//     ReflectorReflectedVersion and ReflectorAutoReflects ("True" on the
//     copies it creates itself, "False" on pull copies a person created).
//   - kubernetes-replicator writes ReplicatorReplicatedFromVersion, the
//     resourceVersion of the source it copied, and nothing else naming the
//     source on push copies; pull copies carry ReplicatorReplicateFrom,
//     written by a person. A resourceVersion is that of a single write in
//     the cluster, so a push copy whose version is the source's current
//     one was copied from this very source.
//   - kubemirror labels its copies KubemirrorMirror and
//     KubemirrorManagedByLabel and records the source's namespace, name and
//     UID.
//   - Kyverno labels what a generate rule makes KyvernoManagedByLabel
//     "kyverno" and KyvernoPolicyName, and a clone also with its source's
//     namespace and UID (KyvernoSourceNamespace, KyvernoSourceUID).
//   - fleetmirror itself, releasing a synchronized mirror as a plain
//     object (deletion policy Orphan), records the source reference and
//     UID it was a mirror of (annotations.AnnotationReleasedFrom,
//     AnnotationReleasedFromUID). A copy made once is never marked: it
//     was its namespace's from the start.
//
// Pull copies are never proven: they were created by their namespace's
// owner (often through Helm or a GitOps tool), who also deletes them; as
// mirrors they would be deleted with the source. fleetmirror.io/mirror-from
// serves them instead.
func Proof(tool Tool, obj metav1.Object, o Origin) (ok bool, why string) {
	switch tool {
	case Reflector:
		return reflectorProof(obj.GetAnnotations(), o)
	case Replicator:
		return replicatorProof(obj.GetAnnotations(), o)
	case Kubemirror:
		return kubemirrorProof(obj.GetLabels(), obj.GetAnnotations(), o)
	case Kyverno:
		return kyvernoProof(obj.GetLabels(), o)
	case Fleetmirror:
		return releasedProof(obj.GetAnnotations(), o)
	default:
		return false, fmt.Sprintf("unknown tool %s", quote(string(tool)))
	}
}

func reflectorProof(a map[string]string, o Origin) (bool, string) {
	reflects, ok := a[ReflectorReflects]
	if !ok {
		return false, "no " + ReflectorReflects + " annotation"
	}
	if strings.TrimSpace(reflects) != o.String() {
		return false, fmt.Sprintf("it reflects %s, not %s", quote(reflects), o)
	}
	if !strings.EqualFold(strings.TrimSpace(a[ReflectorAutoReflects]), "true") {
		return false, "it is a pull copy (" + ReflectorAutoReflects + " is not true), which belongs to its namespace's owner"
	}
	if strings.TrimSpace(a[ReflectorReflectedVersion]) == "" {
		return false, "no " + ReflectorReflectedVersion + ": the reflector has not written it"
	}
	return true, ""
}

func replicatorProof(a map[string]string, o Origin) (bool, string) {
	version := a[ReplicatorReplicatedFromVersion]
	if version == "" {
		return false, "no " + ReplicatorReplicatedFromVersion + " annotation"
	}
	if from, pull := a[ReplicatorReplicateFrom]; pull {
		if from != o.String() {
			return false, fmt.Sprintf("it is replicated from %s, not %s", quote(from), o)
		}
		return false, "it is a pull copy (" + ReplicatorReplicateFrom + "), which belongs to its namespace's owner"
	}
	if version != o.ResourceVersion {
		return false, ReplicatorReplicatedFromVersion + " is not the source's current resourceVersion: a copy of another object, or of an older version of this one (the replicator updates it while it runs)"
	}
	return true, ""
}

func kubemirrorProof(l, a map[string]string, o Origin) (bool, string) {
	if l[KubemirrorMirror] != "true" || l[KubemirrorManagedByLabel] != KubemirrorManagedByValue {
		return false, "no kubemirror mirror labels"
	}
	if ns, name := a[KubemirrorSourceNamespace], a[KubemirrorSourceName]; ns != o.Namespace || name != o.Name {
		return false, fmt.Sprintf("it mirrors %s, not %s", quote(ns+"/"+name), o)
	}
	if uid, ok := a[KubemirrorSourceUID]; ok && uid != string(o.UID) {
		return false, "it mirrors an earlier object of that name (another " + KubemirrorSourceUID + ")"
	}
	return true, ""
}

func kyvernoProof(l map[string]string, o Origin) (bool, string) {
	if l[KyvernoManagedByLabel] != KyvernoManagedByValue || l[KyvernoPolicyName] == "" {
		return false, "no Kyverno generate labels"
	}
	uid, ok := l[KyvernoSourceUID]
	if !ok {
		return false, "not a clone (no " + KyvernoSourceUID + " label): Kyverno generated it from data"
	}
	if ns := l[KyvernoSourceNamespace]; ns != o.Namespace {
		return false, fmt.Sprintf("it is a clone of an object in namespace %s, not of %s", quote(ns), o)
	}
	if uid != string(o.UID) {
		return false, "it is a clone of another object (another " + KyvernoSourceUID + ")"
	}
	return true, ""
}

func releasedProof(a map[string]string, o Origin) (bool, string) {
	from, ok := a[annotations.AnnotationReleasedFrom]
	if !ok {
		return false, "no " + annotations.AnnotationReleasedFrom + " annotation"
	}
	if from != o.Ref {
		return false, fmt.Sprintf("it was released by the mirrors of %s, not %s", quote(from), o.Ref)
	}
	if a[annotations.AnnotationReleasedFromUID] != string(o.UID) {
		return false, "it was a mirror of an earlier object of that name (another " + annotations.AnnotationReleasedFromUID + ")"
	}
	return true, ""
}

// Prove returns the first of tools whose Proof obj carries, or "" and why
// none of them does ("reflector: ...; kubemirror: ...").
func Prove(tools []Tool, obj metav1.Object, o Origin) (Tool, string) {
	var whys []string
	for _, t := range tools {
		ok, why := Proof(t, obj, o)
		if ok {
			return t, ""
		}
		whys = append(whys, string(t)+": "+why)
	}
	return "", strings.Join(whys, "; ")
}

// ParseAdopt reads the value of annotations.AnnotationAdopt: a comma
// separated list of tools. It returns the known tools once each, in the
// order of Tools, and a problem for the unknown ones, which are ignored.
func ParseAdopt(value string) (tools []Tool, problems []string) {
	var unknown []string
	for _, e := range strings.Split(value, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case slices.Contains(Tools, Tool(e)):
			if !slices.Contains(tools, Tool(e)) {
				tools = append(tools, Tool(e))
			}
		default:
			// Entries are not lower-cased: every other value we read is
			// exact, and a hint fixes the spelling once for good.
			hint := quote(e)
			if lower := Tool(strings.ToLower(e)); slices.Contains(Tools, lower) {
				hint += fmt.Sprintf(" (did you mean %q?)", lower)
			}
			if !slices.Contains(unknown, hint) {
				unknown = append(unknown, hint)
			}
		}
	}
	slices.SortFunc(tools, func(a, b Tool) int { return slices.Index(Tools, a) - slices.Index(Tools, b) })
	if len(unknown) > 0 {
		const most = 5
		list := strings.Join(unknown[:min(len(unknown), most)], ", ")
		if len(unknown) > most {
			list += fmt.Sprintf(" and %d more", len(unknown)-most)
		}
		problems = append(problems, fmt.Sprintf("%s: ignored %s, not a tool; write a comma-separated list of %s",
			annotations.AnnotationAdopt, list, joinTools(Tools)))
	}
	return tools, problems
}

func joinTools(tools []Tool) string {
	s := make([]string, len(tools))
	for i, t := range tools {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// quote quotes a value read from an object for a message, cut to a length
// that fits an Event.
func quote(s string) string {
	const most = 64
	if utf8.RuneCountInString(s) <= most {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q...", string([]rune(s)[:most]))
}
