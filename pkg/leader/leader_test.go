package leader_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/leader"
)

var fleet *fleettest.Fleet

func TestMain(m *testing.M) { fleettest.Main(m, &fleet) }

// The durations of most tests: short, so that a takeover takes seconds.
const (
	leaseDuration = 2 * time.Second
	renewDeadline = 1500 * time.Millisecond
	retryPeriod   = 200 * time.Millisecond
)

// leaseName is the Lease of every test, each in a namespace of its own.
const leaseName = "fleetmirror-member"

// serial numbers the namespaces and users of the tests (-count runs each
// test several times in one API server).
var serial atomic.Int32

// setup gives a test a fresh namespace and the Config of a candidate that
// may do there only what the charts' Role allows: create Leases, and get,
// update and delete the one Lease. A list or watch would be refused, and
// the candidate would never lead.
func setup(t *testing.T) leader.Config {
	t.Helper()
	if fleet == nil {
		t.Skip("needs an API server")
	}
	n := serial.Add(1)
	ns := fmt.Sprintf("leader-%d", n)
	user := fmt.Sprintf("leader-candidate-%d", n)
	ctx := context.Background()
	admin := fleet.Hub.Client
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader-election"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, Verbs: []string{"create"}},
				{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"}, ResourceNames: []string{leaseName}, Verbs: []string{"get", "update", "delete"}},
			},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader-election"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leader-election"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}},
		},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg, _, err := fleet.Hub.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	return leader.Config{
		Config:          cfg,
		Namespace:       ns,
		Name:            leaseName,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
	}
}

// getLease reads the test's Lease as the admin.
func getLease(g Gomega, cfg leader.Config) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{}
	g.Expect(fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Name}, lease)).To(Succeed())
	return lease
}

// holder is the Lease's holderIdentity, "" when unset.
func holder(lease *coordinationv1.Lease) string {
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// leads counts the lead functions running in a test, across candidates,
// and the most that ever ran at once. windDown is how long a lead takes to
// return once its context ended, like a controller finishing its work in
// flight.
type leads struct {
	running, most atomic.Int32
	windDown      atomic.Int64 // a time.Duration
}

func (l *leads) enter() {
	n := l.running.Add(1)
	for {
		m := l.most.Load()
		if n <= m || l.most.CompareAndSwap(m, n) {
			return
		}
	}
}

// candidate is one replica running leader.Run.
type candidate struct {
	identity string
	cancel   context.CancelFunc
	done     chan struct{}
	err      error // Run's result, once done is closed

	mu        sync.Mutex
	leading   bool      // lead is running
	startedAt time.Time // when lead last started
	changes   []bool    // OnChange's calls
}

// start runs a candidate as identity with cfg until the test ends. lead
// counts itself in all.
func start(t *testing.T, cfg leader.Config, identity string, all *leads) *candidate {
	c := &candidate{identity: identity, done: make(chan struct{})}
	cfg.Identity = identity
	cfg.OnChange = func(leading bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.changes = append(c.changes, leading)
	}
	log := testr.NewWithOptions(t, testr.Options{Verbosity: 1}).WithName(identity)
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.err = leader.Run(ctx, cfg, func(ctx context.Context) {
			all.enter()
			defer all.running.Add(-1)
			c.set(true)
			<-ctx.Done()
			time.Sleep(time.Duration(all.windDown.Load()))
			c.set(false)
		})
	}()
	t.Cleanup(func() { _ = c.stop() })
	return c
}

func (c *candidate) set(leading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading = leading
	if leading {
		c.startedAt = time.Now()
	}
}

// isLeading reports whether the candidate's lead is running.
func (c *candidate) isLeading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

func (c *candidate) leadStarted() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startedAt
}

func (c *candidate) onChanges() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bool(nil), c.changes...)
}

// returned reports whether Run returned.
func (c *candidate) returned() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop cancels Run's context and returns Run's result.
func (c *candidate) stop() error {
	c.cancel()
	<-c.done
	return c.err
}

