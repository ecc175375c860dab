package controller

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fleetmirror/fleetmirror/pkg/apply"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/targets"
)

// result is the outcome of one target.
type result struct {
	namespace string
	outcome   apply.Outcome
	err       error
}

// summary adds up the results of one reconcile.
type summary struct {
	created, updated, replaced, unchanged, deleted, skipped int
	stale                                                   int
	conflicts, failures                                     []string
	errors                                                  []error
}

func (s *summary) record(kind, cluster string, r result) {
	metrics.SyncOperations.WithLabelValues(kind, cluster, string(r.outcome)).Inc()
	switch r.outcome {
	case apply.Created:
		s.created++
	case apply.Updated:
		s.updated++
	case apply.Replaced:
		s.replaced++
	case apply.Unchanged:
		s.unchanged++
	case apply.Deleted:
		s.deleted++
	case apply.Skipped:
		s.skipped++
	case apply.Conflict:
		metrics.Conflicts.WithLabelValues(kind, cluster).Inc()
		s.conflicts = append(s.conflicts, r.err.Error())
	default:
		if errors.Is(r.err, apply.ErrStaleSource) {
			s.stale++
		}
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
	s.skipped += o.skipped
	s.stale += o.stale
	s.conflicts = append(s.conflicts, o.conflicts...)
	s.failures = append(s.failures, o.failures...)
	s.errors = append(s.errors, o.errors...)
}

func (s *summary) err() error { return errs(s.errors) }

// statusLine is the one-line summary written to AnnotationStatus.
func statusLine(res targets.Result, s summary) string {
	synced := s.created + s.updated + s.replaced + s.unchanged
	parts := []string{fmt.Sprintf("%d/%d namespaces synced", synced, len(res.Namespaces))}
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(len(s.conflicts), "conflicts")
	add(len(s.failures), "failed")
	add(len(res.Skipped), "over limit")
	add(len(res.Refused), "refused")
	add(len(res.Missing), "missing")
	return strings.Join(parts, "; ")
}

// joinLimited lists at most five items, saying how many more there are.
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
