package fleettest

import (
	"flag"
	"fmt"
	"io"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// envTestLog, when set, makes the agents run in a suite log to stderr.
const envTestLog = "FLEETMIRROR_TEST_LOG"

// StartSuite is how a package's envtest suite begins, called first in its
// TestMain: it parses the test flags, ends the process successfully under
// -short (the suite needs API servers), sends controller-runtime's log to
// stderr when FLEETMIRROR_TEST_LOG is set and nowhere otherwise, and starts
// a fleet of the hub and the named members, ending the process with status
// 1 when it cannot. The caller stops the fleet after m.Run.
func StartSuite(memberNames ...string) *Fleet {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping envtest suite in -short mode")
		os.Exit(0)
	}
	if os.Getenv(envTestLog) != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	f, err := Start("", memberNames...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return f
}
