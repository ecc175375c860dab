package targets

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/glob"
)

var downSince = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// memberFleet is a member agent's fleet: its own cluster "m". The tier
// labels are for namespace selectors.
func memberFleet() Fleet {
	return Fleet{Clusters: []Cluster{{Name: "m", Namespaces: []Namespace{
		ns("default"), ns("kube-system", "tier", "web"), ns("platform", "tier", "web"),
		ns("team-a", "tier", "web"), ns("team-b", "tier", "db"), ns("team-cc"),
		ns("app-1", annotations.LabelAllowMirrors, "true", "tier", "web"),
		ns("app-2", annotations.LabelAllowMirrors, "false", "tier", "web"),
		ns("app-3", "tier", "db"),
		{Name: "app-4", Terminating: true, Labels: map[string]string{annotations.LabelAllowMirrors: "true", "tier": "web"}},
	}}}}
}

// hubFleet is a hub's fleet, the source's cluster "src" among it, in
// name order. The tier labels are for namespace selectors.
func hubFleet() Fleet {
	prod := map[string]string{"env": "prod"}
	dev := map[string]string{"env": "dev"}
	return Fleet{Clusters: []Cluster{
		{Name: "east", Labels: prod, State: Ready, KindSynced: true, Namespaces: []Namespace{
			ns("default"), ns("team-a", "tier", "web"), ns("team-b"),
			ns("app-1", annotations.LabelAllowMirrors, "true"),
			ns("app-2", annotations.LabelAllowMirrors, "false", "tier", "web"),
			{Name: "app-4", Terminating: true, Labels: map[string]string{annotations.LabelAllowMirrors: "true", "tier": "web"}},
		}},
		{Name: "east-2", Labels: dev, State: Ready, KindSynced: true, Namespaces: []Namespace{ns("default", "tier", "web")}},
		{Name: "hub", Labels: prod, State: Ready, KindSynced: true,
			Namespaces: []Namespace{ns("default"), ns("fleetmirror-system", "tier", "web"), ns("kube-system"), ns("team-a", "tier", "web")},
			Excluded:   glob.MustParseList("fleetmirror-system"), ExcludedBecause: "it holds the hub's cluster registration Secrets"},
		{Name: "lost", Labels: dev, State: Unreachable},
		{Name: "north", Labels: prod, State: Pending},
		{Name: "slow", Labels: prod, State: Ready, Namespaces: []Namespace{ns("default"), ns("team-a", "tier", "web")}},
		{Name: "south", Labels: prod, State: Unreachable, UnreachableSince: downSince},
		{Name: "src", Labels: prod, State: Ready, KindSynced: true, Namespaces: []Namespace{ns("platform", "tier", "web"), ns("team-a", "tier", "web")}},
		{Name: "west", Labels: dev, State: Ready, KindSynced: true, Namespaces: []Namespace{ns("default"), ns("team-a"), ns("team-c", "tier", "web")}},
	}}
}

