package shard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/shard"
)

const (
	systemNS  = "fleetmirror-system"
	secretsNS = "clusters"
	srcNS     = "src"
	mirrorNS  = "mirrors"
	members   = 12
	// leaseDuration is short, so that a takeover takes seconds.
	leaseDuration = 3 * time.Second
	group         = "fleetmirror-hub"
)

var (
	fleet    *fleettest.Fleet
	auditDir string
)

// auditPolicy records the writes of Secrets in the mirrors' namespace and,
// in the hub, the sources' of TestShardedHubStartUp (their status), with
// the user agent that tells the hub replicas apart.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources: [{group: "", resources: ["secrets"]}]
  verbs: ["create", "update", "patch", "delete"]
  namespaces: ["` + mirrorNS + `", "` + startupSrcNS + `"]
- level: None
`

func TestMain(m *testing.M) {
	fleettest.SetLogger()
	code := func() int {
		if _, err := fleettest.Assets(); err != nil {
			fmt.Fprintln(os.Stderr, "skipping the shard suite:", err)
			return 0
		}
		var err error
		if auditDir, err = os.MkdirTemp("", "shard-audit-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(auditDir)
		policy := filepath.Join(auditDir, "policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		names := make([]string, members)
		for i := range names {
			names[i] = fmt.Sprintf("member-%02d", i)
		}
		audit := map[string]string{
			"audit-policy-file": policy,
			"audit-log-path":    filepath.Join(auditDir, "{cluster}.log"),
		}
		fleet, err = fleettest.StartShared("", fleettest.SharedOptions{MemberArgs: audit, HubArgs: audit}, names...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			if err := fleet.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}

// replica is one hub replica running in the test process, with clients
// and an identity of its own.
type replica struct {
	id     string
	cancel context.CancelFunc
	done   chan error
	// leasesCut, when set, fails the replica's requests for Leases: it
	// loses its own while it still reads the hub's sources and reaches
	// the members, which is what fencing must stop.
	leasesCut atomic.Bool
	// slow, when set, holds each list and watch of Namespaces for
	// slowNamespaces first: a connection to the hub takes that long to
	// sync, as on a loaded hub API server.
	slow atomic.Bool
}

// slowNamespaces is how long a slow replica's Namespace lists wait.
const slowNamespaces = time.Second

// leaseFault fails the requests for Leases while cut is set, and holds
// those for Namespaces while slow is.
type leaseFault struct {
	next      http.RoundTripper
	cut, slow *atomic.Bool
}

func (f leaseFault) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.cut.Load() && strings.Contains(r.URL.Path, "/apis/coordination.k8s.io/") {
		return nil, errors.New("leases cut off by the test")
	}
	if f.slow.Load() && r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces" {
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(slowNamespaces):
		}
	}
	return f.next.RoundTrip(r)
}

// WrappedRoundTripper lets client-go see through the fault.
func (f leaseFault) WrappedRoundTripper() http.RoundTripper { return f.next }

// startReplica starts the replica id, with flags that override the
// defaults; slow sets its slow from the start.
func startReplica(t *testing.T, id string, slow bool, flags ...string) *replica {
	t.Helper()
	o, err := hub.ParseOptions(append([]string{
		"--cluster-name=hub", "--namespace=" + systemNS, "--cluster-secrets-namespace=" + secretsNS,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--resync-period=0",
		"--cluster-probe-interval=300ms", "--cluster-probe-timeout=1s", "--api-call-timeout=5s",
		"--resource-types=Secret.v1", "--leader-elect=false",
		"--shards=auto", "--shard-id=" + id, "--shard-lease-duration=" + leaseDuration.String(),
	}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{id: id, done: make(chan error, 1)}
	r.slow.Store(slow)
	cfg := rest.CopyConfig(fleet.Hub.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return leaseFault{next: rt, cut: &r.leasesCut, slow: &r.slow}
	})
	o.RESTConfig = cfg
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- hub.Run(ctx, o) }()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() {
	if r.cancel != nil {
		fleettest.StopInProcess(r.id, r.cancel, r.done)
		r.cancel = nil
	}
}

// claims reads the claims of the replicas ids from their Leases (one cut
// off from the hub's API server cannot withdraw its own).
func claims(g Gomega, ids ...string) map[string][]string {
	return groupClaims(g, systemNS, group, ids...)
}

// groupClaims is claims of the group grp, whose Leases are in ns.
func groupClaims(g Gomega, ns, grp string, ids ...string) map[string][]string {
	var list coordinationv1.LeaseList
	g.Expect(fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{shard.LabelGroup: grp})).To(Succeed())
	out := map[string][]string{}
	for _, l := range list.Items {
		if v := l.Annotations[shard.AnnotationClaims]; v != "" && slices.Contains(ids, *l.Spec.HolderIdentity) {
			out[*l.Spec.HolderIdentity] = strings.Split(v, ",")
		}
	}
	return out
}

// owners maps each claimed cluster to its replica, failing on a cluster
// claimed twice.
func owners(g Gomega, of map[string][]string) map[string]string {
	out := map[string]string{}
	for id, cs := range of {
		for _, c := range cs {
			g.Expect(out).NotTo(HaveKey(c), "cluster %s claimed by %s and %s", c, out[c], id)
			out[c] = id
		}
	}
	return out
}

// settled waits until the replicas ids claim every cluster, each one
// once, and returns who claims what.
func settled(t *testing.T, within time.Duration, ids ...string) map[string]string {
	t.Helper()
	var got map[string]string
	EventuallyWithOffset(1, func(g Gomega) {
		c := claims(g, ids...)
		g.Expect(slices.Sorted(maps.Keys(c))).To(Equal(slices.Sorted(slices.Values(ids))))
		got = owners(g, c)
		g.Expect(got).To(HaveLen(members + 1)) // and the hub's own cluster
	}).WithTimeout(within).WithPolling(100 * time.Millisecond).Should(Succeed())
	return got
}

// setSource writes v into the source, retrying on conflicts with the
// hub's own writes to it.
func setSource(src *corev1.Secret, v string) {
	ctx := context.Background()
	EventuallyWithOffset(1, func() error {
		cur := &corev1.Secret{}
		if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(src), cur); err != nil {
			return err
		}
		cur.StringData = map[string]string{"v": v}
		return fleet.Hub.Client.Update(ctx, cur)
	}).Should(Succeed())
}

// mirrorsHold waits until every member has the mirror with data v.
func mirrorsHold(t *testing.T, within time.Duration, v string) {
	t.Helper()
	for _, m := range fleet.Clusters()[1:] {
		EventuallyWithOffset(1, func(g Gomega) {
			var s corev1.Secret
			g.Expect(m.Client.Get(context.Background(), client.ObjectKey{Namespace: mirrorNS, Name: "shared"}, &s)).To(Succeed())
			g.Expect(string(s.Data["v"])).To(Equal(v), "in %s", m.Name)
		}).WithTimeout(within).WithPolling(100 * time.Millisecond).Should(Succeed())
	}
}

// TestShardedHub runs three hub replicas over twelve members: they divide
// the clusters, a replica cut off from the hub's API server stops writing
// and its clusters are served again by the others within two lease
// durations, no mirror is lost, a fourth replica takes about a quarter of
// the clusters, and no mirror is ever written by two replicas in the same
// period (the members' audit logs).
func TestShardedHub(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	for _, c := range fleet.Clusters() {
		for _, ns := range []string{systemNS, secretsNS, srcNS, mirrorNS} {
			Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		if c != fleet.Hub {
			Expect(fleettest.RegisterPlain(ctx, fleet.Hub.Client, secretsNS, c, nil, nil)).To(Succeed())
		}
	}
	a, b, c := startReplica(t, "hub-a", false), startReplica(t, "hub-b", false), startReplica(t, "hub-c", false)
	three := settled(t, time.Minute, a.id, b.id, c.id)
	t.Logf("three replicas: %v", three)

	src := &corev1.Secret{ObjectMeta: fleettest.SourceMeta(srcNS, "shared", "member-*/"+mirrorNS), StringData: map[string]string{"v": "0"}}
	Expect(fleet.Hub.Client.Create(ctx, src)).To(Succeed())
	mirrorsHold(t, time.Minute, "0")

	// Keep the source changing, so that every replica writes all along.
	stopWrites := make(chan struct{})
	writes := make(chan int)
	go func() {
		n := 0
		defer func() { writes <- n }()
		for {
			select {
			case <-stopWrites:
				return
			case <-time.After(200 * time.Millisecond):
			}
			n++
			cur := &corev1.Secret{}
			if fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(src), cur) == nil {
				cur.StringData = map[string]string{"v": fmt.Sprint(n)}
				_ = fleet.Hub.Client.Update(ctx, cur)
			}
		}
	}()

	// hub-c loses its Lease: it cannot renew, so it must stop writing to
	// its members, which it still reaches, while it still sees the source
	// change; the others take its clusters over once they have seen no
	// renewal for a lease duration.
	cut := time.Now()
	c.leasesCut.Store(true)
	two := settled(t, 4*leaseDuration+10*time.Second, a.id, b.id)
	takeover := time.Since(cut)
	t.Logf("hub-c cut off; its clusters claimed again after %s: %v", takeover.Round(time.Millisecond), two)
	for cl, was := range three {
		if was != c.id {
			Expect(two[cl]).To(Equal(was), "cluster %s of a live replica moved", cl)
		}
	}
	close(stopWrites)
	n := <-writes
	final := fmt.Sprint(n + 1)
	setSource(src, final)
	mirrorsHold(t, 30*time.Second, final)
	t.Logf("every mirror holds %s %s after the cut", final, time.Since(cut).Round(time.Millisecond))
	c.stop()

	// A fourth replica takes about a quarter of the clusters, all from
	// the others, and nothing else moves.
	d := startReplica(t, "hub-d", false)
	withD := settled(t, time.Minute, a.id, b.id, d.id)
	moved := 0
	for cl, was := range two {
		if withD[cl] != was {
			moved++
			Expect(withD[cl]).To(Equal(d.id), "cluster %s moved between old replicas", cl)
		}
	}
	fair := float64(members+1) / 3
	Expect(float64(moved)).To(BeNumerically("<=", math.Ceil(1.5*fair)), "clusters moved to the new replica")
	Expect(moved).To(BeNumerically(">", 0))
	setSource(src, "last")
	mirrorsHold(t, 30*time.Second, "last")

	// hub-a dies (stopped without giving its Lease back, as a killed
	// process would): its clusters are served again by the other two.
	killed := time.Now()
	a.stop()
	survivors := settled(t, 4*leaseDuration+10*time.Second, b.id, d.id)
	t.Logf("hub-a killed; its clusters claimed again after %s: %v", time.Since(killed).Round(time.Millisecond), survivors)
	for cl, was := range withD {
		if was != a.id {
			Expect(survivors[cl]).To(Equal(was), "cluster %s of a live replica moved", cl)
		}
	}
	setSource(src, "after-kill")
	mirrorsHold(t, 30*time.Second, "after-kill")

	// The members' audit logs: per cluster, the writes of each replica form
	// one run, which no write of another replica interrupts.
	total := 0
	for _, m := range fleet.Clusters()[1:] {
		ws := auditWrites(t, m.Name, "shared")
		total += len(ws)
		var runs []string
		for _, w := range ws {
			if len(runs) == 0 || runs[len(runs)-1] != w.replica {
				Expect(runs).NotTo(ContainElement(w.replica), "cluster %s: %s wrote again at %s after another replica wrote (runs %v)",
					m.Name, w.replica, w.at.Format(time.RFC3339Nano), runs)
				runs = append(runs, w.replica)
			}
		}
		t.Logf("%s: writers %v, %d writes", m.Name, runs, len(ws))
	}
	Expect(total).To(BeNumerically(">", members*3))
}

type auditWrite struct {
	replica string
	at      time.Time
}

// auditWrites reads the successful writes of the Secrets named name in
// cluster's audit log, in the order the API server completed them.
func auditWrites(t *testing.T, cluster, name string) []auditWrite {
	t.Helper()
	f, err := os.Open(filepath.Join(auditDir, cluster+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage          string    `json:"stage"`
			UserAgent      string    `json:"userAgent"`
			StageTimestamp time.Time `json:"stageTimestamp"`
			ObjectRef      struct{ Name string }
			ResponseStatus struct{ Code int }
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		id, ok := strings.CutPrefix(ev.UserAgent, shard.UserAgent(""))
		if !ok || ev.Stage != "ResponseComplete" || ev.ObjectRef.Name != name || ev.ResponseStatus.Code >= 300 {
			continue
		}
		out = append(out, auditWrite{replica: id, at: ev.StageTimestamp})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}
