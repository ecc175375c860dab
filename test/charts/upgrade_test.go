package charts_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// previousValues holds charts/<chart>/values.yaml of the previous release,
// as <chart>-values.yaml: the commit test/cluster's TestUpgrade upgrades
// from (its upgradeFrom), whose test checks these copies against it. Copy
// them again when that commit moves.
const previousValues = "testdata/previous-release"

// addedBefore are values some release before the previous one lacked, that
// the templates read with a default of true: a release installed then and
// upgraded with --reuse-values ever since still lacks them.
var addedBefore = map[string][]string{
	"member": {"rbac.aggregateClusterRoles"},
}

// TestReuseValuesKeepsDefaults renders each chart as `helm upgrade
// --reuse-values` from the previous release does: Helm then renders with the
// values of the chart the release was installed from (the previous
// values.yaml, the user's values over it) instead of the new chart's, so a
// value added since is absent and one removed since is still there. The
// objects, hooks and notes must be a fresh install's with the same user
// values: every template defaults what was added, the schema takes what was
// removed, no default changed. Otherwise the README must tell users to
// upgrade with --reset-then-reuse-values (and test/cluster must run that).
func TestReuseValuesKeepsDefaults(t *testing.T) {
	for _, chart := range []string{"member", "hub"} {
		previous, err := os.ReadFile(filepath.Join(previousValues, chart+"-values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for name, user := range map[string]map[string]any{
			"no user values": nil,
			"user values":    values("replicaCount", 2, "image.tag", "v9.9.9", "podDisruptionBudget.enabled", true),
		} {
			t.Run(chart+"/"+name, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), chart)
				if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "charts", chart))); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "values.yaml"), previous, 0o600); err != nil {
					t.Fatal(err)
				}
				out, err := templateDir(t, dir, user)
				if err != nil {
					t.Fatalf("--reuse-values from the previous release fails: %v", err)
				}
				sameObjects(t, renderAll(t, chart, user), parseManifests(t, out))
				if fresh, reused := renderNotes(t, chart, user), copiedChartNotes(t, releaseName, dir, user); fresh != reused {
					t.Errorf("the notes differ:\n%s", cmp.Diff(fresh, reused))
				}
			})
		}
	}
}

// TestAbsentValuesMeanTheirDefaults renders each chart without each value
// it gained since the previous release (and those of addedBefore), as an
// upgrade with --reuse-values from a release that lacked it would: the
// objects must be those of the default, value by value.
func TestAbsentValuesMeanTheirDefaults(t *testing.T) {
	for _, chart := range []string{"member", "hub"} {
		var current, previous map[string]any
		readYAML(t, filepath.Join("charts", chart, "values.yaml"), &current)
		readYAML(t, filepath.Join("test", "charts", previousValues, chart+"-values.yaml"), &previous)
		added := slices.Concat(addedBefore[chart], slices.DeleteFunc(leaves("", current), func(key string) bool {
			return slices.Contains(leaves("", previous), key)
		}))
		defaults := renderAll(t, chart, nil)
		for _, key := range added {
			t.Run(chart+"/"+key, func(t *testing.T) {
				// A null in the values deletes the chart's default.
				sameObjects(t, defaults, renderAll(t, chart, values(key, nil)))
			})
		}
	}
}

// sameObjects fails the test unless two renders hold the same objects,
// compared as decoded YAML and keyed by kind, namespace and name.
func sameObjects(t *testing.T, want, got Manifests) {
	t.Helper()
	byKey := func(ms Manifests) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, o := range ms {
			out[o.Kind+" "+o.Namespace+"/"+o.Name] = o.Map
		}
		return out
	}
	if diff := cmp.Diff(byKey(want), byKey(got)); diff != "" {
		t.Errorf("objects differ (-want +got):\n%s", diff)
	}
}
