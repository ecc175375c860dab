package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// stopGrace is how long an agent has to exit after SIGTERM before its
// process group is killed.
const stopGrace = 15 * time.Second

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux platform Go supports).
const clockTicks = 100

// agent is one fleetmirror process, the leader of a process group of its
// own; whatever it starts goes with it.
type agent struct {
	name    string
	bin     string
	args    []string
	logPath string
	// metricsAddr, probeAddr and pprofAddr are host:port on loopback;
	// pprofAddr is empty unless profiling was asked for.
	metricsAddr, probeAddr, pprofAddr string
	// env is added to the bench's environment for the process.
	env []string

	cmd       *exec.Cmd
	startedAt time.Time
	exited    chan struct{} // closed once the process has exited and been reaped
	err       error
}

// newAgent prepares an agent with free loopback ports for its endpoints.
// base are the flags before the endpoint flags; extra follow them.
func newAgent(name, bin, logPath string, pprof bool, base []string, extra ...string) (*agent, error) {
	a := &agent{name: name, bin: bin, logPath: logPath}
	var err error
	if a.metricsAddr, err = fleettest.FreeAddr(); err != nil {
		return nil, err
	}
	if a.probeAddr, err = fleettest.FreeAddr(); err != nil {
		return nil, err
	}
	a.args = append(append([]string{}, base...),
		"--metrics-bind-address", a.metricsAddr,
		"--health-probe-bind-address", a.probeAddr)
	if pprof {
		if a.pprofAddr, err = fleettest.FreeAddr(); err != nil {
			return nil, err
		}
		a.args = append(a.args, "--pprof-bind-address", a.pprofAddr)
	}
	a.args = append(a.args, extra...)
	return a, nil
}

// start starts the process; startedAt is taken just before the exec, so
// that times measured from it include the agent's own start-up.
func (a *agent) start() error {
	logFile, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(logFile, "\n=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), a.bin, strings.Join(a.args, " "))
	cmd := exec.Command(a.bin, a.args...) //nolint:gosec // the agent binary this program built, with its own flags
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if len(a.env) > 0 {
		cmd.Env = append(os.Environ(), a.env...)
	}
	// A group of its own keeps the terminal's Ctrl-C away from it (the bench
	// stops it in order) and lets stop reach its children; the parent-death
	// signal kills it if the bench dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	a.exited = make(chan struct{})
	a.err = nil
	a.startedAt = time.Now()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s: %w", a.name, err)
	}
	a.cmd = cmd
	exited := a.exited
	go func() {
		err := cmd.Wait()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = logFile.Close()
		a.err = err
		close(exited)
	}()
	return nil
}

