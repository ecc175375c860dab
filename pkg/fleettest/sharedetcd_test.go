package fleettest_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// TestStartShared starts a hub and two members on one etcd and checks that
// they are clusters of their own: an object written to one is not in the
// others, a member's flags and environment are applied (its API server
// serves no apps group), a stopped member comes back with its objects,
// and Stop ends the etcd too.
func TestStartShared(t *testing.T) {
	skipIfShort(t)
	g := NewWithT(t)
	ctx := context.Background()
	dir := t.TempDir()
	var progress []int
	f, err := fleettest.StartShared(dir, fleettest.SharedOptions{
		MemberArgs: map[string]string{"runtime-config": "apps/v1=false"},
		MemberEnv:  []string{"GOGC=50"},
		Parallel:   2,
		Progress:   func(started, _ int) { progress = append(progress, started) },
	}, "member-1", "member-2")
	g.Expect(err).NotTo(HaveOccurred())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = f.Stop()
		}
	})
	g.Expect(progress).To(ConsistOf(1, 2, 3))

	etcdPID, err := f.EtcdPID()
	g.Expect(err).NotTo(HaveOccurred())
	pids := map[int]bool{etcdPID: true}
	for _, c := range f.Clusters() {
		g.Expect(c.KubeconfigPath).To(BeAnExistingFile())
		pid, err := c.APIServerPID()
		g.Expect(err).NotTo(HaveOccurred())
		pids[pid] = true
	}
	g.Expect(pids).To(HaveLen(4), "one etcd and three API servers")

	// The same name in every cluster, a different value in each.
	for _, c := range f.Clusters() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "whose"}, Data: map[string]string{"cluster": c.Name}}
		g.Expect(c.Client.Create(ctx, cm)).To(Succeed())
	}
	for _, c := range f.Clusters() {
		var cm corev1.ConfigMap
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "whose"}, &cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("cluster", c.Name))
	}

	// Member flags and environment; the hub keeps envtest's.
	hasApps := func(c *fleettest.Cluster) bool {
		groups, err := kubernetes.NewForConfigOrDie(c.Config).Discovery().ServerGroups()
		g.Expect(err).NotTo(HaveOccurred())
		for _, gr := range groups.Groups {
			if gr.Name == "apps" {
				return true
			}
		}
		return false
	}
	g.Expect(hasApps(f.Hub)).To(BeTrue())
	g.Expect(hasApps(f.Members[0])).To(BeFalse())
	pid, err := f.Members[0].APIServerPID()
	g.Expect(err).NotTo(HaveOccurred())
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Split(string(environ), "\x00")).To(ContainElement("GOGC=50"))

	// A stopped member is unreachable and comes back with its objects.
	m := f.Members[1]
	g.Expect(m.Stop()).To(Succeed())
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = m.Client.Get(short, client.ObjectKey{Namespace: "default", Name: "whose"}, &corev1.ConfigMap{})
	cancel()
	g.Expect(err).To(HaveOccurred())
	g.Expect(apierrors.IsNotFound(err)).To(BeFalse())
	g.Expect(m.Restart()).To(Succeed())
	var cm corev1.ConfigMap
	g.Expect(m.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "whose"}, &cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("cluster", m.Name))

	g.Expect(f.Stop()).To(Succeed())
	stopped = true
	for pid := range pids {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "process %d still runs after Stop", pid)
	}
	g.Expect(dir + "/member-1.kubeconfig").NotTo(BeAnExistingFile())
}
