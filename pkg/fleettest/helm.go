package fleettest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// errHelmMissing: helm is not built and -short forbids building it.
var errHelmMissing = errors.New("helm is missing")

// Helm returns the path of the pinned helm, the one place every test that
// runs helm gets it from: FLEETMIRROR_HELM when set (make test and make
// test-cluster set it after building it), else the Makefile's
// bin/helm-<HELM_VERSION>-k8s<HELM_KUBE_VERSION>, built with make when
// missing. The Makefile's target builds
// under a lock (hack/go-install.sh), so test packages asking at the same
// moment on a fresh clone build it once. Under -short a missing helm skips
// the test instead of building it.
func Helm(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() { helmPath, helmErr = findHelm() })
	if errors.Is(helmErr, errHelmMissing) {
		t.Skipf("%s is missing and -short is set: run `make tools` to build it", helmPath)
	}
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

func findHelm() (string, error) {
	if path := os.Getenv("FLEETMIRROR_HELM"); path != "" {
		if _, err := os.Stat(path); err != nil {
			return path, fmt.Errorf("FLEETMIRROR_HELM: %w", err)
		}
		return path, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", err
	}
	var version [2]string
	for i, name := range []string{"HELM_VERSION", "HELM_KUBE_VERSION"} {
		m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)$`).FindSubmatch(mk)
		if m == nil {
			return "", fmt.Errorf("%s not found in the Makefile", name)
		}
		version[i] = string(m[1])
	}
	path := filepath.Join(root, "bin", "helm-"+version[0]+"-k8s"+version[1])
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if testing.Short() {
		return path, errHelmMissing
	}
	// The Makefile's target for helm is its absolute path.
	if out, err := exec.Command("make", "-C", root, path).CombinedOutput(); err != nil {
		return path, fmt.Errorf("building helm with make: %v\n%s", err, out)
	}
	return path, nil
}
