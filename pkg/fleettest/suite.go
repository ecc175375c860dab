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
	SetLogger()
	f, err := Start("", memberNames...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return f
}

// Main is the whole TestMain of a package whose tests are partly pure and
// partly need API servers: under -short it runs the tests with *f nil (those
// that need it skip themselves), otherwise it starts a fleet of the hub and
// the named members into *f, runs the tests and stops the fleet. It ends
// the process with the tests' status.
func Main(m *testing.M, f **Fleet, memberNames ...string) {
	flag.Parse()
	SetLogger()
	if testing.Short() {
		fmt.Println("envtest tests skipped in -short mode")
		os.Exit(m.Run())
	}
	var err error
	if *f, err = Start("", memberNames...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := (*f).Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// SetLogger sends controller-runtime's log to stderr when
// FLEETMIRROR_TEST_LOG is set, and nowhere otherwise.
func SetLogger() {
	if os.Getenv(envTestLog) != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
}
