package fleettest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
)

// hack/envtest.sh relinks, once, kube-apiserver and kubectl of a cache
// built before their version stamp (they say v0.0.0-master, which the
// charts' kubeVersion refuses), and leaves stamped ones and etcd alone.
func TestEnvtestRelinksUnstamped(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version := pinnedKube(t)

	xdg := t.TempDir()
	etcd := regexp.MustCompile(`(?m)^ETCD_VERSION=(\S+)$`)
	script, err := os.ReadFile(filepath.Join(root, "hack", "envtest.sh"))
	if err != nil {
		t.Fatal(err)
	}
	em := etcd.FindSubmatch(script)
	if em == nil {
		t.Fatal("hack/envtest.sh sets no ETCD_VERSION")
	}
	dir := filepath.Join(xdg, "fleetmirror", "envtest", fmt.Sprintf("k8s-%s-etcd-%s", version, em[1]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := func(name, says string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "#!/bin/sh\necho %q\n", says), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake("etcd", "etcd")
	fake("kube-apiserver", "Kubernetes v0.0.0-master")
	fake("kubectl", "Client Version: v0.0.0-master")

	// The fake go "builds" a binary that says the release of its ldflags;
	// hack/kube-ldflags.sh's go mod download goes to the real one.
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	fakeBin, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	fakeGo := fmt.Sprintf(`#!/usr/bin/env bash
[[ $1 == mod ]] && exec %q "$@"
echo "$*" >> %q
out= ldflags=
while [[ $# -gt 0 ]]; do
	case "$1" in
	-o) out=$2; shift ;;
	-ldflags=*) ldflags=${1#-ldflags=} ;;
	esac
	shift
done
v=$(sed -n 's/.*component-base\/version.gitVersion=\(v[^ ]*\).*/\1/p' <<<"$ldflags")
case "$out" in
*kube-apiserver.tmp) printf '#!/bin/sh\necho "Kubernetes %%s"\n' "$v" > "$out" ;;
*kubectl.tmp) printf '#!/bin/sh\necho "Client Version: %%s"\n' "$v" > "$out" ;;
*) exit 1 ;;
esac
chmod +x "$out"
`, realGo, calls)
	if err := os.WriteFile(filepath.Join(fakeBin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		t.Helper()
		cmd := exec.Command(filepath.Join(root, "hack", "envtest.sh"))
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "KUBEBUILDER_ASSETS=") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "XDG_CACHE_HOME="+xdg, "PATH="+fakeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/envtest.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	// builds returns the fake go's calls, one a line.
	builds := func() []string {
		data, err := os.ReadFile(calls)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(data)), "\n")
	}

	if got := run(); got != dir {
		t.Fatalf("hack/envtest.sh printed %q, want %q", got, dir)
	}
	for bin, want := range map[string]string{"kube-apiserver": "Kubernetes v" + version, "kubectl": "Client Version: v" + version, "etcd": "etcd"} {
		out, err := exec.Command(filepath.Join(dir, bin)).Output()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%s says %q (%v), want %q", bin, out, err, want)
		}
	}
	if n := len(builds()); n != 2 {
		t.Errorf("%d builds for two unstamped binaries, want 2: %q", n, builds())
	}
	run()
	if n := len(builds()); n != 2 {
		t.Errorf("stamped binaries built again: %d builds after the second run, want 2", n)
	}
}

// pinnedKube is PinnedKubeVersion, or the test fails.
func pinnedKube(t *testing.T) string {
	t.Helper()
	v, err := PinnedKubeVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The API servers of the tests say the release they are, as a cluster's
// do: hack/envtest.sh links them with hack/kube-ldflags.sh (unstamped,
// /version said v0.0.0-master+$Format:%H$, which the charts' kubeVersion
// refuses).
func TestAPIServerSaysItsRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers; skipped with -short")
	}
	if os.Getenv(EnvKubeVersions) != "" {
		t.Skipf("%s chooses the releases", EnvKubeVersions)
	}
	api, _ := APIServer(t)
	dc, err := discovery.NewDiscoveryClientForConfig(api.Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// Only what a cache relinked for its stamp says too: binaries of the
	// first stamp carry no build date.
	want := "v" + pinnedKube(t)
	if info.GitVersion != want || info.Major != "1" || info.Minor != strings.Split(want, ".")[1] || info.GitTreeState != "clean" {
		t.Errorf("/version says %+v, want %s from a clean tree", *info, want)
	}
}
