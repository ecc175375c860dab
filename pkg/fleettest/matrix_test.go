package fleettest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Under MATRIX_DEADLINE, hack/test-matrix.sh stops a build that would
// leave no time for a leg, with the processes it started, and reports the
// legs that needed it as not run without failing; a build that fails on
// its own fails the matrix. The matrix runs here against a fake
// hack/envtest.sh.
func TestMatrixDeadlineStopsBuild(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "test-matrix.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hack", "test-matrix.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	// The fake build of 1.34 never ends; it records the pid of the
	// process it started, as go build starts compilers. 1.37 fails.
	pidFile := filepath.Join(dir, "pid")
	fake := fmt.Sprintf(`#!/usr/bin/env bash
case $1 in
1.34) sleep 300 & echo $! > %q; wait ;;
*) echo "no such build" >&2; exit 1 ;;
esac
`, pidFile)
	if err := os.WriteFile(filepath.Join(dir, "hack", "envtest.sh"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(leg string) (string, error) {
		cmd := exec.Command("bash", filepath.Join(dir, "hack", "test-matrix.sh"), leg)
		// A build gets what is left before the deadline minus a leg's
		// minute: 3 seconds.
		cmd.Env = append(os.Environ(), "MATRIX_LEG_MINUTES=1",
			"MATRIX_DEADLINE="+strconv.FormatInt(time.Now().Add(63*time.Second).Unix(), 10))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	start := time.Now()
	out, err := run("oldest")
	if err != nil {
		t.Fatalf("a build stopped at the deadline failed the matrix: %v\n%s", err, out)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the build was not stopped: the matrix took %s\n%s", took, out)
	}
	for _, want := range []string{"building Kubernetes 1.34 stopped", "leg oldest (1.34) NOT RUN: Kubernetes 1.34 not built in time"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the fake build did not start: %v\n%s", err, out)
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err != nil {
		t.Fatal(err)
	}
	// The process the build started is gone with it.
	deadline := time.Now().Add(5 * time.Second)
	for alive(p) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p, syscall.SIGKILL)
			t.Fatalf("process %d of the stopped build still runs", p)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if out, err := run("newest"); err == nil || !strings.Contains(out, "building Kubernetes 1.37 failed") {
		t.Errorf("a failed build did not fail the matrix (%v):\n%s", err, out)
	}
}