// selecting is a request with target-namespaces entries (none when
// empty), a namespace selector, and more annotations as key, value pairs.
func selecting(entries, selector string, kv ...string) map[string]string {
	out := map[string]string{annotations.AnnotationTargetNamespaceSelector: selector}
	if entries != "" {
		out[annotations.AnnotationTargetNamespaces] = entries
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// planCase is one request and the Outcome expected of it. Lists are comma
// separated; decisions read "Reason=place,place Reason=place", a place
// being cluster/namespace, cluster/ for a whole cluster, / for the fleet,
// or a bare namespace in the member's cluster m.
type planCase struct {
	name        string
	annotations map[string]string
	src         Source
	fleet       Fleet
	policy      Policy
	scope       Scope

	notRelevant                          bool
	targets, skipped, refused, missing   string
	unreachable, since, ignored, covered string
	clusters, pending                    int
	dropped                              string // decisions with or without Explain
	explained                            string // further decisions with Explain
	// within, when not nil, is the member cluster's Within (a trigger).
	within []string
}

func targetsOf(s string) map[string]string {
	return map[string]string{annotations.AnnotationTargetNamespaces: s}
}

func TestPlanMember(t *testing.T) {
	policy := Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...)}
	const rest = "NotMatched=default,kube-system,team-cc,app-1,app-2,app-3,app-4 SourceNamespace=platform"
	cases := []planCase{
		{name: "names", annotations: targetsOf("team-a, team-b"), targets: "m/team-a,m/team-b", explained: rest},
		{name: "the source namespace is never a target", annotations: targetsOf("platform, team-a"), targets: "m/team-a",
			dropped: "SourceNamespace=platform", explained: "NotMatched=default,kube-system,team-b,team-cc,app-1,app-2,app-3,app-4"},
		{name: "glob", annotations: targetsOf("team-?"), targets: "m/team-a,m/team-b", explained: rest},
		{name: "all skips excluded, opted out, terminating, source", annotations: targetsOf("all"),
			targets:   "m/app-1,m/app-3,m/default,m/team-a,m/team-b,m/team-cc",
			explained: "ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform"},
		{name: "all-labeled", annotations: targetsOf("all-labeled"), targets: "m/app-1",
			explained: "NotLabeled=default,team-a,team-b,team-cc,app-3 ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform"},
		{name: "named excluded is refused", annotations: targetsOf("kube-system, team-a"), targets: "m/team-a", refused: "kube-system",
			dropped: "ExcludedNamespace=kube-system", explained: "NotMatched=default,team-b,team-cc,app-1,app-2,app-3,app-4 SourceNamespace=platform"},
		{name: "named opted out is refused", annotations: targetsOf("app-2"), refused: "app-2", dropped: "OptedOut=app-2",
			explained: "NotMatched=default,kube-system,team-a,team-b,team-cc,app-1,app-3,app-4 SourceNamespace=platform"},
		{name: "named missing or terminating", annotations: targetsOf("nope, app-4"), missing: "app-4,nope",
			dropped:   "MissingNamespace=nope Terminating=app-4",
			explained: "NotMatched=default,kube-system,team-a,team-b,team-cc,app-1,app-2,app-3 SourceNamespace=platform"},
		{name: "included limits", annotations: targetsOf("all"), policy: Policy{Included: glob.MustParseList("team-*")},
			targets:   "m/team-a,m/team-b,m/team-cc",
			explained: "ExcludedNamespace=default,kube-system,app-1,app-2,app-3,app-4 SourceNamespace=platform"},
		{name: "per-source limit below the agent's keeps sort order",
			annotations: map[string]string{annotations.AnnotationTargetNamespaces: "team-cc, app-*, team-a", annotations.AnnotationMaxTargets: "2"},
			policy:      Policy{Excluded: policy.Excluded, MaxTargets: 5},
			targets:     "m/app-1,m/app-3", skipped: "team-a,team-cc", dropped: "OverLimit=team-a,team-cc",
			explained: "OptedOut=app-2 Terminating=app-4 NotMatched=default,kube-system,team-b SourceNamespace=platform"},
		{name: "per-source limit cannot raise the agent's",
			annotations: map[string]string{annotations.AnnotationTargetNamespaces: "all", annotations.AnnotationMaxTargets: "10"},
			policy:      Policy{Excluded: policy.Excluded, MaxTargets: 3},
			targets:     "m/app-1,m/app-3,m/default", skipped: "team-a,team-b,team-cc", dropped: "OverLimit=team-a,team-b,team-cc",
			explained: "ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform"},
		{name: "namespace selector: selected namespaces under the entries' consent rules", annotations: selecting("", "tier=web"),
			targets: "m/app-1,m/team-a", refused: "app-2,kube-system",
			dropped:   "ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform",
			explained: "NotMatched=default,team-b,team-cc,app-3"},
		{name: "namespace selector with set requirements", annotations: selecting("", "tier in (db), tier notin (web)"),
			targets: "m/app-3,m/team-b", explained: "NotMatched=default,kube-system,team-a,team-cc,app-1,app-2,app-4 SourceNamespace=platform"},
		{name: "namespace selector and entries: their union, once each", annotations: selecting("team-a, team-b, app-*", "tier=web"),
			targets: "m/app-1,m/app-3,m/team-a,m/team-b", refused: "app-2,kube-system",
			dropped:   "ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform",
			explained: "NotMatched=default,team-cc"},
		{name: "namespace selector beside all refuses what all skips", annotations: selecting("all", "tier=web"),
			targets: "m/app-1,m/app-3,m/default,m/team-a,m/team-b,m/team-cc", refused: "app-2,kube-system",
			dropped: "ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform"},
		{name: "namespace selector and included namespaces", annotations: selecting("", "tier=web"), policy: Policy{Included: glob.MustParseList("team-*")},
			targets: "m/team-a", refused: "app-1,app-2,app-4,kube-system",
			dropped:   "ExcludedNamespace=kube-system,app-1,app-2,app-4 SourceNamespace=platform",
			explained: "NotMatched=default,team-b,team-cc,app-3"},
		{name: "selected namespaces count toward the limit", annotations: selecting("", "tier", annotations.AnnotationMaxTargets, "2"),
			targets: "m/app-1,m/app-3", skipped: "team-a,team-b", refused: "app-2,kube-system",
			dropped:   "ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform OverLimit=team-a,team-b",
			explained: "NotMatched=default,team-cc"},
		{name: "qualified entries are the hub's", annotations: targetsOf("east/team-a"), notRelevant: true},
		{name: "a namespace selector with a cluster selector still selects here", annotations: selecting("east/team-a", "tier=db",
			annotations.AnnotationTargetClusterSelector, "env=prod"),
			targets: "m/app-3,m/team-b", explained: "NotMatched=default,kube-system,team-a,team-cc,app-1,app-2,app-4 SourceNamespace=platform"},
		{name: "unknown cluster waits", annotations: targetsOf("team-a"), src: Source{Cluster: "elsewhere", Namespace: "platform"},
			covered: "-", pending: 1, dropped: "ClusterPending=elsewhere/"},
		{name: "a renamed copy may go beside its source", annotations: targetsOf("platform, team-a"),
			src: Source{Cluster: "m", Namespace: "platform", Renamed: true}, targets: "m/platform,m/team-a",
			explained: "NotMatched=default,kube-system,team-b,team-cc,app-1,app-2,app-3,app-4"},
		{name: "renamed copies under all: the source's namespace too", annotations: targetsOf("all"),
			src:       Source{Cluster: "m", Namespace: "platform", Renamed: true},
			targets:   "m/app-1,m/app-3,m/default,m/platform,m/team-a,m/team-b,m/team-cc",
			explained: "ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4"},
		{name: "a trigger narrows all; the consent rules still hold", annotations: targetsOf("all"),
			within: []string{"team-a", "app-2", "kube-system", "platform"}, targets: "m/team-a",
			explained: "NotTriggered=default,team-b,team-cc,app-1,app-3 ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform"},
		{name: "a named namespace without a trigger is not refused", annotations: targetsOf("team-a, team-b"),
			within: []string{"team-a"}, targets: "m/team-a", dropped: "NotTriggered=team-b",
			explained: "NotMatched=default,kube-system,team-cc,app-1,app-2,app-3,app-4 SourceNamespace=platform"},
		{name: "a trigger narrows a namespace selector", annotations: selecting("", "tier=web"),
			within: []string{"team-b", "app-1"}, targets: "m/app-1", refused: "app-2,kube-system",
			dropped:   "NotTriggered=team-a ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform",
			explained: "NotMatched=default,team-b,team-cc,app-3"},
		{name: "a trigger nowhere: no targets", annotations: targetsOf("all"), within: []string{},
			explained: "NotTriggered=default,team-a,team-b,team-cc,app-1,app-3 ExcludedNamespace=kube-system OptedOut=app-2 Terminating=app-4 SourceNamespace=platform"},
	}
	for i := range cases {
		c := &cases[i]
		if c.src == (Source{}) {
			c.src = Source{Cluster: "m", Namespace: "platform"}
		}
		c.fleet = memberFleet()
		if c.within != nil {
			c.fleet.Clusters[0].Within = sets.New(c.within...)
		}
		if c.policy.Excluded == nil && c.policy.Included == nil {
			c.policy.Excluded = policy.Excluded
		}
		if c.covered == "" {
			c.covered = "m"
		}
	}
	runPlanCases(t, cases)
}

