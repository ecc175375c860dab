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
// cluster, keyed like apiserver_request_total, and the watches they open.
type requestCounter struct {
	mu sync.Mutex
	c  counts
	// opened counts WATCH requests when they are sent, by "WATCH
	// resource"; c counts them when they end, as the API server does.
	opened counts
}

func newRequestCounter() *requestCounter { return &requestCounter{c: counts{}, opened: counts{}} }

func (rc *requestCounter) inc(key string) {
	rc.mu.Lock()
	rc.c[key]++
	rc.mu.Unlock()
}

func (rc *requestCounter) incOpened(key string) {
	rc.mu.Lock()
	rc.opened[key]++
	rc.mu.Unlock()
}

func (rc *requestCounter) snapshot() (requests, opened counts) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return maps.Clone(rc.c), maps.Clone(rc.opened)
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
	if watch {
		t.counter.incOpened(key)
	} else {
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
	// watchesOpen is the watches open now per resource
	// (apiserver_longrunning_requests{verb="WATCH"}), any client.
	watchesOpen map[string]float64
	// unresponsive is the watchers the watch cache closed because they did
	// not keep up, per resource (apiserver_terminated_watchers_total), any
	// client.
	unresponsive map[string]float64
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
		"apiserver_watch_events_total", "apiserver_cache_list_returned_objects_total", "apiserver_storage_list_returned_objects_total",
		"apiserver_longrunning_requests", "apiserver_terminated_watchers_total")
	if err != nil {
		return apiSnapshot{}, err
	}
	s := apiSnapshot{requests: counts{}, errors: counts{}, served: map[string]float64{}, watchesOpen: map[string]float64{}, unresponsive: map[string]float64{}}
	for _, m := range fams.Series("apiserver_longrunning_requests", "verb", "WATCH") {
		s.watchesOpen[resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), fleettest.Label(m, "subresource"))] += fleettest.SampleValue(m)
	}
	for _, m := range fams["apiserver_terminated_watchers_total"].GetMetric() {
		s.unresponsive[resourceName(fleettest.Label(m, "group"), fleettest.Label(m, "resource"), "")] += fleettest.SampleValue(m)
	}
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
	// benchOpened is the watches the bench opened, by "WATCH resource".
	benchOpened counts
}

// agentWatchesOpen is the watches open at the mark that are not the
// bench's, per resource: the agent's, and the API server's own informers'.
func (m apiMark) agentWatchesOpen() map[string]float64 {
	out := map[string]float64{}
	for res, v := range m.server.watchesOpen {
		out[res] += v
	}
	for k, v := range m.benchOpened {
		res := strings.TrimPrefix(k, "WATCH ")
		out[res] -= v - m.bench[k] // opened and not yet closed
	}
	return out
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
	// Watches are the agent's watches in the phase, per resource.
	Watches watchCounts `json:"watches"`
}

// watchCounts are the watches of the agent in a phase, per resource.
//
// The API server counts a WATCH in apiserver_request_total when it ends,
// and keeps the watches open in apiserver_longrunning_requests; the bench
// counts its own at both ends. So the agent opened, in a phase, the
// watches that ended in it plus those open at its end minus those open at
// its start, the bench's own taken out everywhere. Each informer holds one
// watch open at a time: a watch opened beyond the first of each informer
// started in the phase is a restart, the reopening of a watch that ended
// (closed by the API server, most often because the agent did not keep
// up; or a timeout, every 5 to 10 minutes per informer). Informers
// started in the phase are the watches open at its end, less those open at
// its start when the same agent process ran throughout, or less the API
// server's own (open before the agent first started) when the agent was
// started in the phase. The API server's own informers otherwise count
// with the agent's: one of theirs ending in a phase counts as a restart.
type watchCounts struct {
	// Opened is the watches the agent opened.
	Opened map[string]float64 `json:"opened,omitempty"`
	// OpenAtEnd is the agent's watches open at the end of the phase: all
	// but the bench's and those open before the agent first started.
	OpenAtEnd map[string]float64 `json:"openAtEnd,omitempty"`
	// Restarts is Opened beyond the first watch of each informer started
	// in the phase.
	Restarts map[string]float64 `json:"restarts,omitempty"`
	// Unresponsive is the watchers the API server closed in the phase
	// because they did not keep up (apiserver_terminated_watchers_total),
	// any client's, the bench's included.
	Unresponsive map[string]float64 `json:"unresponsive,omitempty"`
}

// costBetween is the cost of the phase from mark a to mark b; newProcess
// says that the agent process was started in it, own are the watches
// open before the agent first started (the API server's own).
func costBetween(a, b apiMark, newProcess bool, own map[string]float64) clusterCost {
	server := b.server.requests.sub(a.server.requests)
	bench := b.bench.sub(a.bench)
	served := map[string]float64{}
	for k, v := range b.server.served {
		if d := v - a.server.served[k]; d != 0 {
			served[k] = d
		}
	}
	agent := server.sub(bench)
	return clusterCost{Agent: agent, Bench: bench, Errors: b.server.errors.sub(a.server.errors), Served: served,
		Watches: watchesBetween(a, b, agent, newProcess, own)}
}

// watchesBetween counts the agent's watches of a phase (see watchCounts);
// agent is its requests in the phase.
func watchesBetween(a, b apiMark, agent counts, newProcess bool, own map[string]float64) watchCounts {
	w := watchCounts{Opened: map[string]float64{}, OpenAtEnd: map[string]float64{}, Restarts: map[string]float64{}, Unresponsive: map[string]float64{}}
	before, after := a.agentWatchesOpen(), b.agentWatchesOpen()
	resources := sets.KeySet(before).Union(sets.KeySet(after))
	for k := range agent {
		if res, ok := strings.CutPrefix(k, "WATCH "); ok {
			resources.Insert(res)
		}
	}
	for res := range resources {
		opened := agent["WATCH "+res] + after[res] - before[res]
		started := after[res] - own[res]
		if !newProcess {
			started = after[res] - before[res]
		}
		setNonZero(w.Opened, res, max(0, opened))
		setNonZero(w.OpenAtEnd, res, after[res]-own[res])
		setNonZero(w.Restarts, res, max(0, opened-max(0, started)))
	}
	for res, v := range b.server.unresponsive {
		setNonZero(w.Unresponsive, res, v-a.server.unresponsive[res])
	}
	return w
}

func setNonZero(m map[string]float64, k string, v float64) {
	if v != 0 {
		m[k] = v
	}
}

func (c *clusterCost) add(o clusterCost) {
	if c.Agent == nil {
		*c = clusterCost{Agent: counts{}, Bench: counts{}, Errors: counts{}, Served: map[string]float64{},
			Watches: watchCounts{Opened: map[string]float64{}, OpenAtEnd: map[string]float64{}, Restarts: map[string]float64{}, Unresponsive: map[string]float64{}}}
	}
	c.Agent.add(o.Agent)
	c.Bench.add(o.Bench)
	c.Errors.add(o.Errors)
	for k, v := range o.Served {
		c.Served[k] += v
	}
	for _, m := range []struct{ dst, src map[string]float64 }{
		{c.Watches.Opened, o.Watches.Opened}, {c.Watches.OpenAtEnd, o.Watches.OpenAtEnd},
		{c.Watches.Restarts, o.Watches.Restarts}, {c.Watches.Unresponsive, o.Watches.Unresponsive},
	} {
		counts(m.dst).add(m.src)
	}
}