// TestOneCandidate: a lone candidate creates the Lease, leads and renews
// it, and steps down when its context ends.
func TestOneCandidate(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	var all leads
	a := start(t, cfg, "a", &all)

	g.Eventually(a.isLeading, 10*time.Second).Should(BeTrue())
	g.Expect(a.onChanges()).To(Equal([]bool{true}))
	lease := getLease(g, cfg)
	g.Expect(holder(lease)).To(Equal("a"))
	g.Expect(*lease.Spec.LeaseDurationSeconds).To(BeEquivalentTo(2))
	g.Expect(*lease.Spec.LeaseTransitions).To(BeEquivalentTo(0))
	acquired, renewed := lease.Spec.AcquireTime.Time, lease.Spec.RenewTime.Time

	// It renews: renewTime moves, acquireTime stays.
	g.Eventually(func(g Gomega) {
		lease := getLease(g, cfg)
		g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", renewed))
		g.Expect(lease.Spec.AcquireTime.Time).To(BeTemporally("==", acquired))
		g.Expect(holder(lease)).To(Equal("a"))
	}, 5*time.Second).Should(Succeed())

	// Cancelled, it stops leading and releases the Lease as client-go does.
	g.Expect(a.stop()).To(Succeed())
	g.Expect(a.isLeading()).To(BeFalse())
	g.Expect(a.onChanges()).To(Equal([]bool{true, false}))
	lease = getLease(g, cfg)
	g.Expect(holder(lease)).To(BeEmpty())
	g.Expect(*lease.Spec.LeaseDurationSeconds).To(BeEquivalentTo(1))
	g.Expect(*lease.Spec.LeaseTransitions).To(BeEquivalentTo(0))
}

// TestDeleteOnRelease: with DeleteOnRelease, a candidate that steps down
// deletes the Lease instead (the uninstall mode, the last holder, leaves
// none behind); refused the delete, it steps down as without.
func TestDeleteOnRelease(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	cfg.DeleteOnRelease = true
	var all leads
	a := start(t, cfg, "a", &all)
	g.Eventually(a.isLeading, 10*time.Second).Should(BeTrue())
	g.Expect(a.stop()).To(Succeed())
	err := fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Name}, &coordinationv1.Lease{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Lease is still there: %v", err)

	// A Role without delete, as the charts' before: it steps down.
	role := &rbacv1.Role{}
	g.Expect(fleet.Hub.Client.Get(context.Background(), client.ObjectKey{Namespace: cfg.Namespace, Name: "leader-election"}, role)).To(Succeed())
	role.Rules[1].Verbs = []string{"get", "update"}
	g.Expect(fleet.Hub.Client.Update(context.Background(), role)).To(Succeed())
	b := start(t, cfg, "b", &all)
	g.Eventually(b.isLeading, 10*time.Second).Should(BeTrue())
	g.Expect(b.stop()).To(Succeed())
	g.Expect(holder(getLease(g, cfg))).To(BeEmpty(), "refused the delete, it did not step down")
}

// TestLeadReturnsEarly: a lead that returns on its own does not end
// leadership, as in client-go: the Lease is renewed until Run's context
// ends.
func TestLeadReturnsEarly(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	var changes []bool // OnChange runs in Run's goroutine, read after it returned
	cfg.Identity, cfg.OnChange = "a", func(leading bool) { changes = append(changes, leading) }
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), testr.New(t)))
	returned, done := make(chan struct{}), make(chan struct{})
	var err error // Run's result, once done is closed
	go func() {
		defer close(done)
		err = leader.Run(ctx, cfg, func(context.Context) { close(returned) })
	}()
	t.Cleanup(func() { cancel(); <-done })

	g.Eventually(returned, 10*time.Second).Should(BeClosed())
	renewed := getLease(g, cfg).Spec.RenewTime.Time
	g.Eventually(func() time.Time { return getLease(g, cfg).Spec.RenewTime.Time }, 2*cfg.LeaseDuration).
		Should(BeTemporally(">", renewed.Add(cfg.LeaseDuration)), "renewing stopped when lead returned")
	g.Expect(holder(getLease(g, cfg))).To(Equal("a"))
	g.Expect(done).NotTo(BeClosed())

	cancel()
	g.Eventually(done, 5*time.Second).Should(BeClosed())
	g.Expect(err).To(Succeed())
	g.Expect(changes).To(Equal([]bool{true, false}))
	g.Expect(holder(getLease(g, cfg))).To(BeEmpty())
}

// twoCandidates starts a and b and returns them once one of them leads:
// the leader first.
func twoCandidates(t *testing.T, g Gomega, cfg leader.Config, all *leads) (*candidate, *candidate) {
	a, b := start(t, cfg, "a", all), start(t, cfg, "b", all)
	g.Eventually(func() bool { return a.isLeading() || b.isLeading() }, 10*time.Second).Should(BeTrue())
	if b.isLeading() {
		a, b = b, a
	}
	// The other waits, and has seen the leader's renewals meanwhile.
	g.Consistently(b.isLeading, time.Second).Should(BeFalse())
	g.Expect(a.isLeading()).To(BeTrue())
	g.Expect(b.onChanges()).To(BeEmpty())
	return a, b
}

