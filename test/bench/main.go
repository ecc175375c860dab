// Command bench measures fleetmirror against real API servers: initial
// convergence, update propagation, new namespaces, deletion, API cost per
// phase, the agent's memory and CPU, and the floor a plain client reaches on
// the same machine. It is driven by `make bench` (BENCH_FLAGS passes flags).
//
// Every workload starts fresh envtest API servers (pkg/fleettest), seeds
// them, and only then starts the agent binary as a separate process, so
// that its memory and CPU are its own. Mirrors are observed through
// label-selected informers in this process, never by polling. Results are
// printed as a table and written to <out>/<workload>.json.
//
// Benchmarks print figures; they do not pass or fail. The targets of the
// benchmark issue are printed beside the figures as a reading aid.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// Workload names.
const (
	wlMemberSmall = "member-small"
	wlMemberLarge = "member-large"
	wlHub         = "hub"
	wlHubChurn    = "hub-churn"
	wlHubFaults   = "hub-faults"
	wlHubFleet    = "hub-fleet"
	wlHubShards   = "hub-shards"
)

// allWorkloads are the workloads of -workload all. hub-fleet is not among
// them: it starts a hundred API servers, takes about 10 minutes and 13 GiB
// of memory, so it runs only when asked for by name.
var allWorkloads = []string{wlMemberSmall, wlMemberLarge, wlHub, wlHubChurn, wlHubFaults}

// scale is the size of a workload; every field is a flag.
type scale struct {
	Namespaces int `json:"namespaces"` // target namespaces per target cluster
	Sources    int `json:"sources"`
	Noise      int `json:"noise"`     // unrelated, unlabelled Secrets and ConfigMaps
	Members    int `json:"members"`   // member clusters (hub workloads)
	Updates    int `json:"updates"`   // timed source updates
	Cycles     int `json:"cycles"`    // register/unregister cycles (hub-churn)
	ValueSize  int `json:"valueSize"` // bytes of each of a source's data values
}

// defaults are the workloads of the benchmark issue.
var defaults = map[string]scale{
	wlMemberSmall: {Namespaces: 200, Sources: 6, Noise: 2000, Updates: 100},
	wlMemberLarge: {Namespaces: 500, Sources: 20, Noise: 5000, Updates: 100},
	wlHub:         {Namespaces: 100, Sources: 10, Members: 5, Updates: 100},
	wlHubChurn:    {Namespaces: 20, Sources: 4, Members: 1, Cycles: 50},
	wlHubFaults:   {Namespaces: 4, Sources: 100, Members: 5, Updates: 100},
	// Two Secrets and two ConfigMaps: both kinds are watched everywhere.
	wlHubFleet: {Namespaces: 2, Sources: 4, Members: 100, Updates: 20},
	// Three replicas over twelve members; Updates are the timed
	// one-source updates before the kill.
	wlHubShards: {Namespaces: 2, Sources: 2, Members: 12, Updates: 5},
}

// options are the command line.
type options struct {
	workload     string
	override     scale
	set          map[string]bool // flags given explicitly
	out          string
	workers      int
	timeout      time.Duration
	pprof        bool
	agentArgs    string
	agentEnv     string
	floorWorkers int
	updateGap    time.Duration
	churnDelete  bool
	settle       time.Duration
	outage       time.Duration
	memberOutage time.Duration
	idle         time.Duration
	shardLease   time.Duration
	slimServers  bool
	// memberKinds writes the member agents' kinds objects (hub-fleet).
	memberKinds bool
	// receiveOnly registers the member clusters receive-only (hub-fleet,
	// hub-shards).
	receiveOnly bool
	// kcp runs hub-shards' member clusters as logical clusters of
	// kcpProcesses kcp processes (kcp.go), the binary kcpBin.
	kcp          bool
	kcpProcesses int
	kcpBin       string
	// kcpArgs are extra flags of every kcp process, kcpEnv extra
	// environment variables.
	kcpArgs string
	kcpEnv  string
	// hubFleetModes are the modes hub-fleet runs one after the other
	// (hubFleetModes); none: one run as the other flags say.
	hubFleetModes string
	// sourceModes are the source modes member-small and member-large run
	// one after the other (sourceModeOrder), compared when more than one.
	sourceModes string
	// sourceMode is this run's: annotations or policies.
	sourceMode string
	// repeat is how many times each source mode runs, alternating; the
	// comparison is of the medians.
	repeat int
	// compareOnly: run nothing, compare the source modes' results files
	// already in out.
	compareOnly bool
}

