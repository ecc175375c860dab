package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/hub"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// The finalizers of the agents, and one of somebody else's.
const (
	policyFinalizer = annotations.Prefix + "policy-cleanup"
	othersFinalizer = "example.com/keep"
)

// cleanupCluster starts an API server of its own, with the MirrorPolicy
// CRD and no agent, for cleanup to scan as a whole; it returns it and the
// path of its admin kubeconfig.
func cleanupCluster(t *testing.T) (*fleettest.Cluster, string) {
	t.Helper()
	if api == nil {
		t.Skip("needs an API server")
	}
	f, err := fleettest.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	if _, err := fleettest.InstallPolicyCRD(f.Hub.Config); err != nil {
		t.Fatal(err)
	}
	kc, err := f.Hub.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return f.Hub, path
}

// getIn reads obj (namespace and name set) afresh from c: it must exist.
func getIn[T client.Object](g Gomega, c *fleettest.Cluster, obj T) T {
	got, err := fleettest.Lookup(c, obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(BeNil(), "%s/%s", obj.GetNamespace(), obj.GetName())
	return got
}

// createMirror creates the mirror in ns of the Secret srcNS/name of
// cluster, as writer managedBy builds it.
func createMirror(g Gomega, k8s client.Client, managedBy, cluster, srcNS, name, ns string) {
	src := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"v": "b25l"}}}
	src.SetAPIVersion("v1")
	src.SetKind("Secret")
	src.SetNamespace(srcNS)
	src.SetName(name)
	src.SetUID("0c3e0e0c-0000-4000-8000-000000000001")
	m, _, err := desired.Build(src, desired.Target{Namespace: ns}, desired.Options{SourceCluster: cluster, ManagedBy: managedBy}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Create(context.Background(), m)).To(Succeed())
}

