package annotations

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Pull mirrors: the destination's owner asks for a copy of a source with
// LabelPull and AnnotationMirrorFrom, and the source's owner allows it with
// AnnotationAllowPullInto. Both are parsed here, apart from Request: a pull
// mirror is not a source, and a source's consent is read only when a pull
// mirror asks for it.

// MirrorFrom is a parsed AnnotationMirrorFrom: the source a pull mirror
// asks for, of the pull mirror's own kind.
type MirrorFrom struct {
	// Cluster is empty for NS/NAME, a source in the pull mirror's own
	// cluster that the member agent serves, and set for CLUSTER/NS/NAME,
	// a source in another cluster that the hub serves.
	Cluster   string
	Namespace string
	Name      string
}

// Remote reports whether the reference names a cluster: the hub serves it.
func (m MirrorFrom) Remote() bool { return m.Cluster != "" }

// String returns the reference as written.
func (m MirrorFrom) String() string {
	if m.Cluster == "" {
		return m.Namespace + "/" + m.Name
	}
	return m.Cluster + "/" + m.Namespace + "/" + m.Name
}

// ErrMirrorFromForm says a mirror-from value is neither NS/NAME nor
// CLUSTER/NS/NAME. Either agent reports it; the other errors of a value of
// one form concern only the agent serving that form.
var ErrMirrorFromForm = errors.New("write NAMESPACE/NAME, or CLUSTER/NAMESPACE/NAME through the hub")

// ParseMirrorFrom parses an AnnotationMirrorFrom value. Every part must be
// a valid name: a namespace a DNS-1123 label, a cluster and an object name
// DNS-1123 subdomains. Errors say what is wrong in words for the pull
// mirror's owner; a value of neither form wraps ErrMirrorFromForm. A value
// of the CLUSTER/NS/NAME form with an invalid part is returned with its
// Cluster set, so that only the hub reports it.
func ParseMirrorFrom(value string) (MirrorFrom, error) {
	value = strings.TrimSpace(value)
	if len(value) > MaxAnnotationLength {
		return MirrorFrom{}, fmt.Errorf("%s: value is %d bytes, over the limit of %d: %w", AnnotationMirrorFrom, len(value), MaxAnnotationLength, ErrMirrorFromForm)
	}
	parts := strings.Split(value, "/")
	var m MirrorFrom
	switch len(parts) {
	case 2:
		m = MirrorFrom{Namespace: parts[0], Name: parts[1]}
	case 3:
		m = MirrorFrom{Cluster: parts[0], Namespace: parts[1], Name: parts[2]}
	default:
		return MirrorFrom{}, fmt.Errorf("%s: %q: %w", AnnotationMirrorFrom, value, ErrMirrorFromForm)
	}
	var problems []string
	check := func(what, s string, isValid func(string) []string) {
		if s == "" {
			problems = append(problems, "empty "+what)
			return
		}
		if errs := isValid(s); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s %q is not a valid name: %s", what, s, strings.Join(errs, "; ")))
		}
	}
	if len(parts) == 3 {
		check("cluster", m.Cluster, validation.IsDNS1123Subdomain)
	}
	check("namespace", m.Namespace, validation.IsDNS1123Label)
	check("name", m.Name, validation.IsDNS1123Subdomain)
	if len(problems) > 0 {
		return MirrorFrom{Cluster: m.Cluster}, fmt.Errorf("%s: %q: %s", AnnotationMirrorFrom, value, strings.Join(problems, "; "))
	}
	return m, nil
}

// PullConsent is a source's parsed AnnotationAllowPullInto: the namespaces
// whose pull mirrors may copy it.
type PullConsent struct {
	// Local holds the unqualified patterns: namespaces of the source's own
	// cluster, for the member agent.
	Local []Pattern
	// Remote holds the CLUSTER/NS patterns, for the hub.
	Remote []RemoteTarget
	// Problems describes every invalid entry; the valid entries beside it
	// still count.
	Problems []string
}

// ParseAllowPullInto parses an AnnotationAllowPullInto value: a comma list
// of namespace patterns (names and globs, as in target-namespaces) and
// CLUSTER/NS patterns. The keywords all and all-labeled are refused: "*"
// says every namespace, and a namespace label is the namespace owner's
// consent to receive mirrors, not the source owner's to give them.
func ParseAllowPullInto(value string) PullConsent {
	var c PullConsent
	c.Local, c.Remote, c.Problems = parseEntries(AnnotationAllowPullInto, value, "no pull is allowed", parsePullNamespace)
	return c
}

// parsePullNamespace is a namespace pattern of target-namespaces without
// its keywords.
func parsePullNamespace(s string) (Pattern, error) {
	p, err := parseNamespacePattern(s)
	if err != nil {
		return Pattern{}, err
	}
	if p.Kind == All || p.Kind == AllLabeled {
		return Pattern{}, fmt.Errorf("the keyword %s is not taken here; write \"*\" for every namespace", s)
	}
	return p, nil
}

// AllowsLocal reports whether a pull mirror in namespace ns of the source's
// own cluster may copy the source.
func (c PullConsent) AllowsLocal(ns string) bool {
	for _, p := range c.Local {
		if p.Match(ns) {
			return true
		}
	}
	return false
}

// AllowsRemote reports whether a pull mirror in namespace ns of cluster
// may copy the source.
func (c PullConsent) AllowsRemote(cluster, ns string) bool {
	for _, r := range c.Remote {
		if r.Cluster.Match(cluster) && r.Namespace.Match(ns) {
			return true
		}
	}
	return false
}
