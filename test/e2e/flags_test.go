package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// A malformed pattern in a flag stops the agent at start-up, before it
// serves health or touches a cluster, with an error that names the flag
// and the pattern. Accepted, it would match nothing: an exclusion that
// excludes nothing, a policy that allows nothing or strips nothing.
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
	}
	for _, tc := range cases {
		for _, bin := range tc.bins {
			t.Run(bin.name+"/"+tc.flag, func(t *testing.T) {
				probe, err := fleettest.FreeAddr()
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin.path,
					"--kubeconfig", hubC.KubeconfigPath, "--namespace", systemNS,
					"--metrics-bind-address", "0", "--health-probe-bind-address", probe,
					"--"+tc.flag+"="+tc.pattern)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				err = cmd.Run()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 2 {
					t.Fatalf("%s --%s=%s: %v, want exit status 2; output:\n%s", filepath.Base(bin.path), tc.flag, tc.pattern, err, out.String())
				}
				msg := out.String()
				if !strings.Contains(msg, "--"+tc.flag) || !strings.Contains(msg, tc.want) {
					t.Errorf("output does not name the flag --%s and %q:\n%s", tc.flag, tc.want, msg)
				}
				if strings.Contains(msg, "Starting") {
					t.Errorf("the agent started before refusing the flag:\n%s", msg)
				}
			})
		}
	}
}
