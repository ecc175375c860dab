package shard

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
)

// VirtualNodes is how many points each replica has on the ring. With 200
// points per replica the plain ring gives each replica its fair share of
// clusters within about ±15% (the spread falls as 1/sqrt(points)), so the
// load bound rarely has to move a cluster off its ring owner.
const VirtualNodes = 200

// DefaultEpsilon is the load slack ε: no replica serves more than
// ceil((1+ε)·clusters/replicas) clusters. The smaller ε, the more often a
// replica that dies or joins changes the bound enough to move clusters of
// other replicas too: over the fleets of TestAssignSpill, ε = 0.25 moves
// 2.4% more clusters than those of a dead replica, 0.5 moves 0.4%.
const DefaultEpsilon = 0.5

// Assign maps every cluster to one replica by consistent hashing with
// bounded loads (Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with
// Bounded Loads", 2018): each replica has VirtualNodes points on a hash
// ring; the clusters, taken in the order of their own hash, go to the
// first replica clockwise from their hash that serves fewer than
// ceil((1+ε)·clusters/replicas). It is pure and deterministic: every replica
// that sees the same clusters and replicas computes the same map, whatever
// order they are given in. With no replica the map is empty.
//
// Adding a replica moves about 1/N of the clusters to it (its ring points
// take over their arcs); removing one moves its clusters to the next
// replicas on the ring, and others only where the load bound spilled a
// cluster past its ring owner (see TestAssignRemovalMovesOnlyItsClusters).
//
// Hand-written, not a library: the function is forty lines, must give the
// same answer on every replica forever (a library's hash or ring layout
// changing in an upgrade would reshuffle the fleet during a rolling
// update), and the module's dependencies are kept to Kubernetes' own.
func Assign(clusters, replicas []string, epsilon float64) map[string]string {
	out := make(map[string]string, len(clusters))
	replicas = dedupe(replicas)
	clusters = dedupe(clusters)
	if len(replicas) == 0 || len(clusters) == 0 {
		return out
	}
	ring := make([]point, 0, len(replicas)*VirtualNodes)
	for i, r := range replicas {
		for v := range VirtualNodes {
			ring = append(ring, point{hash: hashOf(r + "#" + strconv.Itoa(v)), replica: i})
		}
	}
	slices.SortFunc(ring, func(a, b point) int {
		if a.hash != b.hash {
			return cmp.Compare(a.hash, b.hash)
		}
		return a.replica - b.replica
	})
	keyed := make([]point, len(clusters))
	for i, c := range clusters {
		keyed[i] = point{hash: hashOf(c), replica: i}
	}
	// The order clusters are placed in decides which ones the bound
	// spills; by hash, so that it favours no name.
	slices.SortFunc(keyed, func(a, b point) int {
		if a.hash != b.hash {
			return cmp.Compare(a.hash, b.hash)
		}
		return cmp.Compare(clusters[a.replica], clusters[b.replica])
	})
	if (len(clusters)+len(replicas)-1)/len(replicas) <= ExactUpTo {
		for c, r := range balanced(ring, keyed, len(replicas)) {
			out[clusters[c]] = replicas[r]
		}
		return out
	}
	capacity := int(math.Ceil((1 + max(epsilon, 0)) * float64(len(clusters)) / float64(len(replicas))))
	load := make([]int, len(replicas))
	for _, k := range keyed {
		start := onRing(ring, k.hash)
		for j := range ring {
			p := ring[(start+j)%len(ring)]
			if load[p.replica] < capacity {
				load[p.replica]++
				out[clusters[k.replica]] = replicas[p.replica]
				break
			}
		}
	}
	return out
}

// ExactUpTo is the largest fair share (clusters per replica, rounded up)
// at which Assign balances exactly: every replica serves the fair share
// rounded down or up. The ring's spread is ±15% of a large share, but
// whole clusters of a small one: under the load bound alone, 7 clusters
// came out 4/3/0 over three replicas.
const ExactUpTo = 4

// balanced assigns the clusters keyed (hash, index) exactly evenly over
// the replicas of ring, and returns each cluster's replica by index. It
// is a stable matching (Gale and Shapley's deferred acceptance, clusters
// proposing): a cluster prefers the replicas in the order the ring meets
// them clockwise from its hash, as the ring alone would place it; a
// replica prefers the clusters whose hash lies closest before its point,
// which are those it owns on the ring. Each replica takes the fair share
// rounded down, and the clusters' count mod the replicas' take one more:
// those the ring gives the most clusters. So most clusters stay with
// their ring owner, and when a replica comes or goes, the clusters that
// move are, besides its own, the few that the changed shares push on
// (TestAssignSmallFleetMoves).
func balanced(ring []point, keyed []point, replicas int) []int {
	n := len(keyed)
	// prefs[c] are the replicas in c's order; rank[c][r] is how far r's
	// first point lies clockwise from c's hash.
	prefs := make([][]int, n)
	rank := make([][]uint64, n)
	natural := make([]int, replicas)
	for _, k := range keyed {
		c, start := k.replica, onRing(ring, k.hash)
		rank[c] = make([]uint64, replicas)
		for j := 0; j < len(ring) && len(prefs[c]) < replicas; j++ {
			p := ring[(start+j)%len(ring)]
			if !slices.Contains(prefs[c], p.replica) {
				prefs[c] = append(prefs[c], p.replica)
				rank[c][p.replica] = p.hash - k.hash // wraps around the ring
			}
		}
		natural[prefs[c][0]]++
	}
	capacity := make([]int, replicas)
	order := make([]int, replicas)
	for r := range order {
		order[r] = r
	}
	slices.SortStableFunc(order, func(a, b int) int { return natural[b] - natural[a] })
	for i, r := range order {
		capacity[r] = n / replicas
		if i < n%replicas {
			capacity[r]++
		}
	}
	held := make([][]int, replicas)
	next := make([]int, n)
	free := make([]int, 0, n)
	for i := len(keyed) - 1; i >= 0; i-- {
		free = append(free, keyed[i].replica)
	}
	out := make([]int, n)
	for len(free) > 0 {
		c := free[len(free)-1]
		free = free[:len(free)-1]
		r := prefs[c][next[c]]
		next[c]++
		out[c] = r
		held[r] = append(held[r], c)
		if len(held[r]) <= capacity[r] {
			continue
		}
		// Over its share: r lets go of the cluster it holds least.
		worst := 0
		for i, o := range held[r] {
			if rank[o][r] > rank[held[r][worst]][r] {
				worst = i
			}
		}
		free = append(free, held[r][worst])
		held[r] = slices.Delete(held[r], worst, worst+1)
	}
	return out
}

// onRing is the index of the first point of ring at or after hash
// (len(ring) past the last one: taken modulo, the first).
func onRing(ring []point, hash uint64) int {
	i, _ := slices.BinarySearchFunc(ring, hash, func(p point, h uint64) int { return cmp.Compare(p.hash, h) })
	return i
}

// point is a position on the ring and what sits there (a replica's or a
// cluster's index).
type point struct {
	hash    uint64
	replica int
}

// hashOf is FNV-1a finished with SplitMix64's mixer: FNV alone spreads
// names that differ in their last characters ("member-1", "member-2")
// poorly over the high bits the ring orders by.
func hashOf(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	x := binary.BigEndian.Uint64(h.Sum(nil))
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func dedupe(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
