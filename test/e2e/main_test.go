package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

const (
	// systemNS is where the agents run and the hub reads registration Secrets.
	systemNS = "fleetmirror-system"
	// timeout bounds every wait for the fleet to converge.
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
	// startTimeout bounds the wait for a started agent to be ready.
	startTimeout = time.Minute
	// lazyProbeInterval is how soon the agents notice the first source of a
	// kind they do not watch yet (the default, 10s, would dominate the run).
	lazyProbeInterval = "1s"
)

var (
	fleet            *fleettest.Fleet
	hubC, memA, memB *fleettest.Cluster
	// members holds the fleetmirror-member process of each cluster, by name.
	members map[string]*agent
	// hubAgent is the fleetmirror-hub process on the hub.
	hubAgent *agent
	// memberBin and hubBin are the binaries the agents run.
	memberBin, hubBin string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping end-to-end tests in -short mode")
		os.Exit(0)
	}
	// The tests' own clients log nothing worth reading; the agents log to files.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(run(m))
}

// run sets up the fleet and the agents, runs the tests and tears everything
// down. On failure it keeps the work directory and prints where it is and
// the end of every agent's log.
func run(m *testing.M) (code int) {
	dir, err := os.MkdirTemp("", "fleetmirror-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if code == 0 {
			if err := os.RemoveAll(dir); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			return
		}
		fmt.Fprintf(os.Stderr, "\nbinaries, kubeconfigs and agent logs are kept in %s\n", dir)
	}()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		return 1
	}

	memberBin, hubBin, err = buildBinaries(dir)
	if err != nil {
		return fail(err)
	}
	if fleet, err = fleettest.Start(dir, "member-a", "member-b"); err != nil {
		return fail(err)
	}
	defer func() {
		if err := fleet.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the fleet:", err)
			code = 1
		}
	}()
	hubC, memA, memB = fleet.Hub, fleet.Cluster("member-a"), fleet.Cluster("member-b")

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := registerMembers(ctx); err != nil {
		return fail(err)
	}

	// The agents stop before the fleet: they should not see their API
	// servers go away.
	var agents []*agent
	defer func() {
		errs := make([]error, len(agents))
		var wg sync.WaitGroup
		for i, a := range agents {
			wg.Go(func() { errs[i] = a.stop() })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", agents[i].name, err)
				code = 1
			}
		}
		if code != 0 {
			for _, a := range agents {
				fmt.Fprintf(os.Stderr, "\n--- last lines of %s (%s)\n%s\n", a.name, a.logPath, a.tail(40))
			}
		}
	}()
	members = map[string]*agent{}
	logs := filepath.Join(dir, "logs")
	for _, c := range fleet.Clusters() {
		args := []string{"--namespace", systemNS, "--lazy-probe-interval", lazyProbeInterval}
		if c.Name == memA.Name { // TestHeapProfiler compares it with member-b's
			pprofAddr, err := fleettest.FreeAddr()
			if err != nil {
				return fail(err)
			}
			args = append(args, "--pprof-bind-address", pprofAddr)
		}
		if c.Name == memB.Name { // TestMaxProcs
			args = append(args, "--max-procs=1")
		}
		a, err := startAgent(memberBin, logs, c.Name, args...)
		if err != nil {
			return fail(err)
		}
		agents = append(agents, a)
		members[c.Name] = a
	}
	hubAgent, err = startAgent(hubBin, logs, hubC.Name, "--namespace", systemNS, "--cluster-probe-interval", "500ms",
		"--lazy-probe-interval", lazyProbeInterval)
	if err != nil {
		return fail(err)
	}
	agents = append(agents, hubAgent)
	for _, a := range agents {
		if err := a.waitReady(ctx); err != nil {
			return fail(err)
		}
	}
	if err := waitClustersUp(ctx, memA.Name, memB.Name); err != nil {
		return fail(err)
	}
	return m.Run()
}

// e2eVersion is the version the binaries under test are stamped with, the
// way a release stamps them (the Makefile's LDFLAGS).
const e2eVersion = "v9.9.9"

// buildBinaries builds fleetmirror-member and fleetmirror-hub into dir,
// stamped with e2eVersion, with the race detector when the tests run with
// it, so that races in the agents fail the tests too.
func buildBinaries(dir string) (member, hub string, err error) {
	root, err := fleettest.RepoRoot()
	if err != nil {
		return "", "", err
	}
	build := func(name, pkg string) (string, error) {
		out := filepath.Join(dir, name)
		args := []string{"build", "-o", out, "-ldflags", "-X github.com/fleetmirror/fleetmirror/pkg/version.Version=" + e2eVersion}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
		}
		return out, nil
	}
	if member, err = build("fleetmirror-member", "./cmd/member"); err != nil {
		return "", "", err
	}
	hub, err = build("fleetmirror-hub", "./cmd/hub")
	return member, hub, err
}

// registerMembers creates the agents' namespace in every cluster and
// registers member-a with the hub in Cluster API form, member-b in plain form.
func registerMembers(ctx context.Context) error {
	for _, c := range fleet.Clusters() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNS}}
		if err := c.Client.Create(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s in %s: %w", systemNS, c.Name, err)
		}
	}
	return errors.Join(
		fleettest.RegisterCAPI(ctx, hubC.Client, systemNS, memA, nil),
		fleettest.RegisterPlain(ctx, hubC.Client, systemNS, memB, nil, nil),
	)
}

// waitClustersUp waits until the hub reports every named cluster up, so that
// the tests start from a connected fleet.
func waitClustersUp(ctx context.Context, names ...string) error {
	return waitUp(ctx, hubAgent, names...)
}
