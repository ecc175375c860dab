package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// Releases of the charts. A release name that holds the chart's name is the
// full name of every object (fleetmirror.fullname).
const (
	memberRelease = "fleetmirror-member"
	hubRelease    = "fleetmirror-hub"
	// Releases installed only for their RBAC, never run: a hub that mirrors
	// ConfigMaps only, and a member whose hub identity may mirror Secrets only.
	hubConfigMapsRelease    = "fleetmirror-hub-configmaps"
	memberHubSecretsRelease = "fleetmirror-member-secrets"
)

// The charts, installed with Helm into a fleet of its own, give the binaries
// enough rights to run the fleet scenario as the charts' ServiceAccounts
// (tokens from the TokenRequest API, the members registered with the hub by
// kubectl fleetmirror register-cluster --token-secret from the member chart's hub identity), and those
// identities cannot write RBAC, mint tokens or read what they do not mirror.
//
// The fleet is not TestMain's: the agents there run as admins, and two
// member agents in one cluster would fight over the same mirrors.
func TestChartsRBAC(t *testing.T) {
	begin := time.Now()
	helmBin := fleettest.Helm(t)
	root, err := fleettest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := keepDirOnFailure(t, "fleetmirror-rbac-")
	f, err := fleettest.Start(dir, "member-a", "member-b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stopping the fleet: %v", err)
		}
	})
	hub, ma, mb := f.Hub, f.Cluster("member-a"), f.Cluster("member-b")
	t.Logf("fleet started in %s", time.Since(begin).Round(time.Millisecond))

	// The member chart everywhere (with the hub's identity in the members),
	// the hub chart in the hub, and the two releases only read for their
	// RBAC. The releases of one cluster are installed one after the other,
	// in this order (the hub releases put their Secrets Role into the member
	// release's namespace, which must exist); the clusters side by side.
	step := time.Now()
	memberChart, hubChart := filepath.Join(root, "charts", "member"), filepath.Join(root, "charts", "hub")
	secretsAndConfigMaps := []string{"Secret.v1", "ConfigMap.v1"}
	type release struct {
		name, chart, namespace string
		values                 map[string]any
	}
	memberValues := func(c *fleettest.Cluster) map[string]any {
		return map[string]any{
			"config":    map[string]any{"clusterName": c.Name, "resourceTypes": secretsAndConfigMaps},
			"hubAccess": map[string]any{"enabled": c != hub},
		}
	}
	releases := map[*fleettest.Cluster][]release{
		hub: {
			{memberRelease, memberChart, systemNS, memberValues(hub)},
			{hubRelease, hubChart, systemNS, map[string]any{
				"config": map[string]any{"clusterName": hub.Name, "clusterSecretsNamespace": systemNS, "resourceTypes": secretsAndConfigMaps},
			}},
			{hubConfigMapsRelease, hubChart, hubConfigMapsRelease, map[string]any{
				"config": map[string]any{"clusterSecretsNamespace": systemNS, "resourceTypes": []string{"ConfigMap.v1"}},
			}},
		},
		ma: {{memberRelease, memberChart, systemNS, memberValues(ma)}},
		mb: {
			{memberRelease, memberChart, systemNS, memberValues(mb)},
			{memberHubSecretsRelease, memberChart, memberHubSecretsRelease, map[string]any{
				"config":    map[string]any{"clusterName": mb.Name, "resourceTypes": secretsAndConfigMaps},
				"hubAccess": map[string]any{"enabled": true, "resourceTypes": []string{"Secret.v1"}},
				// The CRD belongs to the cluster's first release, as the
				// chart's README says for a second one.
				"crds": map[string]any{"enabled": false},
			}},
		},
	}
	var installs []func() error
	for c, rs := range releases {
		installs = append(installs, func() error {
			for _, r := range rs {
				if err := helmInstall(helmBin, dir, c, r.name, r.chart, r.namespace, r.values); err != nil {
					return err
				}
			}
			return nil
		})
	}
	runAll(t, installs...)
	t.Logf("charts installed in %s", time.Since(step).Round(time.Millisecond))

	// The identities, read from what the charts installed.
	step = time.Now()
	memberDeploy := map[string]chartDeployment{}
	memberSA := map[string]*identity{}
	for _, c := range f.Clusters() {
		d := readDeployment(t, c, systemNS, memberRelease, "fleetmirror-member")
		memberDeploy[c.Name] = d
		memberSA[c.Name] = newIdentity(t, dir, c, systemNS, d.serviceAccount, nil)
	}
	hubDeploy := readDeployment(t, hub, systemNS, hubRelease, "fleetmirror-hub")
	hubSA := newIdentity(t, dir, hub, systemNS, hubDeploy.serviceAccount, nil)
	hubAccess := map[string]*identity{}
	for _, m := range []*fleettest.Cluster{ma, mb} {
		hubAccess[m.Name] = registerWithPlugin(t, dir, hub, m, systemNS, memberRelease+"-hub-token")
	}
	hubConfigMapsSA := newIdentity(t, dir, hub, hubConfigMapsRelease,
		readDeployment(t, hub, hubConfigMapsRelease, hubConfigMapsRelease, "fleetmirror-hub").serviceAccount, nil)
	hubSecretsOnly := tokenSecretIdentity(t, dir, mb, memberHubSecretsRelease, memberHubSecretsRelease+"-hub-token")
	t.Logf("tokens and registrations made in %s", time.Since(step).Round(time.Millisecond))

	// The binaries, with the flags the charts' Deployments give them, then
	// what only works out of cluster: loopback endpoints, the identity's
	// kubeconfig and the e2e suite's short probe intervals.
	step = time.Now()
	var procs []*agent
	stopAtCleanup(t, &procs)
	logs := filepath.Join(dir, "logs")
	start := func(bin, cluster string, d chartDeployment, id *identity, extra ...string) *agent {
		t.Helper()
		a, err := startChartAgent(bin, logs, cluster, d, id.kubeconfigPath, extra...)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, a)
		return a
	}
	memberBin, hubBin := members[hubC.Name].cmd.Path, hubAgent.cmd.Path
	for _, c := range f.Clusters() {
		start(memberBin, c.Name, memberDeploy[c.Name], memberSA[c.Name], "--lazy-probe-interval="+lazyProbeInterval)
	}
	theHub := start(hubBin, hub.Name, hubDeploy, hubSA, "--lazy-probe-interval="+lazyProbeInterval, "--cluster-probe-interval=500ms")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, a := range procs {
		if err := a.waitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitUp(ctx, theHub, hub.Name, ma.Name, mb.Name); err != nil {
		t.Fatal(err)
	}
	t.Logf("agents ready and the hub connected in %s", time.Since(step).Round(time.Millisecond))

	step = time.Now()
	t.Run("the agents run as the charts' ServiceAccounts", func(t *testing.T) {
		for _, id := range append([]*identity{hubSA}, memberSA[hub.Name], memberSA[ma.Name], memberSA[mb.Name]) {
			id.expectUser(t, id.kubeconfigPath)
		}
		for _, m := range []*fleettest.Cluster{ma, mb} {
			hubAccess[m.Name].expectUser(t, registrationKubeconfig(t, dir, hub, m))
		}
	})
	t.Run("a hub Secret reaches the hub and both members", func(t *testing.T) {
		hubSecretScenario(t, hub, ma, mb)
	})
	t.Run("a member ConfigMap reaches another member", func(t *testing.T) {
		memberConfigMapScenario(t, hub, ma, mb, "app-1")
	})
	t.Run("a MirrorPolicy in a member reaches another member", func(t *testing.T) {
		policyAcrossMembersScenario(t, ma, mb)
	})
	t.Run("no request of the agents was forbidden", func(t *testing.T) {
		for _, a := range procs {
			if lines := grepLog(a, "forbidden", 5); len(lines) > 0 {
				t.Errorf("%s was refused requests, the chart's RBAC misses rights:\n%s", a.name, strings.Join(lines, "\n"))
			}
		}
	})
	t.Logf("scenarios ran in %s", time.Since(step).Round(time.Millisecond))

	t.Run("no identity writes RBAC, mints tokens or reads what it does not mirror", func(t *testing.T) {
		all := []*identity{hubSA, hubConfigMapsSA, hubSecretsOnly}
		for _, c := range f.Clusters() {
			all = append(all, memberSA[c.Name])
		}
		for _, m := range []*fleettest.Cluster{ma, mb} {
			all = append(all, hubAccess[m.Name])
		}
		for _, id := range all {
			id.expectDenied(t, privileged...)
			id.expectForbiddenRBACWrite(t)
		}

		// Each identity has the rights its chart grants, else the denials
		// above would prove nothing.
		for _, c := range f.Clusters() {
			id := memberSA[c.Name]
			id.expectAllowed(t, mirroring("")...)
			id.expectAllowed(t, leaderElection(systemNS, memberDeploy[c.Name].leaseName)...)
			id.expectDenied(t, otherLeases(systemNS)...)
			id.expectAllowed(t, servingPolicies...)
			id.expectDenied(t, writingPolicies...)
		}
		// The hub reads MirrorPolicies and applies its part of their
		// status, in its own cluster and through its identity in the
		// members; their finalizer and the rest are the member agent's.
		for _, id := range []*identity{hubSA, hubAccess[ma.Name], hubAccess[mb.Name]} {
			id.expectAllowed(t, readingPolicies...)
			id.expectDenied(t, notReadingPolicies...)
			id.expectDenied(t, writingPolicies...)
		}
		hubSA.expectAllowed(t, mirroring("")...)
		hubSA.expectAllowed(t, leaderElection(systemNS, hubDeploy.leaseName)...)
		hubSA.expectDenied(t, otherLeases(systemNS)...)
		for _, m := range []*fleettest.Cluster{ma, mb} {
			id := hubAccess[m.Name]
			id.expectAllowed(t, mirroring("")...)
			// The hub elects its leader in the hub; in members it needs no Lease.
			id.expectDenied(t, access{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: systemNS})
			// Neither the member agent nor anyone holding its token can become the hub.
			memberSA[m.Name].expectDenied(t, access{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: systemNS, name: id.serviceAccount})
		}

		// The hub reads kubeconfig Secrets in its Secrets namespace only:
		// without Secret among its kinds, nowhere else.
		id := hubConfigMapsSA
		id.expectAllowed(t,
			access{verb: "list", resource: "secrets", namespace: systemNS},
			access{verb: "watch", resource: "secrets", namespace: systemNS},
			access{verb: "list", resource: "configmaps"},
		)
		id.expectDenied(t,
			access{verb: "list", resource: "secrets"},
			access{verb: "watch", resource: "secrets"},
			access{verb: "get", resource: "secrets", namespace: "kube-system", name: "anything"},
			access{verb: "list", resource: "secrets", namespace: "default"},
			access{verb: "list", resource: "secrets", namespace: hubConfigMapsRelease},
			access{verb: "create", resource: "secrets", namespace: systemNS},
			access{verb: "update", resource: "secrets", namespace: systemNS, name: "member-a-fleetmirror"},
		)
		id.expectListForbidden(t, "secrets", "default")
		id.expectListForbidden(t, "secrets", "")
		id.expectListAllowed(t, "secrets", systemNS)

		// The hub's identity in a member mirrors the kinds it is given, no others.
		id = hubSecretsOnly
		id.expectAllowed(t, access{verb: "list", resource: "secrets"})
		id.expectDenied(t,
			access{verb: "get", resource: "configmaps", namespace: "default", name: "anything"},
			access{verb: "list", resource: "configmaps"},
			access{verb: "watch", resource: "configmaps"},
			access{verb: "create", resource: "configmaps", namespace: "default"},
		)
		id.expectListForbidden(t, "configmaps", "")
		id.expectListAllowed(t, "secrets", "")
	})
	t.Logf("whole test: %s", time.Since(begin).Round(time.Millisecond))
}

