// Command fleetmirror-member is the member agent: it mirrors annotated
// objects into other namespaces of the cluster it runs in.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetmirror/fleetmirror/pkg/member"
)

func main() {
	fs := flag.NewFlagSet("fleetmirror-member", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: fleetmirror-member [flags]\n\nMirrors annotated objects into other namespaces of this cluster.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var o member.Options
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
	if err := member.Run(ctx, o); err != nil {
		log.Error(err, "Member agent failed")
		os.Exit(1)
	}
}
