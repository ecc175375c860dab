package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// twoClusters starts a hub and a member and writes a kubeconfig with the
// contexts "hub" (current) and "member".
func twoClusters(t *testing.T) (*fleettest.Fleet, string) {
	t.Helper()
	if api == nil {
		t.Skip("needs an API server")
	}
	f, err := fleettest.Start("", "member-x")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	merged := fleettest.MergedKubeconfig(map[string]*fleettest.Cluster{"hub": f.Hub, "member": f.Cluster("member-x")}, "hub")
	// The member's CA as a file, as many kubeconfigs have it: the command
	// must embed its contents.
	dir := t.TempDir()
	caFile := filepath.Join(dir, "member-ca.crt")
	if err := os.WriteFile(caFile, merged.Clusters["member"].CertificateAuthorityData, 0o600); err != nil {
		t.Fatal(err)
	}
	merged.Clusters["member"].CertificateAuthority = caFile
	merged.Clusters["member"].CertificateAuthorityData = nil
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*fleettest.Cluster{f.Hub} {
		if err := c.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}}); err != nil {
			t.Fatal(err)
		}
	}
	return f, path
}

func runWith(kubeconfig string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append(args, "--kubeconfig="+kubeconfig))
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

func TestRegisterCluster(t *testing.T) {
	f, kubeconfig := twoClusters(t)
	g := NewWithT(t)
	ctx := context.Background()
	member := f.Cluster("member-x").Client

	// Not ours: unregister must leave it alone.
	other := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}
	g.Expect(member.Create(ctx, other)).To(Succeed())

	out, err := runWith(kubeconfig, "register-cluster", "Bad_Name", "--member-context=member", "--token-duration=1h")
	g.Expect(err).To(MatchError(ContainSubstring("invalid")), out)

	out, err = runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-duration=1h", "--label=env=test", "--receive-only")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("hub: secret fleetmirror-system/member-x-fleetmirror applied"))
	g.Expect(out).To(ContainSubstring("member: clusterrole fleetmirror-hub applied"))

	var s corev1.Secret
	g.Expect(f.Hub.Client.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "member-x-fleetmirror"}, &s)).To(Succeed())
	g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelClusterName, "member-x"))
	g.Expect(s.Labels).To(HaveKeyWithValue("env", "test"))
	g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelReceiveOnly, "true"))
	g.Expect(s.Labels).NotTo(HaveKey(annotations.LabelManagedBy), "the hub refuses mirrors")

	// What the hub's provider accepts: parses, no plugin, nothing from files.
	kc, err := clientcmd.Load(s.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	kctx := kc.Contexts[kc.CurrentContext]
	g.Expect(kctx).NotTo(BeNil())
	auth, cluster := kc.AuthInfos[kctx.AuthInfo], kc.Clusters[kctx.Cluster]
	g.Expect(auth.Exec).To(BeNil())
	g.Expect(auth.AuthProvider).To(BeNil())
	g.Expect(auth.TokenFile).To(BeEmpty())
	g.Expect(auth.Token).NotTo(BeEmpty())
	g.Expect(cluster.CertificateAuthority).To(BeEmpty())
	g.Expect(cluster.CertificateAuthorityData).To(Equal(f.Cluster("member-x").Config.CAData))
	g.Expect(cluster.Server).To(Equal(f.Cluster("member-x").Config.Host))

	// It works, with exactly the hub's rights.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	hubView, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = hubView.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = hubView.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = hubView.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = hubView.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing Pods: %v", err)

	var cr rbacv1.ClusterRole
	g.Expect(member.Get(ctx, client.ObjectKey{Name: cli.HubIdentity}, &cr)).To(Succeed())
	g.Expect(cr.Labels).To(HaveKeyWithValue(cli.LabelManagedBy, cli.ManagedByValue))
	g.Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"fleetmirror.io"}, Resources: []string{"mirrorpolicies/status"}, Verbs: []string{"patch"}},
	}))

	// Running it again updates in place.
	out, err = runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-duration=1h")
	g.Expect(err).NotTo(HaveOccurred(), out)

	out, err = runWith(kubeconfig, "unregister-cluster", "member-x", "--member-context=member")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("hub: secret fleetmirror-system/member-x-fleetmirror deleted"))

	gone := func(c client.Client, obj client.Object) func(Gomega) {
		return func(g Gomega) {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: %v", obj, obj.GetName(), err)
		}
	}
	g.Eventually(gone(f.Hub.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "member-x-fleetmirror"}})).
		WithTimeout(wait.Timeout).WithPolling(wait.Poll).Should(Succeed())
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: cli.HubIdentity}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: cli.HubIdentity}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cli.HubIdentity}},
	} {
		g.Eventually(gone(member, obj)).WithTimeout(wait.Timeout).WithPolling(wait.Poll).Should(Succeed())
	}
	g.Expect(member.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed())
}

