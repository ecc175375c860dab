package fleet

import (
	"slices"
	"strings"
	"time"
)

// Claim is one registration's bid to serve the cluster it reaches. A hub
// knows a cluster by its identity (clusters.Cluster.Identity), not by the
// name it was registered under: two registrations that reach one cluster
// would otherwise each delete the mirrors written through the other.
type Claim struct {
	// Name is the registration's cluster name.
	Name string
	// Local marks the hub's own cluster, which always keeps its identity.
	Local bool
	// Since is when the registration was made (its Secret's
	// creationTimestamp); the older keeps the cluster.
	Since time.Time
	// Identity is the cluster's identity, "" until it was read.
	Identity string
	// Tried: the first read of the identity answered or failed.
	Tried bool
	// Serving: the registration serves its cluster already; it keeps it
	// until it goes away.
	Serving bool
}

// Award decides which registrations serve their cluster. A cluster served
// already stays with its registration. Otherwise the first claim in the
// order of Precedes takes it, and the later ones are refused, each mapped
// to the name of the registration that has the cluster. A claim waits
// (neither served nor refused) while its identity is unknown, or while a
// claim before it has not tried to read its own yet, so that the outcome
// does not depend on which identity was read first; the hub's own cluster
// must have its identity before any other claim is decided.
func Award(claims []Claim) (serve []string, refused map[string]string) {
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b Claim) int {
		if Precedes(a, b) {
			return -1
		}
		if Precedes(b, a) {
			return 1
		}
		return 0
	})
	holder := map[string]string{}
	for _, c := range sorted {
		if c.Serving && c.Identity != "" {
			if _, taken := holder[c.Identity]; !taken {
				holder[c.Identity] = c.Name
			}
		}
	}
	refused = map[string]string{}
	undecided := false // a claim before this one does not know its identity yet
	for _, c := range sorted {
		switch h, taken := holder[c.Identity]; {
		case c.Identity == "":
			if !c.Tried || c.Local {
				undecided = true
			}
		case c.Serving && h == c.Name:
		case taken:
			refused[c.Name] = h
		case !undecided:
			holder[c.Identity] = c.Name
			serve = append(serve, c.Name)
		}
	}
	return serve, refused
}

// Precedes reports whether registration a keeps a cluster that b reaches
// too: the hub's own cluster first, then the older registration, then the
// name.
func Precedes(a, b Claim) bool {
	if a.Local != b.Local {
		return a.Local
	}
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	return strings.Compare(a.Name, b.Name) < 0
}
