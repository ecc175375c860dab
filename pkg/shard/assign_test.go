package shard

import (
	"fmt"
	"math"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		name               string
		clusters, replicas []string
		eps                float64
	}{
		{"no replica", names("c", 5), nil, DefaultEpsilon},
		{"no cluster", nil, names("r", 3), DefaultEpsilon},
		{"one replica takes all", names("c", 7), []string{"r"}, DefaultEpsilon},
		{"12 over 3", names("member", 12), names("hub", 3), DefaultEpsilon},
		{"13 over 3", names("member", 13), names("hub", 3), DefaultEpsilon},
		{"100 over 7", names("member", 100), names("hub", 7), DefaultEpsilon},
		{"more replicas than clusters", names("c", 2), names("r", 5), DefaultEpsilon},
		{"no slack", names("c", 30), names("r", 3), 0},
		{"duplicates count once", []string{"a", "a", "b"}, []string{"r", "r"}, DefaultEpsilon},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Assign(tc.clusters, tc.replicas, tc.eps)
			clusters, replicas := dedupe(tc.clusters), dedupe(tc.replicas)
			if len(replicas) == 0 {
				if len(got) != 0 {
					t.Fatalf("with no replica got %v", got)
				}
				return
			}
			if len(got) != len(clusters) {
				t.Fatalf("assigned %d of %d clusters: %v", len(got), len(clusters), got)
			}
			load := map[string]int{}
			for _, c := range clusters {
				r, ok := got[c]
				if !ok {
					t.Fatalf("cluster %s not assigned", c)
				}
				load[r]++
			}
			limit := int(math.Ceil((1 + tc.eps) * float64(len(clusters)) / float64(len(replicas))))
			for r, n := range load {
				if n > limit {
					t.Errorf("replica %s serves %d clusters, over the bound %d", r, n, limit)
				}
			}
			// Same inputs in another order: same map, on every replica.
			rev := func(s []string) []string {
				out := make([]string, len(s))
				for i := range s {
					out[i] = s[len(s)-1-i]
				}
				return out
			}
			again := Assign(rev(tc.clusters), rev(tc.replicas), tc.eps)
			for c, r := range got {
				if again[c] != r {
					t.Errorf("order changed the assignment of %s: %s, then %s", c, r, again[c])
				}
			}
		})
	}
}

// moved counts the clusters whose replica differs between a and b.
func moved(a, b map[string]string) (n int, which []string) {
	for c, r := range a {
		if b[c] != r {
			n++
			which = append(which, c)
		}
	}
	return n, which
}

// TestAssignAdditionMovesAboutOneNth checks the point of consistent
// hashing: a replica added takes about 1/N of the clusters, and every
// cluster that moves, moves to it.
func TestAssignAdditionMovesAboutOneNth(t *testing.T) {
	for _, tc := range []struct{ clusters, replicas int }{{12, 3}, {100, 4}, {300, 9}, {1000, 15}} {
		t.Run(fmt.Sprintf("%d clusters, %d+1 replicas", tc.clusters, tc.replicas), func(t *testing.T) {
			cl, rs := names("member", tc.clusters), names("hub", tc.replicas)
			before := Assign(cl, rs, DefaultEpsilon)
			added := fmt.Sprintf("hub-%d", tc.replicas)
			after := Assign(cl, append(rs, added), DefaultEpsilon)
			n, which := moved(before, after)
			fair := float64(tc.clusters) / float64(tc.replicas+1)
			// Moves to the new replica are its fair share at most (the
			// bound); a few more may move between old replicas where the
			// bound tightened. 1.5x the fair share, plus one, is ample.
			if float64(n) > 1.5*fair+1 {
				t.Errorf("%d of %d clusters moved, fair share of the new replica is %.1f: %v", n, tc.clusters, fair, which)
			}
			toNew := 0
			for _, c := range which {
				if after[c] == added {
					toNew++
				}
			}
			if toNew == 0 || float64(toNew) < 0.5*fair {
				t.Errorf("the new replica took %d clusters, fair share %.1f", toNew, fair)
			}
		})
	}
}

