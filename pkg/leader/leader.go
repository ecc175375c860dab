package leader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
)

// ErrLost is wrapped by the error Run returns when leadership was lost: a
// renewal did not succeed within RenewDeadline, because the API server
// failed or another replica took the Lease.
var ErrLost = errors.New("leadership lost")

// jitterFactor spreads the tries of waiting replicas over up to 120% of
// RetryPeriod more, as client-go's JitterFactor does.
const jitterFactor = 1.2

// Config says which Lease to campaign for, as whom, and how fast. The
// durations mean what they mean in client-go's LeaderElectionConfig and
// are validated the same way: LeaseDuration > RenewDeadline >
// 1.2 × RetryPeriod > 0.
type Config struct {
	// Config reaches the API server that holds the Lease. Run copies it and
	// bounds each request to max(1s, RenewDeadline/2).
	Config *rest.Config
	// Namespace and Name name the Lease.
	Namespace, Name string
	// Identity is this replica's holderIdentity. It must be unique among
	// the replicas and among the restarts of one: callers pass the hostname,
	// "_" and a random suffix, as controller-runtime does, so that a
	// restarted replica does not take its predecessor's Lease for its own.
	Identity string
	// LeaseDuration is how long waiting replicas leave the Lease to its
	// holder after they last saw it change; at least a second, as the Lease
	// holds whole seconds (fractions are dropped, as client-go drops them).
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader tries to renew the Lease before
	// it gives up leadership.
	RenewDeadline time.Duration
	// RetryPeriod is the time between tries to acquire or renew the Lease.
	RetryPeriod time.Duration
	// ReleaseOnCancel makes the leader step down when Run's context ends,
	// after lead returned, so that another replica takes over at once
	// instead of after LeaseDuration.
	ReleaseOnCancel bool
	// DeleteOnRelease makes the leader delete the Lease where
	// ReleaseOnCancel steps down, when the Lease still names this replica
	// and has not changed since it was read: the last holder ever, the
	// agent's uninstall mode, leaves no Lease behind. When the delete is
	// refused (a Role without it), the leader steps down instead.
	DeleteOnRelease bool
	// OnChange, when set, is called with true when this replica starts
	// leading and with false when it stops; it must not block.
	OnChange func(leading bool)
}

// validate explains everything wrong with c at once.
func (c *Config) validate(lead func(context.Context)) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if c.Config == nil {
		add("no rest.Config")
	}
	for _, msg := range validation.IsDNS1123Label(c.Namespace) {
		add("namespace %q: %s", c.Namespace, msg)
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.Name) {
		add("name %q: %s", c.Name, msg)
	}
	if c.Identity == "" {
		add("empty identity")
	}
	if lead == nil {
		add("no lead function")
	}
	if c.LeaseDuration < time.Second {
		add("leaseDuration %s is less than 1s (the Lease holds whole seconds)", c.LeaseDuration)
	}
	if c.LeaseDuration <= c.RenewDeadline {
		add("leaseDuration %s must be greater than renewDeadline %s", c.LeaseDuration, c.RenewDeadline)
	}
	if c.RetryPeriod <= 0 {
		add("retryPeriod %s must be greater than zero", c.RetryPeriod)
	}
	if c.RenewDeadline <= time.Duration(jitterFactor*float64(c.RetryPeriod)) {
		add("renewDeadline %s must be greater than retryPeriod %s × %.1f", c.RenewDeadline, c.RetryPeriod, jitterFactor)
	}
	if c.DeleteOnRelease && !c.ReleaseOnCancel {
		add("deleteOnRelease without releaseOnCancel")
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid leader election config: %s", strings.Join(problems, "; "))
	}
	return nil
}

// Run campaigns for the Lease until ctx ends. While it leads it runs lead
// with a context that is cancelled when leadership ends; Run waits for lead
// to return before it releases the Lease or returns. It returns nil when
// ctx ended (the Lease released first if ReleaseOnCancel and this replica
// held it), an error wrapping ErrLost when leadership was lost, and
// another error, without contacting the API server, when cfg or lead is
// invalid. The package comment tells the whole contract.
//
// Run logs to the logger of ctx (logr.FromContextOrDiscard).
func Run(ctx context.Context, cfg Config, lead func(ctx context.Context)) error {
	if err := cfg.validate(lead); err != nil {
		return err
	}
	client, err := newLeaseClient(cfg.Config, cfg.Namespace, cfg.Name, cfg.RenewDeadline)
	if err != nil {
		return err
	}
	e := &elector{
		cfg:     cfg,
		client:  client,
		seconds: int32(min(cfg.LeaseDuration/time.Second, math.MaxInt32)), //nolint:gosec // bounded just before
		log:     logr.FromContextOrDiscard(ctx).WithValues("lease", client.String(), "identity", cfg.Identity),
	}
	if !e.acquire(ctx) {
		return nil
	}
	lost := e.lead(ctx, lead)
	// After a loss too, as client-go does: if the API server failed and
	// the Lease still names us, the next leader need not wait for it to
	// expire.
	if cfg.ReleaseOnCancel {
		e.release(ctx)
	}
	if ctx.Err() != nil {
		return nil
	}
	return lost
}

