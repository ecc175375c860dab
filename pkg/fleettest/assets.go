package fleettest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// envAssets is the variable envtest reads the binaries' directory from.
const envAssets = "KUBEBUILDER_ASSETS"

// modulePattern matches the module line of this repository's go.mod.
var modulePattern = regexp.MustCompile(`(?m)^module\s+github\.com/fleetmirror/fleetmirror\s*$`)

// Assets returns the directory holding kube-apiserver, etcd and kubectl.
// When FLEETMIRROR_KUBE_VERSIONS (EnvKubeVersions) names the hub's version,
// that version's, as hack/envtest.sh VERSION prints it. Otherwise
// KUBEBUILDER_ASSETS wins when set; else hack/envtest.sh of the repository
// around the working directory prints it. The script builds the binaries
// from source on first use (several minutes, progress on stderr).
func Assets() (string, error) {
	kv, err := configuredVersions()
	if err != nil {
		return "", err
	}
	return assetsOf(kv.hub)
}

// Prometheus returns the directory holding promtool and prometheus.
// FLEETMIRROR_PROMETHEUS_DIR wins when set (make test sets it); otherwise
// hack/prometheus.sh prints it, building both from source on first use
// (several minutes, progress on stderr).
func Prometheus() (string, error) {
	return prometheusTools.dir()
}

var (
	assets          = &scriptDir{env: envAssets, script: "envtest.sh"}
	prometheusTools = &scriptDir{env: "FLEETMIRROR_PROMETHEUS_DIR", script: "prometheus.sh"}
)

// scriptDir is a directory of tools that a script in hack/ prints, given
// args, unless an environment variable (env, when not empty) names it.
type scriptDir struct {
	env, script string
	args        []string

	mu    sync.Mutex
	found string // cached after the first success
}

func (s *scriptDir) dir() (string, error) {
	if dir := os.Getenv(s.env); s.env != "" && dir != "" {
		return dir, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found != "" {
		return s.found, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "hack", s.script)}, s.args...)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	name := strings.Join(append([]string{"hack/" + s.script}, s.args...), " ")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("%s printed no directory", name)
	}
	s.found = dir
	return dir, nil
}

// RepoRoot walks up from the working directory to the fleetmirror module's
// root: the first directory with a go.mod declaring this module. Nested
// modules (hack/tools/...) are passed over.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePattern.Match(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the fleetmirror repository: no go.mod of github.com/fleetmirror/fleetmirror above the working directory")
		}
		dir = parent
	}
}
