package shard_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/metrics"
	"github.com/fleetmirror/fleetmirror/pkg/shard"
)

// The start-up scenario's own namespaces and group, apart from
// TestShardedHub's; its mirrors are in mirrorNS, which the members audit.
const (
	startupSystemNS  = "startup-system"
	startupSecretsNS = "startup-clusters"
	startupSrcNS     = "startup-src"
	startupGroup     = "startup"
	startupSource    = "startup"
	startupMembers   = 6
	startupLease     = 6 * time.Second
)

// TestShardedHubStartUp is issue 27's scenario: the hub and six members,
// three replicas r1, r2, r3 started one right after the other on a slow hub API server
// (its Namespace lists take a second, so that the hub's own cluster is
// engaged read only, then served, before its first connection synced),
// one source in the hub targeting a namespace in every member. Every
// member gets its mirror and every update of it, the source gets its
// status, the split is the balanced one (3/2/2) at the first try (no
// replica hands a cluster over), and when a fourth replica takes the
// hub's own cluster and dies, the cluster goes back and is served
// again. The API servers' audit logs show every cluster written by one
// replica at a time, and each member written once per update.
func TestShardedHubStartUp(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	mems := fleet.Clusters()[1 : 1+startupMembers]
	all := []string{fleet.Hub.Name}
	for _, ns := range []string{startupSystemNS, startupSecretsNS, startupSrcNS} {
		Expect(fleet.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	for _, m := range mems {
		all = append(all, m.Name)
		if err := m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mirrorNS}}); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(fleettest.RegisterPlain(ctx, fleet.Hub.Client, startupSecretsNS, m, nil, nil)).To(Succeed())
	}
	flags := []string{"--namespace=" + startupSystemNS, "--cluster-secrets-namespace=" + startupSecretsNS,
		"--shard-group=" + startupGroup, "--shard-lease-duration=" + startupLease.String()}
	released := func() float64 { return reassignmentsOf("released") }
	releasedBefore := released()

	// Started together, as a Deployment's Pods are, each a moment after
	// the one before: once that one has written its Lease twice (created
	// it, then renewed it or claimed clusters), so that it saw itself
	// alone for a while, as the replica of the issue did.
	ids := []string{"r1", "r2", "r3"}
	for _, id := range ids {
		r := startReplica(t, id, true, flags...)
		// Slow at start-up only: the updates below are timed by the
		// members' mirrors, not by the hub's lists.
		defer r.slow.Store(false)
		key := client.ObjectKey{Namespace: startupSystemNS, Name: startupGroup + "-" + id}
		created := ""
		Eventually(func(g Gomega) {
			l := &coordinationv1.Lease{}
			g.Expect(fleet.Hub.Client.Get(ctx, key, l)).To(Succeed())
			if created == "" {
				created = l.ResourceVersion
			}
			g.Expect(l.ResourceVersion).NotTo(Equal(created))
		}).WithTimeout(30 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
	}
	want := shard.Assign(all, ids, shard.DefaultEpsilon)
	split := startupSplit(t, time.Minute, want, ids...)
	load := map[string]int{}
	for _, id := range split {
		load[id]++
	}
	Expect(slices.Sorted(maps.Values(load))).To(Equal([]int{2, 2, 3}), "the split %v", split)

	src := &corev1.Secret{ObjectMeta: fleettest.SourceMeta(startupSrcNS, startupSource, "member-*/"+mirrorNS), StringData: map[string]string{"v": "0"}}
	Expect(fleet.Hub.Client.Create(ctx, src)).To(Succeed())
	startupMirrorsHold(t, mems, 90*time.Second, "0")
	Eventually(func(g Gomega) {
		cur := &corev1.Secret{}
		g.Expect(fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(src), cur)).To(Succeed())
		g.Expect(cur.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, Not(BeEmpty())))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	const updates = 3
	for v := 1; v <= updates; v++ {
		setSource(src, fmt.Sprint(v))
		startupMirrorsHold(t, mems, 30*time.Second, fmt.Sprint(v))
	}
	Expect(released()).To(Equal(releasedBefore), "a replica handed a cluster over: the split flapped")

	// A fourth replica, named so that it takes the hub's own cluster,
	// takes it; killed, it gives it back.
	fourth, wantD := "", map[string]string(nil)
	for i := 4; fourth == ""; i++ {
		id := fmt.Sprintf("r%d", i)
		if wantD = shard.Assign(all, append(slices.Clone(ids), id), shard.DefaultEpsilon); wantD[fleet.Hub.Name] == id {
			fourth = id
		}
	}
	joined := time.Now()
	d := startReplica(t, fourth, false, flags...)
	startupSplit(t, time.Minute, wantD, append(slices.Clone(ids), fourth)...)
	setSource(src, "with-"+fourth)
	startupMirrorsHold(t, mems, 30*time.Second, "with-"+fourth)
	d.stop()
	startupSplit(t, 4*startupLease+10*time.Second, want, ids...)
	setSource(src, "last")
	startupMirrorsHold(t, mems, 30*time.Second, "last")

	// The audit logs. Before the fourth replica, each cluster was written
	// by its replica alone; after, by it, then at most by its replica of
	// the split of four (the fourth, or another one where the shares
	// changed) and by it again: never by two at once.
	for _, c := range all {
		ws := auditWrites(t, c, startupSource)
		var runs []string
		early := 0
		for _, w := range ws {
			if len(runs) == 0 || runs[len(runs)-1] != w.replica {
				runs = append(runs, w.replica)
			}
			if w.at.Before(joined) {
				early++
				Expect(w.replica).To(Equal(want[c]), "cluster %s written by %s at %s, before the fourth replica", c, w.replica, w.at.Format(time.RFC3339Nano))
			}
		}
		t.Logf("%s: writers %v, %d writes", c, runs, len(ws))
		Expect(early).To(BeNumerically(">", 0), "cluster %s", c)
		switch len(runs) {
		case 1:
		case 3:
			Expect(runs).To(Equal([]string{want[c], wantD[c], want[c]}), "cluster %s", c)
		default:
			t.Fatalf("cluster %s written by %v in turn", c, runs)
		}
		if c != fleet.Hub.Name {
			// Created, then written once for each of the updates+2
			// changes of the source.
			Expect(ws).To(HaveLen(updates+3), "writes of the mirror in %s", c)
		}
	}
}

