package hub_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
)

const (
	// systemNS is the agents' own namespace (--namespace).
	systemNS = "fleetmirror-system"
	// secretsNS holds the registration Secrets: apart from systemNS, as
	// with Cluster API, where they sit beside the Cluster objects.
	secretsNS = "capi-clusters"
	timeout   = 30 * time.Second
	poll      = 100 * time.Millisecond
)

var (
	fleet            *fleettest.Fleet
	hubC, memA, memB *fleettest.Cluster
	hubAgent         *running
	// partA cuts the hub off member-a.
	partA *fleettest.FaultProxy
)

func TestMain(m *testing.M) {
	fleet = fleettest.StartSuite("member-a", "member-b")
	hubC, memA, memB = fleet.Hub, fleet.Cluster("member-a"), fleet.Cluster("member-b")
	code := func() int {
		ctx := context.Background()
		for _, c := range fleet.Clusters() {
			for _, ns := range []string{systemNS, secretsNS} {
				if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
			}
		}
		if err := registerA(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := registerB(nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		hubAgent = startHub()
		defer func() { hubAgent.stop() }()
		return m.Run()
	}()
	if err := fleet.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// registerA registers member-a in the Cluster API form, reached through partA.
func registerA() error {
	kc, err := memA.Kubeconfig()
	if err != nil {
		return err
	}
	if partA == nil {
		u, err := url.Parse(memA.Config.Host)
		if err != nil {
			return err
		}
		if partA, err = fleettest.NewFaultProxy(u.Host); err != nil {
			return err
		}
	}
	if kc, err = partA.Through(kc); err != nil {
		return err
	}
	return fleettest.RegisterCAPI(context.Background(), hubC.Client, secretsNS, memA, kc)
}

// registerB registers member-b in the plain form, labelled env=prod.
func registerB(kubeconfig []byte) error {
	if kubeconfig == nil {
		var err error
		if kubeconfig, err = memB.Kubeconfig(); err != nil {
			return err
		}
	}
	return fleettest.RegisterPlain(context.Background(), hubC.Client, secretsNS, memB, kubeconfig, map[string]string{"env": "prod"})
}

type running struct {
	cancel context.CancelFunc
	done   chan error
}

func startHub(extraArgs ...string) *running { return startHubOn(hubC, extraArgs...) }

// startHubOn runs a hub in the cluster c with the suite's flags and extra
// ones.
func startHubOn(c *fleettest.Cluster, extraArgs ...string) *running {
	args := append([]string{
		"--cluster-name=hub",
		"--namespace=" + systemNS,
		"--cluster-secrets-namespace=" + secretsNS,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--resync-period=0",
		"--cluster-probe-interval=300ms",
		"--cluster-probe-timeout=2s",
		"--api-call-timeout=5s",
		"--resource-types=Secret.v1,ConfigMap.v1",
		"--lazy-probe-interval=300ms",
	}, extraArgs...)
	o, err := hub.ParseOptions(args...)
	if err != nil {
		panic(err)
	}
	o.RESTConfig = c.Config
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- hub.Run(ctx, o) }()
	return r
}

// stop cancels the hub and waits for it to return.
func (r *running) stop() { fleettest.StopInProcess("hub", r.cancel, r.done) }

var counter atomic.Int64

// uniq returns a name unique in this test run.
func uniq(prefix string) string { return fmt.Sprintf("%s%d", prefix, counter.Add(1)) }

// wait is how long this suite waits for the hub, and how often it looks.
var wait = fleettest.Wait{Timeout: timeout, Poll: poll}

// mkNamespaces creates namespace name in each cluster.
func mkNamespaces(t *testing.T, name string, cs ...*fleettest.Cluster) {
	t.Helper()
	fleettest.CreateNamespaces(t, name, nil, cs...)
}

// srcAndShared creates two namespaces of fresh names: one for sources in
// srcIn and one shared by the clusters sharedIn, for mirrors.
func srcAndShared(t *testing.T, srcIn *fleettest.Cluster, sharedIn ...*fleettest.Cluster) (src, shared string) {
	t.Helper()
	src, shared = uniq("src"), uniq("shared")
	mkNamespaces(t, src, srcIn)
	mkNamespaces(t, shared, sharedIn...)
	return src, shared
}

func sourceSecret(ns, name, targets string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: fleettest.SourceMeta(ns, name, targets), StringData: data}
}

func getSecret(c *fleettest.Cluster, ns, name string) (*corev1.Secret, error) {
	return fleettest.Lookup(c, fleettest.Secret(ns, name))
}

func eventuallySecret(t *testing.T, c *fleettest.Cluster, ns, name string, check func(g Gomega, s *corev1.Secret)) *corev1.Secret {
	t.Helper()
	return eventuallySecretWithin(t, c, ns, name, timeout, check)
}

// eventuallySecretWithin waits up to within until ns/name exists in c and
// check passes on it.
func eventuallySecretWithin(t *testing.T, c *fleettest.Cluster, ns, name string, within time.Duration, check func(g Gomega, s *corev1.Secret)) *corev1.Secret {
	t.Helper()
	return fleettest.EventuallyExists(t, fleettest.Wait{Timeout: within, Poll: poll}, c, fleettest.Secret(ns, name), check)
}

func eventuallyGone(t *testing.T, c *fleettest.Cluster, ns, name string) {
	t.Helper()
	fleettest.EventuallyGone(t, wait, c, fleettest.Secret(ns, name))
}

func change(t *testing.T, c *fleettest.Cluster, obj client.Object, fn func()) {
	t.Helper()
	fleettest.Change(t, wait, c, obj, func(client.Object) { fn() })
}

func status(c *fleettest.Cluster, obj client.Object) func() string { return fleettest.Status(c, obj) }

// eventMessages lists the messages of events with reason about name in
// namespace ns of c.
func eventMessages(c *fleettest.Cluster, ns, name, reason string) []string {
	return fleettest.EventMessages(c, ns, name, reason)
}

func objKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

var clientcmdapiExecConfig = clientcmdapi.ExecConfig{Command: "/bin/true", APIVersion: "client.authentication.k8s.io/v1"}
