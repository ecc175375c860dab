package peers

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

func TestRegexGlobs(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		m       matching
		want    []string
		// err is part of the reason when the pattern does not translate.
		err string
	}{
		{pattern: "team-a", m: firstMatch, want: []string{"team-a"}},
		{pattern: "  team-a ", m: firstMatch, want: []string{"team-a"}},
		{pattern: "", m: firstMatch},
		{pattern: "^team-a$", m: firstMatch, want: []string{"team-a"}},
		{pattern: "app-.*", m: firstMatch, want: []string{"app-*"}},
		{pattern: "^app-.*$", m: firstMatch, want: []string{"app-*"}},
		{pattern: ".*-prod", m: firstMatch, want: []string{"*-prod"}},
		{pattern: "app-.+", m: firstMatch, want: []string{"app-?*"}},
		{pattern: "ns-.", m: firstMatch, want: []string{"ns-?"}},
		{pattern: ".*", m: firstMatch, want: []string{"*"}},
		{pattern: `a\-b`, m: firstMatch, want: []string{"a-b"}},
		{pattern: "a|b", m: firstMatch, want: []string{"a", "b"}},
		{pattern: "a|a", m: firstMatch, want: []string{"a"}},
		{pattern: "team-a|team", m: firstMatch, want: []string{"team-a", "team"}},
		{pattern: "team|team-a", m: firstMatch, err: "finds \"team\" first"},
		{pattern: "(team|team-a)", m: firstMatch, err: "finds \"team\" first"},
		{pattern: "^(team|team-a)$", m: firstMatch, want: []string{"team", "team-a"}},
		{pattern: "(team|team-a)$", m: firstMatch, want: []string{"team", "team-a"}},
		{pattern: "team$|team-a", m: firstMatch, want: []string{"team", "team-a"}},
		{pattern: "(?:a|b)", m: firstMatch, want: []string{"a", "b"}},
		{pattern: "app-.*|db", m: firstMatch, want: []string{"app-*", "db"}},
		{pattern: "db|app-.*", m: firstMatch, want: []string{"db", "app-*"}},
		{pattern: "app|app-.*", m: firstMatch, err: "finds \"app\" first"},
		{pattern: "a.b|a-bc", m: firstMatch, err: "may match the start of a longer name"},
		{pattern: "namespace-[0-9]*", m: firstMatch, err: "character class"},
		{pattern: `ns\d`, m: firstMatch, err: `escape "\\d"`},
		{pattern: `ns\.a`, m: firstMatch, err: "escape"},
		{pattern: "Team", m: firstMatch, err: "never appears in a namespace name"},
		{pattern: "a_b", m: firstMatch, err: "never appears in a namespace name"},
		{pattern: "a+", m: firstMatch, err: "quantifier"},
		{pattern: "ab?", m: firstMatch, err: "quantifier"},
		{pattern: "a{2}", m: firstMatch, err: "quantifier"},
		{pattern: "x.*?", m: firstMatch, err: "lazy"},
		{pattern: "a||b", m: firstMatch, err: "empty alternative"},
		{pattern: "a(b|c)", m: firstMatch, err: "group inside"},
		{pattern: "a^b", m: firstMatch, err: "anchor"},
		{pattern: "all", m: firstMatch, err: "keyword"},
		{pattern: "all-labeled", m: firstMatch, err: "keyword"},
		{pattern: "any", m: firstMatch, err: "did you mean"},
		{pattern: "-a", m: firstMatch, err: "not a valid name"},

		{pattern: "team-a", m: wrapped, want: []string{"team-a"}},
		{pattern: "^team-a", m: wrapped, want: []string{"team-a"}},
		{pattern: "team-a$", m: wrapped, want: []string{"team-a"}},
		{pattern: "app-.*", m: wrapped, want: []string{"app-*"}},
		{pattern: ".*", m: wrapped, want: []string{"*"}},
		{pattern: "a|b", m: wrapped, err: "alternation without a group"},
		{pattern: "^a$|^b$", m: wrapped, want: []string{"a", "b"}},
		{pattern: "team|team-a", m: wrapped, err: "alternation without a group"},
		{pattern: "(a|b)", m: wrapped, want: []string{"a", "b"}},
		{pattern: "(team|team-a)", m: wrapped, want: []string{"team", "team-a"}},
		{pattern: "app-ns-[0-9]*", m: wrapped, err: "character class"},
		{pattern: "a(", m: wrapped, err: "cannot compile"},
		{pattern: "", m: wrapped},
	} {
		got, err := regexGlobs(tt.pattern, tt.m)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("regexGlobs(%q, %d) = %q, %v; want an error containing %q", tt.pattern, tt.m, got, err, tt.err)
		case tt.err == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("regexGlobs(%q, %d) = %q, %v; want %q", tt.pattern, tt.m, got, err, tt.want)
		}
	}
}