// startupSplit waits until the replicas ids claim the clusters of the
// start-up scenario as want says, each once, and returns the split.
func startupSplit(t *testing.T, within time.Duration, want map[string]string, ids ...string) map[string]string {
	t.Helper()
	var got map[string]string
	EventuallyWithOffset(1, func(g Gomega) {
		got = owners(g, groupClaims(g, startupSystemNS, startupGroup, ids...))
		g.Expect(got).To(Equal(want))
	}).WithTimeout(within).WithPolling(100 * time.Millisecond).Should(Succeed())
	return got
}

// startupMirrorsHold waits until every member of mems has the start-up
// source's mirror with data v.
func startupMirrorsHold(t *testing.T, mems []*fleettest.Cluster, within time.Duration, v string) {
	t.Helper()
	for _, m := range mems {
		EventuallyWithOffset(1, func(g Gomega) {
			var s corev1.Secret
			g.Expect(m.Client.Get(context.Background(), client.ObjectKey{Namespace: mirrorNS, Name: startupSource}, &s)).To(Succeed())
			g.Expect(string(s.Data["v"])).To(Equal(v), "in %s", m.Name)
		}).WithTimeout(within).WithPolling(100 * time.Millisecond).Should(Succeed())
	}
}

// reassignmentsOf reads fleetmirror_hub_shard_reassignments_total of
// direction, summed over the replicas of the test process.
func reassignmentsOf(direction string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "fleetmirror_hub_shard_reassignments_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelOf(m, "direction") == direction {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