// elector is one campaign of Run: client-go's LeaderElector with a LeaseLock.
type elector struct {
	cfg     Config
	client  *leaseClient
	seconds int32 // leaseDurationSeconds of our records
	log     logr.Logger

	// What this replica knows of the Lease. One goroutine at a time uses
	// these fields: Run's while it acquires and releases, the renewing
	// goroutine in between; the hand-overs are channel operations.

	// lease is the Lease as last read or written; its resourceVersion goes
	// with the next write.
	lease *coordinationv1.Lease
	// observed is the Lease's record as last seen to change, and
	// observedAt when, on this replica's clock: a Lease expires
	// observed.seconds after observedAt, whatever times it holds.
	observed   record
	observedAt time.Time
	// reported is the holder last logged.
	reported string
}

// acquire tries to acquire the Lease every RetryPeriod, with jitter, until
// it holds it (true) or ctx ends (false): client-go's acquire, whose
// wait.JitterUntil(…, RetryPeriod, 1.2, sliding) waits as this loop does.
func (e *elector) acquire(ctx context.Context) bool {
	e.log.Info("Attempting to acquire lease")
	for ctx.Err() == nil {
		held, err := e.tryAcquireOrRenew(ctx)
		switch {
		case held:
			e.log.Info("Acquired lease")
			return true
		case err == nil || ctx.Err() != nil:
			// Another replica holds the Lease (observe logged it), or we
			// are shutting down.
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			e.log.V(1).Info("Another replica wrote the lease first", "error", err.Error())
		default:
			e.log.Info("Failed to acquire lease", "error", err.Error())
		}
		sleep(ctx, wait.Jitter(e.cfg.RetryPeriod, jitterFactor))
	}
	return false
}

// lead runs lead while the Lease is renewed, until leadership ends. It
// returns once lead has returned and renewing has stopped: an error
// wrapping ErrLost when leadership was lost, else nil (ctx ended).
func (e *elector) lead(ctx context.Context, lead func(context.Context)) error {
	e.changed(true)
	leadCtx, cancelLead := context.WithCancel(ctx)
	defer cancelLead()
	leadDone := make(chan struct{})
	go func() {
		defer close(leadDone)
		lead(leadCtx)
	}()

	// Renewing has a context of its own: when ctx ends, it goes on until
	// lead has wound down, so that no other replica starts meanwhile.
	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRenewing()
	renewed := make(chan error, 1)
	go func() { renewed <- e.renew(renewCtx) }()

	var err error
	select {
	case err = <-renewed:
		// Leadership is lost: another replica may be leading already.
		e.changed(false)
		cancelLead()
		<-leadDone
	case <-ctx.Done():
		cancelLead()
		<-leadDone
		stopRenewing()
		err = <-renewed // a loss while lead wound down; Run returns nil anyway
		e.changed(false)
	}
	if err != nil {
		return fmt.Errorf("%w: lease %s: %w", ErrLost, e.client, err)
	}
	return nil
}

// renew renews the Lease every RetryPeriod until ctx ends (nil) or a
// renewal did not succeed within RenewDeadline (the last failure): the
// loop of client-go's renew, wait.Until around wait.PollUntilContextTimeout.
func (e *elector) renew(ctx context.Context) error {
	for sleep(ctx, e.cfg.RetryPeriod) {
		err := e.renewWithin(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			e.log.Info("Lost lease", "error", err.Error())
			return err
		}
	}
	return nil
}

