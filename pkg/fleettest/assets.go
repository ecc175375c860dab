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

var (
	assetsMu  sync.Mutex
	assetsDir string // cached after the first success
)

// Assets returns the directory holding kube-apiserver, etcd and kubectl.
// KUBEBUILDER_ASSETS wins when set; otherwise hack/envtest.sh of the
// repository around the working directory prints it, building the binaries
// from source on first use (several minutes, progress on stderr).
func Assets() (string, error) {
	if dir := os.Getenv(envAssets); dir != "" {
		return dir, nil
	}
	assetsMu.Lock()
	defer assetsMu.Unlock()
	if assetsDir != "" {
		return assetsDir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "envtest.sh"))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/envtest.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", errors.New("hack/envtest.sh printed no directory")
	}
	assetsDir = dir
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
