package fleet

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestAward: who keeps a cluster reached by several registrations.
func TestAward(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	read := func(name, id string, since time.Time) Claim {
		return Claim{Name: name, Since: since, Identity: id, Tried: true}
	}
	for _, tc := range []struct {
		name    string
		claims  []Claim
		serve   []string
		refused map[string]string
	}{
		{name: "one each", claims: []Claim{read("a", "X", t0), read("b", "Y", t0)}, serve: []string{"a", "b"}},
		{name: "the older keeps it", claims: []Claim{read("z-old", "X", t0), read("a-new", "X", t1)},
			serve: []string{"z-old"}, refused: map[string]string{"a-new": "z-old"}},
		{name: "same second: the name decides", claims: []Claim{read("b", "X", t0), read("a", "X", t0)},
			serve: []string{"a"}, refused: map[string]string{"b": "a"}},
		{name: "the hub's own cluster first",
			claims:  []Claim{read("old", "X", t0), {Name: "hub", Local: true, Since: t1, Identity: "X", Tried: true, Serving: true}},
			refused: map[string]string{"old": "hub"}},
		{name: "no claim before the hub's own identity",
			claims: []Claim{read("a", "X", t0), {Name: "hub", Local: true, Serving: true, Tried: true}}},
		{name: "the one serving keeps it, even younger",
			claims:  []Claim{read("old", "X", t0), {Name: "new", Since: t1, Identity: "X", Tried: true, Serving: true}},
			refused: map[string]string{"old": "new"}},
		{name: "an older claim not read yet holds the younger ones",
			claims: []Claim{{Name: "old", Since: t0}, read("new", "X", t1), read("newer", "Y", t1.Add(time.Hour))}},
		{name: "an older claim that could not be read holds nothing",
			claims: []Claim{{Name: "old", Since: t0, Tried: true}, read("new", "X", t1)}, serve: []string{"new"}},
		{name: "a younger claim not read yet holds nothing",
			claims: []Claim{read("old", "X", t0), {Name: "new", Since: t1}}, serve: []string{"old"}},
		{name: "three of one cluster", claims: []Claim{read("c", "X", t1), read("b", "X", t0), read("a", "X", t1)},
			serve: []string{"b"}, refused: map[string]string{"a": "b", "c": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The order the claims come in changes nothing.
			for _, claims := range [][]Claim{tc.claims, reversed(tc.claims)} {
				serve, refused := Award(claims)
				if diff := cmp.Diff(tc.serve, serve, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
					t.Errorf("served (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.refused, refused, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("refused (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func reversed(c []Claim) []Claim {
	out := slices.Clone(c)
	slices.Reverse(out)
	return out
}
