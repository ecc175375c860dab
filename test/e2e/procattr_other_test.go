//go:build !linux

package e2e

import "syscall"

// sysProcAttr puts an agent in a process group of its own, so that stopping
// it stops whatever it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
