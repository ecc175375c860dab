package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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
	metricsAddr, probeAddr := a.metricsAddr, a.probeAddr
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.Create(a.logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig", c.KubeconfigPath,
		"--cluster-name", cluster,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
	}, extra...)

	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, errors.Join(fmt.Errorf("starting %s: %w", a.name, err), logFile.Close())
	}
	a.cmd = cmd
	go func() {
		a.err = cmd.Wait()
		// Whatever the agent started in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = logFile.Close()
		close(a.exited)
	}()
	return a, nil
}

// newAgentAt returns an agent, not started, named name and logging to
// logPath, with metrics and probe endpoints on free loopback ports.
func newAgentAt(name, logPath string) (*agent, error) {
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	probeAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return &agent{name: name, logPath: logPath, metricsAddr: metricsAddr, probeAddr: probeAddr, exited: make(chan struct{})}, nil
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
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
	url := "http://" + a.probeAddr + "/readyz"
	for {
		if code, err := get(ctx, url, io.Discard); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s is not ready: %w", a.name, url, ctx.Err())
		case <-a.exited:
			return fmt.Errorf("%s exited: %v", a.name, a.err)
		case <-time.After(poll):
		}
	}
}

// scrape reads the agent's /metrics.
func (a *agent) scrape() (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var body bytes.Buffer
	url := "http://" + a.metricsAddr + "/metrics"
	code, err := get(ctx, url, &body)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(&body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return families, nil
}

// get sends GET url, copies the body to w and returns the status code.
func get(ctx context.Context, url string, w io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = io.Copy(w, resp.Body)
	return resp.StatusCode, err
}

// value returns the value of the series of family name whose labels include
// the given label/value pairs (for a histogram, its number of observations),
// summed when several series match, and whether any did.
func value(families map[string]*dto.MetricFamily, name string, labelPairs ...string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labelPairs...) {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// hasLabels reports whether m carries every label/value pair.
func hasLabels(m *dto.Metric, labelPairs ...string) bool {
	for i := 0; i+1 < len(labelPairs); i += 2 {
		ok := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labelPairs[i] && l.GetValue() == labelPairs[i+1] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// sample is value for assertions: NaN, which equals nothing, when no series
// matches.
func sample(families map[string]*dto.MetricFamily, name string, labelPairs ...string) float64 {
	if v, ok := value(families, name, labelPairs...); ok {
		return v
	}
	return math.NaN()
}