// TestTakeoverAfterRelease: of two candidates one leads; when it is
// cancelled it releases the Lease once its lead has returned, and the
// other takes over at its next try, long before the lease duration, one
// transition later. Their leads never overlap.
func TestTakeoverAfterRelease(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	// A long lease, so that a takeover by expiry cannot pass for one by
	// release.
	cfg.LeaseDuration, cfg.RenewDeadline = 10*time.Second, 8*time.Second
	var all leads
	// Leads take a while to return: the Lease is released only after.
	all.windDown.Store(int64(500 * time.Millisecond))
	first, second := twoCandidates(t, g, cfg, &all)
	g.Expect(*getLease(g, cfg).Spec.LeaseTransitions).To(BeEquivalentTo(0))

	g.Expect(first.stop()).To(Succeed())
	released := time.Now()
	g.Expect(first.onChanges()).To(Equal([]bool{true, false}))
	g.Eventually(second.isLeading, cfg.LeaseDuration).Should(BeTrue())
	g.Expect(second.leadStarted().Sub(released)).To(BeNumerically("<", cfg.LeaseDuration/4),
		"the second took over at its next try, not after the lease duration")
	lease := getLease(g, cfg)
	g.Expect(holder(lease)).To(Equal(second.identity))
	g.Expect(*lease.Spec.LeaseTransitions).To(BeEquivalentTo(1))
	g.Expect(*lease.Spec.LeaseDurationSeconds).To(BeEquivalentTo(10))

	g.Expect(second.stop()).To(Succeed())
	g.Expect(all.most.Load()).To(BeEquivalentTo(1), "two leads ran at once")
}

// TestTakeoverAfterCrash: a leader that stops renewing without releasing
// keeps the Lease for the lease duration after the waiting candidate last
// saw it change, measured on the waiter's clock; then the waiter takes
// over.
func TestTakeoverAfterCrash(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	cfg.ReleaseOnCancel = false
	var all leads
	first, second := twoCandidates(t, g, cfg, &all)

	g.Expect(first.stop()).To(Succeed())
	lease := getLease(g, cfg)
	g.Expect(holder(lease)).To(Equal(first.identity), "not released")
	lastRenewal := lease.Spec.RenewTime.Time

	g.Consistently(second.isLeading, cfg.LeaseDuration/2).Should(BeFalse())
	g.Eventually(second.isLeading, 10*time.Second).Should(BeTrue())
	// The second saw the last renewal after it was stamped, and waited the
	// lease duration since (one clock in this test).
	g.Expect(second.leadStarted().Sub(lastRenewal)).To(BeNumerically(">=", cfg.LeaseDuration))
	lease = getLease(g, cfg)
	g.Expect(holder(lease)).To(Equal(second.identity))
	g.Expect(*lease.Spec.LeaseTransitions).To(BeEquivalentTo(1))
	g.Expect(all.most.Load()).To(BeEquivalentTo(1), "two leads ran at once")
}

// TestHolderClockNotTrusted: a holder whose clock is an hour behind keeps
// renewing the Lease. A candidate that compared the Lease's times with its
// own clock would take it at once; ours sees it change and waits, and
// takes it over only a lease duration after the last change it saw.
func TestHolderClockNotTrusted(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	admin := fleet.Hub.Client
	skewed, seconds, past := "skewed", int32(2), metav1.NewMicroTime(time.Now().Add(-time.Hour))
	g.Expect(admin.Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &skewed, LeaseDurationSeconds: &seconds,
			AcquireTime: &past, RenewTime: &past},
	})).To(Succeed())

	// The skewed holder renews every 300ms, its times an hour behind. It
	// renews only a Lease that still names it: a renewal retried after a
	// conflict with the takeover would otherwise renew the new holder's
	// Lease and count as the skewed holder's last renewal.
	ctx, stopRenewing := context.WithCancel(context.Background())
	renewing := make(chan struct{})
	defer func() { stopRenewing(); <-renewing }()
	// The start and the answer of the skewed holder's last successful
	// renewal; read once renewing is closed. The answer is only reported:
	// the bound holds from the start.
	var lastRenewal, lastAnswer time.Time
	errTakenOver := errors.New("the Lease names another holder")
	go func() {
		defer close(renewing)
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
			started := time.Now()
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				lease := &coordinationv1.Lease{}
				if err := admin.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.Name}, lease); err != nil {
					return err
				}
				if holder(lease) != skewed {
					return errTakenOver
				}
				renewed := metav1.NewMicroTime(past.Add(time.Duration(i) * time.Millisecond))
				lease.Spec.RenewTime = &renewed
				return admin.Update(ctx, lease)
			})
			switch {
			case err == nil:
				lastRenewal, lastAnswer = started, time.Now()
			case errors.Is(err, errTakenOver):
				return // a took over; the checks below say whether too soon
			case ctx.Err() == nil:
				t.Errorf("renewing as the skewed holder: %v", err)
				return
			}
		}
	}()

	var all leads
	a := start(t, cfg, "a", &all)
	g.Consistently(a.isLeading, 2*cfg.LeaseDuration).Should(BeFalse())
	stopRenewing()
	<-renewing
	g.Eventually(a.isLeading, 10*time.Second).Should(BeTrue())
	g.Expect(a.leadStarted().Sub(lastRenewal)).To(BeNumerically(">=", cfg.LeaseDuration),
		"lead started %s after the last renewal's start, %s after its answer (renewal %s, answer %s, lead %s)",
		a.leadStarted().Sub(lastRenewal), a.leadStarted().Sub(lastAnswer),
		lastRenewal.Format(time.StampMicro), lastAnswer.Format(time.StampMicro), a.leadStarted().Format(time.StampMicro))
	lease := getLease(g, cfg)
	g.Expect(holder(lease)).To(Equal("a"))
	g.Expect(*lease.Spec.LeaseTransitions).To(BeEquivalentTo(1))
}