func TestPlanHub(t *testing.T) {
	policy := Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...), MaxTargets: 100}
	const (
		eastUnmatched = "east/default,east/team-b,east/app-1,east/app-2,east/app-4"
		down          = "ClusterUnreachable=lost/,south/ ClusterPending=north/,slow/"
		ignored       = "The hub does not mirror sources of cluster src, namespace platform to other clusters (--allowed-source-clusters, --allowed-source-namespaces)"
	)
	cases := []planCase{
		{name: "names", annotations: targetsOf("east/team-a, west/team-a"), targets: "east/team-a,west/team-a", clusters: 2,
			explained: "ClusterNotSelected=east-2/,hub/,lost/,north/,slow/,south/ SourceCluster=src/ NotMatched=" + eastUnmatched + ",west/default,west/team-c"},
		{name: "cluster glob reaches every other cluster", annotations: targetsOf("*/team-a"),
			targets: "east/team-a,hub/team-a,west/team-a", missing: "east-2/team-a", clusters: 4,
			unreachable: "lost,south", since: "south", pending: 2,
			dropped:   "MissingNamespace=east-2/team-a " + down,
			explained: "SourceCluster=src/ NotMatched=" + eastUnmatched + ",east-2/default,hub/default,hub/fleetmirror-system,hub/kube-system,west/default,west/team-c"},
		{name: "cluster selector", annotations: map[string]string{annotations.AnnotationTargetNamespaces: "*/team-a", annotations.AnnotationTargetClusterSelector: "env=prod"},
			targets: "east/team-a,hub/team-a", clusters: 2, unreachable: "south", since: "south", pending: 2,
			dropped:   "ClusterUnreachable=south/ ClusterPending=north/,slow/",
			explained: "ClusterNotSelected=east-2/,lost/,west/ SourceCluster=src/ NotMatched=" + eastUnmatched + ",hub/default,hub/fleetmirror-system,hub/kube-system"},
		{name: "the hub's exclusions and its cluster's own", annotations: targetsOf("hub/fleetmirror-system, hub/kube-system, hub/team-a"),
			targets: "hub/team-a", refused: "hub/fleetmirror-system,hub/kube-system", clusters: 1,
			dropped:   "ExcludedNamespace=hub/fleetmirror-system,hub/kube-system",
			explained: "ClusterNotSelected=east/,east-2/,lost/,north/,slow/,south/,west/ SourceCluster=src/ NotMatched=hub/default"},
		{name: "all in globbed clusters", annotations: targetsOf("e*/all"),
			targets: "east/app-1,east/default,east/team-a,east/team-b,east-2/default", clusters: 2,
			explained: "OptedOut=east/app-2 Terminating=east/app-4 ClusterNotSelected=hub/,lost/,north/,slow/,south/,west/ SourceCluster=src/"},
		{name: "all-labeled", annotations: targetsOf("east/all-labeled"), targets: "east/app-1", clusters: 1,
			explained: "NotLabeled=east/default,east/team-a,east/team-b OptedOut=east/app-2 Terminating=east/app-4 ClusterNotSelected=east-2/,hub/,lost/,north/,slow/,south/,west/ SourceCluster=src/"},
		{name: "per-source limit over all clusters in (cluster, namespace) order",
			annotations: map[string]string{annotations.AnnotationTargetNamespaces: "*/all", annotations.AnnotationMaxTargets: "3"},
			targets:     "east/app-1,east/default,east/team-a",
			skipped:     "east/team-b,east-2/default,hub/default,hub/team-a,west/default,west/team-a,west/team-c",
			clusters:    4, unreachable: "lost,south", since: "south", pending: 2,
			dropped:   "OverLimit=east/team-b,east-2/default,hub/default,hub/team-a,west/default,west/team-a,west/team-c " + down,
			explained: "OptedOut=east/app-2 Terminating=east/app-4 ExcludedNamespace=hub/fleetmirror-system,hub/kube-system SourceCluster=src/"},
		{name: "the agent's limit over all clusters", annotations: targetsOf("*/default, west/team-*"),
			policy:  Policy{Excluded: policy.Excluded, MaxTargets: 5},
			targets: "east/default,east-2/default,hub/default,west/default,west/team-a", skipped: "west/team-c",
			clusters: 4, unreachable: "lost,south", since: "south", pending: 2,
			dropped:   "OverLimit=west/team-c " + down,
			explained: "SourceCluster=src/ NotMatched=east/team-a,east/team-b,east/app-1,east/app-2,east/app-4,hub/fleetmirror-system,hub/kube-system,hub/team-a"},
		{name: "missing and refused read cluster/namespace in cluster order", annotations: targetsOf("west/nope, east-2/nope, east/nope, east/app-4, east/app-2"),
			refused: "east/app-2", missing: "east/app-4,east/nope,east-2/nope,west/nope", clusters: 3,
			dropped:   "OptedOut=east/app-2 Terminating=east/app-4 MissingNamespace=east/nope,east-2/nope,west/nope",
			explained: "ClusterNotSelected=hub/,lost/,north/,slow/,south/ SourceCluster=src/ NotMatched=east/default,east/team-a,east/team-b,east/app-1,east-2/default,west/default,west/team-a,west/team-c"},
		{name: "hub policy: source cluster not allowed", annotations: targetsOf("*/team-a"),
			scope:   Scope{Remote: true, AllowedSourceClusters: glob.MustParseList("prod-*")},
			ignored: ignored, covered: "-", dropped: "HubPolicy=/"},
		{name: "hub policy: source namespace not allowed", annotations: targetsOf("*/team-a"),
			scope:   Scope{Remote: true, AllowedSourceNamespaces: glob.MustParseList("team-*")},
			ignored: ignored, covered: "-", dropped: "HubPolicy=/"},
		{name: "hub policy: allowed source", annotations: targetsOf("west/team-a"),
			scope:   Scope{Remote: true, AllowedSourceClusters: glob.MustParseList("s*"), AllowedSourceNamespaces: glob.MustParseList("plat*")},
			targets: "west/team-a", clusters: 1,
			explained: "ClusterNotSelected=east/,east-2/,hub/,lost/,north/,slow/,south/ SourceCluster=src/ NotMatched=west/default,west/team-c"},
		{name: "a namespace selector alone is the member's", annotations: selecting("", "tier=web"), notRelevant: true, covered: "-"},
		{name: "a namespace selector without a cluster selector stays home", annotations: selecting("west/team-a", "tier=web"),
			targets: "west/team-a", clusters: 1,
			explained: "ClusterNotSelected=east/,east-2/,hub/,lost/,north/,slow/,south/ SourceCluster=src/ NotMatched=west/default,west/team-c"},
		{name: "namespace selector in the clusters the cluster selector selects",
			annotations: selecting("", "tier=web", annotations.AnnotationTargetClusterSelector, "env=prod"),
			targets:     "east/team-a,hub/team-a", refused: "east/app-2,hub/fleetmirror-system", clusters: 2,
			unreachable: "south", since: "south", pending: 2,
			dropped:   "OptedOut=east/app-2 Terminating=east/app-4 ExcludedNamespace=hub/fleetmirror-system ClusterUnreachable=south/ ClusterPending=north/,slow/",
			explained: "ClusterNotSelected=east-2/,lost/,west/ SourceCluster=src/ NotMatched=east/default,east/team-b,east/app-1,hub/default,hub/kube-system"},
		{name: "namespace selector and entries in selected clusters, once each",
			annotations: selecting("*/default, east/team-a, west/team-a", "tier=web", annotations.AnnotationTargetClusterSelector, "env=prod",
				annotations.AnnotationMaxTargets, "3"),
			targets: "east/default,east/team-a,hub/default", skipped: "hub/team-a", refused: "east/app-2,hub/fleetmirror-system", clusters: 2,
			unreachable: "south", since: "south", pending: 2,
			dropped: "OptedOut=east/app-2 Terminating=east/app-4 ExcludedNamespace=hub/fleetmirror-system OverLimit=hub/team-a " +
				"ClusterUnreachable=south/ ClusterPending=north/,slow/",
			explained: "ClusterNotSelected=east-2/,lost/,west/ SourceCluster=src/ NotMatched=east/team-b,east/app-1,hub/kube-system"},
		{name: "hub policy covers the namespace selector", annotations: selecting("", "tier=web", annotations.AnnotationTargetClusterSelector, "env=prod"),
			scope:   Scope{Remote: true, AllowedSourceNamespaces: glob.MustParseList("team-*")},
			ignored: ignored, covered: "-", dropped: "HubPolicy=/"},
		{name: "registrations not read yet", annotations: targetsOf("*/team-a"), fleet: Fleet{Loading: true},
			covered: "-", pending: 1, dropped: "ClusterPending=/"},
		{name: "unqualified entries are the member's", annotations: targetsOf("team-a, all"), notRelevant: true, covered: "-"},
	}
	for i := range cases {
		c := &cases[i]
		c.src = Source{Cluster: "src", Namespace: "platform"}
		if !c.fleet.Loading {
			c.fleet = hubFleet()
		}
		if c.policy.Excluded == nil {
			c.policy = policy
		}
		c.scope.Remote = true
		if c.covered == "" {
			c.covered = "east,east-2,hub,west"
		}
	}
	runPlanCases(t, cases)
}

