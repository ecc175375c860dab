package targets

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// Reason says why a candidate target was dropped. The values are CamelCase,
// like Event reasons, so that tools can match on them.
type Reason string

// Reasons a namespace is not a target.
const (
	// SourceNamespace: the namespace holds the source; a mirror never
	// replaces its source.
	SourceNamespace Reason = "SourceNamespace"
	// ExcludedNamespace: the operator's policy excludes the namespace
	// (--excluded-namespaces, --included-namespaces, or an exclusion of its
	// cluster such as the hub's registration Secrets).
	ExcludedNamespace Reason = "ExcludedNamespace"
	// OptedOut: the namespace is labelled fleetmirror.io/allow-mirrors=false.
	OptedOut Reason = "OptedOut"
	// NotLabeled: only all-labeled matched, and the namespace is not
	// labelled fleetmirror.io/allow-mirrors=true.
	NotLabeled Reason = "NotLabeled"
	// Terminating: the namespace is being deleted.
	Terminating Reason = "Terminating"
	// MissingNamespace: the namespace was named but does not exist.
	MissingNamespace Reason = "MissingNamespace"
	// OverLimit: the namespace matched, but more targets matched than the
	// limit allows and it is not among the first in sort order.
	OverLimit Reason = "OverLimit"
	// NotMatched: no entry of the request matches the namespace, and its
	// namespace selector, if any, does not select it.
	NotMatched Reason = "NotMatched"
	// NotTriggered: the namespace holds no object of the policy's
	// trigger; it gets its copy once one is there.
	NotTriggered Reason = "NotTriggered"
)

// Reasons a whole cluster holds no target. Their Decision has no Namespace.
const (
	// HubPolicy: the hub does not let sources of this cluster and namespace
	// target other clusters. The Decision names no cluster: it applies to all.
	HubPolicy Reason = "HubPolicy"
	// SourceCluster: the cluster holds the source; the hub mirrors only to
	// other clusters.
	SourceCluster Reason = "SourceCluster"
	// ClusterNotSelected: no CLUSTER/NAMESPACE entry matches the cluster, or
	// the request's cluster selector does not select it.
	ClusterNotSelected Reason = "ClusterNotSelected"
	// ClusterPending: the cluster, or the caches of the source's kind in it,
	// are not ready yet; the source is reconciled again when they are. With
	// no cluster named, the clusters themselves are not known yet.
	ClusterPending Reason = "ClusterPending"
	// ClusterUnreachable: the cluster does not answer; its mirrors are
	// neither written nor removed until it is back.
	ClusterUnreachable Reason = "ClusterUnreachable"
	// ClusterElsewhere: another replica of a sharded hub serves the
	// cluster; this replica neither writes nor removes mirrors there.
	ClusterElsewhere Reason = "ClusterElsewhere"
)

// Decision says why one candidate was not targeted.
type Decision struct {
	// Cluster names the cluster; empty when the decision covers the fleet.
	Cluster string
	// Namespace names the namespace; empty when the whole cluster is dropped.
	Namespace string
	Reason    Reason
	// Message says it in plain words, for the people who annotate objects.
	Message string
}

// recorder collects Decisions. A nil recorder records nothing, so that
// Resolve costs no more than it did before decisions existed.
type recorder struct {
	// remote names clusters in messages: the hub targets other clusters.
	remote bool
	// explain records the namespaces dropped without being named too; each
	// one of a cluster costs a Decision, so only when asked.
	explain   bool
	decisions []Decision
}

func (r *recorder) explaining() bool { return r != nil && r.explain }

