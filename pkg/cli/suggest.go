package cli

import (
	"slices"
	"strings"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// sourceKeys are the keys a person writes on a source: labels and
// annotations that the agent reads.
var sourceKeys = []string{
	annotations.LabelEnabled,
	annotations.AnnotationSync,
	annotations.AnnotationTargetNamespaces,
	annotations.AnnotationMaxTargets,
	annotations.AnnotationTargetClusterSelector,
	annotations.AnnotationTargetNamespaceSelector,
	annotations.AnnotationAllowPullInto,
	annotations.AnnotationAdopt,
	annotations.LabelPull,
	annotations.AnnotationMirrorFrom,
	annotations.AnnotationTransform,
	annotations.AnnotationTransformStrict,
	annotations.AnnotationTargetName,
	annotations.AnnotationCopyOnce,
	annotations.AnnotationDeletionPolicy,
	annotations.AnnotationExcludeNamespaces,
	annotations.AnnotationKeepAdditions,
}

// knownKeys are every key with our prefix that may be on an object: those
// of sources, those the agents write, and the namespace opt-in.
var knownKeys = append(slices.Clone(sourceKeys),
	annotations.AnnotationStatus,
	annotations.AnnotationCopied,
	annotations.LabelAllowMirrors,
	annotations.LabelMirror,
	annotations.LabelManagedBy,
	annotations.AnnotationSource,
	annotations.AnnotationSourceUID,
	annotations.AnnotationSourceResourceVersion,
	annotations.AnnotationContentHash,
	annotations.AnnotationReleasedFrom,
	annotations.AnnotationReleasedFromUID,
	annotations.LabelClusterName, annotations.LabelReceiveOnly,
)

// UnknownKeys returns the keys of m with our prefix that fleetmirror does
// not know, sorted.
func UnknownKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, annotations.Prefix) && !slices.Contains(knownKeys, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ClosestKey returns the source key nearest to key by edit distance, or ""
// when none is near enough to be what was meant (more than a third of the
// key's length away).
func ClosestKey(key string) string {
	best, bestDist := "", len(key)/3+1
	for _, k := range sourceKeys {
		if d := editDistance(strings.ToLower(key), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
