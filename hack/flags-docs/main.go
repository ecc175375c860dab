// Command flags-docs writes docs/flags.md from the flags the binaries bind.
//
//	go run ./hack/flags-docs
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

func main() {
	_ = os.Unsetenv("POD_NAMESPACE") // document the default, not this shell's
	var m member.Options
	var h hub.Options
	mfs, hfs := flag.NewFlagSet("member", flag.ContinueOnError), flag.NewFlagSet("hub", flag.ContinueOnError)
	m.AddFlags(mfs)
	h.AddFlags(hfs)
	if err := os.WriteFile("docs/flags.md", []byte(agent.FlagsReference(mfs, hfs)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
