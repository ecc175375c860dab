package targets

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// DefaultExcludedNamespaces are never targeted unless the operator says so.
// The agent's own namespace is added at start-up.
var DefaultExcludedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Namespace is what target resolution needs to know of a namespace.
type Namespace struct {
	Name   string
	Labels map[string]string
	// Terminating namespaces refuse new objects; they are never targeted.
	Terminating bool
}

// Policy is the operator's side of target resolution.
type Policy struct {
	// Included, when not empty, limits targets to namespaces matching one glob.
	Included glob.List
	// Excluded namespaces (globs) are never targeted, whatever the entry.
	Excluded glob.List
	// MaxTargets bounds the targets of one source; zero means no bound.
	MaxTargets int
	// SourceExcluded are the namespaces the source itself excludes
	// (fleetmirror.io/exclude-namespaces); Plan sets them from the request.
	SourceExcluded glob.List
}

// Allows reports whether the operator, and the source's own exclusions,
// let mirrors into namespace ns.
func (p Policy) Allows(ns string) bool {
	if p.Excluded.Match(ns) || p.SourceExcluded.Match(ns) {
		return false
	}
	return len(p.Included) == 0 || p.Included.Match(ns)
}

// Excluding returns a copy of p that also excludes the namespaces of more.
func (p Policy) Excluding(more ...glob.Glob) Policy {
	p.Excluded = append(slices.Clip(p.Excluded), more...)
	return p
}

// Limit is the bound for a source asking for perSource targets (zero: unset).
func (p Policy) Limit(perSource int) int {
	if perSource > 0 && (p.MaxTargets == 0 || perSource < p.MaxTargets) {
		return perSource
	}
	return p.MaxTargets
}

// Result is the outcome of Resolve. Every list is sorted.
type Result struct {
	// Namespaces receive a mirror.
	Namespaces []string
	// Skipped matched but are over the limit.
	Skipped []string
	// Refused were named explicitly, or selected by the namespace
	// selector, but the policy excludes them or the namespace opted out
	// with LabelAllowMirrors=false.
	Refused []string
	// Missing were named explicitly but do not exist or are terminating.
	// A selected namespace exists by definition and is never Missing.
	Missing []string
}

// Resolve picks the namespaces of one cluster that the patterns reach.
// sourceNamespace is never a target (pass "" when the source lives in
// another cluster). limit bounds the result; the first names in sort order
// win, so the choice is the same on every reconcile. Plan does the same in
// each cluster it resolves in, and says why candidates were dropped.
func Resolve(patterns []annotations.Pattern, sourceNamespace string, namespaces []Namespace, policy Policy, limit int) Result {
	return resolveIn(&Cluster{Namespaces: namespaces}, patterns, nil, sourceNamespace, policy, limit, nil)
}

// resolveIn is Resolve in cluster c, whose Excluded namespaces are refused
// too, with the namespaces sel selects (nil: none) as targets beside the
// patterns'. rec, when not nil, records a Decision for every candidate
// dropped.
//
// It runs for every source on every namespace event, over every namespace
// of the cluster: the chosen ones are marked by position in the namespaces
// sorted by name (the agents pass them sorted; any other order is sorted
// here), so that it builds no map and the result needs no sort.
func resolveIn(c *Cluster, patterns []annotations.Pattern, sel labels.Selector, sourceNamespace string, policy Policy, limit int, rec *recorder) Result {
	var res Result
	namespaces := sortedByName(c.Namespaces)
	find := func(name string) (*Namespace, int) {
		i, ok := slices.BinarySearchFunc(namespaces, name, func(ns Namespace, name string) int { return strings.Compare(ns.Name, name) })
		if !ok {
			return nil, -1
		}
		return &namespaces[i], i
	}
	allows := func(name string) bool { return policy.Allows(name) && !c.Excluded.Match(name) }
	chosen := make([]bool, len(namespaces))
	for _, p := range patterns {
		if p.Kind == annotations.Name {
			ns, i := find(p.Raw)
			switch {
			case p.Raw == sourceNamespace:
				rec.sourceNamespace(c.Name, p.Raw)
			case !allows(p.Raw) || ns != nil && optedOut(ns):
				res.Refused = append(res.Refused, p.Raw)
				rec.refused(c, policy, p.Raw)
			case ns == nil || ns.Terminating:
				res.Missing = append(res.Missing, p.Raw)
				rec.missing(c.Name, p.Raw, ns != nil)
			case !c.holds(p.Raw):
				// Not refused: it is a target once it holds one.
				rec.notWithin(c, p.Raw)
			default:
				chosen[i] = true
			}
			continue
		}
		for i := range namespaces {
			ns := &namespaces[i]
			if chosen[i] || ns.Name == sourceNamespace || ns.Terminating || optedOut(ns) || !p.Match(ns.Name) || !allows(ns.Name) || !c.holds(ns.Name) {
				continue
			}
			if p.Kind == annotations.AllLabeled && ns.Labels[annotations.LabelAllowMirrors] != "true" {
				continue
			}
			chosen[i] = true
		}
	}
	// A namespace labelled to match the selector is chosen as deliberately
	// as one named: dropping it is reported like dropping a name, except
	// that it exists by definition, so a terminating one is not Missing.
	for i := range namespaces {
		ns := &namespaces[i]
		if sel == nil || chosen[i] || !sel.Matches(labels.Set(ns.Labels)) {
			continue
		}
		switch {
		case ns.Name == sourceNamespace:
			rec.sourceNamespace(c.Name, ns.Name)
		case !allows(ns.Name) || optedOut(ns):
			res.Refused = append(res.Refused, ns.Name)
			rec.refused(c, policy, ns.Name)
		case ns.Terminating:
			rec.missing(c.Name, ns.Name, true)
		case !c.holds(ns.Name):
			rec.notWithin(c, ns.Name)
		default:
			chosen[i] = true
		}
	}
	for i, ok := range chosen {
		if ok {
			res.Namespaces = append(res.Namespaces, namespaces[i].Name)
		}
	}
	slices.Sort(res.Refused)
	slices.Sort(res.Missing)
	res.Refused = slices.Compact(res.Refused)
	res.Missing = slices.Compact(res.Missing)
	if limit > 0 && len(res.Namespaces) > limit {
		res.Skipped = res.Namespaces[limit:]
		res.Namespaces = res.Namespaces[:limit:limit]
		for _, name := range res.Skipped {
			rec.overLimit(c.Name, name, limit)
		}
	}
	if rec.explaining() && (len(patterns) > 0 || sel != nil) {
		byName := make(map[string]bool, len(res.Namespaces)+len(res.Skipped))
		for i, ok := range chosen {
			if ok {
				byName[namespaces[i].Name] = true
			}
		}
		rec.unchosen(c, patterns, sel, sourceNamespace, policy, byName)
	}
	return res
}

// sortedByName returns namespaces sorted by name: namespaces itself when
// it is (the agents' snapshots are), else a sorted copy.
func sortedByName(namespaces []Namespace) []Namespace {
	byName := func(a, b Namespace) int { return strings.Compare(a.Name, b.Name) }
	if slices.IsSortedFunc(namespaces, byName) {
		return namespaces
	}
	out := slices.Clone(namespaces)
	slices.SortFunc(out, byName)
	return out
}

func optedOut(ns *Namespace) bool {
	return ns.Labels[annotations.LabelAllowMirrors] == "false"
}
