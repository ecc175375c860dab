package targets

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

// FuzzPlan resolves fuzzed annotations over a fixed fleet and holds Plan to
// reference, and to what Decisions promise.
func FuzzPlan(f *testing.F) {
	for _, s := range []struct {
		targets, max, selector, nsSelector, extra string
		src, flags, limit                         uint8
	}{
		{"team-a, team-b", "", "", "", "", 0, 0, 0},
		{"all, kube-system, nope", "2", "", "", "team-z", 2, 0, 3},
		{"all-labeled, app-*", "", "", "", "", 0, 16, 0},
		{"*/team-a, east/all", "3", "env=prod", "", "", 7, 1, 5},
		{"e*/all-labeled, hub/fleetmirror-system, west/nope", "", "env!=dev", "", "", 3, 1, 0},
		{"*/all", "1", "", "", "team-a", 7, 13, 2},
		{"*/team-a", "", "", "", "", 7, 3, 0},
		{"*/team-a", "", "", "", "", 7, 33, 0},
		{"", "", "", "tier=web", "", 7, 0, 0},
		{"team-a", "2", "", "tier in (web, db)", "", 0, 16, 0},
		{"*/default", "3", "env=prod", "tier=web", "", 7, 1, 0},
		{"", "", "env", "tier", "", 3, 1, 4},
		{"", "", "", "tier=web", "", 7, 1, 0},
		{"", "", "env=prod", "tier in (", "", 7, 1, 0},
	} {
		f.Add(s.targets, s.max, s.selector, s.nsSelector, s.extra, s.src, s.flags, s.limit)
	}
	names := slices.Collect(func(yield func(string) bool) {
		for _, c := range hubFleet().Clusters {
			if !yield(c.Name) {
				return
			}
		}
	})
	f.Fuzz(func(t *testing.T, targetsValue, maxTargets, selector, nsSelector, extra string, srcPick, flags, limit uint8) {
		ann := map[string]string{
			annotations.AnnotationTargetNamespaces:      targetsValue,
			annotations.AnnotationMaxTargets:            maxTargets,
			annotations.AnnotationTargetClusterSelector: selector,
		}
		if nsSelector != "" {
			ann[annotations.AnnotationTargetNamespaceSelector] = nsSelector
		}
		req := annotations.Parse(nil, ann)
		fleet := hubFleet()
		fleet.Loading = flags&2 != 0
		if flags&32 != 0 { // a sharded hub: another replica serves west
			fleet.Clusters[len(fleet.Clusters)-1].State = Elsewhere
		}
		if east := &fleet.Clusters[0]; extra != "" && !slices.ContainsFunc(east.Namespaces, func(n Namespace) bool { return n.Name == extra }) {
			east.Namespaces = append(east.Namespaces, ns(extra))
		}
		src := Source{Cluster: names[int(srcPick)%len(names)], Namespace: []string{"platform", "team-a", "default"}[int(srcPick)/len(names)%3]}
		policy := Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...), MaxTargets: int(limit % 8)}
		if flags&16 != 0 {
			policy.Included = glob.MustParseList("team-*", "app-?")
		}
		scope := Scope{Remote: flags&1 != 0}
		if flags&4 != 0 {
			scope.AllowedSourceClusters = glob.MustParseList("s*")
		}
		if flags&8 != 0 {
			scope.AllowedSourceNamespaces = glob.MustParseList("plat*")
		}

		got := Plan(req, src, fleet, policy, scope)
		if g, w := render(got), render(reference(req, src, fleet, policy, scope)); g != w {
			t.Fatalf("Plan:\n%s\nreference:\n%s", g, w)
		}
		scope.Explain = true
		explained := Plan(req, src, fleet, policy, scope)
		if g, w := render(explained), render(got); g != w {
			t.Fatalf("with Explain:\n%s\nwithout:\n%s", g, w)
		}
		for _, d := range got.Decisions {
			if !slices.Contains(explained.Decisions, d) {
				t.Errorf("decision %+v is missing with Explain", d)
			}
		}
		checkOutcome(t, got, src, scope, nil)
		checkOutcome(t, explained, src, scope, fleet.Clusters)
	})
}