// TestRenewsWhileLeadWindsDown: when the leader's context ends, it keeps
// renewing the Lease until its lead has returned, however long that
// takes, so that no other replica leads meanwhile (controller-runtime's
// manager stops its runnables before it gives up the Lease, too).
func TestRenewsWhileLeadWindsDown(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	cfg.ReleaseOnCancel = false // the takeover waits for expiry
	windDown := 2 * cfg.LeaseDuration
	var all leads
	all.windDown.Store(int64(windDown))
	first, second := twoCandidates(t, g, cfg, &all)

	cancelled := time.Now()
	g.Expect(first.stop()).To(Succeed())
	g.Expect(time.Since(cancelled)).To(BeNumerically(">=", windDown), "Run returned before lead")
	all.windDown.Store(0)
	lease := getLease(g, cfg)
	g.Expect(holder(lease)).To(Equal(first.identity))
	lastRenewal := lease.Spec.RenewTime.Time
	g.Expect(lastRenewal).To(BeTemporally(">", cancelled.Add(windDown-cfg.LeaseDuration/2)), "stopped renewing while lead wound down")

	g.Eventually(second.isLeading, 10*time.Second).Should(BeTrue())
	g.Expect(second.leadStarted().Sub(lastRenewal)).To(BeNumerically(">=", cfg.LeaseDuration))
	g.Expect(all.most.Load()).To(BeEquivalentTo(1), "two leads ran at once")
}

// TestLostToAnotherWriter: when another writer takes the Lease, the leader
// fails to renew it for the renew deadline, then stops leading: lead's
// context ends, OnChange(false), and Run returns ErrLost without
// overwriting the new holder. It returns only once lead has returned.
func TestLostToAnotherWriter(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	cfg.DeleteOnRelease = true // nor is another holder's Lease deleted
	var all leads
	windDown := 300 * time.Millisecond
	all.windDown.Store(int64(windDown))
	a := start(t, cfg, "a", &all)
	g.Eventually(a.isLeading, 10*time.Second).Should(BeTrue())

	admin := fleet.Hub.Client
	taken := time.Now() // before the write: the leader cannot see it earlier
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease := getLease(g, cfg)
		intruder, seconds, now := "intruder", int32(60), metav1.NowMicro()
		lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &intruder, &seconds
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		return admin.Update(context.Background(), lease)
	})).To(Succeed())

	g.Eventually(a.returned, retryPeriod+renewDeadline+3*time.Second).Should(BeTrue())
	lostAfter := time.Since(taken)
	g.Expect(a.err).To(MatchError(leader.ErrLost))
	g.Expect(a.err.Error()).To(ContainSubstring(`held by "intruder"`))
	g.Expect(lostAfter).To(BeNumerically(">=", renewDeadline), "gave up before the renew deadline")
	g.Expect(lostAfter).To(BeNumerically("<", retryPeriod+renewDeadline+windDown+time.Second), "kept leading after the renew deadline")
	g.Expect(a.isLeading()).To(BeFalse(), "Run returned before lead")
	g.Expect(a.onChanges()).To(Equal([]bool{true, false}))
	g.Expect(holder(getLease(g, cfg))).To(Equal("intruder"), "the release overwrote another holder")
}

