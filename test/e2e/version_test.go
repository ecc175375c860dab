package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

const modulePath = "github.com/fleetmirror/fleetmirror"

// `go install github.com/fleetmirror/fleetmirror/cmd/member@<commit>` builds
// without our -ldflags and, in module mode, records no VCS settings: the
// binary must still say which version and commit it is. The test serves the
// committed tree of this checkout as a pseudo-version from a file proxy
// (the module cache's download directory serves every dependency, so
// nothing leaves the machine), installs the member from it as a user would,
// and reads --version.
func TestVersionOfGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the member with go install")
	}
	root, err := fleettest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Skipf("git %s: %v (not a git checkout)", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	rev := git("rev-parse", "HEAD")
	secs, err := strconv.ParseInt(git("show", "-s", "--format=%ct", "HEAD"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	version := module.PseudoVersion("v0", "", time.Unix(secs, 0), rev[:12])

	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive HEAD | tar -x -C "$2"`, "sh", root, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive: %v\n%s", err, out)
	}
	dir := filepath.Join(tmp, "proxy", modulePath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	if err := modzip.CreateFromDir(zf, module.Version{Path: modulePath, Version: version}, src); err != nil {
		t.Fatal(err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info := `{"Version":"` + version + `","Time":"` + time.Unix(secs, 0).UTC().Format(time.RFC3339) + `"}`
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": []byte(info), version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	goEnv := func(key string) string {
		out, err := exec.Command("go", "env", key).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	modcache := filepath.Join(tmp, "mod")
	bin := filepath.Join(tmp, "bin")
	env := append(append(os.Environ(), fleettest.ImageBuildEnv...),
		"GOBIN="+bin,
		"GOMODCACHE="+modcache,
		"GOPROXY=file://"+filepath.Join(tmp, "proxy")+",file://"+filepath.Join(goEnv("GOMODCACHE"), "cache", "download"),
		"GOSUMDB=off", // the pseudo-version exists only here; go.sum still checks every dependency
		"GOTOOLCHAIN=local",
		// -buildvcs=false as on our machines: no VCS stamp to fall back on.
		// -trimpath keeps the build cache's keys free of the temporary module
		// cache's path, so a second run compiles only what changed; with
		// the image's settings (ImageBuildEnv) it shares what the other
		// tests' builds compiled (fleettest.GoBuild).
		"GOFLAGS=-buildvcs=false -trimpath",
	)
	t.Cleanup(func() { // the module cache is read-only; go clean removes it
		cmd := exec.Command("go", "clean", "-modcache")
		cmd.Env = env
		_ = cmd.Run()
	})
	install := exec.Command("go", "install", modulePath+"/cmd/member@"+version)
	install.Env = env
	install.Dir = tmp
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "member"), "--version")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("member --version: %v\n%s", err, stderr.String())
	}
	want := "fleetmirror-member " + version + " (revision " + rev[:12] + ", "
	if !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("member --version of go install @%s = %q, want %q…", version, stdout.String(), want)
	}
}
