package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/clusters"
)

// maxSuggestions bounds the kinds "did you mean" names.
const maxSuggestions = 3

// discoveryRetry is how long to wait between attempts to ask the API
// server which kinds it serves.
const discoveryRetry = time.Second

// checkResourceTypes refuses --resource-types entries the API server does
// not serve, naming the closest kinds it does. A server that cannot be
// asked (down, or an aggregated API of an asked group unavailable) is
// asked again every second for up to timeout; then the error says that it
// could not be asked, never that the kind is unknown.
func checkResourceTypes(ctx context.Context, cfg *rest.Config, kinds []schema.GroupVersionKind, timeout time.Duration) error {
	if len(kinds) == 0 {
		return nil
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("--resource-types: %w", err)
	}
	dc, err := clusters.NewDiscovery(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("--resource-types: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := servedBy(ctx, dc).check(kinds)
		var unasked *unaskedError
		if !errors.As(err, &unasked) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("--resource-types: could not ask the API server at %s which kinds it serves (tried for %s): %w", cfg.Host, timeout, unasked.err)
		case <-time.After(discoveryRetry):
		}
	}
}

// served is what discovery told: every kind served, whether it is
// namespaced, and the group-versions that could not be listed.
type served struct {
	kinds       map[schema.GroupVersionKind]bool // true: namespaced
	unavailable map[schema.GroupVersion]error
	err         error // discovery failed as a whole
}

// unaskedError is a kind that could not be checked: discovery failed.
type unaskedError struct{ err error }

func (e *unaskedError) Error() string { return e.err.Error() }

// servedBy asks dc for every kind the API server serves.
func servedBy(ctx context.Context, dc *clusters.Discovery) served {
	s := served{kinds: map[schema.GroupVersionKind]bool{}}
	lists, err := dc.GroupsAndResources(ctx)
	var partial *clusters.PartialDiscoveryError
	switch {
	case errors.As(err, &partial):
		s.unavailable = partial.Failed
	case err != nil:
		s.err = err
		return s
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") { // not a subresource
				s.kinds[gv.WithKind(r.Kind)] = r.Namespaced
			}
		}
	}
	return s
}

// check returns the error for the first of kinds that is not a served,
// namespaced kind, or an *unaskedError when discovery could not tell.
func (s served) check(kinds []schema.GroupVersionKind) error {
	if s.err != nil {
		return &unaskedError{s.err}
	}
	for _, k := range kinds {
		namespaced, ok := s.kinds[k]
		switch {
		case ok && namespaced:
			continue
		case ok:
			return fmt.Errorf("--resource-types: %s is cluster-scoped; only namespaced kinds are mirrored", formatKind(k))
		case s.unavailable[k.GroupVersion()] != nil:
			return &unaskedError{fmt.Errorf("%s: %w", k.GroupVersion(), s.unavailable[k.GroupVersion()])}
		}
		var candidates []schema.GroupVersionKind
		for gvk, namespaced := range s.kinds {
			if namespaced {
				candidates = append(candidates, gvk)
			}
		}
		msg := fmt.Sprintf("--resource-types: %s is not served by the API server", formatKind(k))
		if near := suggestKinds(k, candidates); len(near) > 0 {
			names := make([]string, len(near))
			for i, n := range near {
				names[i] = formatKind(n)
			}
			msg += "; did you mean " + orList(names) + "?"
		}
		return errors.New(msg)
	}
	return nil
}

// formatKind writes gvk the way --resource-types takes it: Kind.version[.group].
func formatKind(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind + "." + gvk.Version
	}
	return gvk.Kind + "." + gvk.Version + "." + gvk.Group
}

// suggestKinds returns up to three of served that want was probably meant
// to be: the kinds whose name is within a few edits of want's (case does
// not count), closest first; among kinds of one name, those whose whole
// Kind.version.group is closest come first.
func suggestKinds(want schema.GroupVersionKind, served []schema.GroupVersionKind) []schema.GroupVersionKind {
	type scored struct {
		gvk        schema.GroupVersionKind
		kind, full int
	}
	wantKind, wantFull := strings.ToLower(want.Kind), strings.ToLower(formatKind(want))
	// A third of the name may be wrong, at least two letters of it.
	maxEdits := max(2, len(wantKind)/3)
	var near []scored
	for _, gvk := range served {
		if gvk == want {
			continue
		}
		d := editDistance(wantKind, strings.ToLower(gvk.Kind), maxEdits)
		if d > maxEdits {
			continue
		}
		near = append(near, scored{gvk, d, editDistance(wantFull, strings.ToLower(formatKind(gvk)), 1<<30)})
	}
	slices.SortFunc(near, func(a, b scored) int {
		if a.kind != b.kind {
			return a.kind - b.kind
		}
		if a.full != b.full {
			return a.full - b.full
		}
		return strings.Compare(formatKind(a.gvk), formatKind(b.gvk))
	})
	var out []schema.GroupVersionKind
	for _, s := range near[:min(len(near), maxSuggestions)] {
		out = append(out, s.gvk)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b in bytes, or
// limit+1 when it is more than limit (long user input costs no more than
// a short one then).
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit+1)
}

// orList joins names as "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
