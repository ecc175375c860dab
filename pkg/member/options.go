package member

import (
	"flag"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
)

// Options are the member agent's settings: the shared ones, all flags.
type Options struct {
	agent.Options
}

// memberMaxProcs is the member agent's default --max-procs. Its work is a
// few workers' writes and the watch events they echo, which two CPUs
// carry; the Go runtime's default, every CPU of the node, gave it more
// memory and CPU for the same work and no speed: in the member benchmark
// (test/bench/README.md) with GOMAXPROCS=16, the peak RSS was 2.3 MiB
// higher and the CPU spent half as much again, the convergence no faster.
// It is also the least the Go runtime gives a container with a CPU limit.
const memberMaxProcs = 2

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	o.Options.AddFlags(fs, agent.Binary{Name: "fleetmirror-member", Cluster: "local", MaxProcs: memberMaxProcs})
}

// ParseOptions returns the options given by command-line style args, with
// every default applied.
func ParseOptions(args ...string) (Options, error) {
	var o Options
	err := agent.Parse("fleetmirror-member", &o, args)
	return o, err
}
