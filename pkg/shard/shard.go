package shard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/fleet"
)

// Options configure one replica of a sharded hub.
type Options struct {
	// Config reaches the hub's own cluster, where the Leases are.
	Config *rest.Config
	// Namespace holds the Leases (the hub's namespace).
	Namespace string
	// Group names the replicas that share the clusters: the value of
	// LabelGroup on their Leases, and the prefix of their names.
	Group string
	// Identity names this replica among them (its Pod's name); its Lease
	// is Group-Identity.
	Identity string
	// LeaseDuration is how long a replica's Lease holds without renewal.
	// A replica renews every LeaseDuration/8, stops serving when it could
	// not renew for RenewDeadline(LeaseDuration), and the others take its
	// clusters once they have seen no renewal for LeaseDuration.
	LeaseDuration time.Duration
	// Epsilon is the load slack of Assign.
	Epsilon float64
}

// UserAgent is the user agent of a replica's requests to the clusters it
// serves.
func UserAgent(identity string) string { return "fleetmirror-hub-shard/" + identity }

// RenewDeadline is how long after the start of its last successful
// renewal a replica still serves clusters: two thirds of the lease
// duration. The last third is the fence's margin: the calls in flight when
// a replica stops are aborted then (fleet.ErrHandedOver), well before
// another replica, which waits a whole lease duration from the renewal it
// saw last, may start.
func RenewDeadline(leaseDuration time.Duration) time.Duration { return leaseDuration * 2 / 3 }

// Provider engages in the fleet the clusters of Inner that this replica
// holds, and the others as served elsewhere (or, the hub's own cluster,
// read only: every replica reads its sources). See the package comment.
type Provider struct {
	Options
	Inner fleet.Provider
}

// Run divides Inner's clusters with the other replicas until ctx ends.
func (p *Provider) Run(ctx context.Context, e fleet.Engager) error {
	client, err := newLeaseClient(p.Config, p.Namespace)
	if err != nil {
		return err
	}
	s := &sharder{
		opts:   p.Options,
		inner:  p.Inner,
		e:      e,
		regs:   map[string]*registration{},
		held:   map[string]*held{},
		claims: map[string]bool{},
		kick:   make(chan struct{}, 1),
		renewC: make(chan struct{}, 1),
		left:   make(chan leftEngagement, 16),
		retry:  p.LeaseDuration / 8,
		settle: p.LeaseDuration / 4,
		renewD: RenewDeadline(p.LeaseDuration),
	}
	s.leases = newLeases(client, p.Group, p.Identity, p.LeaseDuration, s.trigger)
	return s.run(logf.IntoContext(ctx, logf.FromContext(ctx).WithName("shard").WithValues("replica", p.Identity)))
}

// registration is one cluster as Inner engaged it.
type registration struct {
	spec fleet.Spec
	ctx  context.Context
}

// state is where this replica stands with one registered cluster.
type state int

const (
	// idle: another replica serves it (or nobody yet); engaged as served
	// elsewhere, or read only for the hub's own cluster.
	idle state = iota
	// claimed: assigned here and claimed in the Lease; served once this
	// replica has seen its own claim and no live replica claims it too.
	claimed
	// serving: engaged for writing.
	serving
	// releasing: handed over or unregistered; claimed until its
	// engagement is torn down.
	releasing
)

// held is one registered cluster, as the loop sees it.
type held struct {
	state  state
	reg    *registration // what the current engagement was made from
	cancel context.CancelCauseFunc
	gen    int // of the current engagement, to tell its Left from older ones
}

type leftEngagement struct {
	name string
	gen  int
}

// sharder is one run of a Provider. The loop owns held and claims' writes;
// mu guards what other goroutines touch.
type sharder struct {
	opts   Options
	inner  fleet.Provider
	e      fleet.Engager
	leases *leases
	retry  time.Duration
	renewD time.Duration
	settle time.Duration

	mu          sync.Mutex
	regs        map[string]*registration
	innerListed bool
	claims      map[string]bool

	held   map[string]*held
	gen    int
	listed bool

	kick   chan struct{}
	renewC chan struct{}
	left   chan leftEngagement
	done   <-chan struct{} // run's context's
}

func (s *sharder) trigger() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *sharder) renewNow() {
	select {
	case s.renewC <- struct{}{}:
	default:
	}
}

func (s *sharder) run(ctx context.Context) error {
	s.done = ctx.Done()
	inf := s.leases.watch(ctx)
	go s.renew(ctx)
	innerDone := make(chan error, 1)
	go func() { innerDone <- s.inner.Run(ctx, registry{s}) }()
	tick := time.NewTicker(s.retry)
	defer tick.Stop()
	fence := time.NewTimer(s.renewD)
	defer fence.Stop()
	rounds := 0
	for {
		select {
		case <-ctx.Done():
			// The fleet closes every connection when its provider returns.
			// The Lease is left to expire: the others take over after a
			// lease duration, once this replica's writes have surely ended.
			return nil
		case err := <-innerDone:
			if err != nil {
				return err
			}
			innerDone = nil
		case <-s.kick:
		case l := <-s.left:
			s.engagementLeft(ctx, l)
		case <-fence.C:
		case <-tick.C:
			if rounds++; rounds%64 == 0 {
				s.leases.collect(ctx)
			}
		}
		if !inf.HasSynced() {
			continue
		}
		s.step(ctx)
		// Wake up when the Lease goes stale, to stop serving right then.
		fence.Reset(max(time.Until(s.leases.freshUntil(s.renewD)), 0) + time.Millisecond)
	}
}

