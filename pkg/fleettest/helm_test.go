package fleettest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestGoInstallBuildsOnce: hack/go-install.sh, which builds the Makefile's
// pinned tools, builds a tool once when several callers ask at the same
// moment (test/charts and test/e2e both ask for helm on a fresh clone), every
// caller finds the whole binary, and a failed build leaves nothing behind. A
// fake go on PATH stands in for the build and counts its calls.
func TestGoInstallBuildsOnce(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "hack", "go-install.sh")
	fakeBin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	// The fake build is slow enough that unlocked callers would overlap.
	fakeGo := fmt.Sprintf(`#!/usr/bin/env bash
echo "$*" >> %q
sleep 0.5
[[ "$2" == *broken* ]] && exit 1
printf '#!/bin/sh\necho tool\n' > "$GOBIN/tool"
chmod +x "$GOBIN/tool"
`, calls)
	if err := os.WriteFile(filepath.Join(fakeBin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	path := fakeBin + string(os.PathListSeparator) + os.Getenv("PATH")

	run := func(bindir, pkg string) ([]byte, error) {
		cmd := exec.Command(script, "tool", pkg, "v1.0.0", bindir)
		cmd.Env = append(os.Environ(), "PATH="+path)
		return cmd.CombinedOutput()
	}

	bindir := t.TempDir()
	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			if out, err := run(bindir, "example.com/tool"); err != nil {
				errs[i] = fmt.Errorf("caller %d: %v\n%s", i, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 1 {
		t.Errorf("%d builds for %d callers, want 1", n, callers)
	}
	out, err := exec.Command(filepath.Join(bindir, "tool")).Output()
	if err != nil || string(out) != "tool\n" {
		t.Errorf("bin/tool runs: %q, %v", out, err)
	}

	// A binary of its own name and -ldflags (helm's: bin/helm-v3.22.0-k8s1.37)
	// is built beside the plain one, which is not taken for it, and
	// bin/tool points at it.
	cmd := exec.Command(script, "tool", "example.com/tool", "v1.0.0", bindir, "tool-v1.0.0-x", "-X example.com/tool.v=x")
	cmd.Env = append(os.Environ(), "PATH="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if data, err = os.ReadFile(calls); err != nil {
		t.Fatal(err)
	}
	ran := strings.Split(strings.TrimSpace(string(data)), "\n")
	if want := "install -ldflags=-X example.com/tool.v=x example.com/tool@v1.0.0"; len(ran) != 2 || ran[1] != want {
		t.Errorf("go ran %q, want a second build: go %s", ran, want)
	}
	if link, err := os.Readlink(filepath.Join(bindir, "tool")); err != nil || link != "tool-v1.0.0-x" {
		t.Errorf("bin/tool points at %q (%v), want tool-v1.0.0-x", link, err)
	}

	// A failed build leaves neither the binary nor its build directory.
	broken := t.TempDir()
	if _, err := run(broken, "example.com/broken"); err == nil {
		t.Fatal("a failed build succeeded")
	}
	left, _ := filepath.Glob(filepath.Join(broken, "tool*"))
	builds, _ := filepath.Glob(filepath.Join(broken, ".build-*"))
	if len(left)+len(builds) != 0 {
		t.Errorf("a failed build left %v", append(left, builds...))
	}
}
