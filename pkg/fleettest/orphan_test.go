package fleettest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envOrphanHelper makes TestOrphanGuardHelper run; its value is a directory.
const envOrphanHelper = "FLEETTEST_ORPHAN_HELPER"

// TestOrphanGuard kills a process that started a guarded child, as a test
// timeout or kill -9 would, and expects the child to die with it.
func TestOrphanGuard(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux only")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestOrphanGuardHelper$", "-test.short")
	helper.Env = append(os.Environ(), envOrphanHelper+"="+t.TempDir())
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	for sc := bufio.NewScanner(out); child == 0 && sc.Scan(); {
		_, _ = fmt.Sscanf(sc.Text(), "child %d", &child)
	}
	if child == 0 {
		_ = helper.Process.Kill()
		t.Fatal("the helper printed no child pid")
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	// setpriv sets the parent-death signal and then execs the command:
	// wait for the exec, or a parent killed before prctl ran would (rightly)
	// leave the child behind and the test would race.
	execDeadline := time.Now().Add(10 * time.Second)
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", child))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if !alive(child) || time.Now().After(execDeadline) {
			t.Fatalf("child %d is not running sleep (comm %q)", child, comm)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d outlived its parent", child)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOrphanGuardHelper is the parent TestOrphanGuard kills: it starts a
// guarded sleep in a process group of its own, as envtest starts its
// processes, prints its pid and waits.
func TestOrphanGuardHelper(t *testing.T) {
	dir := os.Getenv(envOrphanHelper)
	if dir == "" {
		t.Skip("run by TestOrphanGuard")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	path, err := orphanGuard(dir, sleep)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("child %d\n", cmd.Process.Pid)
	_ = cmd.Wait()
	t.Fatal("the guarded child exited while its parent lived")
}

// alive tells whether pid runs: it exists and is no zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	// The state follows the parenthesised command name: "pid (comm) S ...".
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
