package fleettest

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// HTTPFaultProxy is an HTTPS reverse proxy in front of an API server that
// answers in its place when told to: every request with one HTTP status
// (429 with Retry-After, 5xx, 401, 403), or with a response cut off after
// its headers. It terminates TLS with a certificate of its own and
// forwards with the credentials it was given, so the clients of its
// kubeconfig see the faults an API server (or a load balancer in front of
// it) produces, not TCP failures.
type HTTPFaultProxy struct {
	srv *httptest.Server

	mu         sync.Mutex
	status     int
	retryAfter string
	cut        bool
	answered   []Answered
	// path, when set, is answered with pathStatus pathLeft more times
	// (negative: until Heal), whatever the other faults.
	path       string
	pathStatus int
	pathLeft   int
	// slowPaths are forwarded slowBy late until Heal.
	slowPaths []string
	slowBy    time.Duration
}

// Answered is one request the proxy answered in the API server's place.
type Answered struct {
	At     time.Time
	Path   string
	Status int
}

// NewHTTPFaultProxy starts a proxy to the API server of upstream, which it
// reaches with upstream's credentials.
func NewHTTPFaultProxy(upstream *rest.Config) (*HTTPFaultProxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	rp.FlushInterval = -1 // watches stream
	p := &HTTPFaultProxy{}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		status, retryAfter, cut := p.status, p.retryAfter, p.cut
		if p.path != "" && r.URL.Path == p.path && p.pathLeft != 0 {
			status, cut = p.pathStatus, false
			p.pathLeft--
		}
		if status != 0 && !cut {
			p.answered = append(p.answered, Answered{At: time.Now(), Path: r.URL.Path, Status: status})
		}
		var late time.Duration
		if slices.Contains(p.slowPaths, r.URL.Path) {
			late = p.slowBy
		}
		p.mu.Unlock()
		if late > 0 {
			select {
			case <-time.After(late):
			case <-r.Context().Done():
				return // the client gave up
			}
		}
		switch {
		case cut:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"kind":`))
			panic(http.ErrAbortHandler) // the stream is reset mid-response
		case status == http.StatusTooManyRequests:
			// As API Priority and Fairness answers: plain text.
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "Too many requests, please try again later.", status)
		case status != 0:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the fault proxy","code":%d}`, status)
		default:
			r.Header.Del("Authorization") // the proxy's own credentials go upstream
			rp.ServeHTTP(w, r)
		}
	}))
	p.srv.EnableHTTP2 = true
	p.srv.StartTLS()
	return p, nil
}

// Fail answers every request with status until Heal (0: forward again);
// a 429 asks to retry after 1s.
func (p *HTTPFaultProxy) Fail(status int) { p.Throttle(status, "1") }

// Throttle answers every request with status and a Retry-After header of
// retryAfter (when status is 429) until Heal.
func (p *HTTPFaultProxy) Throttle(status int, retryAfter string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.retryAfter = status, retryAfter
}

// FailPath answers the requests for path (such as /readyz) with status,
// times times (negative: until Heal), and forwards the others.
func (p *HTTPFaultProxy) FailPath(path string, status, times int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.path, p.pathStatus, p.pathLeft = path, status, times
}

// SlowPaths forwards the requests for paths (such as /readyz) d late,
// until Heal, and the others at once: an API server whose readiness checks
// are slow while it serves its resources.
func (p *HTTPFaultProxy) SlowPaths(d time.Duration, paths ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slowPaths, p.slowBy = paths, d
}

// Answered returns the requests the proxy answered in the API server's
// place, in the order it answered them.
func (p *HTTPFaultProxy) Answered() []Answered {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.answered)
}

// CutResponses cuts every response off after its headers until Heal.
func (p *HTTPFaultProxy) CutResponses() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Heal forwards every request again.
func (p *HTTPFaultProxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.cut, p.path, p.slowPaths = 0, false, "", nil
	return nil
}

// Close stops the proxy.
func (p *HTTPFaultProxy) Close() { p.srv.Close() }

// Kubeconfig returns a self-contained kubeconfig of cluster name that
// reaches the API server through the proxy, with a token the proxy
// replaces by its own credentials.
func (p *HTTPFaultProxy) Kubeconfig(name string) ([]byte, error) {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: p.srv.URL, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: "through-the-fault-proxy"}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}
