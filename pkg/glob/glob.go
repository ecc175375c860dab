// Package glob is fleetmirror's one pattern type. Users write globs in
// annotations (target entries, transform rules); operators write them in
// flags (excluded and included namespaces, strip keys) and in hub policy
// (allowed source clusters and namespaces). All of them are parsed here,
// once, into a Glob that is known to be well formed, so matching cannot
// fail: path.Match, which does the matching, answers false together with
// ErrBadPattern for a malformed pattern, and an exclusion that matches
// nothing fails open.
package glob

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Glob is a validated pattern in path.Match syntax: * matches any run of
// characters but '/', ? one character, [class] one character of a class,
// and \ escapes. The zero Glob is invalid and matches nothing.
type Glob struct {
	raw string
	// literal is true when raw has no glob syntax: Match compares strings.
	literal bool
}

// ErrEmpty is returned for an empty pattern.
var ErrEmpty = errors.New("empty pattern")

// Parse validates pattern. The error names the pattern and says what is
// wrong with it.
func Parse(pattern string) (Glob, error) {
	if pattern == "" {
		return Glob{}, ErrEmpty
	}
	// path.Match checks the whole pattern, whatever it is matched against.
	if _, err := path.Match(pattern, ""); err != nil {
		return Glob{}, fmt.Errorf("bad pattern %q: an unclosed '[' or a trailing '\\'", pattern)
	}
	return Glob{raw: pattern, literal: !strings.ContainsAny(pattern, `*?[\`)}, nil
}

// MustParse is Parse for patterns written in the code; it panics on error.
func MustParse(pattern string) Glob {
	g, err := Parse(pattern)
	if err != nil {
		panic(err)
	}
	return g
}

// Match reports whether name matches the whole pattern.
func (g Glob) Match(name string) bool {
	if g.literal {
		return g.raw == name
	}
	ok, _ := path.Match(g.raw, name) // validated by Parse: no error
	return ok && g.raw != ""
}

// Literal reports whether the pattern matches one name only.
func (g Glob) Literal() bool { return g.literal }

// String returns the pattern as written.
func (g Glob) String() string { return g.raw }

// List is a set of globs; it matches what any of them matches.
type List []Glob

// ParseList parses every pattern; the error names the first bad one.
func ParseList(patterns []string) (List, error) {
	out := make(List, 0, len(patterns))
	for _, p := range patterns {
		g, err := Parse(p)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// MustParseList is ParseList for patterns written in the code.
func MustParseList(patterns ...string) List {
	l, err := ParseList(patterns)
	if err != nil {
		panic(err)
	}
	return l
}

// Match reports whether any glob of l matches name.
func (l List) Match(name string) bool {
	for _, g := range l {
		if g.Match(name) {
			return true
		}
	}
	return false
}

// Strings returns the patterns as written.
func (l List) Strings() []string {
	out := make([]string, len(l))
	for i, g := range l {
		out[i] = g.raw
	}
	return out
}

// ParseNames parses globs over namespace or cluster names. Such names are
// lowercase and never hold '/' or white space, so a pattern with any of
// those could never match: it is refused instead of failing open.
func ParseNames(patterns []string) (List, error) {
	l, err := ParseList(patterns)
	if err != nil {
		return nil, err
	}
	for _, g := range l {
		if i := strings.IndexFunc(g.raw, func(r rune) bool {
			return r >= 'A' && r <= 'Z' || r == '/' || r == ' ' || r == '\t'
		}); i >= 0 {
			return nil, fmt.Errorf("pattern %q can never match a name: names are lowercase and hold no %q", g.raw, g.raw[i])
		}
	}
	return l, nil
}
