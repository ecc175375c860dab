package clusters

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ErrUnreachable is the cause of the calls a cluster refused or aborted
// because it is marked unreachable.
type ErrUnreachable struct {
	Cluster string
	Since   time.Time
	Reason  string
}

func (e *ErrUnreachable) Error() string {
	return fmt.Sprintf("cluster %s unreachable since %s: %s", e.Cluster, e.Since.UTC().Format(time.RFC3339), e.Reason)
}

// DownProbeInterval is how often a cluster that does not answer is probed
// again: one readiness request a second costs it nothing, and its watches,
// which wait for the probe (see health), resume within a second of its
// return.
const DownProbeInterval = time.Second

// health is what is known of whether a cluster answers. Its owner (the
// hub's probe) marks it down and up; the pipeline's calls read it. While a
// cluster is down its calls fail at once instead of waiting for their
// deadline, and marking it down aborts the calls in flight: one cluster
// that hangs never holds the work of the others.
//
// The watches follow it too: while the cluster is down they dial nothing
// (the probe alone asks whether it is back), and when it is marked up they
// all reconnect at once and resume from where they were, instead of each
// retrying on a back-off of its own that reached 30s during an outage.
type health struct {
	mu   sync.Mutex
	down *ErrUnreachable
	// abort is cancelled, with down as its cause, when the cluster is
	// marked down; calls derive from it.
	abort       context.Context
	cancelAbort context.CancelCauseFunc
	// back is closed when the cluster is next marked up, and replaced;
	// ups counts the times it was.
	back chan struct{}
	ups  uint64
}

func newHealth() *health {
	h := &health{back: make(chan struct{})}
	h.abort, h.cancelAbort = context.WithCancelCause(context.Background())
	return h
}

// state returns how many times the cluster was marked up, a channel closed
// when it is next, and whether it is marked down now.
func (h *health) state() (ups uint64, back <-chan struct{}, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ups, h.back, h.down != nil
}

// waitUp blocks while the cluster is marked down; false when ctx ended.
func (h *health) waitUp(ctx context.Context) bool {
	for {
		_, back, down := h.state()
		if !down {
			return ctx.Err() == nil
		}
		select {
		case <-ctx.Done():
			return false
		case <-back:
		}
	}
}

// retries spaces the attempts of one watch loop: each pause is longer than
// the one before (its back-off, started afresh by reset), and it ends
// early when the cluster is marked up again since the attempt began: the
// probe saw it answer. Every watch loop of a cluster (watch, presence,
// kinds hint) waits through it, so that none dials a cluster marked down.
type retries struct {
	health     *health // nil: the back-off alone
	newBackoff func() wait.Backoff
	backoff    wait.Backoff
	// ups is health.ups when the attempt began; back is closed when the
	// cluster is next marked up after that.
	ups  uint64
	back <-chan struct{}
}

func newRetries(h *health, newBackoff func() wait.Backoff) *retries {
	return &retries{health: h, newBackoff: newBackoff, backoff: newBackoff()}
}

// begin starts an attempt: it waits while the cluster is marked down and
// notes its health then. False when ctx ended meanwhile.
func (r *retries) begin(ctx context.Context) bool {
	if r.health == nil {
		return true
	}
	if !r.health.waitUp(ctx) {
		return false
	}
	r.ups, r.back, _ = r.health.state()
	return true
}

// interrupted reports whether the cluster was marked down (and maybe up)
// since the attempt began.
func (r *retries) interrupted() bool {
	if r.health == nil {
		return false
	}
	ups, _, down := r.health.state()
	return down || ups != r.ups
}

// reset starts the back-off afresh: an attempt lasted.
func (r *retries) reset() { r.backoff = r.newBackoff() }

