package fleettest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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
		t.Skip("the guard reads /proc: Linux only")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	sleep, err = filepath.EvalSymlinks(sleep)
	if err != nil {
		t.Fatal(err)
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
	// Kill the parent once the guarded binary runs, as envtest's processes
	// do for nearly all of their life. The guard script bears the binary's
	// name, so the command name (comm) cannot tell the two apart; the
	// executable can.
	execDeadline := time.Now().Add(10 * time.Second)
	for {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", child))
		if exe == sleep {
			break
		}
		if !alive(child) || time.Now().After(execDeadline) {
			t.Fatalf("child %d is not running %s (exe %q)", child, sleep, exe)
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

// TestOrphanGuardLeavesNoWatchdog runs guarded commands the way envtest
// does, output to pipes, and expects Wait to return as soon as the command
// exits and the command's process group to empty within a poll: the watchdog
// holds no pipe open, leaves when the command does, and kills nothing when
// the command exits before the watchdog has even started.
func TestOrphanGuardLeavesNoWatchdog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the guard reads /proc: Linux only")
	}
	for _, tc := range []struct {
		name    string
		bin     string
		args    []string
		runtime time.Duration // how long the command itself runs
	}{
		{name: "exits before the watchdog starts", bin: "echo", args: []string{"hello"}},
		{name: "exits while the watchdog polls", bin: "sh", args: []string{"-c", "echo hello; sleep 1.5"}, runtime: 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, err := exec.LookPath(tc.bin)
			if err != nil {
				t.Fatal(err)
			}
			path, err := orphanGuard(t.TempDir(), bin)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			cmd := exec.Command(path, tc.args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("guarded %s: %v (output %q)", tc.bin, err, out.String())
			}
			if got := out.String(); got != "hello\n" {
				t.Errorf("guarded %s printed %q, want %q", tc.bin, got, "hello\n")
			}
			// The watchdog polls every second: a Wait that waited for it
			// would take about that long more.
			if took := time.Since(start); took > tc.runtime+900*time.Millisecond {
				t.Errorf("Wait returned after %v: something still held the output pipe", took)
			}
			// The watchdog, left in the command's process group, exits
			// within a poll of the command's exit.
			deadline := time.Now().Add(10 * time.Second)
			for {
				members := groupMembers(cmd.Process.Pid)
				if len(members) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("process group %d still runs %v after its leader exited", cmd.Process.Pid, members)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
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

// groupMembers returns the processes of process group pgid that run (no
// zombies: a reaper that is slow to reap must not fail the test).
func groupMembers(pgid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var members []int
	for _, dir := range dirs {
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid pgrp ...": the fields after comm.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		members = append(members, pid)
	}
	return members
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
