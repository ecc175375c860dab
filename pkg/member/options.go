package member

import (
	"flag"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
)

// Options are the member agent's settings; each is a flag.
type Options struct {
	agent.Options
}

// BindFlags registers every option on fs and returns a function that
// finishes parsing once fs.Parse has run.
func (o *Options) BindFlags(fs *flag.FlagSet) func() error {
	return o.Options.BindFlags(fs, "fleetmirror-member", "local")
}

// ParseOptions returns the options given by command-line style args, with
// every default applied.
func ParseOptions(args ...string) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("fleetmirror-member", flag.ContinueOnError)
	finish := o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	return o, finish()
}