// TestCleanup runs cleanup against a cluster that agents left as they
// leave one when they go without their uninstall: mirrors (and objects
// that only look like them), sources with the agents' finalizers (of
// earlier versions) and statuses, one being deleted, a MirrorPolicy whose
// CRD is being deleted, a pull mirror's status, the member's kinds
// object. The dry run writes nothing; each --apply removes exactly the
// marks of its --managed-by, and what was being deleted goes.
func TestCleanup(t *testing.T) {
	c, kubeconfig := cleanupCluster(t)
	k8s := c.Client
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{"src", "a", "b", "pol", "fleetmirror-system"} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	const bothStatuses = "2/2 namespaces synced | remote: 1 cluster, 1/1 synced"
	secret := func(ns, name string, labels, annots map[string]string, finalizers ...string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annots, Finalizers: finalizers}}
	}
	sourceLabels := map[string]string{annotations.LabelEnabled: "true"}
	mirrorLabels := map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByMember}
	objects := []client.Object{
		// A source with both agents' marks, and somebody else's.
		secret("src", "db", sourceLabels, map[string]string{
			annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: "a, b, hub-cluster/a",
			annotations.AnnotationStatus: bothStatuses, "team": "payments",
		}, member.Finalizer, othersFinalizer, hub.Finalizer),
		// A source whose label is gone, the member's marks still on it.
		secret("src", "former", nil, map[string]string{annotations.AnnotationStatus: "1/1 namespaces synced"}, member.Finalizer),
		// A source to be deleted while it holds the member's finalizer.
		secret("src", "doomed", sourceLabels, nil, member.Finalizer),
		// Lookalikes: our labels with another source's name, without a
		// source reference; an object named like a source in a target.
		secret("a", "lookalike", mirrorLabels, map[string]string{annotations.AnnotationSource: "cluster-1/src/db"}),
		secret("a", "noref", mirrorLabels, nil),
		secret("b", "db-copy", nil, nil),
		secret("a", "former", nil, nil),
		// A pull mirror the member serves.
		secret("b", "pulled", map[string]string{annotations.LabelPull: "true"}, map[string]string{
			annotations.AnnotationMirrorFrom: "src/db", annotations.AnnotationStatus: "Synced: the source's content", "mine": "yes",
		}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "fleetmirror-system", Name: clusters.MemberKindsName,
			Labels: map[string]string{clusters.LabelMemberKinds: "true"}}},
		&v1alpha1.MirrorPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "pol", Name: "doomed", Finalizers: []string{policyFinalizer}},
			Spec:       v1alpha1.MirrorPolicySpec{Source: v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: []string{"x"}}, TargetNamespaces: []string{"a"}},
		},
	}
	for _, o := range objects {
		g.Expect(k8s.Create(ctx, o)).To(Succeed())
	}
	createMirror(g, k8s, annotations.ManagedByMember, "cluster-1", "src", "db", "a")
	createMirror(g, k8s, annotations.ManagedByMember, "cluster-1", "src", "db", "b")
	createMirror(g, k8s, annotations.ManagedByHub, "hub-cluster", "src", "db", "pol") // as the hub writes into a member
	// The source is deleted, and so is the CRD with the policy in place
	// (its resources then list no patch verb in discovery, yet take it).
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName("mirrorpolicies.fleetmirror.io")
	for _, o := range []client.Object{fleettest.Secret("src", "doomed"), crd} {
		g.Expect(k8s.Delete(ctx, o)).To(Succeed())
	}
	t.Cleanup(func() { // somebody else's finalizer would keep src/db for ever
		_ = k8s.Patch(ctx, secret("src", "db", nil, nil), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	crdExists := func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Name: crd.GetName()}, crd.DeepCopy())
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return err == nil
	}
	exists := func(obj client.Object) bool {
		got, err := fleettest.Lookup(c, obj)
		g.Expect(err).NotTo(HaveOccurred())
		return got != nil
	}

	// The dry run lists every change and makes none.
	before := resourceVersions(g, k8s)
	out, err := runWith(kubeconfig, "cleanup")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(resourceVersions(g, k8s)).To(Equal(before), out)
	g.Expect(crdExists()).To(BeTrue(), "the policy's finalizer holds the CRD")
	g.Expect(out).To(HavePrefix("Dry run: nothing is written."))
	g.Expect(out).To(MatchRegexp(`(?m)^Secret\s+a\s+db\s+delete: mirror of cluster-1/src/db \(managed-by member\)$`))
	g.Expect(out).To(MatchRegexp(`(?m)^Secret\s+pol\s+db\s+delete: mirror of hub-cluster/src/db \(managed-by hub\)$`))
	g.Expect(out).To(MatchRegexp(`(?m)^MirrorPolicy\s+pol\s+doomed\s+remove finalizer ` + policyFinalizer + `$`))
	g.Expect(out).To(MatchRegexp(`(?m)^Secret\s+src\s+db\s+remove finalizer ` + member.Finalizer + `, ` + hub.Finalizer + `; remove ` + annotations.AnnotationStatus + ` "` + bothStatuses + `"$`))
	g.Expect(out).NotTo(ContainSubstring("lookalike"))
	g.Expect(out).NotTo(ContainSubstring("noref"))
	g.Expect(out).NotTo(ContainSubstring("db-copy"))
	g.Expect(out).To(ContainSubstring("4 objects to delete, finalizers to remove from 4 objects, 3 status annotations to change.\nRun again with --apply"))

	out, err = runWith(kubeconfig, "cleanup", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var rep cli.CleanupReport
	g.Expect(json.Unmarshal([]byte(out), &rep)).To(Succeed(), out)
	g.Expect(rep.Objects).To(HaveLen(9))
	g.Expect(rep.Objects).To(ContainElement(And(HaveField("Kind", "Secret"), HaveField("Namespace", "src"), HaveField("Name", "former"),
		HaveField("RemoveFinalizers", []string{member.Finalizer}), HaveField("Status", "1/1 namespaces synced"), HaveField("NewStatus", HaveValue(BeEmpty())))))
	g.Expect(resourceVersions(g, k8s)).To(Equal(before))

	// The member's marks only, mirrors kept: the hub's part of the status
	// and its finalizer stay.
	out, err = runWith(kubeconfig, "cleanup", "--managed-by=member", "--keep-mirrors", "--apply")
	g.Expect(err).NotTo(HaveOccurred(), out)
	src := getIn(g, c, fleettest.Secret("src", "db"))
	g.Expect(src.Finalizers).To(Equal([]string{othersFinalizer, hub.Finalizer}), out)
	g.Expect(src.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "remote: 1 cluster, 1/1 synced"))
	g.Expect(exists(fleettest.Secret("a", "db"))).To(BeTrue(), "--keep-mirrors keeps the mirrors")
	g.Expect(exists(fleettest.Secret("pol", "db"))).To(BeTrue(), "the hub's mirror is not the member's")
	g.Expect(exists(fleettest.ConfigMap("fleetmirror-system", clusters.MemberKindsName))).To(BeFalse(), "the kinds object is not a mirror: it goes")
	// What was being deleted goes, once the finalizer is off.
	g.Expect(exists(fleettest.Secret("src", "doomed"))).To(BeFalse(), out)
	g.Eventually(crdExists, wait.Timeout, wait.Poll).Should(BeFalse(), "the policy went, and the CRD with it: %s", out)

	// Everything left of both.
	out, err = runWith(kubeconfig, "cleanup", "--apply")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("Dry run"))
	g.Expect(out).To(MatchRegexp(`(?m)^Secret\s+a\s+db\s+delete: mirror of cluster-1/src/db \(managed-by member\)\s+done$`))
	for _, gone := range []client.Object{fleettest.Secret("a", "db"), fleettest.Secret("b", "db"), fleettest.Secret("pol", "db")} {
		g.Expect(exists(gone)).To(BeFalse(), "%s/%s: %s", gone.GetNamespace(), gone.GetName(), out)
	}
	// Never by name, never by label alone.
	for _, name := range []string{"lookalike", "noref", "former"} {
		g.Expect(getIn(g, c, fleettest.Secret("a", name)).ResourceVersion).To(Equal(before["secret a/"+name]), name)
	}
	g.Expect(getIn(g, c, fleettest.Secret("b", "db-copy")).ResourceVersion).To(Equal(before["secret b/db-copy"]))
	src = getIn(g, c, fleettest.Secret("src", "db"))
	g.Expect(src.Finalizers).To(Equal([]string{othersFinalizer}))
	g.Expect(src.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
	g.Expect(src.Annotations).To(HaveKeyWithValue("team", "payments"))
	g.Expect(src.Annotations).To(HaveKeyWithValue(annotations.AnnotationTargetNamespaces, "a, b, hub-cluster/a"))
	g.Expect(src.Labels).To(Equal(sourceLabels))
	former := getIn(g, c, fleettest.Secret("src", "former"))
	g.Expect(former.Finalizers).To(BeEmpty())
	g.Expect(former.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
	pulled := getIn(g, c, fleettest.Secret("b", "pulled"))
	g.Expect(pulled.Annotations).To(Equal(map[string]string{annotations.AnnotationMirrorFrom: "src/db", "mine": "yes"}))
	g.Expect(pulled.Labels).To(HaveKeyWithValue(annotations.LabelPull, "true"))

	out, err = runWith(kubeconfig, "cleanup")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HaveSuffix("Nothing of the fleetmirror agents' found.\n"))
}

