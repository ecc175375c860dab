package member

import (
	"flag"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
)

// Options are the member agent's settings: the shared ones, all flags.
type Options struct {
	agent.Options
}

// AddFlags registers every option on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	o.Options.AddFlags(fs, agent.Binary{Name: "fleetmirror-member", Cluster: "local"})
}

// ParseOptions returns the options given by command-line style args, with
// every default applied.
func ParseOptions(args ...string) (Options, error) {
	var o Options
	err := agent.Parse("fleetmirror-member", &o, args)
	return o, err
}
