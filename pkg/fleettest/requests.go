package fleettest

import (
	"context"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Requests records the requests sent through the transports it wraps.
// Wrap is a rest.Config's Wrap function.
type Requests struct {
	mu   sync.Mutex
	list []request
}

// request is one recorded request; status is 0 when it failed without one.
type request struct {
	method, path string
	status       int
}

// Wrap returns next, recording every request it sends.
func (r *Requests) Wrap(next http.RoundTripper) http.RoundTripper {
	return &recorder{next: next, requests: r}
}

// Count counts the requests of method to a path ending in suffix that were
// answered with status.
func (r *Requests) Count(method, suffix string, status int) int {
	n := 0
	for _, s := range r.Statuses(method, suffix) {
		if s == status {
			n++
		}
	}
	return n
}

// Statuses are the statuses of the requests of method to a path ending in
// suffix, in the order they were answered.
func (r *Requests) Statuses(method, suffix string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, c := range r.list {
		if c.method == method && strings.HasSuffix(c.path, suffix) {
			out = append(out, c.status)
		}
	}
	return out
}

// Writes counts the requests other than GET that the API server accepted.
func (r *Requests) Writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.list {
		if c.method != http.MethodGet && c.status > 0 && c.status < 300 {
			n++
		}
	}
	return n
}

type recorder struct {
	next     http.RoundTripper
	requests *Requests
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	r.requests.mu.Lock()
	r.requests.list = append(r.requests.list, request{method: req.Method, path: req.URL.Path, status: status})
	r.requests.mu.Unlock()
	return resp, err
}

// WrappedRoundTripper lets client-go reach the transport beneath.
func (r *recorder) WrappedRoundTripper() http.RoundTripper { return r.next }

// NewNamespace creates a namespace named prefix-<random> in c for one test
// or case, and returns its name.
func NewNamespace(c *Cluster, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	err := c.Client.Create(context.Background(), ns)
	return ns.Name, err
}