func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			req := annotations.Parse(nil, tt.annotations)
			if len(req.Problems) > 0 {
				t.Fatalf("bad test input: %v", req.Problems)
			}
			for _, explain := range []bool{false, true} {
				scope := tt.scope
				scope.Explain = explain
				got := Plan(req, tt.src, tt.fleet, tt.policy, scope)
				check := func(what, got, want string) {
					t.Helper()
					if got != want {
						t.Errorf("explain %v: %s = %q, want %q", explain, what, got, want)
					}
				}
				check("relevant", fmt.Sprint(got.Relevant), fmt.Sprint(!tt.notRelevant))
				check("targets", joinTargets(got.Targets), tt.targets)
				check("skipped", strings.Join(got.Skipped, ","), tt.skipped)
				check("refused", strings.Join(got.Refused, ","), tt.refused)
				check("missing", strings.Join(got.Missing, ","), tt.missing)
				check("unreachable", strings.Join(got.Unreachable, ","), tt.unreachable)
				check("ignored", got.Ignored, tt.ignored)
				check("clusters", fmt.Sprint(got.Clusters), fmt.Sprint(tt.clusters))
				check("pending", fmt.Sprint(got.Pending), fmt.Sprint(tt.pending))
				check("covered", strings.Join(got.Covered, ","), strings.TrimPrefix(tt.covered, "-"))
				var since []string
				for name, at := range got.UnreachableSince {
					if !at.Equal(downSince) {
						t.Errorf("unreachable since %s = %v, want %v", name, at, downSince)
					}
					since = append(since, name)
				}
				slices.Sort(since)
				check("unreachable since", strings.Join(since, ","), tt.since)
				want := expectDecisions(tt.dropped)
				if explain {
					want = slices.Concat(want, expectDecisions(tt.explained))
				}
				// By cluster, then namespace: east/x before east-2/x.
				slices.SortFunc(want, func(a, b string) int {
					ac, an, _ := strings.Cut(a, "/")
					bc, bn, _ := strings.Cut(b, "/")
					return cmp.Or(cmp.Compare(ac, bc), cmp.Compare(an, bn))
				})
				check("decisions", strings.Join(placesOf(got.Decisions), " "), strings.Join(want, " "))
				checkMessages(t, got.Decisions)
			}
		})
	}
}