// TestAssignRemovalMovesOnlyItsClusters: when a replica dies only its
// clusters move. The load bound can in principle spill others (a
// replica full before has room once the bound grows); these fleets, the
// sizes the hub runs at, show none. (Small fleets, balanced exactly, are
// TestAssignSmallFleet's.)
func TestAssignRemovalMovesOnlyItsClusters(t *testing.T) {
	for _, tc := range []struct{ clusters, replicas int }{{13, 3}, {20, 3}, {100, 4}, {300, 9}, {1000, 15}} {
		for dead := range tc.replicas {
			cl, rs := names("member", tc.clusters), names("hub", tc.replicas)
			before := Assign(cl, rs, DefaultEpsilon)
			rest := append(append([]string{}, rs[:dead]...), rs[dead+1:]...)
			after := Assign(cl, rest, DefaultEpsilon)
			_, which := moved(before, after)
			for _, c := range which {
				if before[c] != rs[dead] {
					t.Errorf("%d clusters, %d replicas, %s died: %s moved from %s to %s", tc.clusters, tc.replicas, rs[dead], c, before[c], after[c])
				}
			}
		}
	}
}

// TestAssignSpill bounds, over many fleets, how many clusters of live
// replicas move when one dies (see Assign): under 1% of those that move.
func TestAssignSpill(t *testing.T) {
	extra, total := 0, 0
	for seed := range 20 {
		for _, tc := range []struct{ clusters, replicas int }{{13, 3}, {20, 4}, {100, 4}, {300, 9}} {
			cl := names(fmt.Sprintf("m%d", seed), tc.clusters)
			rs := names(fmt.Sprintf("h%d", seed), tc.replicas)
			before := Assign(cl, rs, DefaultEpsilon)
			_, which := moved(before, Assign(cl, rs[1:], DefaultEpsilon))
			for _, c := range which {
				if before[c] != rs[0] {
					extra++
				}
			}
			total += len(which)
		}
	}
	if float64(extra) > 0.01*float64(total) {
		t.Errorf("%d of %d clusters that moved when a replica died were not its own", extra, total)
	}
}

// TestAssignSmallFleet: up to ExactUpTo clusters per replica, every
// replica serves the fair share rounded down or up (the issue's fleet of
// the hub and six members over r1, r2 and r3 came out 4/3/0), and a
// replica that comes or goes moves, besides its own clusters, at most
// one more: a cluster its ring owner takes back as its share grows. Where
// the others' share grows past ExactUpTo, the load bound takes over, and
// up to a fair share more go back to their ring owners.
func TestAssignSmallFleet(t *testing.T) {
	issue := append([]string{"hub"}, names("member", 6)...)
	for _, tc := range []struct {
		name               string
		clusters, replicas []string
	}{
		{"the issue's 7 over r1-r3", issue, []string{"r1", "r2", "r3"}},
		{"7 over 3", names("c", 7), names("hub", 3)},
		{"12 over 3", names("member", 12), names("hub", 3)},
		{"5 over 4", names("member", 5), names("hub", 4)},
		{"9 over 4", names("m", 9), names("r", 4)},
		{"3 over 5", names("m", 3), names("r", 5)},
		{"16 over 4", names("member", 16), names("hub", 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, r := len(tc.clusters), len(tc.replicas)
			got := Assign(tc.clusters, tc.replicas, DefaultEpsilon)
			load := map[string]int{}
			for _, c := range tc.clusters {
				load[got[c]]++
			}
			for _, rep := range tc.replicas {
				if load[rep] != n/r && load[rep] != (n+r-1)/r {
					t.Errorf("%s serves %d of %d clusters over %d replicas: %v", rep, load[rep], n, r, load)
				}
			}
			for dead, gone := range tc.replicas {
				rest := append(append([]string{}, tc.replicas[:dead]...), tc.replicas[dead+1:]...)
				after := Assign(tc.clusters, rest, DefaultEpsilon)
				allowed := 1
				if (n+r-2)/(r-1) > ExactUpTo {
					allowed = n / r
				}
				for _, change := range []struct {
					what          string
					before, after map[string]string
				}{{gone + " leaves", got, after}, {gone + " joins", after, got}} {
					_, which := moved(change.before, change.after)
					extra := 0
					for _, c := range which {
						if change.before[c] != gone && change.after[c] != gone {
							extra++
						}
					}
					if extra > allowed {
						t.Errorf("%s: %d clusters moved between the others: %v", change.what, extra, which)
					}
				}
			}
		})
	}
}