// privileged are requests no fleetmirror identity may make: writing RBAC
// (which would let it grant itself anything), minting tokens, impersonating,
// running Pods, changing Deployments (its own included), CRDs, namespaces.
var privileged = []access{
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "roles", namespace: systemNS},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "roles", namespace: "default"},
	{verb: "update", group: "rbac.authorization.k8s.io", resource: "roles", namespace: systemNS, name: "fleetmirror-member-leader-election"},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: systemNS},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: "default"},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	{verb: "update", group: "rbac.authorization.k8s.io", resource: "clusterroles", name: "fleetmirror-member"},
	{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
	{verb: "create", resource: "serviceaccounts", subresource: "token", namespace: systemNS},
	{verb: "create", resource: "serviceaccounts", namespace: systemNS},
	{verb: "impersonate", resource: "users"},
	{verb: "impersonate", resource: "serviceaccounts"},
	{verb: "impersonate", resource: "groups"},
	{verb: "list", resource: "pods"},
	{verb: "create", resource: "pods", namespace: "default"},
	{verb: "create", resource: "pods", subresource: "exec", namespace: systemNS},
	{verb: "update", group: "apps", resource: "deployments", namespace: systemNS, name: memberRelease},
	{verb: "create", group: "apiextensions.k8s.io", resource: "customresourcedefinitions"},
	{verb: "create", resource: "namespaces"},
	{verb: "delete", resource: "namespaces", name: "default"},
	{verb: "create", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicies"},
	{verb: "create", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
}

// mirroring is what an identity that mirrors Secrets and ConfigMaps needs in
// namespace ns ("" for every namespace).
func mirroring(ns string) []access {
	var out []access
	for _, resource := range []string{"secrets", "configmaps"} {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
			out = append(out, access{verb: verb, resource: resource, namespace: ns})
		}
	}
	return append(out,
		access{verb: "list", resource: "namespaces"},
		access{verb: "watch", resource: "namespaces"},
		access{verb: "create", resource: "events", namespace: "default"},
		access{verb: "patch", resource: "events", namespace: "default"},
	)
}

// servingPolicies is what the member agent needs to serve MirrorPolicies in
// every namespace: read them, set its finalizer, write their status.
var servingPolicies = []access{
	{verb: "get", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default", name: "anything"},
	{verb: "list", group: "fleetmirror.io", resource: "mirrorpolicies"},
	{verb: "watch", group: "fleetmirror.io", resource: "mirrorpolicies"},
	{verb: "patch", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default", name: "anything"},
	{verb: "update", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default", name: "anything"},
	{verb: "get", group: "fleetmirror.io", resource: "mirrorpolicies", subresource: "status", namespace: "default", name: "anything"},
	{verb: "patch", group: "fleetmirror.io", resource: "mirrorpolicies", subresource: "status", namespace: "default", name: "anything"},
	{verb: "update", group: "fleetmirror.io", resource: "mirrorpolicies", subresource: "status", namespace: "default", name: "anything"},
	{verb: "update", group: "fleetmirror.io", resource: "mirrorpolicies", subresource: "finalizers", namespace: "default", name: "anything"},
}

// readingPolicies is what the hub needs of MirrorPolicies: read them, apply
// its part of their status; notReadingPolicies the member agent's rest.
var (
	readingPolicies = []access{
		{verb: "get", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default", name: "anything"},
		{verb: "list", group: "fleetmirror.io", resource: "mirrorpolicies"},
		{verb: "watch", group: "fleetmirror.io", resource: "mirrorpolicies"},
		{verb: "patch", group: "fleetmirror.io", resource: "mirrorpolicies", subresource: "status", namespace: "default", name: "anything"},
	}
	notReadingPolicies = []access{
		{verb: "patch", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default", name: "anything"},
		{verb: "update", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default", name: "anything"},
		{verb: "update", group: "fleetmirror.io", resource: "mirrorpolicies", subresource: "status", namespace: "default", name: "anything"},
		{verb: "update", group: "fleetmirror.io", resource: "mirrorpolicies", subresource: "finalizers", namespace: "default", name: "anything"},
	}
)

// writingPolicies is what only a policy's authors do: the agent never
// creates or deletes a MirrorPolicy.
var writingPolicies = []access{
	{verb: "create", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default"},
	{verb: "delete", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default", name: "anything"},
	{verb: "deletecollection", group: "fleetmirror.io", resource: "mirrorpolicies", namespace: "default"},
}

// leaderElection is what an agent electing its leader with Lease name in ns needs.
func leaderElection(ns, name string) []access {
	return []access{
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: ns},
		{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: name},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: name},
	}
}

// otherLeases are Leases an agent must not take over.
func otherLeases(ns string) []access {
	return []access{
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "someone-else"},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "someone-else"},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "kube-controller-manager"},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
	}
}

// access is one request, as a SelfSubjectAccessReview asks about it.
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.group != "" {
		s += "." + a.group
	}
	if a.subresource != "" {
		s += "/" + a.subresource
	}
	if a.name != "" {
		s += " " + a.name
	}
	if a.namespace != "" {
		return s + " in " + a.namespace
	}
	return s + " cluster-wide"
}

// identity is a ServiceAccount of a chart with a token from the
// TokenRequest API, and a kubeconfig and a client holding that token.
type identity struct {
	cluster                   *fleettest.Cluster
	namespace, serviceAccount string
	token, kubeconfigPath     string
	client                    kubernetes.Interface
}

func (id *identity) String() string {
	return fmt.Sprintf("ServiceAccount %s/%s in %s", id.namespace, id.serviceAccount, id.cluster.Name)
}

// newIdentity requests a token for ServiceAccount ns/sa of c (bound to
// boundTo when set) and writes a kubeconfig with it into dir.
func newIdentity(t *testing.T, dir string, c *fleettest.Cluster, ns, sa string, boundTo *corev1.Secret) *identity {
	t.Helper()
	token := requestToken(t, c, ns, sa, boundTo)
	kc, err := tokenKubeconfig(c, sa, token)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.kubeconfig", c.Name, ns, sa))
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &identity{cluster: c, namespace: ns, serviceAccount: sa, token: token, kubeconfigPath: path, client: clientFromKubeconfig(t, kc)}
}

// requestToken asks c's API server for a token of ServiceAccount ns/sa, as
// the kubelet does for a Pod (envtest's API server signs them), valid for
// an hour, bound to boundTo when set.
func requestToken(t *testing.T, c *fleettest.Cluster, ns, sa string, boundTo *corev1.Secret) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	expiry := int64(time.Hour / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	if boundTo != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: boundTo.Name, UID: boundTo.UID}
	}
	resp, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s in %s: %v", ns, sa, c.Name, err)
	}
	return resp.Status.Token
}

