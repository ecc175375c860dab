package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// stopGrace is how long an agent has to exit after SIGTERM before it is killed.
const stopGrace = 15 * time.Second

// agent is one fleetmirror process. Its stdout and stderr go to logPath.
type agent struct {
	name    string // binary/cluster, for messages
	logPath string
	// metricsAddr and probeAddr are the host:port of /metrics and /readyz.
	metricsAddr, probeAddr string

	cmd    *exec.Cmd
	cancel context.CancelFunc
	exited chan struct{} // closed once the process has exited; err is set then
	err    error
}

// startAgent starts bin against cluster with its kubeconfig, its cluster
// name and metrics and probe endpoints on free loopback ports, followed by
// extra flags. The process leads a process group of its own; stop ends it.
func startAgent(bin, logDir, cluster string, extra ...string) (*agent, error) {
	c := fleet.Cluster(cluster)
	a, err := newAgentAt(filepath.Base(bin)+"/"+cluster, filepath.Join(logDir, filepath.Base(bin)+"-"+cluster+".log"))
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig", c.KubeconfigPath,
		"--cluster-name", cluster,
		"--metrics-bind-address", a.metricsAddr,
		"--health-probe-bind-address", a.probeAddr,
	}, extra...)
	if err := startProcess(a, bin, args...); err != nil {
		return nil, err
	}
	return a, nil
}

// newAgentAt returns an agent, not started, named name and logging to
// logPath, with metrics and probe endpoints on free loopback ports.
func newAgentAt(name, logPath string) (*agent, error) {
	metricsAddr, err := fleettest.FreeAddr()
	if err != nil {
		return nil, err
	}
	probeAddr, err := fleettest.FreeAddr()
	if err != nil {
		return nil, err
	}
	return &agent{name: name, logPath: logPath, metricsAddr: metricsAddr, probeAddr: probeAddr, exited: make(chan struct{})}, nil
}

// stop sends SIGTERM to the agent's process group and waits for it to exit
// (it is killed after stopGrace). It fails when the agent had exited by
// itself, exited with an error, or reported a data race.
func (a *agent) stop() error {
	select {
	case <-a.exited:
		return fmt.Errorf("exited before it was stopped: %v", a.err)
	default:
	}
	a.cancel()
	<-a.exited
	var errs []error
	// Wait reports a clean exit after cancellation as the context's error.
	if a.err != nil && !errors.Is(a.err, context.Canceled) {
		errs = append(errs, fmt.Errorf("stopped with %w", a.err))
	}
	if log, err := os.ReadFile(a.logPath); err != nil {
		errs = append(errs, err)
	} else if bytes.Contains(log, []byte("WARNING: DATA RACE")) {
		errs = append(errs, fmt.Errorf("data race reported, see %s", a.logPath))
	}
	return errors.Join(errs...)
}

// tail returns the last n lines of the agent's log.
func (a *agent) tail(n int) string {
	data, err := os.ReadFile(a.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitReady waits until the agent's /readyz answers 200.
func (a *agent) waitReady(ctx context.Context) error {
	return a.waitOK(ctx, "http://"+a.probeAddr+"/readyz")
}

// waitOK waits until GET url answers 200 while the process runs; when it
// exits instead, the error holds the end of its log.
func (a *agent) waitOK(ctx context.Context, url string) error {
	for {
		if code, err := fleettest.HTTPGet(ctx, url, io.Discard); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s is not ready: %w", a.name, url, ctx.Err())
		case <-a.exited:
			return fmt.Errorf("%s exited: %v\n%s", a.name, a.err, a.tail(20))
		case <-time.After(poll):
		}
	}
}

// scrape reads the agent's /metrics.
func (a *agent) scrape() (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return fleettest.Scrape(ctx, "http://"+a.metricsAddr+"/metrics")
}

// value returns the value of the series of family name whose labels include
// the given label/value pairs (for a histogram, its number of observations),
// summed when several series match, and whether any did.
func value(families map[string]*dto.MetricFamily, name string, labelPairs ...string) (float64, bool) {
	return fleettest.Families(families).Value(name, labelPairs...)
}

// sample is value for assertions: NaN, which equals nothing, when no series
// matches.
func sample(families map[string]*dto.MetricFamily, name string, labelPairs ...string) float64 {
	if v, ok := value(families, name, labelPairs...); ok {
		return v
	}
	return math.NaN()
}
