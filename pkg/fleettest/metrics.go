package fleettest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are metric families by name, as a scrape or a registry gives
// them.
type Families map[string]*dto.MetricFamily

// Gather collects the metrics of a registry in the test process (an agent
// run in-process registers on controller-runtime's registry); nil families
// when it fails.
func Gather(g prometheus.Gatherer) Families {
	list, err := g.Gather()
	if err != nil {
		return nil
	}
	fams := Families{}
	for _, f := range list {
		fams[f.GetName()] = f
	}
	return fams
}

// Scrape reads and parses the Prometheus text endpoint at url (an agent's
// /metrics).
func Scrape(ctx context.Context, url string) (Families, error) {
	var body bytes.Buffer
	code, err := HTTPGet(ctx, url, &body)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", url, code)
	}
	fams, err := ParseMetrics(&body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return fams, nil
}

// ParseMetrics parses the Prometheus text format.
func ParseMetrics(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return fams, nil
}

// HTTPGet sends GET url, copies the body to w and returns the status code.
// It asks for an uncompressed body: a gzip writer of an agent's metrics
// endpoint holds 1.6 MiB of compressor state, which would show in the
// agent's heap as a cost of being measured.
func HTTPGet(ctx context.Context, url string, w io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = io.Copy(w, resp.Body)
	return resp.StatusCode, err
}

// Series returns the series of family name whose labels include every one
// of the given label/value pairs, in the family's order.
func (fams Families) Series(name string, labelPairs ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		if HasLabels(m, labelPairs...) {
			out = append(out, m)
		}
	}
	return out
}

// Value returns the sum of the values (SampleValue) of the series of family
// name whose labels include the given label/value pairs, and whether any
// series matched.
func (fams Families) Value(name string, labelPairs ...string) (float64, bool) {
	series := fams.Series(name, labelPairs...)
	var sum float64
	for _, m := range series {
		sum += SampleValue(m)
	}
	return sum, len(series) > 0
}

// SampleValue is the value of one series: a counter's, a gauge's or an
// untyped one's, or a histogram's number of observations.
func SampleValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// HasLabels reports whether m carries every label/value pair.
func HasLabels(m *dto.Metric, labelPairs ...string) bool {
	for i := 0; i+1 < len(labelPairs); i += 2 {
		if Label(m, labelPairs[i]) != labelPairs[i+1] {
			return false
		}
	}
	return true
}

// Label returns the value of label name of m, empty when it has none.
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, and that no earlier call in this process returned: the kernel may
// hand a port just closed to the next bind to port 0, and two agents of
// one test were given the same port that way (TestChartsRBAC: "bind:
// address already in use").
func FreeAddr() (string, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		if err := l.Close(); err != nil {
			return "", err
		}
		if !handedOut[addr] {
			handedOut[addr] = true
			return addr, nil
		}
	}
}

var (
	handedOutMu sync.Mutex
	handedOut   = map[string]bool{}
)