// renew keeps this replica's Lease renewed with its claims.
func (s *sharder) renew(ctx context.Context) {
	log := logf.FromContext(ctx)
	for {
		s.mu.Lock()
		claims := slices.Sorted(maps.Keys(s.claims))
		s.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, s.renewD)
		err := s.leases.renew(rctx, claims)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Info("Cannot renew the shard Lease", "error", err.Error())
		}
		s.trigger()
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.retry):
		case <-s.renewC:
		}
	}
}

// step brings the engagements in line with the assignment of the
// registered clusters over the live replicas.
func (s *sharder) step(ctx context.Context) {
	log := logf.FromContext(ctx)
	fresh := s.leases.fresh(s.renewD)
	// The split is made over the replicas live for settle at least, this
	// one included, and no cluster is claimed anew while a replica is
	// still settling: replicas that start together do not divide the
	// clusters among the first of them to be seen and then again.
	live, settling := s.leases.settled(s.settle)
	if !fresh {
		live = slices.DeleteFunc(live, func(id string) bool { return id == s.opts.Identity })
	}
	leaseFresh.Set(b2f(fresh))
	liveReplicas.Set(float64(len(live)))
	s.mu.Lock()
	regs := maps.Clone(s.regs)
	innerListed := s.innerListed
	s.mu.Unlock()
	assigned := Assign(slices.Collect(maps.Keys(regs)), live, s.opts.Epsilon)
	checked := silentChecked{}
	for _, name := range slices.Sorted(maps.Keys(regs)) {
		reg := regs[name]
		h := s.held[name]
		if h == nil {
			h = &held{}
			s.held[name] = h
			s.engageIdle(ctx, name, reg, h)
		}
		want := fresh && assigned[name] == s.opts.Identity
		switch h.state {
		case idle:
			if h.reg != reg { // registered again: the old engagement ended with it
				s.engageIdle(ctx, name, reg, h)
			}
			if want && !settling && !s.leases.claimedByOther(ctx, name, checked) {
				h.state = claimed
				s.claim(name, true)
			}
		case claimed:
			switch {
			case !want:
				h.state = idle
				s.claim(name, false)
			case s.leases.seenOwnClaim(name) && !s.leases.claimedByOther(ctx, name, checked):
				s.serve(ctx, name, reg, h)
			}
		case serving:
			switch {
			case !want:
				log.Info("Handing the cluster over", "cluster", name, "fresh", fresh)
				s.release(ctx, name, h)
			case h.reg != reg: // registered again, with new credentials
				s.serve(ctx, name, reg, h)
			}
		case releasing:
		}
	}
	for name, h := range s.held {
		if _, ok := regs[name]; ok {
			continue
		}
		switch h.state { // unregistered: its engagement ends with its registration
		case serving:
			h.state = releasing // its Left tells when it is torn down
		case idle, claimed:
			s.claim(name, false)
			delete(s.held, name)
		case releasing:
		}
	}
	n := 0
	for _, h := range s.held {
		if h.state == serving {
			n++
		}
	}
	servedClusters.Set(float64(n))
	if !s.listed && innerListed {
		s.listed = true
		s.e.Listed()
	}
}

// claim adds or withdraws a claim in the Lease, written at once.
func (s *sharder) claim(name string, on bool) {
	s.mu.Lock()
	if on {
		s.claims[name] = true
	} else {
		delete(s.claims, name)
	}
	s.mu.Unlock()
	s.renewNow()
}

// engagement returns a context for an engagement of reg and the Spec to
// engage, whose Left tells the loop.
func (s *sharder) engagement(name string, reg *registration, h *held) (context.Context, fleet.Spec) {
	if h.cancel != nil {
		h.cancel(nil)
	}
	ctx, cancel := context.WithCancelCause(reg.ctx)
	s.gen++
	gen := s.gen
	spec := s.specOf(reg)
	spec.Left = func() {
		select {
		case s.left <- leftEngagement{name, gen}:
		case <-s.done: // shutting down
		}
	}
	h.reg, h.cancel, h.gen = reg, cancel, gen
	return ctx, spec
}

