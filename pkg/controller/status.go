package controller

import (
	"fmt"
	"strings"

	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// result is the outcome of one target.
type result struct {
	cluster   string
	namespace string
	outcome   apply.Outcome
	err       error
	// ruleErrs are transform rules that failed and were skipped;
	// transformErr says the target got no mirror because of its rules.
	ruleErrs     []error
	transformErr error
}

// summary adds up the results of one reconcile.
type summary struct {
	created, updated, replaced, unchanged, deleted, skipped int
	transformSkipped                                        int
	// orphaned counts released mirrors made plain objects (copy-once,
	// deletion-policy Orphan) instead of deleted.
	orphaned int
	// copied lists the targets (NS, or CLUSTER/NS) where a copy-once
	// mirror was made or found in place.
	copied              []string
	conflicts, failures []string
	// adopted lists the namespaces of the mirrors adopted.
	adopted []string
	// transformErrs describe failed rules and targets skipped for them.
	transformErrs []string
	errors        []error
}

func (s *summary) record(kind string, r result) { s.recordAs(kind, r, r.outcome) }

// recordAs records r, whose operation was r.outcome, as the outcome as:
// the whole reconcile that follows a fast pass finds the mirrors the fast
// pass wrote in place, and reports them as the fast pass wrote them
// (newnamespace.go).
func (s *summary) recordAs(kind string, r result, as apply.Outcome) {
	metrics.SyncOperations.WithLabelValues(kind, r.cluster, string(r.outcome)).Inc()
	for _, e := range r.ruleErrs {
		s.transformErrs = append(s.transformErrs, fmt.Sprintf("%s: %v", r.namespace, e))
	}
	if r.transformErr != nil {
		s.transformErrs = append(s.transformErrs, fmt.Sprintf("%s: not written: %v", r.namespace, r.transformErr))
		s.transformSkipped++
	}
	switch as {
	case apply.Created:
		s.created++
	case apply.Updated:
		s.updated++
	case apply.Replaced:
		s.replaced++
	case apply.Unchanged:
		s.unchanged++
	case apply.Adopted:
		s.adopted = append(s.adopted, r.namespace)
	case apply.Deleted:
		s.deleted++
	case apply.Orphaned:
		s.orphaned++
	case apply.Skipped:
		s.skipped++
	case apply.Conflict:
		metrics.Conflicts.WithLabelValues(kind, r.cluster).Inc()
		s.conflicts = append(s.conflicts, r.err.Error())
	default:
		s.failures = append(s.failures, fmt.Sprintf("%s: %v", r.namespace, r.err))
		s.errors = append(s.errors, fmt.Errorf("namespace %s: %w", r.namespace, r.err))
	}
}

func (s *summary) add(o summary) {
	s.created += o.created
	s.updated += o.updated
	s.replaced += o.replaced
	s.unchanged += o.unchanged
	s.deleted += o.deleted
	s.orphaned += o.orphaned
	s.copied = append(s.copied, o.copied...)
	s.skipped += o.skipped
	s.transformSkipped += o.transformSkipped
	s.transformErrs = append(s.transformErrs, o.transformErrs...)
	s.conflicts = append(s.conflicts, o.conflicts...)
	s.adopted = append(s.adopted, o.adopted...)
	s.failures = append(s.failures, o.failures...)
	s.errors = append(s.errors, o.errors...)
}

func (s *summary) err() error { return errs(s.errors) }

// synced counts the targets that hold the source's current content.
func (s *summary) synced() int {
	return s.created + s.updated + s.replaced + s.unchanged + len(s.adopted)
}

// statusLine is this writer's part of AnnotationStatus.
func statusLine(p Plan, s summary, remote bool) string {
	synced := s.synced()
	var parts []string
	if remote {
		parts = append(parts, fmt.Sprintf("%s%s, %d/%d synced", remotePrefix, count(p.Clusters, "cluster"), synced, len(p.Targets)))
	} else {
		parts = append(parts, fmt.Sprintf("%d/%d namespaces synced", synced, len(p.Targets)))
	}
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	if n := len(s.conflicts); n > 0 {
		parts = append(parts, count(n, "conflict"))
	}
	add(len(s.failures), "failed")
	add(s.transformSkipped, "skipped by transform")
	add(len(p.Skipped), "over limit")
	add(len(p.Refused), "refused")
	add(len(p.Missing), "missing")
	if len(p.Unreachable) > 0 {
		parts = append(parts, joinLimited(p.unreachable()))
	}
	switch n := len(p.Elsewhere); {
	case n > 0 && p.ReadEverywhere:
		parts = append(parts, count(n, "cluster")+" served by other hub replicas")
	case n > 0:
		parts = append(parts, count(n, "cluster")+" in other hub shards not served")
	}
	return strings.Join(parts, "; ")
}

// count says n things: "1 cluster", "2 clusters".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// The member and the hub share AnnotationStatus: the member's part comes
// first, the hub's follows after statusSeparator and starts with
// remotePrefix. Each writer replaces only its own part, so they never undo
// each other's writes.
const (
	statusSeparator = " | "
	remotePrefix    = "remote: "
)

// StatusWithout returns the status annotation current without the part of
// one writer (the hub's when remote, the member's otherwise): what the
// writer's uninstall leaves, which kubectl fleetmirror cleanup leaves too
// for an agent that is gone without one.
func StatusWithout(current string, remote bool) string { return mergeStatus(current, "", remote) }

// mergeStatus returns current with this writer's part replaced by part
// ("" removes it).
func mergeStatus(current, part string, remote bool) string {
	local, rem := current, ""
	if i := strings.Index(current, statusSeparator+remotePrefix); i >= 0 {
		local, rem = current[:i], current[i+len(statusSeparator):]
	} else if strings.HasPrefix(current, remotePrefix) {
		local, rem = "", current
	}
	if remote {
		rem = part
	} else {
		local = part
	}
	switch {
	case local == "":
		return rem
	case rem == "":
		return local
	default:
		return local + statusSeparator + rem
	}
}

// joinLimited lists at most five items, saying how many more there are.
// unreachable describes each unreachable target cluster, with the time it
// was found unreachable where known: "eu-2 unreachable since 10:42:13Z".
// The time stays the same while the cluster stays down, so the status does
// not change with every reconcile.
func (p Plan) unreachable() []string {
	out := make([]string, len(p.Unreachable))
	for i, name := range p.Unreachable {
		out[i] = name + " unreachable"
		if since, ok := p.UnreachableSince[name]; ok {
			out[i] += " since " + since.UTC().Format("15:04:05Z")
		}
	}
	return out
}

func joinLimited(items []string) string {
	const most = 5
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}

func firstOr(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return items[0]
}
