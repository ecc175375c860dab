package glob

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestParseAndMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		wantErr string
		match   []string
		noMatch []string
	}{
		{pattern: "kube-system", match: []string{"kube-system"}, noMatch: []string{"kube-system2", "kube-", ""}},
		{pattern: "kube-*", match: []string{"kube-system", "kube-"}, noMatch: []string{"kub", "a/kube-x"}},
		{pattern: "team-?", match: []string{"team-a"}, noMatch: []string{"team-ab", "team-"}},
		{pattern: "[ab]-*", match: []string{"a-1", "b-"}, noMatch: []string{"c-1"}},
		{pattern: "meta.helm.sh/*", match: []string{"meta.helm.sh/release-name"}, noMatch: []string{"meta.helm.sh"}},
		{pattern: `a\*`, match: []string{"a*"}, noMatch: []string{"ab"}},
		{pattern: "*", match: []string{"anything", ""}, noMatch: []string{"a/b"}},
		// Malformed patterns: path.Match would answer false with
		// ErrBadPattern for every name, so an exclusion would exclude nothing.
		{pattern: "kube-[system", wantErr: `bad pattern "kube-[system"`},
		{pattern: "team-[", wantErr: `bad pattern "team-["`},
		{pattern: `trailing\`, wantErr: "bad pattern"},
		{pattern: "", wantErr: "empty pattern"},
	} {
		t.Run(tt.pattern, func(t *testing.T) {
			g, err := Parse(tt.pattern)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want %q", tt.pattern, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.pattern, err)
			}
			if g.String() != tt.pattern {
				t.Errorf("String() = %q", g.String())
			}
			for _, n := range tt.match {
				if !g.Match(n) {
					t.Errorf("%q does not match %q", tt.pattern, n)
				}
			}
			for _, n := range tt.noMatch {
				if g.Match(n) {
					t.Errorf("%q matches %q", tt.pattern, n)
				}
			}
		})
	}
}

func TestZeroGlobMatchesNothing(t *testing.T) {
	var g Glob
	for _, n := range []string{"", "a"} {
		if g.Match(n) {
			t.Errorf("zero Glob matches %q", n)
		}
	}
}

func TestParseNames(t *testing.T) {
	for _, tt := range []struct {
		patterns []string
		wantErr  string
	}{
		{patterns: []string{"kube-system", "team-*", "eu-?.prod"}},
		{patterns: []string{"kube-system", "Kube-*"}, wantErr: `pattern "Kube-*" can never match a name`},
		{patterns: []string{"team/a"}, wantErr: "can never match"},
		{patterns: []string{"ok", "kube-[system"}, wantErr: `bad pattern "kube-[system"`},
	} {
		l, err := ParseNames(tt.patterns)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("ParseNames(%q): %v", tt.patterns, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseNames(%q) error = %v, want %q", tt.patterns, err, tt.wantErr)
		case err == nil && strings.Join(l.Strings(), ",") != strings.Join(tt.patterns, ","):
			t.Errorf("ParseNames(%q) = %q", tt.patterns, l.Strings())
		}
	}
}

func TestListMatch(t *testing.T) {
	l := MustParseList("kube-*", "default")
	for n, want := range map[string]bool{"kube-system": true, "default": true, "team-a": false} {
		if l.Match(n) != want {
			t.Errorf("Match(%q) = %v", n, !want)
		}
	}
	if (List(nil)).Match("x") {
		t.Error("an empty list matches")
	}
}

// FuzzParse checks that a pattern Parse accepts never makes path.Match
// fail, and that Match agrees with path.Match on it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"kube-*", "team-[", "[a-c]?", `x\`, `\*`, "[^a]", "*", "a/b*"} {
		f.Add(s, "kube-system")
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		g, err := Parse(pattern)
		if err != nil {
			if _, merr := path.Match(pattern, name); pattern != "" && !errors.Is(merr, path.ErrBadPattern) {
				t.Fatalf("Parse(%q) refused a pattern path.Match takes: %v", pattern, err)
			}
			return
		}
		want, merr := path.Match(pattern, name)
		if merr != nil {
			t.Fatalf("Parse(%q) accepted a pattern path.Match refuses: %v", pattern, merr)
		}
		if got := g.Match(name); got != want {
			t.Fatalf("Match(%q, %q) = %v, path.Match = %v", pattern, name, got, want)
		}
	})
}