// throttled starts the back-off afresh when err is a 429 answer: the
// cluster is busy, not failing, and the transport holds the next attempt
// for the Retry-After it gave (throttle.go); a back-off grown on top of
// that would keep the watch away for up to 30 s after the cluster can
// answer again.
func (r *retries) throttled(err error) {
	if apierrors.IsTooManyRequests(err) {
		r.reset()
	}
}

// pause waits before the next attempt; false when ctx ended.
func (r *retries) pause(ctx context.Context) bool {
	t := time.NewTimer(r.backoff.Step())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-r.back:
		r.reset()
		return true
	}
}

// MarkDown marks the cluster unreachable for reason: calls in flight are
// aborted, new ones fail at once, and its connections are closed so that
// the next attempt dials afresh instead of queueing on a connection that
// no longer answers. Marking a cluster that is down again changes nothing.
func (c *Cluster) MarkDown(reason string) {
	c.health.mu.Lock()
	if c.health.down != nil {
		c.health.mu.Unlock()
		return
	}
	down := &ErrUnreachable{Cluster: c.opts.Name, Since: time.Now(), Reason: reason}
	c.health.down = down
	cancel := c.health.cancelAbort
	c.health.mu.Unlock()
	cancel(down)
	for _, t := range []*closingTransport{c.transport, c.watchTransport} {
		if t != nil {
			t.conns.CloseAll() // the watches' too: a stream that hangs ends
		}
	}
}

// MarkUp marks the cluster reachable again: every watch reconnects at once
// and resumes from its resourceVersion.
func (c *Cluster) MarkUp() {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	if c.health.down == nil {
		return
	}
	c.health.down = nil
	c.health.abort, c.health.cancelAbort = context.WithCancelCause(context.Background())
	c.health.ups++
	close(c.health.back)
	c.health.back = make(chan struct{})
}

// Unreachable returns why the cluster is marked down, or nil while it is not.
func (c *Cluster) Unreachable() *ErrUnreachable {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.down
}

// CallContext returns the context of one call of the pipeline to the
// cluster: it ends after timeout (none when zero), when ctx ends, or when
// the cluster is marked down, whichever comes first; its cause then says
// which. When the call is still running after the cluster's SlowCall delay,
// SlowCall is called, so that the cluster's health is checked now rather
// than at the next probe. Call the returned function when the call is done.
//
// With Options.MaxCallsInFlight, the call first waits for one of the
// cluster's slots, within its deadline: a cluster that answers slowly gets
// at most that many calls at once however many workers write to it, and a
// call that found no slot in time fails as a call that timed out would.
func (c *Cluster) CallContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	c.health.mu.Lock()
	abort, down := c.health.abort, c.health.down
	c.health.mu.Unlock()
	callCtx, cancel := context.WithCancelCause(ctx)
	if down != nil {
		cancel(down)
		return callCtx, func() {}
	}
	stopAbort := context.AfterFunc(abort, func() { cancel(context.Cause(abort)) })
	timed, cancelTimeout := context.Context(callCtx), context.CancelFunc(func() {})
	if timeout > 0 {
		timed, cancelTimeout = context.WithTimeout(callCtx, timeout)
	}
	end := func() {
		stopAbort()
		cancelTimeout()
		cancel(context.Canceled)
	}
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
		case <-timed.Done():
			return timed, end
		}
	}
	c.inFlight.Inc()
	var slow *time.Timer
	if c.opts.SlowCall != nil && c.opts.SlowCallAfter > 0 {
		slow = time.AfterFunc(c.opts.SlowCallAfter, c.opts.SlowCall)
	}
	var once sync.Once
	return timed, func() {
		once.Do(func() {
			c.inFlight.Dec()
			if c.slots != nil {
				<-c.slots
			}
			if slow != nil {
				slow.Stop()
			}
			end()
		})
	}
}

// CallError returns the error of a failed call made with CallContext: the
// cluster's unreachability when that is what aborted it, else err.
func CallError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if down, ok := context.Cause(ctx).(*ErrUnreachable); ok {
		return down
	}
	return err
}
