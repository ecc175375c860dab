package agent_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// TestFlagsReference fails when docs/flags.md is not what the binaries'
// flags say; `go run ./hack/flags-docs` rewrites it.
func TestFlagsReference(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "") // the documented default
	var m member.Options
	var h hub.Options
	mfs, hfs := flag.NewFlagSet("member", flag.ContinueOnError), flag.NewFlagSet("hub", flag.ContinueOnError)
	m.AddFlags(mfs)
	h.AddFlags(hfs)
	want := agent.FlagsReference(mfs, hfs)
	got, err := os.ReadFile(filepath.Join("..", "..", "docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/flags.md is out of date: run go run ./hack/flags-docs")
	}
	for _, name := range []string{"cluster-name", "excluded-namespaces", "cluster-provider", "kubeconfig-dir"} {
		if hfs.Lookup(name) == nil {
			t.Errorf("the hub has no flag --%s", name)
		}
	}
}
