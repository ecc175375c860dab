package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// TestStatusRemote: with --hub-context, a source's CLUSTER/NS entries are
// resolved as the hub resolves them, from the hub's registration Secrets:
// one row per target, with the hub's identity deciding InSync, Missing and
// Conflict, and a registered cluster that does not answer Unreachable.
func TestStatusRemote(t *testing.T) {
	if api == nil {
		t.Skip("needs API servers")
	}
	g := NewWithT(t)
	ctx := context.Background()
	f, kubeconfig := twoClusters(t)
	hubC, memR := f.Hub, f.Cluster("member-x")

	fleettest.CreateNamespaces(t, agentNS, nil, hubC, memR)
	fleettest.CreateNamespaces(t, "shared", nil, hubC, memR)
	fleettest.CreateNamespaces(t, "src", nil, memR)
	// The member agent's Deployment says the source's cluster is member-x,
	// the name the hub registers it under.
	labels := map[string]string{"app.kubernetes.io/name": "fleetmirror-member"}
	g.Expect(memR.Client.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "fleetmirror-member", Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "member", Image: "fleetmirror:dev",
				Command: []string{"/usr/local/bin/fleetmirror-member"}, Args: []string{"--cluster-name=member-x"}}}},
		}},
	})).To(Succeed())
	// Registered with the hub: member-x, and a cluster nothing answers for.
	g.Expect(fleettest.RegisterPlain(ctx, hubC.Client, agentNS, memR, nil, nil)).To(Succeed())
	deadKC, err := memR.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	addr, err := fleettest.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	deadKC = []byte(strings.Replace(string(deadKC), memR.Config.Host, "https://"+addr, 1))
	g.Expect(fleettest.RegisterPlain(ctx, hubC.Client, agentNS, &fleettest.Cluster{Name: "dead"}, deadKC, nil)).To(Succeed())
	// And twice more: member-x by a later Secret, and the hub's own
	// cluster. The hub refuses both, and so does the plugin.
	memberKC, err := memR.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fleettest.RegisterAs(ctx, hubC.Client, agentNS, "member-x-again", "member-x-again", memberKC)
	g.Expect(err).NotTo(HaveOccurred())
	hubKC, err := hubC.Kubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fleettest.RegisterAs(ctx, hubC.Client, agentNS, "hub-again", "hub-again", hubKC)
	g.Expect(err).NotTo(HaveOccurred())

	src := &corev1.Secret{ObjectMeta: fleettest.SourceMeta("src", "creds", "*/shared"), StringData: map[string]string{"k": "v"}}
	g.Expect(memR.Client.Create(ctx, src)).To(Succeed())

	// The member's context, with the hub's beside it.
	plugin := func(args ...string) string {
		out, err := runWith(kubeconfig, append(args, "--context=member", "--hub-context=hub")...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		return out
	}
	statusRemote := func() map[string]cli.Target {
		out := plugin("status", "secret/creds", "-n", "src", "-o", "json")
		var r cli.Report
		g.Expect(json.Unmarshal([]byte(out), &r)).To(Succeed(), out)
		rows := map[string]cli.Target{}
		for _, tg := range r.Targets {
			rows[tg.Cluster+"/"+tg.Namespace] = tg
		}
		return rows
	}

	// Nothing written yet: hub/shared is Missing (the source's own cluster
	// is never a target of the hub), dead is Unreachable, and the hub's
	// registration namespace is excluded in its own cluster.
	rows := statusRemote()
	g.Expect(rows).To(HaveKeyWithValue("hub/shared", HaveField("State", cli.Missing)))
	g.Expect(rows).NotTo(HaveKey(HavePrefix("member-x-again/")))
	g.Expect(rows).NotTo(HaveKey(HavePrefix("hub-again/")))
	hubClusters(t, plugin, hubC, memR)
	g.Expect(rows).NotTo(HaveKey("member-x/shared"))
	g.Expect(rows).To(HaveKeyWithValue("dead/", HaveField("State", cli.Unreachable)))
	g.Expect(rows["dead/"].Reason).To(ContainSubstring("ClusterUnreachable"))
	g.Expect(plugin("why", "secret/creds", "-n", "src", "--in", "dead/shared")).To(
		And(ContainSubstring("Unreachable"), ContainSubstring("registration Secret")))
	g.Expect(plugin("why", "secret/creds", "-n", "src", "--in", "hub/shared")).To(ContainSubstring("Missing"))

	// The hub's mirror, as the hub builds it: InSync.
	live := &corev1.Secret{}
	g.Expect(memR.Client.Get(ctx, client.ObjectKey{Namespace: "src", Name: "creds"}, live)).To(Succeed())
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	want, _, err := desired.Build(u, desired.Target{Cluster: "hub", Namespace: "shared"},
		desired.Options{SourceCluster: "member-x", ManagedBy: annotations.ManagedByHub}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hubC.Client.Create(ctx, want)).To(Succeed())
	g.Expect(statusRemote()).To(HaveKeyWithValue("hub/shared", HaveField("State", cli.InSync)))
	g.Expect(plugin("why", "secret/creds", "-n", "src", "--in", "hub/shared")).To(ContainSubstring("It is mirrored there"))

	// Someone else's Secret of that name: Conflict, left alone.
	g.Expect(hubC.Client.Delete(ctx, want)).To(Succeed())
	g.Eventually(func() bool {
		s, err := fleettest.Lookup(hubC, fleettest.Secret("shared", "creds"))
		return err == nil && s == nil
	}).Should(BeTrue(), "the deleted mirror is gone")
	g.Expect(hubC.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: "creds"}})).To(Succeed())
	g.Expect(statusRemote()).To(HaveKeyWithValue("hub/shared", HaveField("State", cli.Conflict)))

	remotePulls(t, hubC, memR, plugin)
}

