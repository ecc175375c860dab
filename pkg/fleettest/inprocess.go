package fleettest

import (
	"context"
	"fmt"
	"os"
	"time"
)

// StopInProcess stops an agent that runs in the test process: it cancels
// the agent's context and waits up to a minute for its Run, which reports
// on done, to return. An error from Run goes to stderr (a suite's TestMain
// has no test to fail); a Run that does not return panics, with every
// goroutine's stack, rather than hang the suite.
func StopInProcess(name string, cancel context.CancelFunc, done <-chan error) {
	cancel()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintln(os.Stderr, name, "stopped with error:", err)
		}
	case <-time.After(time.Minute):
		panic(name + " did not stop within a minute")
	}
}
