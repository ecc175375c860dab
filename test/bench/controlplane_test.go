package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// The control-plane CPU of a real API server is found by its flags: its
// kube-apiserver and its etcd, each counted once when clusters share them,
// and it grows with the work the API server is given.
func TestControlPlaneCPU(t *testing.T) {
	g := NewWithT(t)
	fleet, ctx := fleettest.APIServer(t)
	c, err := newCluster("one", fleet.Hub)
	g.Expect(err).NotTo(HaveOccurred())
	before, err := controlPlaneCPU([]*cluster{c})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before).To(BeNumerically(">", 0))
	pids := c.controlPlanePids
	g.Expect(pids).To(HaveLen(2), "kube-apiserver and etcd")
	var names []string
	for _, pid := range pids {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		g.Expect(err).NotTo(HaveOccurred())
		names = append(names, filepath.Base(exe))
	}
	g.Expect(names).To(ConsistOf("kube-apiserver", "etcd"))

	for i := range 200 {
		_, err := c.cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	after, err := controlPlaneCPU([]*cluster{c})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(BeNumerically(">", before))
	alias, err := newCluster("alias", fleet.Hub) // another registered cluster on the same API server
	g.Expect(err).NotTo(HaveOccurred())
	twice, err := controlPlaneCPU([]*cluster{c, alias})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(twice).To(BeNumerically("<", 1.5*after), "a process shared by two clusters counted once")

	noServer := rest.CopyConfig(fleet.Hub.Config)
	noServer.Host = "https://127.0.0.1:1"
	_, err = controlPlaneCPU([]*cluster{c, {name: "gone", fc: &fleettest.Cluster{Config: noServer}}})
	g.Expect(err).To(MatchError(ContainSubstring("no kube-apiserver process with --secure-port=1")))
}
