package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// The API cost of a phase is read from the API server's own counters:
// apiserver_request_total by verb and resource, as deltas between the start
// and the end of the phase. The counters do not say who sent a request, so
// the bench counts every request it sends itself (a wrapping transport on
// all its clients) and subtracts them: what is left is the agent's, plus
// the API server's own loopback traffic (leases, endpoints of the
// kubernetes Service), which never touches Secrets or ConfigMaps.
// WATCH requests are counted by the API server when they end; the bench
// counts its own when their body is closed, to match.

// nonResource is the resource shown for requests outside the REST API
// (/readyz, discovery).
const nonResource = "(non-resource)"

// writeVerbs are the verbs that change objects.
var writeVerbs = sets.New("POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION")

// counts are request counts keyed "VERB resource".
type counts map[string]float64

func (c counts) sub(o counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	for k, v := range o {
		if _, ok := c[k]; !ok && v != 0 {
			out[k] = -v
		}
	}
	return out
}

func (c counts) add(o counts) {
	for k, v := range o {
		c[k] += v
	}
}

// writes sums the write requests to the given resources.
func (c counts) writes(resources ...string) float64 {
	var total float64
	for k, v := range c {
		verb, res, _ := strings.Cut(k, " ")
		if writeVerbs.Has(verb) && slices.Contains(resources, res) {
			total += v
		}
	}
	return total
}

func reqKey(verb, resource string) string {
	if resource == "" {
		resource = nonResource
	}
	return verb + " " + resource
}

// resourceName is resource[.group][/subresource], as in kubectl.
func resourceName(group, resource, subresource string) string {
	if resource == "" {
		return ""
	}
	if group != "" {
		resource += "." + group
	}
	if subresource != "" {
		resource += "/" + subresource
	}
	return resource
}

// requestCounter counts the requests of the bench's own clients of one
// cluster, keyed like apiserver_request_total.
type requestCounter struct {
	mu sync.Mutex
	c  counts
}

func newRequestCounter() *requestCounter { return &requestCounter{c: counts{}} }

func (rc *requestCounter) inc(key string) {
	rc.mu.Lock()
	rc.c[key]++
	rc.mu.Unlock()
}

func (rc *requestCounter) snapshot() counts {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return maps.Clone(rc.c)
}

// instrument makes cfg count its requests in rc and lifts the client-side
// rate limit.
func (rc *requestCounter) instrument(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.RateLimiter = nil
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{next: rt, counter: rc}
	}
	return cfg
}

type countingTransport struct {
	next    http.RoundTripper
	counter *requestCounter
}

// RoundTrip counts a request when it is sent, a watch when it is closed.
// /metrics scrapes are not counted: the API server does not count them.
func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := classify(req)
	if key == "" {
		return t.next.RoundTrip(req)
	}
	watch := strings.HasPrefix(key, "WATCH ")
	if !watch {
		t.counter.inc(key)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || !watch {
		return resp, err
	}
	resp.Body = &countOnClose{ReadCloser: resp.Body, done: func() { t.counter.inc(key) }}
	return resp, nil
}

type countOnClose struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *countOnClose) Close() error {
	c.once.Do(c.done)
	return c.ReadCloser.Close()
}

// namespaceSubresources are the subresources of a namespace, which the
// API server tells from namespaced resources by name.
var namespaceSubresources = sets.New("status", "finalize")

// classify names a request the way apiserver_request_total does, or
// returns "" for /metrics, which the API server does not count.
func classify(req *http.Request) string {
	if req.URL.Path == "/metrics" {
		return ""
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return reqKey("GET", "")
	}
	if len(parts) == 0 {
		return reqKey("GET", "") // discovery of a group version
	}
	if parts[0] == "namespaces" && len(parts) > 2 && !namespaceSubresources.Has(parts[2]) {
		parts = parts[2:] // namespaces/<ns>/<resource>/...
	}
	resource, name, sub := parts[0], "", ""
	if len(parts) > 1 {
		name = parts[1]
	}
	if len(parts) > 2 {
		sub = parts[2]
	}
	var verb string
	switch req.Method {
	case http.MethodGet:
		switch {
		case name != "":
			verb = "GET"
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "WATCH"
		default:
			verb = "LIST"
		}
	case http.MethodPatch:
		verb = "PATCH"
		if strings.Contains(req.Header.Get("Content-Type"), "apply-patch") {
			verb = "APPLY"
		}
	case http.MethodDelete:
		verb = "DELETE"
		if name == "" {
			verb = "DELETECOLLECTION"
		}
	default:
		verb = req.Method
	}
	return reqKey(verb, resourceName(group, resource, sub))
}

