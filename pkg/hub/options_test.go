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
		{"--cluster-probe-interval=0s", "--cluster-probe-interval must be positive, got 0s"},
		{"--cluster-probe-timeout=-1s", "--cluster-probe-timeout must be positive, got -1s"},
		{"--cluster-name=Hub", `--cluster-name: "Hub" is not a DNS-1123 label`},
	} {
		if _, err := hub.ParseOptions(bad.flag); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want %q", bad.flag, err, bad.want)
		}
	}
	// Deprecated and ignored, but an older chart or command line passes it.
	if _, err := hub.ParseOptions("--remote-cleanup-timeout=5m"); err != nil {
		t.Errorf("--remote-cleanup-timeout refused: %v", err)
	}
	o, err := hub.ParseOptions("--allowed-source-namespaces=team-*,platform", "--cluster-secrets-namespace=capi-clusters")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.AllowedSourceNamespaces.Strings(), ","); got != "team-*,platform" {
		t.Errorf("allowed source namespaces = %q", got)
	}
}

// --shards=auto turns leader election off (every replica works on its
// share) and needs a replica name that makes a Lease name.
func TestOptionsSharding(t *testing.T) {
	for _, bad := range []struct{ args []string }{
		{[]string{"--shards=on"}},
		{[]string{"--shards=auto", "--shard-id=Hub_0"}},
		{[]string{"--shards=auto", "--shard-id=hub-0", "--shard-group=a.b"}},
		{[]string{"--shards=auto", "--shard-id=hub-0", "--shard-lease-duration=500ms"}},
	} {
		if _, err := hub.ParseOptions(bad.args...); err == nil {
			t.Errorf("%v: accepted", bad.args)
		}
	}
	o, err := hub.ParseOptions("--shards=auto", "--shard-id=hub-0", "--leader-elect=true")
	if err != nil {
		t.Fatal(err)
	}
	if !o.Sharded() || o.LeaderElect || o.ShardID != "hub-0" {
		t.Errorf("sharded %t, leader election %t, id %q", o.Sharded(), o.LeaderElect, o.ShardID)
	}
	t.Setenv("POD_NAME", "fleetmirror-hub-7d9f-x2k")
	if o, err = hub.ParseOptions("--shards=auto"); err != nil || o.ShardID != "fleetmirror-hub-7d9f-x2k" {
		t.Errorf("shard id %q from $POD_NAME, error %v", o.ShardID, err)
	}
}
