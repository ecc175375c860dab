package hub_test

import (
	"strings"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/hub"
)

// The hub's policy patterns and its cluster-secrets namespace are checked
// at start-up like the shared pattern flags: a malformed one is an error
// naming the flag and the value.
func TestOptionsRefuseMalformedPatterns(t *testing.T) {
	for _, bad := range []struct{ flag, want string }{
		{"--allowed-source-namespaces=team-[", `--allowed-source-namespaces: bad pattern "team-["`},
		{"--allowed-source-clusters=eu-*,eu-[1", `--allowed-source-clusters: bad pattern "eu-[1"`},
		{"--allowed-source-clusters=EU-*", `--allowed-source-clusters: pattern "EU-*" can never match a name`},
		{"--excluded-namespaces=kube-[system", `--excluded-namespaces: bad pattern "kube-[system"`},
		{"--cluster-secrets-namespace=capi-*", `--cluster-secrets-namespace: "capi-*" is not a namespace name`},
	} {
		if _, err := hub.ParseOptions(bad.flag); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want %q", bad.flag, err, bad.want)
		}
	}
	o, err := hub.ParseOptions("--allowed-source-namespaces=team-*,platform", "--cluster-secrets-namespace=capi-clusters")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.AllowedSourceNamespaces.Strings(), ","); got != "team-*,platform" {
		t.Errorf("allowed source namespaces = %q", got)
	}
}