// tokenKubeconfig is a self-contained kubeconfig reaching c with token.
func tokenKubeconfig(c *fleettest.Cluster, user, token string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: user}
	kc.CurrentContext = c.Name
	return clientcmd.Write(*kc)
}

func clientFromKubeconfig(t *testing.T, kc []byte) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	// Hundreds of access reviews: client-go's default of 5 per second
	// would take a minute.
	cfg.QPS, cfg.Burst = 500, 500
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// tokenSecretIdentity is the hub identity a member chart release creates:
// the ServiceAccount its token Secret names, with a token bound to that
// Secret (see fillTokenSecret).
func tokenSecretIdentity(t *testing.T, dir string, c *fleettest.Cluster, ns, tokenSecret string) *identity {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Client.Get(context.Background(), keyOf(ns, tokenSecret), s); err != nil {
		t.Fatalf("the member chart's token Secret in %s: %v", c.Name, err)
	}
	if s.Type != corev1.SecretTypeServiceAccountToken {
		t.Fatalf("Secret %s/%s in %s has type %s, want %s", ns, tokenSecret, c.Name, s.Type, corev1.SecretTypeServiceAccountToken)
	}
	sa := s.Annotations[corev1.ServiceAccountNameKey]
	if sa == "" {
		t.Fatalf("Secret %s/%s in %s names no ServiceAccount", ns, tokenSecret, c.Name)
	}
	return newIdentity(t, dir, c, ns, sa, s)
}

