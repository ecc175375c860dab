package hub_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetmirror/fleetmirror/pkg/hub"
)

// TestKubeconfigDirProvider runs the hub with clusters from a directory of
// kubeconfig files instead of Secrets: the same pipeline mirrors into every
// cluster a file registers, and a cluster whose file is removed leaves the
// fleet.
func TestKubeconfigDirProvider(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for _, c := range fleet.Members {
		kc, err := c.Kubeconfig()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(dir, c.Name+".kubeconfig"), kc, 0o600)).To(Succeed())
	}
	hubAgent.stop()
	hubAgent = startHub("--cluster-provider=kubeconfig-dir", "--kubeconfig-dir="+dir)
	t.Cleanup(func() {
		hubAgent.stop()
		hubAgent = startHub()
	})

	src, shared := uniq("src"), uniq("shared")
	mkNamespaces(t, src, hubC)
	mkNamespaces(t, shared, hubC, memA, memB)
	s := sourceSecret(src, "creds", "*/"+shared, map[string]string{"k": "v1"})
	g.Expect(hubC.Client.Create(context.Background(), s)).To(Succeed())
	for _, c := range fleet.Members {
		eventuallySecret(t, c, shared, "creds", func(g Gomega, m *corev1.Secret) {
			g.Expect(m.Data).To(HaveKeyWithValue("k", []byte("v1")))
		})
	}
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 2 clusters, 2/2 synced"))

	// member-b's file goes: it leaves the fleet, and the source says so.
	g.Expect(os.Remove(filepath.Join(dir, memB.Name+".kubeconfig"))).To(Succeed())
	g.Eventually(status(hubC, s), timeout, poll).Should(Equal("remote: 1 cluster, 1/1 synced"))

	g.Expect(hubC.Client.Delete(context.Background(), s)).To(Succeed())
	eventuallyGone(t, memA, shared, "creds")
	eventuallyGone(t, hubC, src, "creds")
}

// TestKubeconfigDirMissingStopsTheHub: a provider that cannot run stops
// the hub with its error, rather than leaving it up with no fleet.
func TestKubeconfigDirMissingStopsTheHub(t *testing.T) {
	o, err := hub.ParseOptions("--cluster-name=hub-nodir", "--namespace="+systemNS, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--cluster-provider=kubeconfig-dir", "--kubeconfig-dir="+filepath.Join(t.TempDir(), "missing"))
	if err != nil {
		t.Fatal(err)
	}
	o.RESTConfig = hubC.Config
	done := make(chan error, 1)
	go func() { done <- hub.Run(context.Background(), o) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "kubeconfig directory") {
			t.Fatalf("hub.Run = %v, want the kubeconfig directory error", err)
		}
	case <-time.After(timeout):
		t.Fatal("the hub kept running without its kubeconfig directory")
	}
}