// apiSnapshot is the state of one API server's counters.
type apiSnapshot struct {
	requests counts // apiserver_request_total, every response code
	errors   counts // the same, response codes >= 400
	// served is objects handed out per resource: returned by LISTs (watch
	// cache or etcd) and sent as watch events (the initial events of
	// watch-list streams included).
	served map[string]float64
}

// apiServerFamilies reads /metrics of an API server through rc and parses
// the families named, and only those: the whole text is about a megabyte,
// and the bench reads it from a hundred API servers at a time.
func apiServerFamilies(ctx context.Context, rc rest.Interface, names ...string) (fleettest.Families, error) {
	body, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	return parseFamilies(body, names...)
}

// parseFamilies parses the families named out of a text exposition,
// skipping the lines of every other family before parsing.
func parseFamilies(text []byte, names ...string) (fleettest.Families, error) {
	want := sets.New(names...)
	var kept bytes.Buffer
	for line := range bytes.Lines(text) {
		name := line
		if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok { // # HELP name ..., # TYPE name ...
			if _, after, ok := bytes.Cut(rest, []byte(" ")); ok {
				name = after
			}
		}
		if i := bytes.IndexAny(name, "{ \n"); i >= 0 {
			name = name[:i]
		}
		if n := string(name); want.Has(n) || want.Has(familyOf(n)) {
			kept.Write(line)
		}
	}
	return fleettest.ParseMetrics(&kept)
}

// familyOf is the family of a sample's name: a histogram's or summary's
// samples end in _bucket, _sum or _count.
func familyOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// scrapeAPIServer reads the request and object counters of an API server
// through rc.
func scrapeAPIServer(ctx context.Context, rc rest.Interface) (apiSnapshot, error) {
	fams, err := apiServerFamilies(ctx, rc, "apiserver_request_total",
		"apiserver_watch_events_total", "apiserver_cache_list_returned_objects_total", "apiserver_storage_list_returned_objects_total")
	if err != nil {
		return apiSnapshot{}, err
	}
	s := apiSnapshot{requests: counts{}, errors: counts{}, served: map[string]float64{}}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		key := reqKey(fleettest.Label(m, "verb"), resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), fleettest.Label(m, "subresource")))
		v := fleettest.SampleValue(m)
		s.requests[key] += v
		if code := fleettest.Label(m, "code"); code >= "400" && len(code) == 3 {
			s.errors[key+" "+code] += v
		}
	}
	for _, name := range []string{
		"apiserver_watch_events_total",
		"apiserver_cache_list_returned_objects_total",
		"apiserver_storage_list_returned_objects_total",
	} {
		for _, m := range fams[name].GetMetric() {
			s.served[resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), "")] += fleettest.SampleValue(m)
		}
	}
	return s, nil
}

// apiMark is the counters of one cluster at one moment: the API server's
// and the bench's own.
type apiMark struct {
	server apiSnapshot
	bench  counts
}

// clusterCost is the API cost of a phase on one cluster or group of clusters.
type clusterCost struct {
	// Agent is the server's count minus the bench's own requests, by
	// "VERB resource".
	Agent counts `json:"agent"`
	// Bench is what the bench itself sent (subtracted from Agent).
	Bench counts `json:"bench"`
	// Errors are responses >= 400 by "VERB resource code", any client.
	Errors counts `json:"errors,omitempty"`
	// Served is objects returned by LISTs and sent by watches, any client.
	Served map[string]float64 `json:"served"`
}

func costBetween(a, b apiMark) clusterCost {
	server := b.server.requests.sub(a.server.requests)
	bench := b.bench.sub(a.bench)
	served := map[string]float64{}
	for k, v := range b.server.served {
		if d := v - a.server.served[k]; d != 0 {
			served[k] = d
		}
	}
	return clusterCost{Agent: server.sub(bench), Bench: bench, Errors: b.server.errors.sub(a.server.errors), Served: served}
}

func (c *clusterCost) add(o clusterCost) {
	if c.Agent == nil {
		*c = clusterCost{Agent: counts{}, Bench: counts{}, Errors: counts{}, Served: map[string]float64{}}
	}
	c.Agent.add(o.Agent)
	c.Bench.add(o.Bench)
	c.Errors.add(o.Errors)
	for k, v := range o.Served {
		c.Served[k] += v
	}
}
