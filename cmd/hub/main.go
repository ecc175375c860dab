// Command fleetmirror-hub is the hub: it mirrors annotated objects into
// namespaces of other clusters of the fleet, registered by kubeconfig Secrets.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetmirror/fleetmirror/pkg/hub"
)

func main() {
	fs := flag.NewFlagSet("fleetmirror-hub", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: fleetmirror-hub [flags]\n\nMirrors annotated objects into namespaces of other clusters of the fleet.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var o hub.Options
	finish := o.BindFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := finish(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)
	if err := hub.Run(ctx, o); err != nil {
		log.Error(err, "Hub failed")
		os.Exit(1)
	}
}
