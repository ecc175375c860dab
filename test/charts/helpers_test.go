// Package charts_test renders charts/member and charts/hub with Helm and
// asserts what a cluster would get: RBAC exactly as wide as the mirrored
// kinds, hardened Pods, one flag per value, a schema that refuses typos, a
// README that lists every value, and monitoring rules and dashboards that
// only name metrics the binaries export, and an admission policy that a real
// API server runs as the agent parses.
//
// It runs the pinned helm (fleettest.Helm: built with make when missing;
// under -short a missing helm skips the package) and builds cmd/member and cmd/hub. Tests
// that need an API server share one envtest API server, started by the first
// of them (skipped under -short) and stopped by TestMain.
package charts_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// releaseName and releaseNamespace are the release every render uses.
const (
	releaseName      = "fm"
	releaseNamespace = "fleetmirror-system"
)

// Charts under test: directory under charts/ and the binary it runs.
var charts = []struct{ dir, binary string }{
	{"member", "fleetmirror-member"},
	{"hub", "fleetmirror-hub"},
}

var root = func() string {
	abs, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs
}()

// helm returns the pinned helm (fleettest.Helm: the one place tests get it).
func helm(t *testing.T) string {
	t.Helper()
	return fleettest.Helm(t)
}

// Object is one rendered manifest.
type Object struct {
	Kind, Name, Namespace string
	// Raw is the manifest as YAML, for decoding into a typed object.
	Raw []byte
	// Map is the manifest decoded generically.
	Map map[string]any
}

// Manifests are the objects of one render.
type Manifests []Object

// Get returns the only object of kind whose name ends in suffix.
func (ms Manifests) Get(t *testing.T, kind, suffix string) Object {
	t.Helper()
	var found []Object
	for _, o := range ms {
		if o.Kind == kind && strings.HasSuffix(o.Name, suffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s named *%s, found %d in %v", kind, suffix, len(found), ms.names())
	}
	return found[0]
}

// Kinds returns the objects of kind.
func (ms Manifests) Kinds(kind string) []Object {
	var out []Object
	for _, o := range ms {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (ms Manifests) names() []string {
	var out []string
	for _, o := range ms {
		out = append(out, o.Kind+"/"+o.Name)
	}
	return out
}

// Decode decodes the object into a typed Kubernetes object.
func (o Object) Decode(t *testing.T, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.Raw, into); err != nil {
		t.Fatalf("decoding %s/%s: %v\n%s", o.Kind, o.Name, err, o.Raw)
	}
}

// templateChart runs helm template on chart with the values (a nested map,
// written to a file) and extra arguments, returning the output or helm's error.
func templateChart(t *testing.T, chart string, values map[string]any, args ...string) (string, error) {
	t.Helper()
	return templateDir(t, filepath.Join(root, "charts", chart), values, args...)
}

// templateDir is templateChart for the chart in dir.
func templateDir(t *testing.T, dir string, values map[string]any, args ...string) (string, error) {
	t.Helper()
	return templateRelease(t, releaseName, dir, values, args...)
}

// templateRelease is templateDir for a release of another name.
func templateRelease(t *testing.T, release, dir string, values map[string]any, args ...string) (string, error) {
	t.Helper()
	cmd := []string{"template", release, dir, "--namespace", releaseNamespace}
	if values != nil {
		b, err := yaml.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		// Not under t.TempDir: helm splits --values at commas, which test
		// names may hold.
		dir, err := os.MkdirTemp("", "values")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		f := filepath.Join(dir, "values.yaml")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd = append(cmd, "--values", f)
	}
	// No --kube-version unless a test asks: the pinned helm assumes the
	// Kubernetes release of its client libraries, as a user's does.
	cmd = append(cmd, args...)
	var stdout, stderr bytes.Buffer
	c := exec.Command(helm(t), cmd...)
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("helm %s: %v: %s", strings.Join(cmd, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// render renders chart and fails the test when helm fails. It returns what
// helm install creates, and the helm test hook, but not the uninstall
// hook's objects, which exist only while helm uninstall runs:
// renderAll returns those too.
func render(t *testing.T, chart string, values map[string]any, args ...string) Manifests {
	t.Helper()
	var out Manifests
	for _, o := range renderAll(t, chart, values, args...) {
		if o.Hook() != "post-delete" {
			out = append(out, o)
		}
	}
	return out
}

// renderAll renders chart, hooks included, and fails the test when helm
// fails.
func renderAll(t *testing.T, chart string, values map[string]any, args ...string) Manifests {
	t.Helper()
	out, err := templateChart(t, chart, values, args...)
	if err != nil {
		t.Fatal(err)
	}
	return parseManifests(t, out)
}

// Hook returns the object's helm.sh/hook annotation: empty for the
// objects of the release itself.
func (o Object) Hook() string {
	meta, _ := o.Map["metadata"].(map[string]any)
	annots, _ := meta["annotations"].(map[string]any)
	hook, _ := annots["helm.sh/hook"].(string)
	return hook
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func parseManifests(t *testing.T, out string) Manifests {
	t.Helper()
	var ms Manifests
	for _, doc := range docSeparator.Split(out, -1) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		meta, _ := m["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		kind, _ := m["kind"].(string)
		ms = append(ms, Object{Kind: kind, Name: name, Namespace: ns, Raw: []byte(doc), Map: m})
	}
	return ms
}

// values builds a nested values map from dotted paths.
func values(kv ...any) map[string]any {
	out := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		set(out, kv[i].(string), kv[i+1])
	}
	return out
}

func set(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// readYAML decodes a YAML file of the repository.
func readYAML(t *testing.T, rel string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// leaves returns the dotted paths of the values: scalars, lists and empty
// maps are leaves; other maps are descended into.
func leaves(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for k, child := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leaves(p, child)...)
	}
	slices.Sort(out)
	return out
}