func joinTargets(ts []Target) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Cluster + "/" + t.Namespace
	}
	return strings.Join(out, ",")
}

// expectDecisions reads a planCase's decisions as "cluster/namespace:Reason".
func expectDecisions(s string) []string {
	var out []string
	for _, group := range strings.Fields(s) {
		reason, places, _ := strings.Cut(group, "=")
		for _, place := range strings.Split(places, ",") {
			if !strings.Contains(place, "/") {
				place = "m/" + place
			}
			out = append(out, place+":"+reason)
		}
	}
	return out
}

// placesOf renders decisions as expectDecisions does, in their order.
func placesOf(ds []Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Cluster + "/" + d.Namespace + ":" + string(d.Reason)
	}
	return out
}

// checkMessages checks that each message names what it is about.
func checkMessages(t *testing.T, ds []Decision) {
	t.Helper()
	for _, d := range ds {
		if d.Namespace != "" && !strings.Contains(d.Message, "namespace "+d.Namespace) ||
			d.Cluster != "" && d.Namespace == "" && !strings.Contains(d.Message, "cluster "+d.Cluster) {
			t.Errorf("%s/%s %s: message %q does not name it", d.Cluster, d.Namespace, d.Reason, d.Message)
		}
	}
}

// TestDecisionMessages pins the words of every reason: the kubectl plugin
// prints them to the people who wrote the annotations.
func TestDecisionMessages(t *testing.T) {
	member := Source{Cluster: "m", Namespace: "platform"}
	hub := Source{Cluster: "src", Namespace: "platform"}
	memberPolicy := Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...)}
	cases := []struct {
		reason      Reason
		annotations map[string]string
		src         Source
		policy      Policy
		scope       Scope
		place, want string
	}{
		{SourceNamespace, targetsOf("platform"), member, memberPolicy, Scope{}, "m/platform",
			"namespace platform holds the source; a mirror never replaces its source"},
		{ExcludedNamespace, targetsOf("kube-system"), member, memberPolicy, Scope{}, "m/kube-system",
			"namespace kube-system is excluded by the agent's --excluded-namespaces"},
		{ExcludedNamespace, targetsOf("default"), member, Policy{Included: glob.MustParseList("team-*")}, Scope{}, "m/default",
			"namespace default is not in the agent's --included-namespaces"},
		{ExcludedNamespace, targetsOf("hub/fleetmirror-system"), hub, Policy{}, Scope{Remote: true}, "hub/fleetmirror-system",
			"namespace fleetmirror-system in cluster hub is excluded: it holds the hub's cluster registration Secrets"},
		{OptedOut, targetsOf("app-2"), member, memberPolicy, Scope{}, "m/app-2",
			"namespace app-2 opted out of mirrors with the label fleetmirror.io/allow-mirrors=false"},
		{NotLabeled, targetsOf("all-labeled"), member, memberPolicy, Scope{Explain: true}, "m/team-a",
			"namespace team-a matches only all-labeled and is not labelled fleetmirror.io/allow-mirrors=true"},
		{Terminating, targetsOf("east/app-4"), hub, Policy{}, Scope{Remote: true}, "east/app-4",
			"namespace app-4 in cluster east is being deleted"},
		{MissingNamespace, targetsOf("nope"), member, memberPolicy, Scope{}, "m/nope",
			"namespace nope does not exist"},
		{OverLimit, map[string]string{annotations.AnnotationTargetNamespaces: "team-a, team-b", annotations.AnnotationMaxTargets: "1"},
			member, memberPolicy, Scope{}, "m/team-b",
			"namespace team-b matched, but more targets matched than the limit of 1 (the agent's --max-targets, or fleetmirror.io/max-targets on the source); the first in sort order are kept"},
		{NotMatched, targetsOf("team-a"), member, memberPolicy, Scope{Explain: true}, "m/team-b",
			"namespace team-b matches no entry of fleetmirror.io/target-namespaces"},
		{NotMatched, selecting("", "tier=web"), member, memberPolicy, Scope{Explain: true}, "m/team-b",
			`namespace team-b is not selected by fleetmirror.io/target-namespace-selector "tier=web"`},
		{NotMatched, selecting("team-a", "tier=web"), member, memberPolicy, Scope{Explain: true}, "m/team-b",
			`namespace team-b matches no entry of fleetmirror.io/target-namespaces and is not selected by fleetmirror.io/target-namespace-selector "tier=web"`},
		{NotMatched, selecting("", "tier=web", annotations.AnnotationTargetClusterSelector, "env=prod"), hub, Policy{}, Scope{Remote: true, Explain: true}, "east/team-b",
			`namespace team-b in cluster east is not selected by fleetmirror.io/target-namespace-selector "tier=web"`},
		{OptedOut, selecting("", "tier=web"), member, memberPolicy, Scope{}, "m/app-2",
			"namespace app-2 opted out of mirrors with the label fleetmirror.io/allow-mirrors=false"},
		{HubPolicy, targetsOf("*/team-a"), hub, Policy{}, Scope{Remote: true, AllowedSourceNamespaces: glob.MustParseList("kube-*")}, "/",
			"sources of cluster src, namespace platform may not target other clusters: the hub's --allowed-source-clusters or --allowed-source-namespaces leave them out"},
		{SourceCluster, targetsOf("*/team-a"), hub, Policy{}, Scope{Remote: true, Explain: true}, "src/",
			"cluster src holds the source; the hub mirrors only to other clusters (entries without a cluster are the member agent's)"},
		{ClusterNotSelected, targetsOf("east/team-a"), hub, Policy{}, Scope{Remote: true, Explain: true}, "west/",
			"cluster west matches no CLUSTER/NAMESPACE entry of fleetmirror.io/target-namespaces"},
		{ClusterNotSelected, map[string]string{annotations.AnnotationTargetNamespaces: "*/team-a", annotations.AnnotationTargetClusterSelector: "env=prod"},
			hub, Policy{}, Scope{Remote: true, Explain: true}, "west/",
			`cluster west is not selected by fleetmirror.io/target-cluster-selector "env=prod"`},
		{ClusterPending, targetsOf("north/team-a"), hub, Policy{}, Scope{Remote: true}, "north/",
			"the hub is still connecting to cluster north for the first time"},
		{ClusterPending, targetsOf("slow/team-a"), hub, Policy{}, Scope{Remote: true}, "slow/",
			"the hub is still filling its caches of this kind in cluster slow; the source is mirrored there when they are"},
		{ClusterUnreachable, targetsOf("south/team-a"), hub, Policy{}, Scope{Remote: true}, "south/",
			"cluster south has not answered since 2026-11-01T12:00:00Z; its mirrors are neither written nor removed until it is back"},
		{ClusterUnreachable, targetsOf("lost/team-a"), hub, Policy{}, Scope{Remote: true}, "lost/",
			"cluster lost has not answered; its mirrors are neither written nor removed until it is back"},
		{ClusterElsewhere, targetsOf("west/team-a"), hub, Policy{}, Scope{Remote: true}, "west/",
			"cluster west is served by another replica of the sharded hub"},
	}
	seen := map[Reason]bool{}
	for _, tt := range cases {
		fleet := hubFleet()
		if !tt.scope.Remote {
			fleet = memberFleet()
		}
		if tt.reason == ClusterElsewhere {
			fleet.Clusters[len(fleet.Clusters)-1].State = Elsewhere // west
		}
		out := Plan(annotations.Parse(nil, tt.annotations), tt.src, fleet, tt.policy, tt.scope)
		i := slices.IndexFunc(out.Decisions, func(d Decision) bool { return d.Cluster+"/"+d.Namespace == tt.place })
		if i < 0 {
			t.Errorf("%s: no decision for %s in %v", tt.reason, tt.place, placesOf(out.Decisions))
			continue
		}
		if d := out.Decisions[i]; d.Reason != tt.reason || d.Message != tt.want {
			t.Errorf("%s: got %s %q, want %s %q", tt.place, d.Reason, d.Message, tt.reason, tt.want)
		}
		seen[tt.reason] = true
	}
	for _, r := range allReasons {
		if !seen[r] {
			t.Errorf("no case for reason %s", r)
		}
	}
}