func TestRegisterClusterRefuses(t *testing.T) {
	f, kubeconfig := twoClusters(t)
	g := NewWithT(t)
	ctx := context.Background()
	member := f.Cluster("member-x").Client

	// The long-lived token needs the token controller, which envtest lacks:
	// a clear error after the bounded wait.
	out, err := runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-timeout=1s")
	g.Expect(err).To(MatchError(ContainSubstring("token controller did not fill")), out)
	var hubSecrets corev1.SecretList
	g.Expect(f.Hub.Client.List(ctx, &hubSecrets, client.InNamespace(agentNS))).To(Succeed())
	g.Expect(hubSecrets.Items).To(BeEmpty())

	// Unregister removes the token Secret too.
	out, err = runWith(kubeconfig, "unregister-cluster", "member-x", "--member-context=member")
	g.Expect(err).NotTo(HaveOccurred(), out)
	err = member.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: cli.HubTokenSecret}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)

	// A ClusterRole of the same name we did not create is neither taken
	// over nor deleted.
	g.Expect(member.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: cli.HubIdentity}})).To(Succeed())
	out, err = runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-duration=1h")
	g.Expect(err).To(MatchError(ContainSubstring("not created by kubectl-fleetmirror")), out)
	out, err = runWith(kubeconfig, "unregister-cluster", "member-x", "--member-context=member")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("clusterrole fleetmirror-hub kept"))
	g.Expect(member.Get(ctx, client.ObjectKey{Name: cli.HubIdentity}, &rbacv1.ClusterRole{})).To(Succeed())

	// Another Secret registering the same name: refused, not duplicated.
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "by-hand",
		Labels: map[string]string{annotations.LabelClusterName: "member-y"}}}
	g.Expect(f.Hub.Client.Create(ctx, other)).To(Succeed())
	out, err = runWith(kubeconfig, "register-cluster", "member-y", "--member-context=member", "--token-duration=1h")
	g.Expect(err).To(MatchError(ContainSubstring("already registered on the hub by Secret fleetmirror-system/by-hand")), out)

	for _, bad := range [][]string{
		{"register-cluster", "member-x"}, // no --member-context
		{"register-cluster", "member-x", "--member-context=nope"},
		{"register-cluster", "member-x", "--member-context=member", "--label=novalue"},
		{"register-cluster", "member-x", "--member-context=member", "--label=" + annotations.LabelReceiveOnly + "=yes"},
		{"register-cluster", "member-x", "--member-context=member", "--resource-types=Nothing.v1"},
		{"register-cluster", "member-x", "--member-context=member", "--token-duration=1m"},
		{"unregister-cluster", "-bad-"},
	} {
		out, err := runWith(kubeconfig, bad...)
		g.Expect(err).To(HaveOccurred(), "%v: %s", bad, out)
	}
}

// TestRegisterClusterWithTokenSecret registers a member whose hub identity
// exists already (the member chart's hubAccess): the token of that Secret
// goes into the hub's Secret, and nothing is written to the member.
func TestRegisterClusterWithTokenSecret(t *testing.T) {
	f, kubeconfig := twoClusters(t)
	g := NewWithT(t)
	ctx := context.Background()
	m := f.Cluster("member-x")

	// The chart's identity: a ServiceAccount and its token Secret. envtest
	// runs no token controller; the test fills the token in as it would,
	// with a token bound to the Secret.
	const sa, tokenSecret = "fm-fleetmirror-member-hub", "fm-fleetmirror-member-hub-token"
	g.Expect(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})).To(Succeed())
	g.Expect(m.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: sa}})).To(Succeed())
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: tokenSecret,
		Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}}, Type: corev1.SecretTypeServiceAccountToken}
	g.Expect(m.Client.Create(ctx, s)).To(Succeed())

	// Not filled yet: a clear error after the bounded wait, nothing on the hub.
	out, err := runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-secret="+tokenSecret, "--token-timeout=1s")
	g.Expect(err).To(MatchError(ContainSubstring("--token-secret fleetmirror-system/"+tokenSecret)), out)
	var hubSecrets corev1.SecretList
	g.Expect(f.Hub.Client.List(ctx, &hubSecrets, client.InNamespace(agentNS))).To(Succeed())
	g.Expect(hubSecrets.Items).To(BeEmpty())

	cs, err := kubernetes.NewForConfig(m.Config)
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(agentNS).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: s.Name, UID: s.UID},
	}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	s.Data = map[string][]byte{corev1.ServiceAccountTokenKey: []byte(tr.Status.Token)}
	g.Expect(m.Client.Update(ctx, s)).To(Succeed())
	before := memberObjects(t, m)

	out, err = runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-secret="+tokenSecret)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("member: token of secret fleetmirror-system/" + tokenSecret + " read"))
	g.Expect(out).NotTo(ContainSubstring("applied\nhub"), "nothing applied to the member")
	g.Expect(memberObjects(t, m)).To(Equal(before), "register-cluster --token-secret wrote to the member")

	// The hub's Secret authenticates as the chart's ServiceAccount.
	var reg corev1.Secret
	g.Expect(f.Hub.Client.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "member-x-fleetmirror"}, &reg)).To(Succeed())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(reg.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	hubView, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	review, err := hubView.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(review.Status.UserInfo.Username).To(Equal("system:serviceaccount:" + agentNS + ":" + sa))

	// Refused: a Secret that is not a service-account token, and a
	// short-lived token request beside --token-secret.
	plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "plain"}}
	g.Expect(m.Client.Create(ctx, plain)).To(Succeed())
	out, err = runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-secret=plain")
	g.Expect(err).To(MatchError(ContainSubstring("has type Opaque, not kubernetes.io/service-account-token")), out)
	out, err = runWith(kubeconfig, "register-cluster", "member-x", "--member-context=member", "--token-secret="+tokenSecret, "--token-duration=1h")
	g.Expect(err).To(MatchError(ContainSubstring("exclude each other")), out)
}

// memberObjects returns name -> resourceVersion of the member's
// ServiceAccounts, Secrets, ClusterRoles and ClusterRoleBindings.
func memberObjects(t *testing.T, c *fleettest.Cluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &corev1.SecretList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := c.Client.List(context.Background(), list); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			obj := o.(client.Object)
			out[fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())] = obj.GetResourceVersion()
		}
	}
	return out
}