// checkOutcome checks the promises of an Outcome's lists and Decisions. With
// explained clusters, every namespace of a covered cluster must be a target
// or have a Decision.
func checkOutcome(t *testing.T, o Outcome, src Source, scope Scope, explained []Cluster) {
	t.Helper()
	byPlace := func(a, b Decision) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace))
	}
	for i, d := range o.Decisions {
		if i > 0 && byPlace(o.Decisions[i-1], d) >= 0 {
			t.Errorf("decisions out of order or repeated: %+v, then %+v", o.Decisions[i-1], d)
		}
		if !slices.Contains(allReasons, d.Reason) || d.Message == "" {
			t.Errorf("decision %+v has an unknown reason or no message", d)
		}
	}
	decided := func(cluster, namespace string) bool {
		_, found := slices.BinarySearchFunc(o.Decisions, Decision{Cluster: cluster, Namespace: namespace}, byPlace)
		return found
	}
	targeted := map[string]bool{}
	for i, tg := range o.Targets {
		if i > 0 && cmp.Or(cmp.Compare(o.Targets[i-1].Cluster, tg.Cluster), cmp.Compare(o.Targets[i-1].Namespace, tg.Namespace)) >= 0 {
			t.Errorf("targets out of order or repeated: %v, then %v", o.Targets[i-1], tg)
		}
		if decided(tg.Cluster, tg.Namespace) || decided(tg.Cluster, "") || decided("", "") {
			t.Errorf("target %v is also dropped: %v", tg, placesOf(o.Decisions))
		}
		targeted[tg.Cluster+"/"+tg.Namespace] = true
	}
	for _, place := range slices.Concat(o.Skipped, o.Refused, o.Missing) {
		cluster, namespace, qualified := strings.Cut(place, "/")
		if !qualified {
			cluster, namespace = src.Cluster, place
		}
		if qualified != scope.Remote || !decided(cluster, namespace) || targeted[cluster+"/"+namespace] {
			t.Errorf("%s is skipped, refused or missing without its one Decision: %v", place, placesOf(o.Decisions))
		}
	}
	for _, cluster := range slices.Concat(o.Unreachable, o.Elsewhere) {
		if !decided(cluster, "") {
			t.Errorf("cluster %s is unreachable or elsewhere without a Decision", cluster)
		}
	}
	if !o.Relevant || o.Ignored != "" {
		return
	}
	for _, c := range explained {
		if !slices.Contains(o.Covered, c.Name) {
			continue
		}
		for _, n := range c.Namespaces {
			if !targeted[c.Name+"/"+n.Name] && !decided(c.Name, n.Name) && !decided(c.Name, "") {
				t.Errorf("namespace %s of cluster %s is neither a target nor explained: %v", n.Name, c.Name, placesOf(o.Decisions))
			}
		}
	}
}

