package cluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// member is an API server of its own, serving on the node's address so
// that the hub's Pod reaches it.
type member struct {
	name   string
	env    *envtest.Environment
	client kubernetes.Interface
	port   int
}

// startMember starts an envtest API server listening on the node's
// address, stopped at the end of the test.
func startMember(t *testing.T, name string) *member {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(env.nodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	api := &envtest.APIServer{}
	api.Address = env.nodeIP // SecureServing.ListenAddr, promoted
	api.Port = strconv.Itoa(port)
	api.Configure().Set("advertise-address", env.nodeIP)
	e := &envtest.Environment{
		BinaryAssetsDirectory:    env.assets,
		ControlPlane:             envtest.ControlPlane{APIServer: api},
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := e.Start()
	if err != nil {
		t.Fatalf("starting member %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &member{name: name, env: e, client: cs, port: port}
}

// kubeconfigFor writes one kubeconfig whose contexts are the node ("hub")
// and each member (by name), as admins, for the plugin.
func kubeconfigFor(t *testing.T, members ...*member) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	merged := clientcmdapi.NewConfig()
	for _, ctx := range cfg.Contexts {
		merged.Clusters["hub"] = cfg.Clusters[ctx.Cluster]
		merged.AuthInfos["hub"] = cfg.AuthInfos[ctx.AuthInfo]
		merged.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "hub"}
		break
	}
	for _, m := range members {
		user, err := m.env.AddUser(envtest.User{Name: "admin-" + m.name, Groups: []string{"system:masters"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := user.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		mc, err := clientcmd.Load(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctx := range mc.Contexts {
			merged.Clusters[m.name] = mc.Clusters[ctx.Cluster]
			merged.AuthInfos[m.name] = mc.AuthInfos[ctx.AuthInfo]
			merged.Contexts[m.name] = &clientcmdapi.Context{Cluster: m.name, AuthInfo: m.name}
			break
		}
	}
	merged.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHubChart installs the hub chart on the node beside two member API
// servers registered with kubectl fleetmirror register-cluster: CLUSTER/NS
// targets and a pull across clusters work through the hub's Pod.
func TestHubChart(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	const ns = "fm-hub"
	m1, m2 := startMember(t, "m1"), startMember(t, "m2")
	kubeconfig := kubeconfigFor(t, m1, m2)
	release(t, hubRelease, ns, hubChart, imageValues(env.imageRepo, env.imageTag)...)
	for _, m := range []*member{m1, m2} {
		out, err := pluginRun(kubeconfig, "register-cluster", m.name, "--hub-context", "hub", "--member-context", m.name,
			"--hub-namespace", ns, "--token-duration", "10m", "--server", fmt.Sprintf("https://%s:%d", env.nodeIP, m.port))
		Expect(err).NotTo(HaveOccurred(), out)
		for _, n := range []string{"fmh-t", "fmh-pull"} {
			_, err := m.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
	}
	namespace(t, cs, "fmh-src", nil)

	t.Run("CLUSTER/NS targets", func(t *testing.T) {
		RegisterTestingT(t)
		source(t, cs, "fmh-src", "fleet", "m1/fmh-t, m2/fmh-t", "one")
		for _, m := range []*member{m1, m2} {
			mirrored(t, m.client, "fleet", "one", 2*time.Minute, "fmh-t")
		}
		setValue(t, cs, "fmh-src", "fleet", "two")
		for _, m := range []*member{m1, m2} {
			mirrored(t, m.client, "fleet", "two", time.Minute, "fmh-t")
		}
	})

	t.Run("pull across clusters", func(t *testing.T) {
		RegisterTestingT(t)
		_, err := cs.CoreV1().Secrets("fmh-src").Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: "pullable", Namespace: "fmh-src",
				Labels:      map[string]string{annotations.LabelEnabled: "true"},
				Annotations: map[string]string{annotations.AnnotationAllowPullInto: "m1/fmh-pull"},
			},
			StringData: map[string]string{"value": "pulled"},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = m1.client.CoreV1().Secrets("fmh-pull").Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: "mine", Namespace: "fmh-pull",
				Labels:      map[string]string{annotations.LabelPull: "true"},
				Annotations: map[string]string{annotations.AnnotationMirrorFrom: "hub/fmh-src/pullable"},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			s, err := m1.client.CoreV1().Secrets("fmh-pull").Get(context.Background(), "mine", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(s.Data["value"])).To(Equal("pulled"))
		}).WithTimeout(2 * time.Minute).Should(Succeed())
	})

	t.Run("uninstall while a member is unreachable", func(t *testing.T) {
		RegisterTestingT(t)
		mirrored(t, m2.client, "fleet", "two", time.Second, "fmh-t")
		// The hook's wait for unreachable clusters, shortened for the test.
		install(t, hubRelease, ns, hubChart, append(imageValues(env.imageRepo, env.imageTag), "--set", "uninstall.timeoutSeconds=15")...)
		restore := unreachable(t, m2)
		// The hub's post-delete hook cleans what it reaches, tries the rest
		// for uninstall.timeoutSeconds and fails naming the member it could
		// not reach; Helm reports the failure with the hook's log, and the
		// release is gone all the same.
		out, err := tryCommand(env.helm, "uninstall", hubRelease, "--namespace", ns, "--wait", "--timeout", "6m")
		Expect(err).To(HaveOccurred(), out)
		// Helm prints the failed Job's log; its last line names the member.
		Expect(out).To(ContainSubstring("cluster m2 not reached"))
		gone(t, m1.client, "fmh-t", "fleet", time.Second)
		Expect(fleetmirrorFinalizers(t, cs)).To(BeEmpty(), "the hub's own cluster is reachable: its sources are released")
		restore()
		_, err = m2.client.CoreV1().Secrets("fmh-t").Get(context.Background(), "fleet", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the mirror in the unreachable member stays")
		// The way out once it is back: install and uninstall again.
		install(t, hubRelease, ns, hubChart, imageValues(env.imageRepo, env.imageTag)...)
		helm(t, "uninstall", hubRelease, "--namespace", ns, "--wait", "--timeout", "5m")
		gone(t, m2.client, "fmh-t", "fleet", time.Second)
	})
}

// unreachable drops what the node's Pods send to m until the returned
// function is called: the member is down as far as the hub can tell, and its
// API server keeps its objects.
func unreachable(t *testing.T, m *member) (restore func()) {
	t.Helper()
	rule := []string{"INPUT", "-s", env.podCIDR, "-d", env.nodeIP, "-p", "tcp", "--dport", strconv.Itoa(m.port), "-j", "DROP"}
	command(t, "iptables", append([]string{"-w", "-I"}, rule...)...)
	var once sync.Once
	restore = func() { once.Do(func() { command(t, "iptables", append([]string{"-w", "-D"}, rule...)...) }) }
	t.Cleanup(restore)
	return restore
}

// pluginRun runs kubectl-fleetmirror with kubeconfig.
func pluginRun(kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(env.plugin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