// allReasons lists every Reason, for tests that want each one.
var allReasons = []Reason{SourceNamespace, ExcludedNamespace, OptedOut, NotLabeled, Terminating, MissingNamespace, OverLimit, NotMatched,
	HubPolicy, SourceCluster, ClusterNotSelected, ClusterPending, ClusterUnreachable, ClusterElsewhere}

// TestPlanInvalidNamespaceSelector: a namespace selector that does not
// parse, or is empty, selects nothing, in either scope; the entries beside
// it still work, and Explain says the selector selects nothing.
func TestPlanInvalidNamespaceSelector(t *testing.T) {
	policy := Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...)}
	for _, tt := range []struct {
		name, entries, selector string
		scope                   Scope
		targets                 string
	}{
		{"member, selector alone", "", "tier in (web", Scope{}, ""},
		{"member, beside an entry", "team-b", "tier in (web", Scope{}, "m/team-b"},
		{"member, empty", "", " ", Scope{}, ""},
		{"hub, with a cluster selector", "", "tier notin web", Scope{Remote: true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ann := selecting(tt.entries, tt.selector)
			src, fleet := Source{Cluster: "m", Namespace: "platform"}, memberFleet()
			if tt.scope.Remote {
				ann = selecting(tt.entries, tt.selector, annotations.AnnotationTargetClusterSelector, "env=prod")
				src, fleet = Source{Cluster: "src", Namespace: "platform"}, hubFleet()
			}
			req := annotations.Parse(nil, ann)
			if len(req.Problems) != 1 || !strings.Contains(req.Problems[0], annotations.AnnotationTargetNamespaceSelector) {
				t.Fatalf("problems = %q, want one about the selector", req.Problems)
			}
			tt.scope.Explain = true
			out := Plan(req, src, fleet, policy, tt.scope)
			if !out.Relevant || joinTargets(out.Targets) != tt.targets || len(out.Refused) > 0 {
				t.Errorf("relevant %v, targets %q, refused %v; want relevant, targets %q, none refused", out.Relevant, joinTargets(out.Targets), out.Refused, tt.targets)
			}
			i := slices.IndexFunc(out.Decisions, func(d Decision) bool { return d.Namespace == "team-a" })
			if i < 0 || out.Decisions[i].Reason != NotMatched || !strings.Contains(out.Decisions[i].Message, "(invalid, so it selects nothing)") {
				t.Errorf("decisions %+v: want team-a NotMatched by a selector that selects nothing", out.Decisions)
			}
		})
	}
}

