package clusters

import (
	"net/http"
	"sync/atomic"
	"time"
)

// An API server whose readiness answer is late is not down when it answers
// everything else in time. Under load, kube-apiserver's readiness checks
// (etcd, its post-start hooks) and kcp's (at a thousand logical clusters)
// can take longer than the probe's deadline while its resources are served
// from the watch cache in milliseconds; marking such a cluster down aborts
// every call in flight to it, stops its watches and reconciles every source
// that targets it twice (down, then up), which adds load where there is too
// much already. So the transport notes when the cluster last answered a
// request of ours in time, and the probe (fleet) takes that as the answer
// its own late request did not give. A cluster whose every answer is late
// (a slow network, a hung connection) gives no such answer, and is marked
// down as before.

// answers keeps when the cluster last answered a request in time.
type answers struct {
	// within is how soon after its request an answer counts.
	within time.Duration
	// last is when the last answer that counted came, as the time since
	// answersEpoch (monotonic, unlike a wall clock); 0: none yet.
	last atomic.Int64
}

// answersEpoch is the origin of answers.last.
var answersEpoch = time.Now()

// observe notes resp, the answer to a request sent at sent: it counts if it
// came within a.within and says that the API server serves, which a 5xx
// (its own failure, or a proxy's in front of it) and a 429 (busy) do not.
func (a *answers) observe(sent time.Time, resp *http.Response) {
	if a == nil || resp.StatusCode >= http.StatusInternalServerError || resp.StatusCode == http.StatusTooManyRequests {
		return
	}
	now := time.Now()
	if now.Sub(sent) > a.within {
		return
	}
	at := int64(now.Sub(answersEpoch))
	for {
		last := a.last.Load()
		if last >= at || a.last.CompareAndSwap(last, at) {
			return
		}
	}
}

// since reports whether an answer counted at t or later.
func (a *answers) since(t time.Time) bool {
	return a != nil && a.last.Load() >= int64(t.Sub(answersEpoch))
}

// AnsweredSince reports whether the API server answered a request other
// than the probe at t or later, within Options.AnswerWithin of its sending,
// with an answer that says it serves (not a 5xx, not a 429). Always false
// without Options.AnswerWithin.
func (c *Cluster) AnsweredSince(t time.Time) bool { return c.answers.since(t) }
