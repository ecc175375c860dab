package e2e

import "syscall"

// sysProcAttr puts an agent in a process group of its own, so that stopping
// it stops whatever it started, and has it killed when the test binary dies
// without cleaning up (a -timeout panic, kill -9).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