// TestPlanUnsortedFleet: clusters given out of order are resolved as if
// sorted, and the caller's slice is left as it was.
func TestPlanUnsortedFleet(t *testing.T) {
	req := annotations.Parse(nil, map[string]string{annotations.AnnotationTargetNamespaces: "*/all", annotations.AnnotationMaxTargets: "4"})
	policy := Policy{Excluded: glob.MustParseList(DefaultExcludedNamespaces...)}
	src := Source{Cluster: "src", Namespace: "platform"}
	scope := Scope{Remote: true, Explain: true}
	want := Plan(req, src, hubFleet(), policy, scope)
	reversed := hubFleet()
	slices.Reverse(reversed.Clusters)
	// And the namespaces of each: the agents pass them sorted, the plugin
	// and others in any order.
	for i := range reversed.Clusters {
		slices.Reverse(reversed.Clusters[i].Namespaces)
	}
	firstNS := reversed.Clusters[0].Namespaces[0].Name
	got := Plan(req, src, reversed, policy, scope)
	if g, w := render(got), render(want); g != w {
		t.Errorf("reversed fleet:\n%s\nsorted fleet:\n%s", g, w)
	}
	if g, w := placesOf(got.Decisions), placesOf(want.Decisions); !slices.Equal(g, w) {
		t.Errorf("reversed fleet decisions %v, sorted %v", g, w)
	}
	if reversed.Clusters[0].Name != "west" {
		t.Errorf("Plan reordered the caller's fleet: first cluster is %s", reversed.Clusters[0].Name)
	}
	if got := reversed.Clusters[0].Namespaces[0].Name; got != firstNS {
		t.Errorf("Plan reordered the caller's namespaces: first is %s, was %s", got, firstNS)
	}
}