// hubFleetMode is a way to run hub-fleet's hub: the flags it adds to the
// hub's, and whether the member clusters hold their member agents' kinds
// objects.
type hubFleetMode struct {
	args        string
	memberKinds bool
	receiveOnly bool
	doc         string
}

// hubFleetModes are hub-fleet's modes by name, in the order they are
// printed.
var hubFleetModes = map[string]hubFleetMode{
	"two-kinds": {doc: "two explicit kinds (the bench's --resource-types=Secret.v1,ConfigMap.v1)"},
	"discovery": {args: "--resource-types=", memberKinds: true,
		doc: "every discovered kind (--resource-types=), each member cluster with its member agent's kinds object"},
	"discovery-without-members": {args: "--resource-types=",
		doc: "every discovered kind (--resource-types=), no kinds objects: clusters without a member agent"},
	"receive-only": {args: "--resource-types=", receiveOnly: true,
		doc: "every discovered kind (--resource-types=), no kinds objects, each member cluster registered receive-only (" + annotations.LabelReceiveOnly + "=true)"},
}

var hubFleetModeOrder = []string{"two-kinds", "discovery", "discovery-without-members", "receive-only"}

// scaleFor returns the workload's default scale with the flags given applied.
func (o *options) scaleFor(workload string) scale {
	s := defaults[workload]
	pick := func(name string, dst *int, v int) {
		if o.set[name] {
			*dst = v
		}
	}
	pick("namespaces", &s.Namespaces, o.override.Namespaces)
	pick("sources", &s.Sources, o.override.Sources)
	pick("noise", &s.Noise, o.override.Noise)
	pick("members", &s.Members, o.override.Members)
	pick("updates", &s.Updates, o.override.Updates)
	pick("cycles", &s.Cycles, o.override.Cycles)
	s.ValueSize = o.override.ValueSize // the flag has a default of its own
	return s
}

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.StringVar(&o.workload, "workload", wlMemberSmall, "Workload: "+strings.Join(allWorkloads, " | ")+" | all (every one before) | "+wlHubFleet+" (100 clusters; only by name) | "+wlHubShards+" (three sharded hub replicas; only by name).")
	fs.IntVar(&o.override.Namespaces, "namespaces", 0, "Target namespaces per target cluster (default: the workload's).")
	fs.IntVar(&o.override.Sources, "sources", 0, "Source objects, half Secrets and half ConfigMaps (default: the workload's).")
	fs.IntVar(&o.override.Noise, "noise", 0, "Unrelated unlabelled Secrets and ConfigMaps (default: the workload's).")
	fs.IntVar(&o.override.Members, "members", 0, "Member clusters of hub workloads; for hub-churn the stable ones beside the churning one; hub-fleet's smoke run is -members 10 (default: the workload's).")
	fs.IntVar(&o.override.Updates, "updates", 0, "Timed source updates (default: the workload's).")
	fs.IntVar(&o.override.Cycles, "cycles", 0, "Register/unregister cycles of hub-churn (default 50).")
	fs.IntVar(&o.override.ValueSize, "value-size", 1024, "Bytes of each of a source's three data values (and of the floor's and the noise objects' values): 340000 makes sources and mirrors of about 1 MiB, the largest a ConfigMap may be.")
	fs.DurationVar(&o.shardLease, "shard-lease", 15*time.Second, "hub-shards: the replicas' --shard-lease-duration (the hub's default).")
	fs.DurationVar(&o.idle, "idle", 30*time.Second, "The window in which the idle agent's requests are counted (hub-fleet: the idle hub's requests and CPU; the other mirroring workloads: a phase \"idle\" after the restart; hub-shards -kcp: kcp's CPU before the hub and with the hub idle).")
	fs.BoolVar(&o.kcp, "kcp", false, "hub-shards: run the member clusters as logical clusters of kcp, spread over -kcp-processes processes, instead of an API server each: a thousand fit on one machine (test/bench/README.md). hack/kcp.sh builds kcp v0.30.0 from its snapshot the first time (about 20 minutes); KCP_BIN names another binary.")
	fs.IntVar(&o.kcpProcesses, "kcp-processes", 4, "hub-shards -kcp: the kcp processes the member clusters are spread over, round-robin. A process hands every event of a kind to the watchers of all its clusters, so one update to every cluster costs it clusters x clusters deliveries; each process more divides that and costs idle CPU and memory of its own (test/bench/README.md).")
	fs.StringVar(&o.kcpArgs, "kcp-args", "", "hub-shards -kcp: extra flags for every kcp process, space-separated (kcp start options lists them).")
	fs.StringVar(&o.kcpEnv, "kcp-env", "GOGC=400", "hub-shards -kcp: environment variables (NAME=value, space-separated) for every kcp process; GOGC=400 trades kcp's memory for 40% less CPU per write, so that the simulator takes less of the machine from the hub.")
	fs.BoolVar(&o.receiveOnly, "receive-only", false, "hub-fleet, hub-shards: register the member clusters receive-only ("+annotations.LabelReceiveOnly+"=true): the hub looks for no sources there; the mode receive-only of -hub-fleet-modes sets it.")
	fs.BoolVar(&o.memberKinds, "member-kinds-objects", false, "hub-fleet: write into every member cluster the kinds object a member agent keeps there (no kind used: the members hold mirrors only; renewed every minute), as with member agents installed; the mode discovery of -hub-fleet-modes sets it.")
	fs.BoolVar(&o.slimServers, "slim-apiservers", true, "hub-fleet: start the member API servers with the flags that halve their memory (test/bench/README.md); false starts them as envtest does.")
	fs.StringVar(&o.out, "out", "bench/results", "Directory of the JSON results and agent logs (relative to the repository root).")
	fs.IntVar(&o.workers, "seed-workers", 32, "Concurrent writers when seeding a workload.")
	fs.IntVar(&o.floorWorkers, "floor-workers", 16, "Concurrent writers of the floor measurement (the fleet-scale issue compares with 16).")
	fs.DurationVar(&o.updateGap, "update-gap", 0, "Pause between timed updates (0: back to back, each starting when the previous one has propagated).")
	fs.BoolVar(&o.churnDelete, "churn-delete-mirrors", false, "hub-churn: delete the churned member's mirrors after each unregistration, so that each registration creates them anew.")
	fs.DurationVar(&o.settle, "settle", 45*time.Second, "hub-churn, hub-fleet: how long the idle hub settles before its goroutines and memory are read (hub-churn: before and after the churn; hub-fleet: at each step of registrations). Over 30s: the HTTP/2 health check client-go turns on (ReadIdleTimeout 30s) keeps a closed connection's buffers referenced until its timer fires, so a shorter settle counts the last cycles' connections as growth.")
	fs.DurationVar(&o.outage, "outage", time.Minute, "hub-faults: how long the sick member is cut off from the hub in the outage phase.")
	fs.DurationVar(&o.memberOutage, "member-outage", 20*time.Second, "hub-faults: how long, in the last phase, a member agent in the sick member is partitioned from its own API server.")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "Longest wait for one measured event (convergence, one update, ...).")
	fs.BoolVar(&o.pprof, "pprof", false, "Start the agent with --pprof-bind-address on a free port (printed) to profile it during the run.")
	fs.StringVar(&o.agentArgs, "agent-args", "", "Extra flags for the agent, space-separated, appended to the standard ones.")
	fs.StringVar(&o.agentEnv, "agent-env", "", "Extra environment of the agents only (not of the API servers), space-separated KEY=VALUE, e.g. GOMAXPROCS=1.")
	fs.StringVar(&o.hubFleetModes, "hub-fleet-modes", "two-kinds,discovery", "hub-fleet: the modes to run one after the other, comma-separated, then compared per cluster: "+strings.Join(hubFleetModeOrder, ", ")+"; empty: one run as -agent-args and -member-kinds-objects say.")
	fs.StringVar(&o.sourceModes, "source-modes", sourceAnnotations, "member-small, member-large: how the sources ask for their mirrors, comma-separated, each mode a run of its own on fresh API servers, then compared figure by figure: "+sourceAnnotations+" (labelled and annotated sources), "+sourcePolicies+" (the same sources without our label or annotations, named by MirrorPolicies with the same targets); both = "+sourceAnnotations+","+sourcePolicies+".")
	fs.IntVar(&o.repeat, "repeat", 1, "member-small, member-large with more than one source mode: run each mode this many times, the modes alternating (annotations, policies, annotations, ...), and compare the medians of each figure: one pair of runs on a shared machine scatters by 10 to 50 % in its timings.")
	fs.BoolVar(&o.compareOnly, "compare-only", false, "member-small, member-large: run nothing; print the comparison of the source modes from the results files an earlier run with the same -source-modes and -repeat wrote to -out.")
	_ = fs.Parse(os.Args[1:])
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })

	workloads := []string{o.workload}
	if o.workload == "all" {
		workloads = allWorkloads
	} else if _, ok := defaults[o.workload]; !ok {
		fmt.Fprintf(os.Stderr, "bench: unknown workload %q (want %s, all, %s or %s)\n", o.workload, strings.Join(allWorkloads, ", "), wlHubFleet, wlHubShards)
		return 2
	}
	if o.kcp && o.workload != wlHubShards {
		fmt.Fprintf(os.Stderr, "bench: -kcp is for -workload %s\n", wlHubShards)
		return 2
	}

	// The bench's own clients log nothing worth reading.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := fleettest.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	if err := os.MkdirAll(filepath.Join(o.out, "logs"), 0o750); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	work, err := os.MkdirTemp("", "fleetmirror-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()

	if o.compareOnly {
		return o.compareFiles(workloads)
	}

	progress("Building the agents")
	bins, err := buildBinaries(ctx, root, work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if _, err := fleettest.Assets(); err != nil { // builds the API server once, before any timing
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if o.kcp {
		progress("Finding kcp (hack/kcp.sh)")
		if o.kcpBin, err = kcpBinary(ctx, root); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	}

	code := 0
	for _, w := range workloads {
		runs, err := o.runsOf(w)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		var compared []modeResult
		var bySource []*Result
		for _, r := range runs {
			if ctx.Err() != nil {
				break
			}
			if r.mode != "" {
				fmt.Printf("\n== %s, mode %s: %s\n", w, r.mode, r.doc)
			}
			b := &bench{opts: r.opts, workload: w, label: r.label, scale: o.scaleFor(w), bins: bins, work: filepath.Join(work, r.label)}
			res, err := b.run(ctx)
			if res != nil {
				res.print(os.Stdout)
				path := filepath.Join(o.out, r.label+".json")
				if werr := res.write(path); werr != nil {
					err = errors.Join(err, werr)
				} else {
					fmt.Printf("\nwritten to %s\n\n", path)
				}
				if r.mode != "" && res.Fleet != nil {
					compared = append(compared, modeResult{mode: r.mode, fleet: res.Fleet})
				}
				if r.mode != "" && res.SourceMode != "" {
					bySource = append(bySource, res)
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench %s: %v\n", r.label, err)
				code = 1
			}
		}
		if len(compared) > 1 {
			printModes(os.Stdout, w, compared)
		}
		if len(bySource) > 1 {
			printSourceModes(os.Stdout, w, bySource)
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		return 130
	}
	return code
}

// binaries are the agents built for this run.
type binaries struct {
	Member, Hub string
}

// shippedBuildFlags are the flags the Dockerfile builds the image's
// binaries with; the figures must be those of what users run (symbol tables
// alone add ~10 MiB of mapped pages to the resident set).
var shippedBuildFlags = []string{"-trimpath", "-ldflags=-s -w"}

// buildBinaries builds both agents once, without the race detector and with
// the image's flags: the figures are those of the shipped binaries.
func buildBinaries(ctx context.Context, root, dir string) (binaries, error) {
	b := binaries{Member: filepath.Join(dir, "fleetmirror-member"), Hub: filepath.Join(dir, "fleetmirror-hub")}
	for out, pkg := range map[string]string{b.Member: "./cmd/member", b.Hub: "./cmd/hub"} {
		args := append(append([]string{"build"}, shippedBuildFlags...), "-o", out, pkg)
		cmd := exec.CommandContext(ctx, "go", args...) //nolint:gosec // fixed packages of this repository
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// progress prints a progress line on stderr, so that stdout holds the results.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
