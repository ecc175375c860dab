package clusters

import (
	"context"
	"fmt"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetmirror/fleetmirror/pkg/metrics"
)

// Throttling: an API server that answers 429 Too Many Requests is alive and
// busy, not gone. It is never marked unreachable for that alone (the probe
// counts a 429 as an answer, see fleet), and what it asks for is honoured
// for the whole cluster at once: after a 429 of the API server as a whole
// (serverWide), no request but the probe is sent to the cluster before its
// Retry-After has passed.
//
// client-go honours Retry-After too, but per request: each call sleeps and
// retries on its own, up to ten times, so that a hundred calls to a
// saturated API server keep asking it a hundred times a second, and a call
// with a long Retry-After waits out its whole deadline (30 s by default)
// while the worker holding it serves nobody else. Here the 429 ends the
// call (the header is taken off the response, which is what stops
// client-go's retry), and the cluster's back-off holds every later request
// until the time the API server named: a request waits for it once, if it
// is at most maxHold away, and is otherwise refused at once with a 429 of
// our own. The pipeline comes back to such a source soon after
// (controller.Reconciler), without its failure back-off, and its workers
// serve the other clusters meanwhile.

// Bounds of one back-off: API Priority and Fairness asks for 1 s; a value
// out of range (absent, unreadable, or a proxy asking for minutes) is
// brought within them, so that a cluster is asked again soon after it
// could answer.
const (
	minThrottle = time.Second
	maxThrottle = 30 * time.Second
)

// maxHold is the longest a request waits for a throttled cluster before
// it is sent; one that would wait longer is refused.
const maxHold = 2 * time.Second

// throttle is a cluster's back-off after 429 answers.
type throttle struct {
	cluster string

	mu sync.Mutex
	// until is when the cluster may be asked again.
	until time.Time
}

// wait returns when the cluster may be asked again: at once, after one
// wait of at most maxHold, or with a 429 of our own when the back-off
// lasts longer (or was extended meanwhile), or ctx's cause when it ended.
func (t *throttle) wait(ctx context.Context) error {
	d := t.remaining()
	if d <= 0 {
		return nil
	}
	if d > maxHold {
		return t.refusal(d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-timer.C:
	}
	if d := t.remaining(); d > 0 {
		return t.refusal(d)
	}
	return nil
}

func (t *throttle) remaining() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Until(t.until)
}

// refusal is the error of a request not sent because the cluster asked
// to be left alone for d more: a 429, as the API server would answer.
func (t *throttle) refusal(d time.Duration) error {
	return apierrors.NewTooManyRequests(
		// No duration in the text: Events repeat only when it changes.
		fmt.Sprintf("cluster %s answers 429 Too Many Requests; not asked again before its Retry-After", t.cluster),
		int(math.Ceil(d.Seconds())))
}

// observe notes what the cluster answered: a 429 of the API server as a
// whole starts or extends the back-off and loses its Retry-After header
// (see above).
func (t *throttle) observe(resp *http.Response) {
	if resp.StatusCode != http.StatusTooManyRequests || !serverWide(resp) {
		return
	}
	d := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	resp.Header.Del("Retry-After")
	now := time.Now()
	t.mu.Lock()
	if until := now.Add(d); until.After(t.until) {
		t.until = until
	}
	t.mu.Unlock()
	metrics.Throttled.WithLabelValues(t.cluster).Inc()
}

// serverWide tells a 429 about the API server as a whole from one about
// the resource a request asked for. The API server's filters (API Priority
// and Fairness, max-in-flight, shutdown) and proxies before it answer with
// plain text (http.Error) before any resource is looked at; a resource's
// storage answers with a Status object in the request's serialization,
// "storage is (re)initializing" from a watch cache that is still filling
// (a CRD just created, an API server just started). Holding the whole
// cluster for the latter would stall every other kind for a second while
// one kind's cache fills, so that answer is left to client-go, which waits
// out its Retry-After for that request alone.
func serverWide(resp *http.Response) bool {
	mediaType, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return true
	}
	switch mediaType {
	case runtime.ContentTypeJSON, runtime.ContentTypeProtobuf, runtime.ContentTypeYAML, runtime.ContentTypeCBOR:
		return false
	}
	return true
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date (RFC 9110
// 10.2.3), brought within [minThrottle, maxThrottle]. Written by hand:
// client-go's reader of the header is unexported and knows seconds only.
func retryAfter(v string, now time.Time) time.Duration {
	d := minThrottle
	if s, err := strconv.Atoi(v); err == nil {
		d = time.Duration(s) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	}
	return min(max(d, minThrottle), maxThrottle)
}