// registerWithPlugin registers member with the hub the way the member
// chart's NOTES say: kubectl fleetmirror register-cluster --token-secret
// turns the chart's token Secret into the hub's registration Secret. envtest
// runs no token controller, so the test fills the token Secret in as that
// controller would, with a token bound to the Secret.
func registerWithPlugin(t *testing.T, dir string, hub, member *fleettest.Cluster, ns, tokenSecret string) *identity {
	t.Helper()
	ctx := context.Background()
	id := tokenSecretIdentity(t, dir, member, ns, tokenSecret)
	s := &corev1.Secret{}
	NewWithT(t).Eventually(func() error {
		if err := member.Client.Get(ctx, keyOf(ns, tokenSecret), s); err != nil {
			return err
		}
		s.Data = map[string][]byte{
			corev1.ServiceAccountTokenKey:     []byte(id.token),
			corev1.ServiceAccountRootCAKey:    member.Config.CAData,
			corev1.ServiceAccountNamespaceKey: []byte(ns),
		}
		return member.Client.Update(ctx, s)
	}, timeout, poll).Should(Succeed())

	kubeconfig := filepath.Join(dir, "plugin-"+member.Name+".kubeconfig")
	merged := fleettest.MergedKubeconfig(map[string]*fleettest.Cluster{"hub": hub, "member": member}, "hub")
	if err := clientcmd.WriteToFile(*merged, kubeconfig); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"register-cluster", member.Name, "--kubeconfig=" + kubeconfig, "--member-context=member",
		"--member-namespace=" + ns, "--token-secret=" + tokenSecret, "--hub-namespace=" + systemNS})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("kubectl fleetmirror register-cluster %s: %v\n%s", member.Name, err, out.String())
	}
	return id
}

