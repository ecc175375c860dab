package fleettest

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// RecordingProxy is an HTTPS proxy in front of a cluster's API server that
// records every request sent through it, as Requests does: what reaches
// the API server through one kubeconfig, counted on the way in. It
// forwards with the cluster's own credentials; its kubeconfig carries a
// token that only the proxy sees.
type RecordingProxy struct {
	Requests
	server *httptest.Server
	// watches are the watches open through the proxy now, by request.
	watches sync.Map // *http.Request -> its URI

	mu sync.Mutex
	// writeDelay holds every write (SlowWrites) before it is forwarded;
	// writing counts the writes held or forwarded and not answered yet,
	// mostWriting the most there were at once.
	writeDelay           time.Duration
	writing, mostWriting int
}

// NewRecordingProxy starts a proxy in front of c; Close stops it.
func NewRecordingProxy(c *Cluster) (*RecordingProxy, error) {
	target, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		return nil, err
	}
	p := &RecordingProxy{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Del("Authorization") // the proxy's token; the transport authenticates
		},
		Transport:     p.Wrap(transport),
		FlushInterval: -1, // watch events pass at once
		// A write is answered once the API server's answer is in hand,
		// before the client gets any of it: counted when the handler
		// returns, a client that read the whole answer could send its
		// next write while this one still counts.
		ModifyResponse: func(resp *http.Response) error {
			if answered, ok := resp.Request.Context().Value(answeredKey{}).(func()); ok {
				answered()
			}
			return nil
		},
	}
	p.server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			p.watches.Store(r, r.URL.RequestURI())
			defer p.watches.Delete(r)
		}
		if r.Method != http.MethodGet {
			answered := sync.OnceFunc(p.write())
			defer answered() // no answer: an error, or the client went away
			r = r.WithContext(context.WithValue(r.Context(), answeredKey{}, answered))
		}
		proxy.ServeHTTP(w, r)
	}))
	return p, nil
}

// answeredKey holds, in a write's context, what counts it answered.
type answeredKey struct{}

// SlowWrites holds every later write (a request other than GET) for d
// before forwarding it, as an API server that answers writes slowly would;
// 0 forwards them at once again.
func (p *RecordingProxy) SlowWrites(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeDelay = d
}

// MostWritesInFlight returns the most writes the proxy held or forwarded
// at once without having answered them yet.
func (p *RecordingProxy) MostWritesInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mostWriting
}

// write counts one write in flight and holds it for the SlowWrites delay;
// call what it returns once the write is answered.
func (p *RecordingProxy) write() (answered func()) {
	p.mu.Lock()
	p.writing++
	p.mostWriting = max(p.mostWriting, p.writing)
	delay := p.writeDelay
	p.mu.Unlock()
	if delay > 0 {
		// The latency of a slow API server, not a wait for a condition.
		time.Sleep(delay)
	}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.writing--
	}
}

// OpenWatches returns the watches open through the proxy now, sorted: those
// of its one client, where the API server's own metrics count everyone's
// (its internal informers' too, which come and go).
func (p *RecordingProxy) OpenWatches() []string {
	var open []string
	p.watches.Range(func(_, uri any) bool {
		open = append(open, uri.(string))
		return true
	})
	slices.Sort(open)
	return open
}

// Kubeconfig returns a self-contained kubeconfig that reaches the cluster
// through the proxy.
func (p *RecordingProxy) Kubeconfig() ([]byte, error) {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.server.Certificate().Raw})
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"proxy": {Server: p.server.URL, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"proxy": {Token: "through-the-recording-proxy"}},
		Contexts:       map[string]*clientcmdapi.Context{"proxy": {Cluster: "proxy", AuthInfo: "proxy"}},
		CurrentContext: "proxy",
	}
	return clientcmd.Write(kc)
}

// Close stops the proxy.
func (p *RecordingProxy) Close() { p.server.Close() }

// List returns the requests recorded so far, as "METHOD PATH STATUS".
func (r *Requests) List() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.list))
	for i, c := range r.list {
		out[i] = fmt.Sprintf("%s %s %d", c.method, c.path, c.status)
	}
	return out
}

// RegisterAs creates a plain registration Secret named secretName that
// registers the cluster of kubeconfig under the name cluster: a second
// name for a cluster registered already, say.
func RegisterAs(ctx context.Context, hub client.Client, namespace, secretName, cluster string, kubeconfig []byte) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	s.Namespace, s.Name = namespace, secretName
	s.Labels = map[string]string{annotations.LabelClusterName: cluster}
	s.Data = map[string][]byte{secret.KubeconfigDataName: kubeconfig}
	if err := hub.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("registering cluster %s as %s/%s: %w", cluster, namespace, secretName, err)
	}
	return s, nil
}
