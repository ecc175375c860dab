package agent

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"

	"github.com/fleetmirror/fleetmirror/pkg/version"
)

// Main is the body of both binaries: it parses the flags of o and the
// logging flags, then runs run until SIGINT or SIGTERM. --version prints
// version.String and exits 0. Bad flags exit with 2, a failed run with 1.
// Either prints one line on stderr, "error: " and the error, and no stack
// trace: most are start-up errors (a kubeconfig that cannot be read, a kind
// the API server does not serve) that the person starting the binary must
// be able to read at a glance.
func Main(binary, description string, o Flags, run func(context.Context) error) {
	profiler := pauseHeapProfiler()
	fs := flag.NewFlagSet(binary, flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\n%s\n\nFlags:\n", binary, description)
		fs.PrintDefaults()
	}
	o.AddFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	// Not an option: it is no setting of the agent, nor a chart value.
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: never returns an error
	if err := noArguments(fs); err != nil {
		exit(2, err)
	}
	if *showVersion {
		fmt.Println(version.String(binary))
		os.Exit(0)
	}
	if err := o.Complete(); err != nil {
		exit(2, err)
	}
	if f := fs.Lookup(pprofFlag); f != nil && f.Value.String() != "" {
		profiler.resume()
	}
	log := newLogger(zapOpts)
	logf.SetLogger(log)
	tuneGC(log)
	if f := fs.Lookup(maxProcsFlag); f != nil {
		limitProcs(log, f.Value.(flag.Getter).Get().(int))
	}
	if err := run(logf.IntoContext(signals.SetupSignalHandler(), log)); err != nil {
		exit(1, err)
	}
}

// defaultMemProfileRate is the Go runtime's own heap profiling rate: one
// allocation sampled in every 512 KiB.
const defaultMemProfileRate = 512 * 1024

// heapProfiler is the heap profiler that pauseHeapProfiler turned off.
type heapProfiler struct{ paused bool }

// pauseHeapProfiler turns the Go runtime's heap profiler off, unless
// GODEBUG=memprofilerate set a rate of its own. The profiler is on in
// every program that links runtime/pprof, as the agents do for their pprof
// endpoint, and what it records is kept for good: each call stack it
// samples takes a bucket, and the stacks' hash table (1.4 MiB) becomes
// resident page by page as they come. Nobody reads the profile unless
// --pprof-bind-address is set, and Main turns it back on then (resume).
// The member benchmark measured a converged agent 1.1 MiB smaller with it
// off, and a restarted one's peak 1.3 MiB lower. It is paused first thing
// in Main; what the packages' initialization allocated before was sampled
// already, a few stacks.
func pauseHeapProfiler() heapProfiler {
	if runtime.MemProfileRate != defaultMemProfileRate {
		return heapProfiler{}
	}
	runtime.MemProfileRate = 0
	return heapProfiler{paused: true}
}

// resume turns the profiler back on at the runtime's default rate, if
// pauseHeapProfiler turned it off; the runtime reads the rate without
// synchronization, so Main calls it before the agent starts anything.
func (p heapProfiler) resume() {
	if p.paused {
		runtime.MemProfileRate = defaultMemProfileRate
	}
}

// noArguments refuses what the flags left over: the binaries take none, and
// a value after a space (--resource-types=Secret.v1 ConfigMap.v1) would
// otherwise be dropped without a word while the flag holds only its first
// part.
func noArguments(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	return fmt.Errorf("unexpected argument %q: %s takes only flags (a list is one argument: --flag=a,b)", fs.Arg(0), fs.Name())
}

// exit prints err on one line and exits with code.
func exit(code int, err error) {
	fmt.Fprintln(os.Stderr, "error: "+strings.ReplaceAll(err.Error(), "\n", " "))
	os.Exit(code)
}

// gcPercent is the GOGC the agents run with unless GOGC is set. Their live
// heap is small (a few MiB of caches) while every write makes garbage of
// the size of the object, so the default of 100 lets the heap, and the
// resident memory, swing to twice the live heap between collections; at 50
// the swing halves, and a collection of a small heap costs little CPU.
const gcPercent = 50

// memoryLimitRatio is the share of the container's memory limit the Go
// runtime takes as its soft limit (GOMEMLIMIT) unless GOMEMLIMIT is set.
// GOGC alone keeps the heap small in the steady state, but a burst (a
// re-list of every mirror after a watch expired, thousands of targets of
// one source) could double the heap past the container's limit before the
// next collection and get the agent OOM-killed; under the soft limit the
// runtime collects harder instead. The rest of the limit is for what the
// runtime does not count: the binary's pages and the kernel's buffers.
const memoryLimitRatio = 0.9

// limitProcs lowers GOMAXPROCS to limit (--max-procs) unless the
// GOMAXPROCS environment variable is set. It never raises it: the Go
// runtime's default already follows the container's CPU limit, and keeps
// following it (an in-place resize) while GOMAXPROCS is not set by a call.
func limitProcs(log logr.Logger, limit int) {
	_, set := os.LookupEnv("GOMAXPROCS")
	current := runtime.GOMAXPROCS(0)
	if n := procs(limit, current, set); n != current {
		runtime.GOMAXPROCS(n)
		log.V(1).Info("Limited GOMAXPROCS", "from", current, "to", n)
	}
}

// procs is the GOMAXPROCS the agent runs with: current, the runtime's,
// lowered to limit when limit is positive and GOMAXPROCS was not set.
func procs(limit, current int, envSet bool) int {
	if envSet || limit <= 0 {
		return current
	}
	return min(current, limit)
}

// tuneGC sets GOGC and GOMEMLIMIT unless they are set. The memory limit
// is read from the container's cgroup (v1 or v2), which is where the
// kubelet puts resources.limits.memory; without a limit none is set.
// AUTOMEMLIMIT (a ratio in (0, 1], or "off") overrides memoryLimitRatio.
func tuneGC(log logr.Logger) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	// Errors are logged by Set; the agent runs without a limit then.
	_, _ = memlimit.Set(
		memlimit.WithRatio(memoryLimitRatio),
		memlimit.WithProvider(memlimit.FromCgroup),
		memlimit.WithLogger(slog.New(logr.ToSlogHandler(log.WithName("memlimit")))),
	)
}