// engageIdle engages a cluster another replica serves: as served
// elsewhere, or read only for the hub's own cluster.
func (s *sharder) engageIdle(ctx context.Context, name string, reg *registration, h *held) {
	if h.cancel != nil && reg.spec.Local {
		h.cancel(fleet.ErrReplaced) // a writable engagement ends at once
		h.cancel = nil
	}
	// The first engagement has no connection to wait for: the fleet knows
	// the cluster before this replica tells it that it listed them all.
	first := h.gen == 0
	ectx, spec := s.engagement(name, reg, h)
	if spec.Local {
		spec.ReadOnly = true
	} else {
		spec.Elsewhere = true
	}
	s.engage(ctx, ectx, spec, h.cancel, spec.Local && !first)
}

// serve engages a cluster for writing.
func (s *sharder) serve(ctx context.Context, name string, reg *registration, h *held) {
	if h.cancel != nil && reg.spec.Local {
		h.cancel(fleet.ErrReplaced) // the read-only engagement: no series dropped
		h.cancel = nil
	}
	ectx, spec := s.engagement(name, reg, h)
	// The replica's name in its requests' user agent: API server audit
	// logs tell the replicas' writes apart.
	spec.Config = rest.CopyConfig(spec.Config)
	spec.Config.UserAgent = UserAgent(s.opts.Identity)
	logf.FromContext(ctx).Info("Serving the cluster", "cluster", name)
	h.state = serving
	reassignments.WithLabelValues("acquired").Inc()
	s.engage(ctx, ectx, spec, h.cancel, spec.Local)
}

// release hands a served cluster over: its engagement ends with
// fleet.ErrHandedOver, which aborts the calls in flight; the claim is
// withdrawn once it is torn down (engagementLeft).
func (s *sharder) release(ctx context.Context, name string, h *held) {
	h.cancel(fleet.ErrHandedOver)
	h.state = releasing
	reassignments.WithLabelValues("released").Inc()
	// Registered still, it is engaged again at once: as served elsewhere,
	// or, the hub's own cluster, read only, which the fleet connects as
	// soon as the served connection is torn down. So the fleet never has
	// the name unknown, and the hub's sources are never left unwatched
	// (it was engaged read only only once torn down, from the loop, which
	// a quick hand-back could overtake). h.gen stays that of the
	// engagement torn down.
	ectx, cancel := context.WithCancelCause(h.reg.ctx)
	spec := s.specOf(h.reg)
	if spec.Local {
		spec.ReadOnly = true
	} else {
		spec.Elsewhere = true
	}
	h.cancel = cancel
	s.engage(ctx, ectx, spec, cancel, spec.Local)
}

// specOf is the Spec of reg, read under the lock Relabel takes.
func (s *sharder) specOf(reg *registration) fleet.Spec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return reg.spec
}

// engage engages spec in the fleet. Engaging a cluster whose previous
// connection is still being torn down waits for it, so the hub's own
// cluster, which is engaged again on every change of role, is engaged in
// the background then.
func (s *sharder) engage(ctx context.Context, ectx context.Context, spec fleet.Spec, cancel context.CancelCauseFunc, background bool) {
	do := func() {
		if err := s.e.Engage(ectx, spec); err != nil && ectx.Err() == nil {
			logf.FromContext(ctx).Error(err, "Cannot engage the cluster", "cluster", spec.Name)
			if cancel != nil {
				cancel(nil)
			}
		}
	}
	if background {
		go do()
		return
	}
	do()
}

// engagementLeft is told that an engagement was torn down. One that was
// being released has its claim withdrawn now.
func (s *sharder) engagementLeft(ctx context.Context, l leftEngagement) {
	h := s.held[l.name]
	if h == nil || h.gen != l.gen || h.state != releasing {
		return
	}
	logf.FromContext(ctx).Info("Handed the cluster over", "cluster", l.name)
	h.state = idle
	s.claim(l.name, false)
	s.mu.Lock()
	_, registered := s.regs[l.name]
	s.mu.Unlock()
	if !registered {
		delete(s.held, l.name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// registry is the Engager Inner sees: it records the registered clusters
// and leaves engaging them to the loop.
type registry struct{ s *sharder }

func (r registry) Engage(ctx context.Context, spec fleet.Spec) error {
	s := r.s
	s.mu.Lock()
	if old, ok := s.regs[spec.Name]; ok && old.ctx.Err() == nil {
		s.mu.Unlock()
		return fmt.Errorf("cluster %s is engaged already", spec.Name)
	}
	reg := &registration{spec: spec, ctx: ctx}
	s.regs[spec.Name] = reg
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		if s.regs[spec.Name] == reg {
			delete(s.regs, spec.Name)
		}
		s.mu.Unlock()
		s.trigger()
	})
	s.trigger()
	return nil
}

func (r registry) Relabel(name string, labels map[string]string) {
	s := r.s
	s.mu.Lock()
	if reg, ok := s.regs[name]; ok {
		reg.spec.Labels = labels // engagements made later carry them
	}
	s.mu.Unlock()
	s.e.Relabel(name, labels)
}

func (r registry) Listed() {
	r.s.mu.Lock()
	r.s.innerListed = true
	r.s.mu.Unlock()
	r.s.trigger()
}
