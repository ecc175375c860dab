package peers

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// matching is how a tool matches one regular expression of a namespace
// list against a namespace name. The two differ where it matters: an
// alternation without a group.
type matching int

const (
	// firstMatch is the reflector's: .NET Regex.Match(name, pattern) must
	// succeed and the first match found (leftmost, alternatives tried in
	// order) must cover the whole name. "team|team-a" never allows team-a:
	// "team" is found first, and it is shorter than the name.
	firstMatch matching = iota
	// wrapped is the replicator's: the pattern, trimmed, gets a leading ^
	// and a trailing $ unless it already has them, and Go's
	// regexp.MatchString decides. "a|b" becomes ^a|b$: any name starting
	// with a, or ending with b.
	wrapped
)

// regexAlt is one alternative of a pattern: its glob, and its anchors.
type regexAlt struct {
	glob       string
	start, end bool
	// unbounded is true when it ends with .* or .+: a match at the start
	// of a name then always reaches its end.
	unbounded bool
}

// regexGlobs translates one regular expression of a namespace list into
// glob entries of fleetmirror's target-namespaces that select exactly the
// same namespace names, or says why that cannot be done. Only literals, .
// (one character: names have no newline), .* and .+, ^ and $ at the ends,
// and an alternation (alone, or as one group around the whole) translate;
// every other construct, and every alternation whose meaning under the
// tool's matching is not "one of these whole names or globs", does not.
// An empty pattern selects nothing: both tools skip it.
func regexGlobs(pattern string, m matching) ([]string, error) {
	p := strings.TrimSpace(pattern)
	if p == "" {
		return nil, nil
	}
	if m == wrapped {
		// replicate/common/common.go BuildStrictRegex.
		if !strings.HasPrefix(p, "^") {
			p = "^" + p
		}
		if !strings.HasSuffix(p, "$") {
			p += "$"
		}
		if _, err := regexp.Compile(p); err != nil {
			return nil, fmt.Errorf("the replicator cannot compile it (%v) and skips it", err)
		}
	}
	alts, err := parseAlts(p)
	if err != nil {
		return nil, err
	}
	if err := checkAlts(alts, m); err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, a := range alts {
		if err := checkEntry(a.glob); err != nil {
			return nil, err
		}
		if !seen[a.glob] {
			seen[a.glob] = true
			out = append(out, a.glob)
		}
	}
	return out, nil
}

// parseAlts reads p as ^?(alts)$? (one group around the whole, the anchors
// outside it applying to every alternative) or as alternatives each with
// its own anchors.
func parseAlts(p string) ([]regexAlt, error) {
	body := p
	start := strings.HasPrefix(body, "^")
	body = strings.TrimPrefix(body, "^")
	end := strings.HasSuffix(body, "$") && !strings.HasSuffix(body, `\$`)
	if end {
		body = strings.TrimSuffix(body, "$")
	}
	if strings.HasPrefix(body, "(") && strings.HasSuffix(body, ")") && strings.Count(body, "(") == 1 && strings.Count(body, ")") == 1 {
		inner := strings.TrimPrefix(body[1:len(body)-1], "?:")
		var alts []regexAlt
		for _, s := range strings.Split(inner, "|") {
			a, err := parseAlt(s)
			if err != nil {
				return nil, err
			}
			a.start, a.end = start, end
			alts = append(alts, a)
		}
		return alts, nil
	}
	var alts []regexAlt
	for _, s := range strings.Split(p, "|") {
		a := regexAlt{start: strings.HasPrefix(s, "^")}
		s = strings.TrimPrefix(s, "^")
		if strings.HasSuffix(s, "$") && !strings.HasSuffix(s, `\$`) {
			a.end = true
			s = strings.TrimSuffix(s, "$")
		}
		parsed, err := parseAlt(s)
		if err != nil {
			return nil, err
		}
		parsed.start, parsed.end = a.start, a.end
		alts = append(alts, parsed)
	}
	return alts, nil
}

// parseAlt translates one alternative without anchors into a glob.
func parseAlt(s string) (regexAlt, error) {
	if s == "" {
		return regexAlt{}, errors.New("an empty alternative matches no namespace name; remove it")
	}
	var b strings.Builder
	a := regexAlt{}
	for i := 0; i < len(s); i++ {
		c := s[i]
		a.unbounded = false
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-':
			b.WriteByte(c)
		case c == '\\' && i+1 < len(s) && s[i+1] == '-':
			b.WriteByte('-')
			i++
		case c == '.':
			if i+1 < len(s) && (s[i+1] == '*' || s[i+1] == '+') {
				if i+2 < len(s) && strings.ContainsRune("*+?{", rune(s[i+2])) {
					return regexAlt{}, fmt.Errorf("%q is a lazy or repeated quantifier; glob patterns have no such thing", s[i:i+3])
				}
				if s[i+1] == '+' {
					b.WriteByte('?')
				}
				b.WriteByte('*')
				a.unbounded = true
				i++
				continue
			}
			b.WriteByte('?')
		default:
			return regexAlt{}, fmt.Errorf("%s; only letters, digits, '-', '.', '.*' and '.+' translate exactly into glob patterns", construct(s, i))
		}
	}
	a.glob = b.String()
	return a, nil
}