// TestLostWhenRenewalsFail: a leader whose renewals fail (here refused:
// its RoleBinding is gone) gives up leadership after the renew deadline.
func TestLostWhenRenewalsFail(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	var all leads
	a := start(t, cfg, "a", &all)
	g.Eventually(a.isLeading, 10*time.Second).Should(BeTrue())

	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: "leader-election"}}
	revoked := time.Now() // before the deletion: renewals cannot fail earlier
	g.Expect(fleet.Hub.Client.Delete(context.Background(), binding)).To(Succeed())

	g.Eventually(a.returned, retryPeriod+renewDeadline+5*time.Second).Should(BeTrue())
	g.Expect(time.Since(revoked)).To(BeNumerically(">=", renewDeadline), "gave up before the renew deadline")
	g.Expect(errors.Is(a.err, leader.ErrLost)).To(BeTrue(), "Run returned %v", a.err)
	g.Expect(strings.ToLower(a.err.Error())).To(ContainSubstring("forbidden"))
	g.Expect(a.isLeading()).To(BeFalse())
	g.Expect(a.onChanges()).To(Equal([]bool{true, false}))
	g.Expect(holder(getLease(g, cfg))).To(Equal("a"), "could not release")
}

// TestRenewalsAreNotRateLimited: the agent's client-side rate limit
// (--kube-api-qps) never holds back a renewal. With a limit of one
// request every 2 s, below the renewals' own pace, a limited lease client
// would miss the renew deadline and lose the lease.
func TestRenewalsAreNotRateLimited(t *testing.T) {
	g := NewWithT(t)
	cfg := setup(t)
	cfg.Config.QPS, cfg.Config.Burst = 0.5, 1
	var all leads
	a := start(t, cfg, "a", &all)
	g.Eventually(a.isLeading, 10*time.Second).Should(BeTrue())
	g.Consistently(a.isLeading, 3*leaseDuration, retryPeriod).Should(BeTrue(), "lost the lease: %v", a.err)
	g.Expect(a.onChanges()).To(Equal([]bool{true}))
}

// TestInvalidConfig: Run refuses a bad Config at once, saying what is
// wrong, as client-go's NewLeaderElector does.
func TestInvalidConfig(t *testing.T) {
	valid := leader.Config{
		Config:        &rest.Config{Host: "https://127.0.0.1:1"},
		Namespace:     "ns",
		Name:          "lease",
		Identity:      "me",
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
	}
	lead := func(context.Context) { t.Error("lead ran") }
	for _, tc := range []struct {
		name   string
		change func(*leader.Config)
		want   string
	}{
		{"no rest config", func(c *leader.Config) { c.Config = nil }, "no rest.Config"},
		{"no namespace", func(c *leader.Config) { c.Namespace = "" }, `namespace ""`},
		{"bad namespace", func(c *leader.Config) { c.Namespace = "Kube_System" }, `namespace "Kube_System"`},
		{"no name", func(c *leader.Config) { c.Name = "" }, `name ""`},
		{"no identity", func(c *leader.Config) { c.Identity = "" }, "empty identity"},
		{"lease shorter than renew deadline", func(c *leader.Config) { c.LeaseDuration = 10 * time.Second },
			"leaseDuration 10s must be greater than renewDeadline 10s"},
		{"lease under a second", func(c *leader.Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 900*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond
		}, "leaseDuration 900ms is less than 1s"},
		{"renew deadline within the jittered retry period", func(c *leader.Config) { c.RetryPeriod = 9 * time.Second },
			"renewDeadline 10s must be greater than retryPeriod 9s × 1.2"},
		{"no retry period", func(c *leader.Config) { c.RetryPeriod = 0 }, "retryPeriod 0s must be greater than zero"},
		{"delete without release", func(c *leader.Config) { c.DeleteOnRelease = true }, "deleteOnRelease without releaseOnCancel"},
	} {
		cfg := valid
		tc.change(&cfg)
		err := leader.Run(context.Background(), cfg, lead)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run = %v, want an error saying %q", tc.name, err, tc.want)
		}
		if errors.Is(err, leader.ErrLost) {
			t.Errorf("%s: a config error is ErrLost", tc.name)
		}
	}
	if err := leader.Run(context.Background(), valid, nil); err == nil || !strings.Contains(err.Error(), "no lead function") {
		t.Errorf("no lead: Run = %v", err)
	}
	// Everything wrong is said at once.
	err := leader.Run(context.Background(), leader.Config{}, lead)
	for _, want := range []string{"no rest.Config", `namespace ""`, `name ""`, "empty identity", "leaseDuration 0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("empty config: Run = %v, want it to say %q", err, want)
		}
	}
}