// renewWithin tries to renew the Lease every RetryPeriod until it succeeds
// (nil) or RenewDeadline has passed (the last failure). A try cut short by
// the deadline itself says nothing new: then the failure of the try before
// it is returned (on a loaded machine the last read of a Lease that another
// holder took would otherwise report only its own timeout).
func (e *elector) renewWithin(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	var last error
	for {
		held, err := e.tryAcquireOrRenew(ctx)
		if held {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("the lease is held by %q", e.observed.holder)
		}
		if ctx.Err() != nil && last != nil {
			return last
		}
		last = err
		if ctx.Err() == nil {
			e.log.Info("Failed to renew lease", "error", err.Error())
		}
		if !sleep(ctx, e.cfg.RetryPeriod) {
			return err
		}
	}
}

// tryAcquireOrRenew acquires the Lease, or renews it when this replica
// holds it, in client-go's steps. It reports whether this replica holds the
// Lease now; false with a nil error means that another replica holds it
// and it has not expired.
func (e *elector) tryAcquireOrRenew(ctx context.Context) (bool, error) {
	now := time.Now()
	id := e.cfg.Identity

	// 1. A leader whose record is current renews it at once, with the
	// resourceVersion of its last write; a failure (a conflict: someone
	// else wrote) falls through to reading the Lease.
	if e.lease != nil && e.observed.holder == id && !expired(e.observedAt, now, e.observed.seconds) {
		lease, err := e.client.update(ctx, e.lease, claim(e.observed, id, e.seconds, now))
		if err == nil {
			e.wrote(lease)
			return true, nil
		}
		e.log.V(1).Info("Failed to renew lease from its last version; reading it", "error", err.Error())
	}

	// 2. Read the Lease, or create it: the first holder counts no
	// transition.
	lease, err := e.client.get(ctx)
	if apierrors.IsNotFound(err) {
		first := record{holder: id, seconds: e.seconds, acquired: now, renewed: now}
		if lease, err = e.client.create(ctx, first); err != nil {
			return false, err
		}
		e.wrote(lease)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	e.lease = lease
	current := recordOf(&lease.Spec)
	e.observe(current)

	// 3. Another holder keeps the Lease until it has not changed for its
	// duration on our clock. An empty holder stepped down.
	if current.holder != "" && current.holder != id && !expired(e.observedAt, now, current.seconds) {
		return false, nil
	}

	// 4. Take the Lease over, or renew it. Another replica that wrote since
	// the read makes this a conflict.
	if lease, err = e.client.update(ctx, lease, claim(current, id, e.seconds, now)); err != nil {
		return false, err
	}
	e.wrote(lease)
	return true, nil
}

// wrote records the Lease as our write left it.
func (e *elector) wrote(lease *coordinationv1.Lease) {
	e.lease = lease
	e.observe(recordOf(&lease.Spec))
}

// observe notes r, the Lease's record as just read or written, and the
// time it changed; it logs a new holder other than this replica.
func (e *elector) observe(r record) {
	if !r.equal(e.observed) {
		e.observed, e.observedAt = r, time.Now()
	}
	if r.holder != e.reported {
		e.reported = r.holder
		if r.holder != "" && r.holder != e.cfg.Identity {
			e.log.Info("Lease is held by another replica", "holder", r.holder)
		}
	}
}

// release steps down, if the Lease still names this replica, by writing
// client-go's released record, or with DeleteOnRelease by deleting the
// Lease. ctx may have ended: the requests get RenewDeadline of their own.
// Failures are logged: the Lease then expires after its duration.
func (e *elector) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	lease, err := e.client.get(ctx)
	if err != nil {
		e.log.Info("Failed to release lease", "error", err.Error())
		return
	}
	current := recordOf(&lease.Spec)
	if current.holder != e.cfg.Identity {
		return // another replica took it over: nothing of ours to release
	}
	if e.cfg.DeleteOnRelease {
		// Conditional on the version that names us: a replica that took
		// the Lease over since keeps it (the delete is a conflict, and so
		// is the step down that follows).
		err := e.client.delete(ctx, lease)
		if err == nil || apierrors.IsNotFound(err) {
			e.log.Info("Deleted lease")
			return
		}
		e.log.Info("Failed to delete lease; stepping down instead", "error", err.Error())
	}
	if _, err := e.client.update(ctx, lease, released(current, time.Now())); err != nil {
		e.log.Info("Failed to release lease", "error", err.Error())
		return
	}
	e.log.Info("Released lease")
}

// changed tells OnChange that leadership started or ended.
func (e *elector) changed(leading bool) {
	if e.cfg.OnChange != nil {
		e.cfg.OnChange(leading)
	}
}

// sleep waits for d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