// construct names the regular expression construct at s[i] that has no
// exact glob.
func construct(s string, i int) string {
	c := s[i]
	switch {
	case c == '[':
		return "a character class ([...]) matches one of a set of characters"
	case c == '*' || c == '+' || c == '?' || c == '{':
		return fmt.Sprintf("the quantifier %q repeats the character before it", c)
	case c == '(' || c == ')':
		return "a group inside the pattern"
	case c == '^' || c == '$':
		return fmt.Sprintf("the anchor %q inside the pattern", c)
	case c == '\\':
		if i+1 < len(s) {
			return fmt.Sprintf("the escape %q", s[i:i+2])
		}
		return "a trailing '\\'"
	case c >= 'A' && c <= 'Z' || c == '_':
		return fmt.Sprintf("%q never appears in a namespace name (names are lowercase letters, digits and '-'; the tool matches case-sensitively)", c)
	default:
		return fmt.Sprintf("%q", c)
	}
}

// checkAlts refuses alternatives whose meaning under m is not "the whole
// name matches this glob".
func checkAlts(alts []regexAlt, m matching) error {
	if m == wrapped {
		for _, a := range alts {
			if len(alts) > 1 && !(a.start && a.end) {
				// ^a|b$ is (^a)|(b$).
				return errors.New("an alternation without a group: the replicator wraps the entry in ^ and $, which then bind to the first and last alternatives only, so they match names starting or ending with them; write each name as its own entry, or group them as (a|b)")
			}
		}
		return nil
	}
	// firstMatch: only a match at the name's start can cover it, so ^ changes
	// nothing. An alternative that is neither $-anchored nor unbounded may
	// match a prefix of a name first, and then a later alternative that
	// matches the whole name is never tried.
	for i, a := range alts[:len(alts)-1] {
		if a.end || a.unbounded {
			continue
		}
		if strings.ContainsAny(a.glob, "*?") {
			return fmt.Errorf("the alternative %q may match the start of a longer name before a later alternative is tried (the reflector takes the first match); group the whole as ^(...)$ to match whole names", a.glob)
		}
		for _, later := range alts[i+1:] {
			if prefixOverlaps(a.glob, later.glob) {
				return fmt.Errorf("the reflector finds %q first in names that %q would match whole, and then refuses them because the match is shorter than the name; group the whole as ^(...)$ if both were meant", a.glob, later.glob)
			}
		}
	}
	return nil
}

// prefixOverlaps reports whether glob g may match a name longer than the
// literal l that starts with l. It may answer true when it cannot tell.
func prefixOverlaps(l, g string) bool {
	lit := g
	if i := strings.IndexAny(g, "*?"); i >= 0 {
		lit = g[:i]
		return strings.HasPrefix(lit, l) || strings.HasPrefix(l, lit)
	}
	return len(lit) > len(l) && strings.HasPrefix(lit, l)
}

// checkEntry refuses a glob that fleetmirror's target-namespaces would not
// read as the same names: an invalid name, or a keyword.
func checkEntry(g string) error {
	r := annotations.Parse(nil, map[string]string{annotations.AnnotationTargetNamespaces: g})
	if len(r.Problems) > 0 {
		return fmt.Errorf("%q: %s", g, strings.TrimPrefix(r.Problems[0], annotations.AnnotationTargetNamespaces+": "))
	}
	if len(r.Local) != 1 || r.Local[0].Kind == annotations.All || r.Local[0].Kind == annotations.AllLabeled {
		return fmt.Errorf("a namespace named %q: in fleetmirror %q is a keyword for many namespaces", g, g)
	}
	return nil
}

// regexList translates a comma list of a tool's regular expressions. The
// problems name each entry that does not translate.
func regexList(key, value string, m matching) (globs []string, problems []string) {
	seen := map[string]bool{}
	for _, entry := range strings.Split(value, ",") {
		gs, err := regexGlobs(entry, m)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: entry %q: %v", key, strings.TrimSpace(entry), err))
			continue
		}
		for _, g := range gs {
			if !seen[g] {
				seen[g] = true
				globs = append(globs, g)
			}
		}
	}
	return globs, problems
}