func TestRegexList(t *testing.T) {
	globs, problems := regexList("k", "team-a, app-.*,,team-a, ns-[0-9]+", firstMatch)
	if !slices.Equal(globs, []string{"team-a", "app-*"}) {
		t.Errorf("globs = %q", globs)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], `k: entry "ns-[0-9]+": a character class`) {
		t.Errorf("problems = %q", problems)
	}
}

// toolMatches is whether the tool lets pattern select name: the reflector
// as .NET does it (Go's regexp is leftmost-first like .NET's backtracking
// engine, and both read the constructs regexGlobs accepts alike), the
// replicator with Go's regexp, as it does.
func toolMatches(t *testing.T, pattern, name string, m matching) bool {
	p := strings.TrimSpace(pattern)
	if m == wrapped {
		if !strings.HasPrefix(p, "^") {
			p = "^" + p
		}
		if !strings.HasSuffix(p, "$") {
			p += "$"
		}
		return regexp.MustCompile(p).MatchString(name)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		t.Fatalf("%q translated, but does not compile: %v", pattern, err)
	}
	loc := re.FindStringIndex(name)
	return loc != nil && loc[1]-loc[0] == len(name)
}

// candidates are names to compare on: the fuzzer's, and names each glob
// matches or nearly matches.
func candidates(name string, globs []string) []string {
	out := []string{name}
	for _, g := range globs {
		for _, star := range []string{"", "a", "x-1", "ab-cd"} {
			n := strings.ReplaceAll(strings.ReplaceAll(g, "*", star), "?", "z")
			out = append(out, n, n+"a", "a"+n, n+"-x")
			if n != "" {
				out = append(out, n[:len(n)-1])
			}
		}
	}
	return out
}

// FuzzRegexGlobs checks that every translated pattern selects exactly the
// names the tool's own matching selects.
func FuzzRegexGlobs(f *testing.F) {
	for _, seed := range []struct{ pattern, name string }{
		{"team-a", "team-a"}, {"app-.*", "app-x"}, {"a|b", "ab"}, {"team|team-a", "team-a"},
		{"^(team|team-a)$", "team-a"}, {"(a|b)", "b"}, {".*-prod|db", "x-prod"}, {"a.b", "a-b"},
		{"db|app-.+", "app-"}, {"x$|x-.*", "x-y"}, {"ns-[0-9]*", "ns-1"}, {"a.*b.*c", "abxc"},
	} {
		f.Add(seed.pattern, seed.name)
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		for _, m := range []matching{firstMatch, wrapped} {
			globs, err := regexGlobs(pattern, m)
			if err != nil {
				continue
			}
			list, err := glob.ParseList(globs)
			if err != nil {
				t.Fatalf("%q gave invalid globs %q: %v", pattern, globs, err)
			}
			for _, n := range candidates(name, globs) {
				if len(validation.IsDNS1123Label(n)) > 0 {
					continue
				}
				if tool, ours := toolMatches(t, pattern, n, m), list.Match(n); tool != ours {
					t.Errorf("matching %d: %q selects %q: %t, its globs %q: %t", m, pattern, n, tool, globs, ours)
				}
			}
		}
	})
}