// registrationKubeconfig writes the kubeconfig of the hub's registration
// Secret of member into dir and returns its path.
func registrationKubeconfig(t *testing.T, dir string, hub, member *fleettest.Cluster) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := hub.Client.Get(context.Background(), keyOf(systemNS, fleettest.PlainSecretName(member.Name)), s); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "registration-"+member.Name+".kubeconfig")
	if err := os.WriteFile(path, s.Data["value"], 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// expectUser checks that the kubeconfig at path authenticates as the identity.
func (id *identity) expectUser(t *testing.T, path string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if want := "system:serviceaccount:" + id.namespace + ":" + id.serviceAccount; review.Status.UserInfo.Username != want {
		t.Errorf("%s authenticates as %q, want %q", path, review.Status.UserInfo.Username, want)
	}
}

// allowed asks the API server whether the identity may make request a.
func (id *identity) allowed(t *testing.T, a access) bool {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name,
		},
	}}
	resp, err := id.client.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: SelfSubjectAccessReview: %v", id, err)
	}
	return resp.Status.Allowed
}

func (id *identity) expectAllowed(t *testing.T, as ...access) {
	t.Helper()
	for _, a := range as {
		if !id.allowed(t, a) {
			t.Errorf("%s may not %s", id, a)
		}
	}
}

