// Command kubectl-fleetmirror is the kubectl plugin of fleetmirror: on the
// PATH, it runs as `kubectl fleetmirror status|why|list`.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/fleetmirror/fleetmirror/pkg/cli"
)

func main() {
	if err := cli.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
