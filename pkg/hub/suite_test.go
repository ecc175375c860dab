package hub_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
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
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping envtest suite in -short mode")
		os.Exit(0)
	}
	if os.Getenv("FLEETMIRROR_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	var err error
	if fleet, err = fleettest.Start("", "member-a", "member-b"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
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

func startHub(extraArgs ...string) *running {
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
		"--remote-cleanup-timeout=3s",
		"--resource-types=Secret.v1,ConfigMap.v1",
		"--lazy-probe-interval=300ms",
	}, extraArgs...)
	o, err := hub.ParseOptions(args...)
	if err != nil {
		panic(err)
	}
	o.RESTConfig = hubC.Config
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- hub.Run(ctx, o) }()
	return r
}

func (r *running) stop() {
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			fmt.Fprintln(os.Stderr, "hub stopped with error:", err)
		}
	case <-time.After(time.Minute):
		panic("hub did not stop within a minute")
	}
}

var counter atomic.Int64

// uniq returns a name unique in this test run.
func uniq(prefix string) string { return fmt.Sprintf("%s%d", prefix, counter.Add(1)) }

// mkNamespaces creates namespace name in each cluster.
func mkNamespaces(t *testing.T, name string, cs ...*fleettest.Cluster) {
	t.Helper()
	for _, c := range cs {
		if err := c.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func sourceSecret(ns, name, targets string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{
				annotations.AnnotationSync:             "true",
				annotations.AnnotationTargetNamespaces: targets,
			},
		},
		StringData: data,
	}
}

func getSecret(c *fleettest.Cluster, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return s, err
}

func eventuallySecret(t *testing.T, c *fleettest.Cluster, ns, name string, check func(g Gomega, s *corev1.Secret)) *corev1.Secret {
	t.Helper()
	return eventuallySecretWithin(t, c, ns, name, timeout, check)
}

// eventuallySecretWithin waits up to within until ns/name exists in c and
// check passes on it.
func eventuallySecretWithin(t *testing.T, c *fleettest.Cluster, ns, name string, within time.Duration, check func(g Gomega, s *corev1.Secret)) *corev1.Secret {
	t.Helper()
	var got *corev1.Secret
	NewWithT(t).Eventually(func(g Gomega) {
		s, err := getSecret(c, ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s).NotTo(BeNil(), "secret %s/%s/%s does not exist", c.Name, ns, name)
		if check != nil {
			check(g, s)
		}
		got = s
	}, within, poll).Should(Succeed())
	return got
}

func eventuallyGone(t *testing.T, c *fleettest.Cluster, ns, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() (*corev1.Secret, error) {
		return getSecret(c, ns, name)
	}, timeout, poll).Should(BeNil(), "secret %s/%s/%s still exists", c.Name, ns, name)
}

func change(t *testing.T, c *fleettest.Cluster, obj client.Object, fn func()) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		fn()
		return c.Client.Update(context.Background(), obj)
	}, timeout, poll).Should(Succeed())
}

func status(c *fleettest.Cluster, obj client.Object) func() string {
	return func() string {
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err.Error()
		}
		return obj.GetAnnotations()[annotations.AnnotationStatus]
	}
}

// eventReasons lists the reasons of events about name in namespace ns of c.
func eventMessages(c *fleettest.Cluster, ns, name, reason string) []string {
	var list corev1.EventList
	if err := c.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

func objKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

var clientcmdapiExecConfig = clientcmdapi.ExecConfig{Command: "/bin/true", APIVersion: "client.authentication.k8s.io/v1"}