// running reports whether the process has not exited.
func (a *agent) running() bool {
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group and waits for the agent to exit,
// killing the group after stopGrace. Stopping a stopped agent does nothing.
func (a *agent) stop() error {
	if !a.running() {
		return nil
	}
	pid := a.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-a.exited
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", a.name, stopGrace)
	}
	var exit *exec.ExitError
	if a.err != nil && !(errors.As(a.err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled()) {
		return fmt.Errorf("%s exited with %w", a.name, a.err)
	}
	return nil
}

// failed returns an error when the agent exited by itself.
func (a *agent) failed() error {
	if a.cmd != nil && !a.running() {
		return fmt.Errorf("%s exited unexpectedly (%v); see %s", a.name, a.err, a.logPath)
	}
	return nil
}

// usage is what the agent process used so far.
type usage struct {
	PeakRSSMiB float64 `json:"peakRSSMiB"` // VmHWM
	RSSMiB     float64 `json:"rssMiB"`     // VmRSS now
	// RSSAnonMiB and RSSFileMiB split VmRSS now: the heap and stacks, and
	// the pages of the binary (code, read-only data) mapped from its file.
	RSSAnonMiB float64 `json:"rssAnonMiB"`
	RSSFileMiB float64 `json:"rssFileMiB"`
	CPUSeconds float64 `json:"cpuSeconds"` // utime + stime
	// Go runtime figures from the agent's /metrics, when read.
	Goroutines   float64 `json:"goroutines,omitempty"`
	HeapInuseMiB float64 `json:"heapInuseMiB,omitempty"`
	GoSysMiB     float64 `json:"goSysMiB,omitempty"`
}

// usage reads /proc of the running agent: VmHWM, VmRSS, utime+stime. The
// rusage of the reaped process would not do: its maxrss counts the pages of
// the parent the child shared until exec, the bench's own.
func (a *agent) usage() (usage, error) {
	if !a.running() {
		return usage{}, fmt.Errorf("%s is not running", a.name)
	}
	return procUsage(a.cmd.Process.Pid)
}

func procUsage(pid int) (usage, error) {
	var u usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for line := range strings.Lines(string(status)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmHWM":
			u.PeakRSSMiB = kb / 1024
		case "VmRSS":
			u.RSSMiB = kb / 1024
		case "RssAnon":
			u.RSSAnonMiB = kb / 1024
		case "RssFile":
			u.RSSFileMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the parenthesised command name start with the state
	// (field 3); utime and stime are fields 14 and 15.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	u.CPUSeconds = (utime + stime) / clockTicks
	return u, nil
}

// waitReady waits until /readyz answers 200 and returns when it first did.
func (a *agent) waitReady(ctx context.Context, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + a.probeAddr + "/readyz"
	for {
		if code, err := fleettest.HTTPGet(ctx, url, io.Discard); err == nil && code == http.StatusOK {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: %s not ready: %w", a.name, url, ctx.Err())
		case <-a.exited:
			return time.Time{}, a.failed()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// scrape reads the agent's /metrics.
func (a *agent) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return fleettest.Scrape(ctx, "http://"+a.metricsAddr+"/metrics")
}

// idleQuiet is how long the agent's reconcile count must stay still, with
// empty queues and no busy worker, for it to count as idle.
const idleQuiet = 1500 * time.Millisecond

// waitIdle waits until the agent has reconciled at least minReconciles
// times since it started, its work queues are empty, no worker is busy and
// its reconcile count has not moved for idleQuiet. It returns the time of
// the last change of the reconcile count seen, an estimate of when the
// agent's work ended.
func (a *agent) waitIdle(ctx context.Context, minReconciles float64, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last, lastChange := -1.0, time.Now()
	for {
		fams, err := a.scrape(ctx)
		if err == nil {
			rec := sum(fams, "controller_runtime_reconcile_total")
			busy := sum(fams, "workqueue_depth") + sum(fams, "controller_runtime_active_workers")
			now := time.Now()
			if rec != last {
				last, lastChange = rec, now
			}
			if busy == 0 && rec >= minReconciles && now.Sub(lastChange) >= idleQuiet {
				return lastChange, nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s did not become idle (reconciles %v, want >= %v): %w", a.name, last, minReconciles, ctx.Err())
		case <-a.exited:
			return time.Time{}, a.failed()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// liveHeap returns the agent's live heap in bytes just after a garbage
// collection: it forces one through the profiling endpoint (the text
// profile, the smallest to build) and reads go_gc_heap_live_bytes, which
// the collection sets. Should building the profile start a second
// collection (its allocations would count as live), it tries again: a
// small heap (GOGC=50) can be collected again while the profile is
// written.
func (a *agent) liveHeap(ctx context.Context) (float64, error) {
	if a.pprofAddr == "" {
		return 0, errors.New("the agent was started without a profiling endpoint")
	}
	for range 20 {
		before, err := a.scrape(ctx)
		if err != nil {
			return 0, err
		}
		code, err := fleettest.HTTPGet(ctx, "http://"+a.pprofAddr+"/debug/pprof/heap?gc=1&debug=1", io.Discard)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("heap profile: HTTP %d", code)
		}
		if err != nil {
			return 0, err
		}
		after, err := a.scrape(ctx)
		if err != nil {
			return 0, err
		}
		if sum(after, "go_gc_cycles_total_gc_cycles_total")-sum(before, "go_gc_cycles_total_gc_cycles_total") == 1 {
			return sum(after, "go_gc_heap_live_bytes"), nil
		}
	}
	return 0, errors.New("no collection of the agent was alone: the live heap cannot be read")
}

// heapProfilerOff is the environment of an agent whose profiling endpoint
// serves only to force collections (liveHeap): GODEBUG with
// memprofilerate=0 added to godebug (the bench's own GODEBUG), unless it
// sets a rate. The agents turn the heap profiler on when the endpoint is
// served; off, the agent's memory is what it is without the endpoint, as
// shipped, and the heap profile that forces a collection is a few bytes.
// With the profiler on, writing the profile allocated enough to start a
// second collection of a small heap (GOGC=50) every time: a hub of 1.8 MiB
// live had no collection alone in 20 tries.
func heapProfilerOff(godebug string) []string {
	switch {
	case strings.Contains(godebug, "memprofilerate="):
		return nil
	case godebug == "":
		return []string{"GODEBUG=memprofilerate=0"}
	default:
		return []string{"GODEBUG=" + godebug + ",memprofilerate=0"}
	}
}

// sum adds up every series of family name (counters, gauges, untyped; a
// histogram's number of observations).
func sum(fams map[string]*dto.MetricFamily, name string) float64 {
	v, _ := fleettest.Families(fams).Value(name)
	return v
}
