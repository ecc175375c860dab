package fleettest_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// fleet is a hub and two members, started once for the package.
var fleet *fleettest.Fleet

// kubeconfigDir is where the fleet's kubeconfigs were written.
var kubeconfigDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips itself
	}
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))

	dir, err := os.MkdirTemp("", "fleettest-kubeconfigs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kubeconfigDir = dir
	fleet, err = fleettest.Start(dir, "member-1", "member-2")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the fleet:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := fleet.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the fleet:", err)
		code = 1
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func skipIfShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts API servers; skipped with -short")
	}
}

// clientFor builds a client from kubeconfig bytes, as a controller given the
// kubeconfig would.
func clientFor(t *testing.T, kubeconfig []byte) client.Client {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatalf("parsing kubeconfig: %v", err)
	}
	cfg.Timeout = 10 * time.Second
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatalf("client from kubeconfig: %v", err)
	}
	return c
}

func createNamespace(ctx context.Context, t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

func TestFleetHasHubAndMembers(t *testing.T) {
	skipIfShort(t)
	ctx := t.Context()

	var names []string
	for _, c := range fleet.Clusters() {
		names = append(names, c.Name)
	}
	if got, want := fmt.Sprint(names), "[hub member-1 member-2]"; got != want {
		t.Fatalf("clusters = %s, want %s", got, want)
	}
	if fleet.Hub != fleet.Cluster("hub") || fleet.Cluster("member-2") != fleet.Members[1] || fleet.Cluster("nope") != nil {
		t.Fatal("Cluster(name) does not find the clusters by name")
	}

	hosts := map[string]string{}
	for _, c := range fleet.Clusters() {
		t.Run(c.Name, func(t *testing.T) {
			if other, dup := hosts[c.Config.Host]; dup {
				t.Fatalf("%s and %s share the API server %s", c.Name, other, c.Config.Host)
			}
			hosts[c.Config.Host] = c.Name

			// An object created through the admin client exists...
			ns := createNamespace(ctx, t, c.Client, "fleettest")
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
				Data:       map[string]string{"cluster": c.Name},
			}
			if err := c.Client.Create(ctx, cm); err != nil {
				t.Fatalf("creating a ConfigMap: %v", err)
			}
			// ...and is seen through the kubeconfig written to disk.
			path := filepath.Join(kubeconfigDir, c.Name+".kubeconfig")
			if c.KubeconfigPath != path {
				t.Fatalf("KubeconfigPath = %q, want %q", c.KubeconfigPath, path)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := &corev1.ConfigMap{}
			if err := clientFor(t, data).Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
				t.Fatalf("reading the ConfigMap through %s: %v", path, err)
			}
			if got.Data["cluster"] != c.Name {
				t.Fatalf("ConfigMap data = %v", got.Data)
			}
			// The clusters are separate: no other cluster has the namespace.
			for _, other := range fleet.Clusters() {
				if other == c {
					continue
				}
				err := other.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
				if !apierrors.IsNotFound(err) {
					t.Fatalf("namespace %s of %s on %s: err = %v, want NotFound", ns, c.Name, other.Name, err)
				}
			}
		})
	}
}

func TestKubeconfigIsSelfContained(t *testing.T) {
	skipIfShort(t)
	data, err := fleet.Members[0].Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	if kc.CurrentContext != "member-1" {
		t.Errorf("current context = %q, want member-1", kc.CurrentContext)
	}
	for name, cl := range kc.Clusters {
		if len(cl.CertificateAuthorityData) == 0 || cl.CertificateAuthority != "" {
			t.Errorf("cluster %s: CA not embedded", name)
		}
	}
	for name, u := range kc.AuthInfos {
		if u.Exec != nil || u.AuthProvider != nil {
			t.Errorf("user %s runs a plugin", name)
		}
		if len(u.ClientCertificateData) == 0 || len(u.ClientKeyData) == 0 || u.ClientCertificate != "" || u.ClientKey != "" {
			t.Errorf("user %s: client certificate not embedded", name)
		}
	}
}

func TestAPIServerMetricsReadable(t *testing.T) {
	skipIfShort(t)
	for _, c := range fleet.Clusters() {
		rc, err := rest.RESTClientFor(restConfigForRaw(c.Config))
		if err != nil {
			t.Fatal(err)
		}
		body, err := rc.Get().AbsPath("/metrics").DoRaw(t.Context())
		if err != nil {
			t.Fatalf("%s: GET /metrics: %v", c.Name, err)
		}
		if !bytes.Contains(body, []byte("apiserver_request_total{")) {
			t.Fatalf("%s: /metrics has no apiserver_request_total", c.Name)
		}
	}
}

// restConfigForRaw makes cfg usable with rest.RESTClientFor for raw paths.
func restConfigForRaw(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return cfg
}

