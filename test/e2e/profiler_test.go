package e2e

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// bucketsMetric is the memory of the Go runtime's heap profiler: its table
// of sampled call stacks and one bucket per stack, which it never frees.
const bucketsMetric = "go_memstats_buck_hash_sys_bytes"

// The agents keep the Go heap profiler off unless they serve pprof: the
// member agent of member-a, started with --pprof-bind-address, records
// new call stacks as it mirrors, and member-b's, started without, records
// none while it does the same work.
func TestHeapProfiler(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	profiled, plain := members[memA.Name], members[memB.Name]
	clusters := []*fleettest.Cluster{memA, memB}
	mkNamespaces(t, "profiler-src", clusters...)
	mkNamespaces(t, "profiler-dst", clusters...)

	before := scrapeAll(g, profiled, plain)
	srcs := map[*fleettest.Cluster]*corev1.Secret{}
	for _, c := range clusters {
		src := &corev1.Secret{ObjectMeta: sourceMeta("profiler-src", "profiled", "profiler-dst"), StringData: map[string]string{"k": "0"}}
		g.Expect(c.Client.Create(ctx, src)).To(Succeed())
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), src) })
		srcs[c] = src
	}
	// Both agents mirror a changed source, at least minRounds times and
	// until the profiled one has sampled a call stack it had not before.
	// A round allocates about a megabyte in each agent (a 64 KiB value
	// read, built and written), and the profiler samples once in 512 KiB:
	// a profiler left on in member-b would record stacks too.
	const minRounds = 10
	round := 0
	g.Eventually(func(g Gomega) {
		round++
		value := fmt.Sprintf("%d:%s", round, strings.Repeat("x", 64<<10))
		for _, c := range clusters {
			change(t, c, srcs[c], func(src *corev1.Secret) { src.StringData = map[string]string{"k": value} })
			eventuallyExists(t, c, secret("profiler-dst", "profiled"), func(g Gomega, mirror *corev1.Secret) {
				g.Expect(string(mirror.Data["k"])).To(Equal(value))
			})
		}
		g.Expect(round).To(BeNumerically(">=", minRounds))
		now := scrapeAll(g, profiled)
		g.Expect(sample(now[profiled], bucketsMetric)).To(BeNumerically(">", sample(before[profiled], bucketsMetric)),
			"%s: heap profile buckets after %d rounds", profiled.name, round)
	}, timeout, poll).Should(Succeed())

	after := scrapeAll(g, plain)
	g.Expect(sample(after[plain], bucketsMetric)).To(Equal(sample(before[plain], bucketsMetric)),
		"%s has no pprof endpoint, yet its heap profiler recorded call stacks in %d rounds of mirroring", plain.name, round)
}

// The member agent runs its Go code on at most --max-procs CPUs, 2 by
// default: member-a runs with the default, member-b with --max-procs=1.
// The Go runtime reports what it runs with in go_sched_gomaxprocs_threads.
func TestMaxProcs(t *testing.T) {
	if v, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skipf("GOMAXPROCS=%s is set for the agents too, and wins over --max-procs", v)
	}
	g := NewWithT(t)
	const metric = "go_sched_gomaxprocs_threads"
	defaulted, limited := members[memA.Name], members[memB.Name]
	got := scrapeAll(g, defaulted, limited)
	g.Expect(sample(got[defaulted], metric)).To(Equal(float64(min(runtime.NumCPU(), 2))), "%s, default --max-procs", defaulted.name)
	g.Expect(sample(got[limited], metric)).To(Equal(1.0), "%s, --max-procs=1", limited.name)
}