// reference is target resolution as the member's and the hub's scopes did
// it before Plan replaced them (pkg/controller's LocalScope.Plan and
// pkg/hub's fleetScope.Plan, up to commit 40ad3b3), stated candidate by
// candidate: an independent oracle that FuzzPlan holds Plan to.
//
// The namespace selector, which came later, is stated here as documented
// in docs/annotations.md: it selects in the source's own cluster for the
// member, and for the hub in the clusters the cluster selector selects,
// only when the source has one.
func reference(req annotations.Request, src Source, fleet Fleet, policy Policy, scope Scope) Outcome {
	if !scope.Remote {
		out := Outcome{Relevant: len(req.Local) > 0 || req.NamespaceSelector != nil, Pending: 1}
		for _, c := range fleet.Clusters {
			if c.Name == src.Cluster {
				names, refused, missing := referenceIn(c, req.Local, req.NamespaceSelector, src.Namespace, policy)
				out = Outcome{Relevant: out.Relevant, Refused: refused, Missing: missing, Covered: []string{c.Name}}
				out.Targets, out.Skipped = referenceLimit(in(c.Name, names), policy.Limit(req.MaxTargets))
			}
		}
		for i, t := range out.Skipped {
			out.Skipped[i] = strings.TrimPrefix(t, src.Cluster+"/")
		}
		return out
	}
	var nsSel labels.Selector
	if req.ClusterSelector != nil {
		nsSel = req.NamespaceSelector
	}
	out := Outcome{Relevant: len(req.Remote) > 0 || nsSel != nil}
	switch {
	case !out.Relevant:
		return out
	case len(scope.AllowedSourceClusters) > 0 && !scope.AllowedSourceClusters.Match(src.Cluster),
		len(scope.AllowedSourceNamespaces) > 0 && !scope.AllowedSourceNamespaces.Match(src.Namespace):
		out.Ignored = fmt.Sprintf("The hub does not mirror sources of cluster %s, namespace %s to other clusters (--allowed-source-clusters, --allowed-source-namespaces)",
			src.Cluster, src.Namespace)
		return out
	case fleet.Loading:
		out.Pending = 1
		return out
	}
	var chosen []Target
	for _, c := range fleet.Clusters { // hubFleet is sorted
		var patterns []annotations.Pattern
		for _, entry := range req.Remote {
			if entry.Cluster.Match(c.Name) {
				patterns = append(patterns, entry.Namespace)
			}
		}
		selected := (len(patterns) > 0 || nsSel != nil) && (req.ClusterSelector == nil || req.ClusterSelector.Matches(labels.Set(c.Labels)))
		if c.Name == src.Cluster {
			continue
		}
		if c.State == Ready && c.KindSynced {
			out.Covered = append(out.Covered, c.Name)
		}
		switch {
		case !selected:
		case c.State == Elsewhere:
			out.Elsewhere = append(out.Elsewhere, c.Name)
		case c.State == Unreachable:
			out.Unreachable = append(out.Unreachable, c.Name)
			if !c.UnreachableSince.IsZero() {
				if out.UnreachableSince == nil {
					out.UnreachableSince = map[string]time.Time{}
				}
				out.UnreachableSince[c.Name] = c.UnreachableSince
			}
		case c.State == Pending || !c.KindSynced:
			out.Pending++
		default:
			out.Clusters++
			names, refused, missing := referenceIn(c, patterns, nsSel, "", policy)
			chosen = append(chosen, in(c.Name, names)...)
			for _, n := range refused {
				out.Refused = append(out.Refused, c.Name+"/"+n)
			}
			for _, n := range missing {
				out.Missing = append(out.Missing, c.Name+"/"+n)
			}
		}
	}
	out.Targets, out.Skipped = referenceLimit(chosen, policy.Limit(req.MaxTargets))
	return out
}

// referenceIn is one cluster's namespaces that the patterns or sel (nil:
// none) choose, and the named or selected ones refused or missing, each
// sorted.
func referenceIn(c Cluster, patterns []annotations.Pattern, sel labels.Selector, sourceNamespace string, policy Policy) (chosen, refused, missing []string) {
	open := func(name string) bool { return policy.Allows(name) && !c.Excluded.Match(name) }
	label := func(n Namespace) string { return n.Labels[annotations.LabelAllowMirrors] }
	for _, n := range c.Namespaces {
		selected := sel != nil && sel.Matches(labels.Set(n.Labels))
		if selected && n.Name != sourceNamespace && (label(n) == "false" || !open(n.Name)) {
			refused = append(refused, n.Name)
		}
		if n.Name == sourceNamespace || n.Terminating || label(n) == "false" || !open(n.Name) {
			continue
		}
		if selected || slices.ContainsFunc(patterns, func(p annotations.Pattern) bool {
			return p.Match(n.Name) && (p.Kind != annotations.AllLabeled || label(n) == "true")
		}) {
			chosen = append(chosen, n.Name)
		}
	}
	for _, p := range patterns {
		if p.Kind != annotations.Name || p.Raw == sourceNamespace {
			continue
		}
		i := slices.IndexFunc(c.Namespaces, func(n Namespace) bool { return n.Name == p.Raw })
		if !open(p.Raw) || i >= 0 && label(c.Namespaces[i]) == "false" {
			refused = append(refused, p.Raw)
		} else if i < 0 || c.Namespaces[i].Terminating {
			missing = append(missing, p.Raw)
		}
	}
	for _, l := range []*[]string{&chosen, &refused, &missing} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return chosen, refused, missing
}

// in places namespaces in cluster.
func in(cluster string, namespaces []string) []Target {
	var out []Target
	for _, n := range namespaces {
		out = append(out, Target{Cluster: cluster, Namespace: n})
	}
	return out
}

// referenceLimit keeps the first limit targets in (cluster, namespace)
// order and names the rest cluster/namespace.
func referenceLimit(chosen []Target, limit int) (kept []Target, skipped []string) {
	slices.SortFunc(chosen, func(a, b Target) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace))
	})
	for i, t := range chosen {
		if limit > 0 && i >= limit {
			skipped = append(skipped, t.Cluster+"/"+t.Namespace)
		} else {
			kept = append(kept, t)
		}
	}
	return kept, skipped
}
