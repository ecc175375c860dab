package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// A malformed pattern in a flag stops the agent at start-up, before it
// serves health or touches a cluster, with an error that names the flag
// and the pattern. Accepted, it would match nothing: an exclusion that
// excludes nothing, a policy that allows nothing or strips nothing. So
// does a value out of range, such as a cluster name that is no DNS label.
func TestMalformedPatternFlags(t *testing.T) {
	type binary struct{ name, path string }
	member, hub := binary{"member", memberBin}, binary{"hub", hubBin}
	cases := []struct {
		bins    []binary
		flag    string
		pattern string
		want    string
	}{
		{[]binary{member, hub}, "excluded-namespaces", "kube-[system", `bad pattern "kube-[system"`},
		{[]binary{member, hub}, "included-namespaces", `team-\`, "bad pattern"},
		{[]binary{member, hub}, "excluded-namespaces", "Kube-System", `pattern "Kube-System" can never match a name`},
		{[]binary{member, hub}, "strip-keys", "example.com/[", `bad pattern "example.com/["`},
		{[]binary{hub}, "allowed-source-namespaces", "team-[", `bad pattern "team-["`},
		{[]binary{hub}, "allowed-source-clusters", "eu-[1", `bad pattern "eu-[1"`},
		{[]binary{member, hub}, "cluster-name", "Bad/Name", `"Bad/Name" is not a DNS-1123 label`},
		{[]binary{member, hub}, "workers", "0", "must be at least 1, got 0"},
	}
	for _, tc := range cases {
		for _, bin := range tc.bins {
			t.Run(bin.name+"/"+tc.flag, func(t *testing.T) {
				probe, err := fleettest.FreeAddr()
				if err != nil {
					t.Fatal(err)
				}
				code, stdout, stderr := runBinary(t, bin.path,
					"--kubeconfig", hubC.KubeconfigPath, "--namespace", systemNS,
					"--metrics-bind-address", "0", "--health-probe-bind-address", probe,
					"--"+tc.flag+"="+tc.pattern)
				msg := stdout + stderr
				if code != 2 {
					t.Fatalf("%s --%s=%s: exit code %d, want 2; output:\n%s", filepath.Base(bin.path), tc.flag, tc.pattern, code, msg)
				}
				if !strings.HasPrefix(stderr, "error: --"+tc.flag) || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
					t.Errorf("stderr is not one line naming the flag --%s and %q:\n%s", tc.flag, tc.want, msg)
				}
				if strings.Contains(msg, "Starting") {
					t.Errorf("the agent started before refusing the flag:\n%s", msg)
				}
			})
		}
	}
}

// runBinary runs bin with args until it exits (at most 30s) and returns
// its exit code, its stdout and its stderr.
func runBinary(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %q: %v", filepath.Base(bin), args, err)
	}
	return code, out.String(), errOut.String()
}

// Start-up errors are one line on stderr, "error: " and what went wrong,
// and exit code 1: a kind the API server does not serve (with the kinds
// meant, probably), a kubeconfig that is not there. No stack trace.
func TestFlagStartupErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a kind the API server does not serve",
			[]string{"--kubeconfig", hubC.KubeconfigPath, "--resource-types=Secret.v1,Secrt.v1"},
			"error: --resource-types: Secrt.v1 is not served by the API server; did you mean Secret.v1?\n"},
		{"a kubeconfig that is not there",
			[]string{"--kubeconfig=/nonexistent"},
			"error: loading kubeconfig: stat /nonexistent: no such file or directory\n"},
	} {
		for _, bin := range []string{memberBin, hubBin} {
			t.Run(tc.name+"/"+filepath.Base(bin), func(t *testing.T) {
				probe, err := fleettest.FreeAddr()
				if err != nil {
					t.Fatal(err)
				}
				args := append([]string{"--namespace", systemNS, "--metrics-bind-address", "0", "--health-probe-bind-address", probe}, tc.args...)
				code, stdout, stderr := runBinary(t, bin, args...)
				if code != 1 || stderr != tc.want || stdout != "" {
					t.Errorf("%s %q: exit code %d, stderr %q, stdout %q; want 1, %q and nothing", filepath.Base(bin), args, code, stderr, stdout, tc.want)
				}
				if strings.Contains(stderr, "goroutine") || strings.Contains(stderr, ".go:") {
					t.Errorf("a stack trace on stderr:\n%s", stderr)
				}
			})
		}
	}
}

// --version prints the version the binary was stamped with at link time,
// and exits 0 without reading a flag or a kubeconfig.
func TestVersion(t *testing.T) {
	for _, bin := range []string{memberBin, hubBin} {
		code, stdout, stderr := runBinary(t, bin, "--version", "--kubeconfig=/nonexistent")
		want := filepath.Base(bin) + " " + e2eVersion + " (revision "
		if code != 0 || !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, ", "+runtime.Version()+")\n") || stderr != "" {
			t.Errorf("%s --version: exit code %d, stdout %q, stderr %q; want 0 and %q…, %s)", filepath.Base(bin), code, stdout, stderr, want, runtime.Version())
		}
	}
}

// A word that is no flag is refused at start-up, naming it: a list written
// with a space (--resource-types=Secret.v1 ConfigMap.v1) must not start an
// agent that silently watches only the first kind.
func TestStrayArgument(t *testing.T) {
	for _, bin := range []string{memberBin, hubBin} {
		code, stdout, stderr := runBinary(t, bin, "--kubeconfig=/nonexistent", "--resource-types=Secret.v1", "ConfigMap.v1")
		want := `error: unexpected argument "ConfigMap.v1": ` + filepath.Base(bin) + " takes only flags"
		if code != 2 || !strings.HasPrefix(stderr, want) || stdout != "" {
			t.Errorf("%s with a stray argument: exit code %d, stderr %q, stdout %q; want 2 and %q…", filepath.Base(bin), code, stderr, stdout, want)
		}
	}
}
