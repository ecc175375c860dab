package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// startProcess starts bin with args the way every process of these tests
// starts (a process group of its own, output to a.logPath, SIGTERM then
// SIGKILL on stop): agents through startAgent, agents with a kubeconfig of
// their own and Prometheus servers directly. a carries the name, the log
// path and the addresses; startProcess fills in the rest.
func startProcess(a *agent, bin string, args ...string) error {
	if err := os.MkdirAll(filepath.Dir(a.logPath), 0o755); err != nil {
		return err
	}
	logFile, err := os.Create(a.logPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		cancel()
		return errors.Join(fmt.Errorf("starting %s: %w", a.name, err), logFile.Close())
	}
	a.cmd, a.cancel, a.exited = cmd, cancel, make(chan struct{})
	go func() {
		a.err = cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = logFile.Close()
		close(a.exited)
	}()
	return nil
}

// stopAtCleanup stops the processes when the test ends, all at once, and
// fails the test if one of them had exited, failed or reported a race; the
// end of every log is then logged.
func stopAtCleanup(t *testing.T, procs *[]*agent) {
	t.Cleanup(func() {
		errs := make([]error, len(*procs))
		done := make(chan int)
		for i, p := range *procs {
			go func() { errs[i] = p.stop(); done <- i }()
		}
		for range *procs {
			<-done
		}
		failed := t.Failed()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%s: %v", (*procs)[i].name, err)
				failed = true
			}
		}
		if failed {
			for _, p := range *procs {
				t.Logf("--- last lines of %s (%s)\n%s", p.name, p.logPath, p.tail(30))
			}
		}
	})
}

// keepDirOnFailure returns a new temporary directory that is removed when
// the test passes and kept, with its path logged, when it fails, so that
// logs and kubeconfigs can be read afterwards.
func keepDirOnFailure(t *testing.T, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs and kubeconfigs are kept in %s", dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// grepLog returns the lines of the process's log that contain substr
// (case-insensitive), at most n of them.
func grepLog(a *agent, substr string, n int) []string {
	data, err := os.ReadFile(a.logPath)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(strings.ToLower(line), strings.ToLower(substr)) {
			out = append(out, line)
			if len(out) == n {
				break
			}
		}
	}
	return out
}
