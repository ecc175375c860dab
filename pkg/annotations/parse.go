package annotations

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmirror/fleetmirror/pkg/glob"
	"github.com/fleetmirror/fleetmirror/pkg/transform"
)

// MaxAnnotationLength bounds AnnotationTargetNamespaces. A longer value is
// refused whole: it is far beyond any real target list and parsing it would
// only cost memory.
const MaxAnnotationLength = 16 * 1024

// PatternKind says how a Pattern matches names.
type PatternKind int

// Pattern kinds.
const (
	// Name matches exactly one name.
	Name PatternKind = iota
	// Glob matches with * (any run of characters) and ? (one character).
	Glob
	// All matches every namespace the policy allows.
	All
	// AllLabeled matches namespaces labelled LabelAllowMirrors=true.
	AllLabeled
)

// Pattern is one namespace or cluster pattern of a target entry.
type Pattern struct {
	// Raw is the pattern as written.
	Raw  string
	Kind PatternKind
	// glob is Raw parsed, for Kind Glob.
	glob glob.Glob
}

// Match reports whether name is matched by the pattern. All and AllLabeled
// match every name; the caller applies namespace labels and policy.
func (p Pattern) Match(name string) bool {
	switch p.Kind {
	case Name:
		return p.Raw == name
	case Glob:
		return p.glob.Match(name)
	default:
		return true
	}
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.Raw }

// RemoteTarget is a qualified CLUSTER/NS entry, handled by the hub.
type RemoteTarget struct {
	Cluster   Pattern
	Namespace Pattern
}

// String returns the entry as written.
func (r RemoteTarget) String() string { return r.Cluster.Raw + "/" + r.Namespace.Raw }

// Request is a source object's parsed mirroring request.
type Request struct {
	// Enabled is true when the source carries LabelEnabled=true.
	Enabled bool
	// Sync is true when AnnotationSync is "true".
	Sync bool
	// Local holds the unqualified entries: namespaces of the source's cluster.
	Local []Pattern
	// Remote holds the CLUSTER/NS entries.
	Remote []RemoteTarget
	// MaxTargets is the per-source limit; zero when not set.
	MaxTargets int
	// ClusterSelector limits the clusters Remote entries reach; nil selects all.
	ClusterSelector labels.Selector
	// NamespaceSelector selects namespaces by their labels as targets, in
	// addition to the entries; nil when the source has none. An invalid or
	// empty one is a Problem and selects nothing.
	NamespaceSelector labels.Selector
	// Transform holds the parsed AnnotationTransform; nil when the source
	// has none or its rules are invalid.
	Transform *Transform
	// TransformErr says why the rules of AnnotationTransform are invalid.
	// Unlike Problems it stops all mirroring of the source: mirroring
	// content its owner meant to change would be a surprise write.
	TransformErr error
	// ExcludeNamespaces are never targets, in any cluster, whatever entry
	// or selector matches them.
	ExcludeNamespaces glob.List
	// TargetName is the name of the mirrors; "" means the source's name.
	TargetName string
	// CopyOnce makes each mirror once and leaves it to its namespace.
	CopyOnce bool
	// KeepAdditions lets the mirrors keep what other writers add to them
	// (AnnotationKeepAdditions).
	KeepAdditions bool
	// Orphan keeps the mirrors as plain objects when the source stops
	// asking for them while it still exists (AnnotationDeletionPolicy).
	Orphan bool
	// Problems describes every other invalid part of the annotations.
	// Valid entries beside an invalid one are still in Local and Remote.
	Problems []string
}

// Transform is a source's parsed AnnotationTransform and
// AnnotationTransformStrict, as desired.Build applies them.
type Transform struct {
	Rules *transform.Rules
	// Strict skips a target when any rule fails for it, instead of
	// skipping only the failing rules.
	Strict bool
}

// Active reports whether the source asks to be mirrored at all.
func (r *Request) Active() bool { return r.Enabled && r.Sync }

// Parse reads the fleetmirror labels and annotations of a source object.
func Parse(objLabels, objAnnotations map[string]string) Request {
	return ParseAs(objLabels, objAnnotations, nil)
}