// TestCleanupRaces changes objects between the scan and the writes: a
// source whose metadata changed is released all the same, with the new
// metadata kept; a mirror that is no longer proven ours is not deleted.
func TestCleanupRaces(t *testing.T) {
	c, _ := cleanupCluster(t)
	k8s := c.Client
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{"src", "a"} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "db",
		Annotations: map[string]string{annotations.AnnotationStatus: "1/1 namespaces synced"}, Finalizers: []string{member.Finalizer}}})).To(Succeed())
	createMirror(g, k8s, annotations.ManagedByMember, "cluster-1", "src", "db", "a")

	cl, err := cli.NewCleaner(c.Config, []cli.Writer{cli.Writers["member"]}, false)
	g.Expect(err).NotTo(HaveOccurred())
	rep, err := cl.Scan(ctx, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rep.Objects).To(HaveLen(2))
	fleettest.Change(t, wait, c, fleettest.Secret("src", "db"), func(s *corev1.Secret) {
		s.Annotations["added"] = "meanwhile"
		s.Finalizers = append(s.Finalizers, othersFinalizer)
	})
	fleettest.Change(t, wait, c, fleettest.Secret("a", "db"), func(s *corev1.Secret) { delete(s.Labels, annotations.LabelMirror) })
	cl.Apply(ctx, rep)

	results := map[string]string{}
	for _, o := range rep.Objects {
		results[o.Namespace+"/"+o.Name] = o.Result
	}
	g.Expect(results).To(Equal(map[string]string{
		"src/db": "done",
		"a/db":   "skipped: it changed since the scan and holds nothing of the agents' any more",
	}))
	g.Expect(rep.Err()).To(Succeed())
	src := getIn(g, c, fleettest.Secret("src", "db"))
	g.Expect(src.Finalizers).To(Equal([]string{othersFinalizer}))
	g.Expect(src.Annotations).To(Equal(map[string]string{"added": "meanwhile"}))
	_ = k8s.Patch(ctx, src, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	g.Expect(getIn(g, c, fleettest.Secret("a", "db")).Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByMember))
}