func (id *identity) expectDenied(t *testing.T, as ...access) {
	t.Helper()
	for _, a := range as {
		if id.allowed(t, a) {
			t.Errorf("%s may %s", id, a)
		}
	}
}

// expectForbiddenRBACWrite has the identity try to grant itself
// cluster-admin, which must be refused.
func (id *identity) expectForbiddenRBACWrite(t *testing.T) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-escalation-" + id.serviceAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: id.namespace, Name: id.serviceAccount}},
	}
	_, err := id.client.RbacV1().ClusterRoleBindings().Create(context.Background(), crb, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s creating a ClusterRoleBinding to cluster-admin: want Forbidden, got %v", id, err)
	}
}

// expectListForbidden lists resource (secrets or configmaps) in ns ("" for
// every namespace) as the identity and expects Forbidden.
func (id *identity) expectListForbidden(t *testing.T, resource, ns string) {
	t.Helper()
	if err := id.list(resource, ns); !apierrors.IsForbidden(err) {
		t.Errorf("%s listing %s in %q: want Forbidden, got %v", id, resource, ns, err)
	}
}

func (id *identity) expectListAllowed(t *testing.T, resource, ns string) {
	t.Helper()
	if err := id.list(resource, ns); err != nil {
		t.Errorf("%s listing %s in %q: %v", id, resource, ns, err)
	}
}