// ParseAs is Parse for values that come from elsewhere under the
// annotations' keys (a MirrorPolicy's spec, pkg/policy): names gives the
// name a key has there, and each problem says that name instead of the key.
// One parser reads both, so a policy means exactly what the same
// annotations mean.
func ParseAs(objLabels, objAnnotations, names map[string]string) Request {
	name := func(key string) string {
		if n, ok := names[key]; ok {
			return n
		}
		return key
	}
	r := Request{
		Enabled: objLabels[LabelEnabled] == "true",
		Sync:    objAnnotations[AnnotationSync] == "true",
	}
	if v, ok := objAnnotations[AnnotationSync]; ok && v != "true" && v != "false" {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %q is neither \"true\" nor \"false\"; mirroring is off", name(AnnotationSync), v))
	}
	local, remote, problems := parseEntries(name(AnnotationTargetNamespaces), objAnnotations[AnnotationTargetNamespaces], "ignored", parseNamespacePattern)
	r.Local, r.Remote, r.Problems = local, remote, append(r.Problems, problems...)
	if v, ok := objAnnotations[AnnotationMaxTargets]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %q is not a positive whole number; ignored", name(AnnotationMaxTargets), v))
		} else {
			r.MaxTargets = n
		}
	}
	if v, ok := objAnnotations[AnnotationTargetClusterSelector]; ok {
		sel, err := labels.Parse(v)
		if err != nil {
			// An unparsable selector must not widen the reach: select nothing.
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %v; no remote cluster is targeted", name(AnnotationTargetClusterSelector), err))
			sel = labels.Nothing()
		}
		r.ClusterSelector = sel
	}
	if v, ok := objAnnotations[AnnotationTargetNamespaceSelector]; ok {
		r.NamespaceSelector = r.parseNamespaceSelector(v, name)
	}
	if v, ok := objAnnotations[AnnotationExcludeNamespaces]; ok {
		r.ExcludeNamespaces = r.parseExcluded(v, name(AnnotationExcludeNamespaces))
	}
	if v, ok := objAnnotations[AnnotationTargetName]; ok {
		// Names of every kind are DNS subdomains or stricter; the API
		// server refuses a mirror whose name its kind does not allow, and
		// that target reports the error.
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %q is not a valid name: %s; mirrors keep the source's name", name(AnnotationTargetName), v, strings.Join(errs, "; ")))
		} else {
			r.TargetName = v
		}
	}
	r.CopyOnce = r.parseBool(objAnnotations, AnnotationCopyOnce, name)
	r.KeepAdditions = r.parseBool(objAnnotations, AnnotationKeepAdditions, name)
	if v, ok := objAnnotations[AnnotationDeletionPolicy]; ok {
		switch v {
		case DeletionPolicyOrphan:
			r.Orphan = true
		case DeletionPolicyDelete:
		default:
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %q is neither %s nor %s; mirrors are deleted", name(AnnotationDeletionPolicy), v, DeletionPolicyDelete, DeletionPolicyOrphan))
		}
	}
	if text, ok := objAnnotations[AnnotationTransform]; ok {
		// Rules may not write our own keys: they prove who owns a mirror.
		rules, err := transform.Parse(text, transform.DefaultLimits(), Prefix)
		if err != nil {
			r.TransformErr = err
		} else {
			r.Transform = &Transform{Rules: rules, Strict: objAnnotations[AnnotationTransformStrict] == "true"}
		}
	}
	return r
}

// parseExcluded parses AnnotationExcludeNamespaces: namespace names and
// globs; an invalid entry is a problem and excludes nothing. Keywords have
// no meaning here.
func (r *Request) parseExcluded(v, key string) glob.List {
	if len(v) > MaxAnnotationLength {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: value is %d bytes, over the limit of %d; ignored", key, len(v), MaxAnnotationLength))
		return nil
	}
	var out glob.List
	for _, entry := range strings.Split(v, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		p, err := parseNamePattern(entry, validation.DNS1123LabelMaxLength, validation.IsDNS1123Label)
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: entry %q: %v; it excludes nothing", key, entry, err))
			continue
		}
		g, err := glob.Parse(p.Raw)
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: entry %q: %v; it excludes nothing", key, entry, err))
			continue
		}
		out = append(out, g)
	}
	return out
}

// parseBool reads a "true"/"false" annotation; anything else is a problem
// and false.
func (r *Request) parseBool(objAnnotations map[string]string, key string, name func(string) string) bool {
	v, ok := objAnnotations[key]
	if ok && v != "true" && v != "false" {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %q is neither \"true\" nor \"false\"; taken as false", name(key), v))
	}
	return v == "true"
}

// Name returns the name of src's mirrors: TargetName, or srcName.
func (r *Request) Name(srcName string) string {
	if r.TargetName != "" {
		return r.TargetName
	}
	return srcName
}

// Renames reports whether src's mirrors have another name than srcName,
// so that a mirror beside the source, in its namespace, would not replace
// it.
func (r *Request) Renames(srcName string) bool { return r.Name(srcName) != srcName }

// parseNamespaceSelector parses AnnotationTargetNamespaceSelector. A
// selector that does not parse, or an empty one, selects nothing: the
// empty selector would select every namespace, and a typo must not.
func (r *Request) parseNamespaceSelector(v string, name func(string) string) labels.Selector {
	sel, err := labels.Parse(v)
	switch {
	case err != nil:
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %v; no namespace is selected", name(AnnotationTargetNamespaceSelector), err))
	case sel.Empty():
		r.Problems = append(r.Problems, fmt.Sprintf("%s: empty, which would select every namespace; no namespace is selected (write %s: %s to mean every namespace)",
			name(AnnotationTargetNamespaceSelector), name(AnnotationTargetNamespaces), KeywordAll))
	default:
		return sel
	}
	return labels.Nothing()
}