func (r *recorder) add(cluster, namespace string, reason Reason, format string, args ...any) {
	if r == nil {
		return
	}
	r.decisions = append(r.decisions, Decision{Cluster: cluster, Namespace: namespace, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// where names a namespace in a message.
func (r *recorder) where(cluster, namespace string) string {
	if r.remote {
		return fmt.Sprintf("namespace %s in cluster %s", namespace, cluster)
	}
	return "namespace " + namespace
}

func (r *recorder) sourceNamespace(cluster, namespace string) {
	if r != nil {
		r.add(cluster, namespace, SourceNamespace, "%s holds the source; a mirror never replaces its source", r.where(cluster, namespace))
	}
}

// refused records why a named namespace is refused: policy or opt-out.
func (r *recorder) refused(c *Cluster, policy Policy, namespace string) {
	if r == nil {
		return
	}
	if why := r.exclusion(c, policy, namespace); why != "" {
		r.add(c.Name, namespace, ExcludedNamespace, "%s", why)
		return
	}
	r.optOut(c.Name, namespace)
}

func (r *recorder) missing(cluster, namespace string, exists bool) {
	switch {
	case r == nil:
	case exists:
		r.add(cluster, namespace, Terminating, "%s is being deleted", r.where(cluster, namespace))
	default:
		r.add(cluster, namespace, MissingNamespace, "%s does not exist", r.where(cluster, namespace))
	}
}

func (r *recorder) overLimit(cluster, namespace string, limit int) {
	if r != nil {
		r.add(cluster, namespace, OverLimit, "%s matched, but more targets matched than the limit of %d (the agent's --max-targets, or %s on the source); the first in sort order are kept",
			r.where(cluster, namespace), limit, annotations.AnnotationMaxTargets)
	}
}

// exclusion says why the operator excludes namespace in c, or "" when not.
func (r *recorder) exclusion(c *Cluster, policy Policy, namespace string) string {
	where := r.where(c.Name, namespace)
	switch {
	case policy.Excluded.Match(namespace):
		return where + " is excluded by the agent's --excluded-namespaces"
	case policy.SourceExcluded.Match(namespace):
		return where + " is excluded by the source's " + annotations.AnnotationExcludeNamespaces + " (spec.excludeNamespaces of a MirrorPolicy)"
	case len(policy.Included) > 0 && !policy.Included.Match(namespace):
		return where + " is not in the agent's --included-namespaces"
	case !c.Excluded.Match(namespace):
		return ""
	case c.ExcludedBecause != "":
		return where + " is excluded: " + c.ExcludedBecause
	default:
		return where + " is excluded in its cluster"
	}
}

// unchosen records why each namespace of c that is neither chosen, nor
// named by an entry, nor selected by sel (those have their Decision
// already) was dropped.
func (r *recorder) unchosen(c *Cluster, patterns []annotations.Pattern, sel labels.Selector, sourceNamespace string, policy Policy, chosen map[string]bool) {
	for i := range c.Namespaces {
		ns := &c.Namespaces[i]
		if chosen[ns.Name] || slices.ContainsFunc(patterns, func(p annotations.Pattern) bool { return p.Kind == annotations.Name && p.Raw == ns.Name }) ||
			sel != nil && sel.Matches(labels.Set(ns.Labels)) {
			continue
		}
		where, excluded := r.where(c.Name, ns.Name), r.exclusion(c, policy, ns.Name)
		switch {
		case ns.Name == sourceNamespace:
			r.sourceNamespace(c.Name, ns.Name)
		case !slices.ContainsFunc(patterns, func(p annotations.Pattern) bool { return p.Match(ns.Name) }):
			r.notMatched(c.Name, ns.Name, len(patterns) > 0, sel)
		case excluded != "":
			r.add(c.Name, ns.Name, ExcludedNamespace, "%s", excluded)
		case optedOut(ns):
			r.optOut(c.Name, ns.Name)
		case ns.Terminating:
			r.missing(c.Name, ns.Name, true)
		case !c.holds(ns.Name):
			r.notWithin(c, ns.Name)
		default:
			// Any other entry matching it would have chosen it.
			r.add(c.Name, ns.Name, NotLabeled, "%s matches only %s and is not labelled %s=true",
				where, annotations.KeywordAllLabeled, annotations.LabelAllowMirrors)
		}
	}
}

// notWithin records a namespace that holds no object of the trigger.
func (r *recorder) notWithin(c *Cluster, namespace string) {
	because := c.WithinBecause
	if because == "" {
		because = "no object of the policy's trigger"
	}
	r.add(c.Name, namespace, NotTriggered, "%s holds %s; it gets its copy once it does", r.where(c.Name, namespace), because)
}

// notMatched records a namespace that no entry matches (entries says there
// are some) and sel, when not nil, does not select.
func (r *recorder) notMatched(cluster, namespace string, entries bool, sel labels.Selector) {
	where := r.where(cluster, namespace)
	switch {
	case sel == nil:
		r.add(cluster, namespace, NotMatched, "%s matches no entry of %s", where, annotations.AnnotationTargetNamespaces)
	case !entries:
		r.add(cluster, namespace, NotMatched, "%s is not selected by %s %s", where, annotations.AnnotationTargetNamespaceSelector, selectorString(sel))
	default:
		r.add(cluster, namespace, NotMatched, "%s matches no entry of %s and is not selected by %s %s",
			where, annotations.AnnotationTargetNamespaces, annotations.AnnotationTargetNamespaceSelector, selectorString(sel))
	}
}

// selectorString quotes a selector for a message. The one that selects
// nothing, the stand-in for an invalid one, would print as "".
func selectorString(sel labels.Selector) string {
	if s := sel.String(); s != "" {
		return strconv.Quote(s)
	}
	return "(invalid, so it selects nothing)"
}

func (r *recorder) sourceCluster(cluster string) {
	r.add(cluster, "", SourceCluster, "cluster %s holds the source; the hub mirrors only to other clusters (entries without a cluster are the member agent's)", cluster)
}

func (r *recorder) notSelected(c *Cluster, matched bool, req annotations.Request) {
	if !matched {
		r.add(c.Name, "", ClusterNotSelected, "cluster %s matches no CLUSTER/NAMESPACE entry of %s", c.Name, annotations.AnnotationTargetNamespaces)
		return
	}
	r.add(c.Name, "", ClusterNotSelected, "cluster %s is not selected by %s %q", c.Name, annotations.AnnotationTargetClusterSelector, req.ClusterSelector.String())
}

// notReady records why a selected cluster cannot be resolved in now.
func (r *recorder) notReady(c *Cluster) {
	switch c.State {
	case Ready:
		r.add(c.Name, "", ClusterPending, "the hub is still filling its caches of this kind in cluster %s; the source is mirrored there when they are", c.Name)
	case Pending:
		r.add(c.Name, "", ClusterPending, "the hub is still connecting to cluster %s for the first time", c.Name)
	default:
		since := ""
		if !c.UnreachableSince.IsZero() {
			since = " since " + c.UnreachableSince.UTC().Format(time.RFC3339)
		}
		r.add(c.Name, "", ClusterUnreachable, "cluster %s has not answered%s; its mirrors are neither written nor removed until it is back", c.Name, since)
	}
}

func (r *recorder) elsewhere(cluster string) {
	r.add(cluster, "", ClusterElsewhere, "cluster %s is served by another replica of the sharded hub", cluster)
}

// sorted returns the decisions in (cluster, namespace) order, one for each.
func (r *recorder) sorted() []Decision {
	byPlace := func(a, b Decision) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Namespace, b.Namespace))
	}
	slices.SortStableFunc(r.decisions, byPlace)
	return slices.CompactFunc(r.decisions, func(a, b Decision) bool { return byPlace(a, b) == 0 })
}

func (r *recorder) optOut(cluster, namespace string) {
	r.add(cluster, namespace, OptedOut, "%s opted out of mirrors with the label %s=false", r.where(cluster, namespace), annotations.LabelAllowMirrors)
}