func (id *identity) list(resource, ns string) error {
	opts := metav1.ListOptions{Limit: 1}
	var err error
	switch resource {
	case "secrets":
		_, err = id.client.CoreV1().Secrets(ns).List(context.Background(), opts)
	case "configmaps":
		_, err = id.client.CoreV1().ConfigMaps(ns).List(context.Background(), opts)
	default:
		err = fmt.Errorf("cannot list %s", resource)
	}
	return err
}

// chartDeployment is what the test takes from a chart's Deployment: the
// ServiceAccount the Pods run as, the agent's arguments and the leader
// election Lease they name.
type chartDeployment struct {
	serviceAccount string
	args           []string
	leaseName      string
}

var leaseArg = regexp.MustCompile(`^--leader-election-id=(.+)$`)

// readDeployment reads Deployment ns/name of c, installed by Helm, whose
// only container must run binary.
func readDeployment(t *testing.T, c *fleettest.Cluster, ns, name, binary string) chartDeployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Client.Get(context.Background(), keyOf(ns, name), d); err != nil {
		t.Fatalf("Deployment of the chart in %s: %v", c.Name, err)
	}
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment %s/%s in %s: want one container, got %d", ns, name, c.Name, len(spec.Containers))
	}
	ctr := spec.Containers[0]
	if len(ctr.Command) != 1 || filepath.Base(ctr.Command[0]) != binary {
		t.Fatalf("Deployment %s/%s in %s runs %v, want %s", ns, name, c.Name, ctr.Command, binary)
	}
	out := chartDeployment{serviceAccount: spec.ServiceAccountName, args: ctr.Args}
	for _, arg := range ctr.Args {
		if m := leaseArg.FindStringSubmatch(arg); m != nil {
			out.leaseName = m[1]
		}
	}
	if out.serviceAccount == "" || out.leaseName == "" {
		t.Fatalf("Deployment %s/%s in %s: no ServiceAccount or no --leader-election-id in %v", ns, name, c.Name, ctr.Args)
	}
	return out
}

// startChartAgent starts bin as the chart's Deployment would run it, with
// its own kubeconfig, endpoints on free loopback ports and extra flags; the
// flags given later win over the chart's.
func startChartAgent(bin, logDir, cluster string, d chartDeployment, kubeconfig string, extra ...string) (*agent, error) {
	a, err := newAgentAt(filepath.Base(bin)+"/"+cluster, filepath.Join(logDir, filepath.Base(bin)+"-"+cluster+".log"))
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, d.args...),
		"--kubeconfig="+kubeconfig,
		"--metrics-bind-address="+a.metricsAddr,
		"--health-probe-bind-address="+a.probeAddr,
	)
	return a, startProcess(a, bin, append(args, extra...)...)
}