// hubClusters: list and status with --hub-context show every cluster of
// the hub with its identity (the UID of its kube-system Namespace) and
// state; a second registration of a cluster is a duplicate of the first.
func hubClusters(t *testing.T, plugin func(args ...string) string, hubC, memR *fleettest.Cluster) {
	t.Helper()
	g := NewWithT(t)
	uid := func(c *fleettest.Cluster) string {
		ns := &corev1.Namespace{}
		g.Expect(c.Client.Get(context.Background(), client.ObjectKey{Name: "kube-system"}, ns)).To(Succeed())
		return string(ns.UID)
	}
	var l cli.Listing
	out := plugin("list", "-A", "-o", "json")
	g.Expect(json.Unmarshal([]byte(out), &l)).To(Succeed(), out)
	byName := map[string]cli.HubCluster{}
	for _, hc := range l.HubClusters {
		byName[hc.Name] = hc
	}
	g.Expect(byName).To(HaveLen(5))
	g.Expect(byName["hub"]).To(Equal(cli.HubCluster{Name: "hub", Identity: uid(hubC), State: "serving"}))
	g.Expect(byName["member-x"]).To(Equal(cli.HubCluster{Name: "member-x", Identity: uid(memR), State: "serving"}))
	g.Expect(byName["member-x-again"]).To(Equal(cli.HubCluster{Name: "member-x-again", Identity: uid(memR), State: "duplicate of member-x"}))
	g.Expect(byName["hub-again"]).To(Equal(cli.HubCluster{Name: "hub-again", Identity: uid(hubC), State: "duplicate of hub"}))
	g.Expect(byName["dead"].Identity).To(BeEmpty())
	g.Expect(byName["dead"].State).To(HavePrefix("unreachable: "))

	text := plugin("status", "secret/creds", "-n", "src")
	g.Expect(text).To(ContainSubstring("Hub clusters:"))
	g.Expect(text).To(MatchRegexp(`member-x-again\s+` + uid(memR) + `\s+duplicate of member-x`))
	g.Expect(plugin("list", "-A")).To(MatchRegexp(`hub-again\s+` + uid(hubC) + `\s+duplicate of hub`))
}