// RemoteNamespaceSelector is the NamespaceSelector where it reaches the
// clusters a hub targets: only together with a ClusterSelector, so that a
// namespace selector alone never fans out over every cluster. Nil when it
// does not apply there.
func (r *Request) RemoteNamespaceSelector() labels.Selector {
	if r.ClusterSelector == nil {
		return nil
	}
	return r.NamespaceSelector
}

// parseEntries parses a comma list of entries of annotation key: namespace
// patterns (parsed by parseNS) and CLUSTER/NS patterns. Blank and repeated
// entries are skipped; an invalid entry is a problem and the valid ones
// beside it still count. A value over MaxAnnotationLength is refused whole,
// and its problem ends with whole, which says what that means.
// target-namespaces and allow-pull-into share it.
func parseEntries(key, value, whole string, parseNS func(string) (Pattern, error)) (local []Pattern, remote []RemoteTarget, problems []string) {
	if len(value) > MaxAnnotationLength {
		return nil, nil, []string{fmt.Sprintf("%s: value is %d bytes, over the limit of %d; %s", key, len(value), MaxAnnotationLength, whole)}
	}
	seen := map[string]bool{}
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" || seen[entry] {
			continue
		}
		seen[entry] = true
		l, r, err := parseEntry(entry, parseNS)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: entry %q: %v", key, entry, err))
		case r != nil:
			remote = append(remote, *r)
		default:
			local = append(local, l)
		}
	}
	return local, remote, problems
}

// parseEntry parses one entry: a namespace pattern, or (remote not nil) a
// CLUSTER/NS pattern.
func parseEntry(entry string, parseNS func(string) (Pattern, error)) (local Pattern, remote *RemoteTarget, err error) {
	cluster, ns, qualified := strings.Cut(entry, "/")
	if !qualified {
		local, err = parseNS(entry)
		return local, nil, err
	}
	if strings.Contains(ns, "/") {
		return Pattern{}, nil, errors.New("more than one '/'; write CLUSTER/NAMESPACE")
	}
	if cluster == "" || ns == "" {
		return Pattern{}, nil, errors.New("empty cluster or namespace; write CLUSTER/NAMESPACE")
	}
	c, err := parseClusterPattern(cluster)
	if err != nil {
		return Pattern{}, nil, err
	}
	n, err := parseNS(ns)
	if err != nil {
		return Pattern{}, nil, err
	}
	return Pattern{}, &RemoteTarget{Cluster: c, Namespace: n}, nil
}

// misspelledKeywords are entries people write meaning a keyword. They are
// valid namespace names, so without this list they would silently target a
// namespace that does not exist.
var misspelledKeywords = map[string]string{
	"all-labelled":   KeywordAllLabeled,
	"all-label":      KeywordAllLabeled,
	"alllabeled":     KeywordAllLabeled,
	"labeled":        KeywordAllLabeled,
	"all-namespaces": KeywordAll,
	"any":            KeywordAll,
}

func parseNamespacePattern(s string) (Pattern, error) {
	switch s {
	case KeywordAll:
		return Pattern{Raw: s, Kind: All}, nil
	case KeywordAllLabeled:
		return Pattern{Raw: s, Kind: AllLabeled}, nil
	}
	lower := strings.ToLower(s)
	if kw, ok := misspelledKeywords[lower]; ok || lower == KeywordAll || lower == KeywordAllLabeled {
		if !ok {
			kw = lower
		}
		return Pattern{}, fmt.Errorf("unknown keyword; did you mean %q?", kw)
	}
	return parseNamePattern(s, validation.DNS1123LabelMaxLength, validation.IsDNS1123Label)
}

func parseClusterPattern(s string) (Pattern, error) {
	return parseNamePattern(s, validation.DNS1123SubdomainMaxLength, validation.IsDNS1123Subdomain)
}

// parseNamePattern accepts a name valid under isValid, or a glob whose
// literal characters are those of such names.
func parseNamePattern(s string, maxLen int, isValid func(string) []string) (Pattern, error) {
	if len(s) > maxLen {
		return Pattern{}, fmt.Errorf("longer than %d characters", maxLen)
	}
	if !strings.ContainsAny(s, "*?") {
		if errs := isValid(s); len(errs) > 0 {
			return Pattern{}, fmt.Errorf("not a valid name: %s", strings.Join(errs, "; "))
		}
		return Pattern{Raw: s, Kind: Name}, nil
	}
	// Target entries take only * and ? of the glob syntax: a namespace
	// list is no place for character classes and escapes.
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '*' || c == '?') {
			return Pattern{}, fmt.Errorf("invalid character %q in pattern; use lowercase letters, digits, '-', '.', '*' and '?'", c)
		}
	}
	g, err := glob.Parse(s)
	if err != nil {
		return Pattern{}, err
	}
	return Pattern{Raw: s, Kind: Glob, glob: g}, nil
}
