package member_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

const (
	clusterName = "test"
	agentNS     = "fleetmirror-system"
	// excludedGlob is excluded by the test agent on top of the defaults.
	excludedGlob = "fm-excluded-*"
)

var (
	// agentHost, when set, is where startAgent's agent reaches the API
	// server (a fault proxy) instead of its address.
	agentHost string
	fleet     *fleettest.Fleet
	k8s       client.Client
	agent     *runningAgent
)

func TestMain(m *testing.M) {
	fleet = fleettest.StartSuite()
	k8s = fleet.Hub.Client
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The MirrorPolicy CRD as the member chart installs it, before the
	// agent starts, as Helm installs a chart's CRDs first.
	if _, err := fleettest.InstallPolicyCRD(fleet.Hub.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agent = startAgent()
	code := m.Run()
	agent.stop()
	if err := fleet.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// runningAgent is a member agent running in this process, with a record of
// every request it sent.
type runningAgent struct {
	cancel   context.CancelFunc
	done     chan error
	requests *requestLog
}

// requestLog records method and URL of every request of one agent.
type requestLog struct {
	mu      sync.Mutex
	reqs    []string
	details []request
}

// request is one recorded request with what the log lines leave out.
type request struct {
	Method string
	URL    *url.URL
	Accept string
	// Status is the response's status code, 0 while none has come.
	Status int
	// Sent is when the request was sent.
	Sent time.Time
}

// sent records a request as it leaves, so that whatever the API server has
// applied is already counted when a test sees its effect; answered fills in
// the status once the response comes back.
func (l *requestLog) sent(r *http.Request, at time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r.Method+" "+r.URL.RequestURI())
	l.details = append(l.details, request{Method: r.Method, URL: r.URL, Accept: r.Header.Get("Accept"), Sent: at})
	return len(l.details) - 1
}

func (l *requestLog) answered(i int, resp *http.Response) {
	if resp == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.details[i].Status = resp.StatusCode
}

// detailed returns every request with its Accept header and status.
func (l *requestLog) detailed() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]request(nil), l.details...)
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// writes returns the requests that changed something.
func (l *requestLog) writes() []string {
	var out []string
	for _, r := range l.all() {
		if m, _, _ := strings.Cut(r, " "); m != http.MethodGet {
			out = append(out, r)
		}
	}
	return out
}

type recordingTransport struct {
	next http.RoundTripper
	log  *requestLog
}

func (t *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	i := t.log.sent(r, time.Now())
	resp, err := t.next.RoundTrip(r)
	t.log.answered(i, resp)
	return resp, err
}

// startAgent runs a member agent against the test cluster with extra flags.
func startAgent(extraArgs ...string) *runningAgent {
	cfg := rest.CopyConfig(fleet.Hub.Config)
	if agentHost != "" {
		cfg.Host = agentHost
	}
	return startAgentOn(cfg, extraArgs...)
}

// startAgentOn runs a member agent against the API server of cfg with the
// suite's flags and extra ones, recording its requests.
func startAgentOn(cfg *rest.Config, extraArgs ...string) *runningAgent {
	args := append([]string{
		"--cluster-name=" + clusterName,
		"--namespace=" + agentNS,
		"--excluded-namespaces=kube-system,kube-public,kube-node-lease," + excludedGlob,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:0",
		"--resync-period=0",
		"--resource-types=Secret.v1,ConfigMap.v1",
		"--lazy-probe-interval=200ms",
	}, extraArgs...)
	o, err := member.ParseOptions(args...)
	if err != nil {
		panic(err)
	}
	log := &requestLog{}
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &recordingTransport{next: rt, log: log} }
	o.RESTConfig = cfg
	ctx, cancel := context.WithCancel(context.Background())
	a := &runningAgent{cancel: cancel, done: make(chan error, 1), requests: log}
	go func() { a.done <- member.Run(ctx, o) }()
	return a
}

// stop cancels the agent and waits for it to return.
func (a *runningAgent) stop() { fleettest.StopInProcess("agent", a.cancel, a.done) }
