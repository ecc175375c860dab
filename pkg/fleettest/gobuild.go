package fleettest

import (
	"fmt"
	"os"
	"os/exec"
)

// GoBuild builds the package pkg of this repository (./cmd/member) into out
// the way the image's binaries are built, CGO_ENABLED=0 go build -trimpath
// (the Dockerfile). Tests that build an agent without the race detector
// build it so, and so does hack/image: the build cache then holds one
// compiled copy of every dependency for all of them.
// Each setting of their own (cgo, -trimpath or not) compiled all of
// Kubernetes' client libraries once more on a fresh machine, minutes of a
// first `make test`.
func GoBuild(out, pkg string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), ImageBuildEnv...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return nil
}

// ImageBuildEnv is the environment of the image's go build, for tests that
// run the go command themselves with it.
var ImageBuildEnv = []string{"CGO_ENABLED=0"}