// waitUp waits until hub reports every named cluster up.
func waitUp(ctx context.Context, hub *agent, names ...string) error {
	for {
		var down []string
		families, err := hub.scrape()
		for _, name := range names {
			if v, ok := value(families, "fleetmirror_hub_cluster_up", "cluster", name); err != nil || !ok || v != 1 {
				down = append(down, name)
			}
		}
		if len(down) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not report %s up: %w", hub.name, strings.Join(down, ", "), errors.Join(err, ctx.Err()))
		case <-hub.exited:
			return fmt.Errorf("%s exited: %v", hub.name, hub.err)
		case <-time.After(poll):
		}
	}
}

// helmInstall installs the chart in dir as release into namespace ns of c,
// creating the namespace, with values, and without waiting: envtest runs no
// Pods, the objects are what counts. Helm's own files go under tmp.
func helmInstall(helmBin, tmp string, c *fleettest.Cluster, release, chart, ns string, values map[string]any) error {
	data, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	home := filepath.Join(tmp, "helm", c.Name+"-"+release)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	valuesFile := filepath.Join(home, "values.yaml")
	if err := os.WriteFile(valuesFile, data, 0o600); err != nil {
		return err
	}
	args := []string{"install", release, chart, "--kubeconfig", c.KubeconfigPath, "--namespace", ns, "--create-namespace",
		"--wait=false", "--values", valuesFile}
	cmd := exec.Command(helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s (in %s): %v\n%s", helmBin, strings.Join(args, " "), c.Name, err, out)
	}
	return nil
}

// runAll runs the functions side by side and fails the test with their errors.
func runAll(t *testing.T, fns ...func() error) {
	t.Helper()
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func keyOf(ns, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: name}
}

// policyAcrossMembersScenario: a Secret that carries none of our keys in
// member-a, named by a MirrorPolicy there with a member-b/NS entry, reaches
// member-b. The hub reads the policy and applies its part of the status
// through its identity in member-a (hubAccess), as the charts grant it;
// deleting the policy removes the remote mirror.
func policyAcrossMembersScenario(t *testing.T, ma, mb *fleettest.Cluster) {
	g := NewWithT(t)
	ctx := context.Background()
	mkNamespaces(t, "policy-src", ma)
	mkNamespaces(t, "policy-dst", mb)
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "policy-src", Name: "operator-creds"},
		StringData: map[string]string{"password": "s3cret"}}
	g.Expect(ma.Client.Create(ctx, src)).To(Succeed())
	p := &v1alpha1.MirrorPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "policy-src", Name: "creds"},
		Spec: v1alpha1.MirrorPolicySpec{Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{src.Name}},
			TargetNamespaces: []string{mb.Name + "/policy-dst"}},
	}
	g.Expect(ma.Client.Create(ctx, p)).To(Succeed())

	eventuallyExists(t, mb, secret("policy-dst", src.Name), func(g Gomega, s *corev1.Secret) {
		expectMirror(g, s, annotations.ManagedByHub, ma.Name+"/policy-src/"+src.Name)
		g.Expect(s.Data).To(HaveKeyWithValue("password", []byte("s3cret")))
	})
	g.Eventually(func(g Gomega) {
		got := &v1alpha1.MirrorPolicy{}
		g.Expect(ma.Client.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionRemoteReady)).To(BeTrue(), "%+v", got.Status)
		g.Expect(got.Status.RemoteTargetsSynced).To(BeEquivalentTo(1))
	}, timeout, poll).Should(Succeed())

	t.Log("Deleting the policy")
	g.Expect(ma.Client.Delete(ctx, p)).To(Succeed())
	eventuallyGone(t, mb, secret("policy-dst", src.Name))
	eventuallyGone(t, ma, p)
	g.Expect(ma.Client.Get(ctx, client.ObjectKeyFromObject(src), &corev1.Secret{})).To(Succeed(), "the source went with its policy")
}
