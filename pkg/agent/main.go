package agent

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Main is the body of both binaries: it parses the flags of o and the
// logging flags, then runs run until SIGINT or SIGTERM. Bad flags exit
// with 2, a failed run with 1.
func Main(binary, description string, o Flags, run func(context.Context) error) {
	fs := flag.NewFlagSet(binary, flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\n%s\n\nFlags:\n", binary, description)
		fs.PrintDefaults()
	}
	o.AddFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: never returns an error
	if err := o.Complete(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)
	tuneGC()
	if err := run(ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)); err != nil {
		log.Error(err, "Exiting", "binary", binary)
		os.Exit(1)
	}
}

// gcPercent is the GOGC the agents run with unless GOGC is set. Their live
// heap is small (a few MiB of caches) while every write makes garbage of
// the size of the object, so the default of 100 lets the heap, and the
// resident memory, swing to twice the live heap between collections; at 50
// the swing halves, and a collection of a small heap costs little CPU.
const gcPercent = 50

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
