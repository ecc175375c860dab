package annotations

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseMirrorFrom(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  MirrorFrom
		// err is a part of the error's message; "" when the value parses.
		err string
		// form says the error is one of form, which either agent reports.
		form bool
		// remote says an error concerns only the hub.
		remote bool
	}{
		{value: "platform/db", want: MirrorFrom{Namespace: "platform", Name: "db"}},
		{value: " platform/db.creds ", want: MirrorFrom{Namespace: "platform", Name: "db.creds"}},
		{value: "eu-1/platform/db", want: MirrorFrom{Cluster: "eu-1", Namespace: "platform", Name: "db"}},
		{value: "eu-1.example.com/platform/db", want: MirrorFrom{Cluster: "eu-1.example.com", Namespace: "platform", Name: "db"}},
		{value: "", err: "write NAMESPACE/NAME", form: true},
		{value: "db", err: "write NAMESPACE/NAME", form: true},
		{value: "a/b/c/d", err: "write NAMESPACE/NAME", form: true},
		{value: strings.Repeat("a", MaxAnnotationLength+1), err: "over the limit", form: true},
		{value: "/db", err: "empty namespace"},
		{value: "platform/", err: "empty name"},
		{value: "Platform/db", err: `namespace "Platform" is not a valid name`},
		{value: "platform/DB", err: `name "DB" is not a valid name`},
		{value: "a.b/db", err: `namespace "a.b"`},
		{value: "platform/*", err: `name "*"`},
		{value: "/platform/db", err: "empty cluster"},
		{value: "EU/platform/db", err: `cluster "EU"`, remote: true},
		{value: "eu-1/platform/", err: "empty name", remote: true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			got, err := ParseMirrorFrom(tc.value)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				if got.String() != strings.TrimSpace(tc.value) {
					t.Errorf("String() = %q, want the value as written", got.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
			if errors.Is(err, ErrMirrorFromForm) != tc.form {
				t.Errorf("errors.Is(ErrMirrorFromForm) = %t, want %t", !tc.form, tc.form)
			}
			if got.Remote() != tc.remote {
				t.Errorf("Remote() = %t, want %t: the wrong agent would report it", got.Remote(), tc.remote)
			}
		})
	}
}

func TestParseAllowPullInto(t *testing.T) {
	for _, tc := range []struct {
		value    string
		local    []string // namespaces allowed locally
		notLocal []string
		remote   [][2]string // cluster, namespace allowed
		problems int
	}{
		{value: "", notLocal: []string{"a", "default"}},
		{value: "team-a, app-*", local: []string{"team-a", "app-1"}, notLocal: []string{"team-b", "app"}},
		{value: "*", local: []string{"anything"}},
		{value: "eu-*/team-a, hub/*", remote: [][2]string{{"eu-1", "team-a"}, {"hub", "x"}}, notLocal: []string{"team-a"}},
		{value: "all", problems: 1, notLocal: []string{"all", "x"}},
		{value: "all-labeled, team-a", problems: 1, local: []string{"team-a"}},
		{value: "Bad_NS, a/b/c, /x, x/, ok", problems: 4, local: []string{"ok"}},
		{value: "all-labelled", problems: 1},
		{value: strings.Repeat("a,", MaxAnnotationLength), problems: 1, notLocal: []string{"a"}},
	} {
		t.Run(tc.value[:min(len(tc.value), 40)], func(t *testing.T) {
			c := ParseAllowPullInto(tc.value)
			if len(c.Problems) != tc.problems {
				t.Errorf("problems %q, want %d", c.Problems, tc.problems)
			}
			for _, ns := range tc.local {
				if !c.AllowsLocal(ns) {
					t.Errorf("%q does not allow %s", tc.value, ns)
				}
			}
			for _, ns := range tc.notLocal {
				if c.AllowsLocal(ns) {
					t.Errorf("%q allows %s", tc.value, ns)
				}
			}
			for _, r := range tc.remote {
				if !c.AllowsRemote(r[0], r[1]) {
					t.Errorf("%q does not allow %s/%s", tc.value, r[0], r[1])
				}
			}
			if c.AllowsRemote("other", "other") && !strings.Contains(tc.value, "*/*") {
				t.Errorf("%q allows every cluster and namespace", tc.value)
			}
		})
	}
}

// FuzzParseMirrorFrom checks that no value crashes the parser and that an
// accepted reference has every part valid and reads back as written.
func FuzzParseMirrorFrom(f *testing.F) {
	for _, s := range []string{"ns/name", "c/ns/name", "", "/", "//", "a/b/c/d", "NS/x", "ns/a.b", "ns/*", " ns/x "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		m, err := ParseMirrorFrom(value)
		if err != nil {
			return
		}
		for _, p := range []string{m.Namespace, m.Name} {
			if p == "" || strings.ContainsAny(p, "/ *?") || !utf8.ValidString(p) {
				t.Fatalf("accepted malformed part %q from %q", p, value)
			}
		}
		if again, err := ParseMirrorFrom(m.String()); err != nil || again != m {
			t.Fatalf("%q parsed to %+v, which reads back as %+v, %v", value, m, again, err)
		}
	})
}

// FuzzParseAllowPullInto checks that no value crashes the parser and that
// every accepted pattern is well formed and never a keyword.
func FuzzParseAllowPullInto(f *testing.F) {
	for _, s := range []string{"a, b", "app-*", "*/shared", "all,all-labeled", "/x", "a/b/c", "x[", strings.Repeat("a,", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		c := ParseAllowPullInto(value)
		for _, p := range append(c.Local, remoteNamespaces(c.Remote)...) {
			if p.Raw == "" || strings.ContainsAny(p.Raw, ",/ []\\") || !utf8.ValidString(p.Raw) || p.Kind == All || p.Kind == AllLabeled {
				t.Fatalf("accepted malformed pattern %+v from %q", p, value)
			}
		}
		c.AllowsLocal("team-a")
		c.AllowsRemote("eu-1", "team-a")
	})
}