// TestCleanupForbidden runs cleanup as a user who may list and write
// Secrets only: it cleans them, names every resource it could not list,
// and fails.
func TestCleanupForbidden(t *testing.T) {
	c, _ := cleanupCluster(t)
	k8s := c.Client
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}})).To(Succeed())
	createMirror(g, k8s, annotations.ManagedByMember, "cluster-1", "src", "db", "a")
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cm",
		Annotations: map[string]string{annotations.AnnotationStatus: "1/1 namespaces synced"}, Finalizers: []string{member.Finalizer}}})).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Patch(ctx, fleettest.ConfigMap("a", "cm"), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secrets-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "get", "patch", "delete"}},
	}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "secrets-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "secrets-only"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "laptop"}},
	})).To(Succeed())
	_, kc, err := c.AddUser("laptop", nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())

	// RBAC takes a moment to reach the authorizer's cache.
	g.Eventually(func(g Gomega) {
		out, err := runWith(kubeconfig, "cleanup", "--apply")
		g.Expect(err).To(MatchError(And(ContainSubstring("not scanned"), ContainSubstring("configmaps"))), out)
		g.Expect(out).To(MatchRegexp(`(?m)^Secret\s+a\s+db\s+delete: .*\s+(done|gone)$`))
		g.Expect(out).To(ContainSubstring("Not scanned (what they hold of the agents' stays):\n"))
		g.Expect(out).To(ContainSubstring("  configmaps: forbidden (RBAC)\n"))
		g.Expect(out).To(ContainSubstring("could not look for agents that still run"))
	}, wait.Timeout, wait.Poll).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: "a", Name: "db"}, &corev1.Secret{}))).To(BeTrue())
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "a", Name: "cm"}, cm)).To(Succeed())
	g.Expect(cm.Finalizers).To(Equal([]string{member.Finalizer}), "not scanned, not written")
}

// TestCleanupRefusesWhileAnAgentRuns: the package's API server has a
// member agent Deployment with a replica; --apply writes nothing there.
func TestCleanupRefusesWhileAnAgentRuns(t *testing.T) {
	k8s := setup(t)
	g := NewWithT(t)
	ns := newNamespaces(t, "cleanup-running")[0]
	createMirror(g, k8s, annotations.ManagedByMember, "test", "src", "db", ns)
	out, err := run("cleanup", "-n", ns, "--apply")
	g.Expect(err).To(MatchError(And(ContainSubstring("nothing written: "), ContainSubstring("the member agent (Deployment "+agentNS+"/fleetmirror-member, 1 replica)"),
		ContainSubstring("still runs here"))), out)
	g.Expect(out).To(ContainSubstring("Dry run: nothing is written."))
	g.Expect(get(g, fleettest.Secret(ns, "db")).Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
	// Leaving the member out, nothing of the hub's is there.
	out, err = run("cleanup", "-n", ns, "--apply", "--managed-by=hub")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("Nothing of the fleetmirror agents' found."))
}