// TestPlanAllocationsWithoutExplain: the agents' hot path records no
// Decision per namespace; only Explain does.
func TestPlanAllocationsWithoutExplain(t *testing.T) {
	req := annotations.Parse(nil, targetsOf("team-a, team-*, nope"))
	allocs := func(namespaces int, explain bool) float64 {
		c := Cluster{Name: "m"}
		for i := range namespaces {
			c.Namespaces = append(c.Namespaces, ns(fmt.Sprintf("ns-%d", i)))
		}
		c.Namespaces = append(c.Namespaces, ns("team-a"))
		fleet := Fleet{Clusters: []Cluster{c}}
		return testing.AllocsPerRun(20, func() {
			Plan(req, Source{Cluster: "m", Namespace: "platform"}, fleet, Policy{}, Scope{Explain: explain})
		})
	}
	small, large := allocs(10, false), allocs(2000, false)
	if large > small+8 {
		t.Errorf("without Explain, 2000 unmatched namespaces cost %v allocations, 10 cost %v", large, small)
	}
	if explained := allocs(2000, true); explained < large+2000 {
		t.Errorf("with Explain, 2000 unmatched namespaces cost %v allocations, want a Decision each over %v", explained, large)
	}
}

// render prints every field of an Outcome but Decisions, nil and empty
// alike, for comparing outcomes.
func render(o Outcome) string {
	var since []string
	for _, name := range slices.Sorted(maps.Keys(o.UnreachableSince)) {
		since = append(since, name+"@"+o.UnreachableSince[name].Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("relevant=%v\ntargets=%s\nskipped=%v\nrefused=%v\nmissing=%v\nunreachable=%v since=%v\nignored=%q\nclusters=%d pending=%d\ncovered=%v",
		o.Relevant, joinTargets(o.Targets), o.Skipped, o.Refused, o.Missing, o.Unreachable, since, o.Ignored, o.Clusters, o.Pending, o.Covered)
}