func TestRegistrationSecrets(t *testing.T) {
	skipIfShort(t)
	g := NewWithT(t)
	ctx := t.Context()
	hub := fleet.Hub.Client
	ns := createNamespace(ctx, t, hub, "registration")
	m1, m2 := fleet.Members[0], fleet.Members[1]

	g.Expect(fleettest.RegisterCAPI(ctx, hub, ns, m1, nil)).To(Succeed())
	g.Expect(fleettest.RegisterPlain(ctx, hub, ns, m2, nil, map[string]string{"region": "eu", "env": "prod"})).To(Succeed())

	list := &corev1.SecretList{}
	g.Expect(hub.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2))

	tests := []struct {
		name   string
		member *fleettest.Cluster
		secret string
		typ    corev1.SecretType
		labels map[string]string
	}{
		{
			name:   "cluster api",
			member: m1,
			secret: "member-1-kubeconfig",
			typ:    "cluster.x-k8s.io/secret",
			labels: map[string]string{"cluster.x-k8s.io/cluster-name": "member-1"},
		},
		{
			name:   "plain",
			member: m2,
			secret: "member-2-fleetmirror",
			typ:    corev1.SecretTypeOpaque,
			labels: map[string]string{"fleetmirror.io/cluster-name": "member-2", "region": "eu", "env": "prod"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &corev1.Secret{}
			g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: tt.secret}, s)).To(Succeed())
			g.Expect(s.Type).To(Equal(tt.typ))
			g.Expect(s.Labels).To(Equal(tt.labels))
			g.Expect(s.OwnerReferences).To(BeEmpty())
			g.Expect(s.Data).To(HaveLen(1))
			g.Expect(s.Data).To(HaveKey("value"))

			// The registered kubeconfig reaches the member, not the hub.
			probe := createNamespace(ctx, t, tt.member.Client, "probe")
			g.Expect(clientFor(t, s.Data["value"]).Get(ctx, client.ObjectKey{Name: probe}, &corev1.Namespace{})).To(Succeed())
		})
	}

	t.Run("update rotates the kubeconfig and relabels", func(t *testing.T) {
		g := NewWithT(t)
		_, rotated, err := m1.AddUser("rotated", []string{"system:masters"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fleettest.RegisterCAPI(ctx, hub, ns, m1, rotated)).To(Succeed())
		s := &corev1.Secret{}
		g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "member-1-kubeconfig"}, s)).To(Succeed())
		g.Expect(s.Data["value"]).To(Equal(rotated))

		g.Expect(fleettest.RegisterPlain(ctx, hub, ns, m2, nil, map[string]string{"region": "us"})).To(Succeed())
		g.Expect(hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "member-2-fleetmirror"}, s)).To(Succeed())
		g.Expect(s.Labels).To(Equal(map[string]string{"fleetmirror.io/cluster-name": "member-2", "region": "us"}))
	})

	t.Run("unregister", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(fleettest.Unregister(ctx, hub, ns, m1)).To(Succeed())
		g.Expect(fleettest.Unregister(ctx, hub, ns, m2)).To(Succeed())
		g.Expect(fleettest.Unregister(ctx, hub, ns, m2)).To(Succeed(), "a second unregister is no error")
		g.Expect(hub.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	})
}

func TestStopAndRestart(t *testing.T) {
	skipIfShort(t)
	g := NewWithT(t)
	ctx := t.Context()
	member := fleet.Members[1]
	t.Cleanup(func() {
		if err := member.Restart(); err != nil {
			t.Errorf("restarting %s for the tests after this one: %v", member.Name, err)
		}
	})

	// A client built from the kubeconfig before the stop, as a controller holds.
	before, err := member.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	old := clientFor(t, before)
	ns := createNamespace(ctx, t, old, "survives")

	g.Expect(member.Stop()).To(Succeed())
	g.Expect(member.Stop()).To(Succeed(), "stopping a stopped cluster is no error")
	err = old.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	g.Expect(err).To(HaveOccurred(), "a stopped cluster must be unreachable")
	g.Expect(apierrors.IsNotFound(err)).To(BeFalse())

	// The other clusters are unaffected.
	g.Expect(fleet.Hub.Client.List(ctx, &corev1.NamespaceList{})).To(Succeed())

	g.Expect(member.Restart()).To(Succeed())

	// The old client and the kubeconfig on disk work again, and etcd kept the data.
	g.Eventually(func() error {
		return old.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	}).WithTimeout(30 * time.Second).Should(Succeed())
	onDisk, err := os.ReadFile(member.KubeconfigPath)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clientFor(t, onDisk).Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())
	g.Expect(member.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed())
}

func TestAddUser(t *testing.T) {
	skipIfShort(t)
	g := NewWithT(t)
	ctx := t.Context()
	member := fleet.Members[0]

	cfg, kubeconfig, err := member.AddUser("alice", []string{"fleettest:readers"})
	g.Expect(err).NotTo(HaveOccurred())
	alice := clientFor(t, kubeconfig)
	fromCfg, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// The API server knows the new identity, through the config and the kubeconfig.
	for _, c := range []client.Client{alice, fromCfg} {
		review := &authenticationv1.SelfSubjectReview{}
		g.Expect(c.Create(ctx, review)).To(Succeed())
		g.Expect(review.Status.UserInfo.Username).To(Equal("alice"))
		g.Expect(review.Status.UserInfo.Groups).To(ContainElement("fleettest:readers"))
		g.Expect(review.Status.UserInfo.Groups).NotTo(ContainElement("system:masters"))
	}

	// It is not the admin: without RBAC it may not list Secrets...
	err = alice.List(ctx, &corev1.SecretList{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing secrets as alice: %v", err)

	// ...and with a binding to its group it may.
	ns := createNamespace(ctx, t, member.Client, "alice")
	g.Expect(member.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-reader", Namespace: ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list"}}},
	})).To(Succeed())
	g.Expect(member.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "secret-reader", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secret-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "fleettest:readers"}},
	})).To(Succeed())
	g.Eventually(func() error {
		return alice.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
	}).WithTimeout(10 * time.Second).Should(Succeed())
}
