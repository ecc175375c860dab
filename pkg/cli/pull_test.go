package cli_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// status and why on pull mirrors say what the agent decides of each: its
// source, its state in the plugin's words, and the fix.
func TestStatusOfPullMirrors(t *testing.T) {
	k8s := setup(t)
	ctx := context.Background()
	nss := newNamespaces(t, "pullsrc", "pulldst")
	src, dst := nss[0], nss[1]
	create := func(obj *corev1.Secret) {
		t.Helper()
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	source := func(name, allow string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: name, Labels: map[string]string{annotations.LabelEnabled: "true"}},
			StringData: map[string]string{"k": "v"}}
		if allow != "" {
			s.Annotations = map[string]string{annotations.AnnotationAllowPullInto: allow}
		}
		return s
	}
	pull := func(name, from string, labelled bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dst, Name: name, Annotations: map[string]string{annotations.AnnotationMirrorFrom: from}}}
		if labelled {
			s.Labels = map[string]string{annotations.LabelPull: "true"}
		}
		return s
	}
	create(source("open", dst))
	create(source("closed", ""))
	create(pull("ok", src+"/open", true))
	create(pull("refused", src+"/closed", true))
	create(pull("missing", src+"/nothing", true))
	create(pull("unlabelled", src+"/open", false))
	create(pull("malformed", src+"/a/b/c", true))
	create(pull("remote", "eu-1/"+src+"/open", true))

	g := NewWithT(t)
	pullOf := func(g Gomega, name string) *cli.PullReport {
		r := status(g, dst, "secret/"+name)
		g.Expect(r.Pull).NotTo(BeNil(), "status of %s reports no pull", name)
		return r.Pull
	}
	// Before any agent wrote it: Pending.
	g.Expect(pullOf(g, "ok")).To(And(HaveField("State", cli.Pending), HaveField("ServedBy", "member"), HaveField("MirrorFrom", src+"/open")))

	startAgent(t)
	g.Eventually(func(g Gomega) {
		p := pullOf(g, "ok")
		g.Expect(p.State).To(Equal(cli.InSync))
		g.Expect(p.PullState).To(Equal("InSync"))
	}, wait.Timeout, wait.Poll).Should(Succeed())

	for _, tc := range []struct {
		name      string
		state     cli.State
		pullState string
		reason    string
		fix       string
	}{
		{"refused", cli.Excluded, "NotAllowed", "allows no pulls", "kubectl annotate --overwrite secret/closed -n " + src + " fleetmirror.io/allow-pull-into=" + dst},
		{"missing", cli.Missing, "SourceMissing", "does not exist", "check the source named in fleetmirror.io/mirror-from"},
		{"unlabelled", cli.Excluded, "NotPullMirror", "not the label fleetmirror.io/pull=true", "kubectl label secret/unlabelled -n " + dst + " fleetmirror.io/pull=true"},
		{"malformed", cli.Excluded, "Refused", "write NAMESPACE/NAME", "kubectl annotate --overwrite secret/malformed -n " + dst + " fleetmirror.io/mirror-from="},
		{"remote", cli.Pending, "", "the hub serves it; give --hub-context", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := pullOf(g, tc.name)
			g.Expect(p.State).To(Equal(tc.state))
			g.Expect(p.PullState).To(Equal(tc.pullState))
			g.Expect(p.Reason).To(ContainSubstring(tc.reason))
			g.Expect(p.Fix).To(ContainSubstring(tc.fix))
			out, err := run("why", "secret/"+tc.name, "-n", dst)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(ContainSubstring(tc.reason))
			if tc.fix != "" {
				g.Expect(out).To(And(ContainSubstring("\nFix: "), ContainSubstring(tc.fix)))
			}
		})
	}

	// The text form, and why on a pull mirror in sync.
	out, err := run("status", "secret/ok", "-n", dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(And(ContainSubstring("Pull mirror:"), MatchRegexp(`Mirror from:\s+`+src+`/open`), MatchRegexp(`State:\s+InSync \(InSync\)`),
		MatchRegexp(`Status:\s+InSync: pulled from `+src+`/open`), ContainSubstring("Pulled")))
	out, err = run("why", "secret/ok", "-n", dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("It holds the content of " + src + "/open (InSync)."))
}

// remotePulls checks, in TestStatusRemote's fleet, what status says of
// CLUSTER/NS/NAME pull mirrors in member-x with --hub-context: the hub's
// checks, with the source read in its cluster.
func remotePulls(t *testing.T, hubC, memR *fleettest.Cluster, plugin func(args ...string) string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	fleettest.CreateNamespaces(t, "pulls", nil, hubC)
	for name, allow := range map[string]string{"open": "member-x/shared", "closed": "other/shared"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "pulls", Name: name,
			Labels: map[string]string{annotations.LabelEnabled: "true"}, Annotations: map[string]string{annotations.AnnotationAllowPullInto: allow}}}
		g.Expect(hubC.Client.Create(ctx, s)).To(Succeed())
	}
	for name, from := range map[string]string{"p-open": "hub/pulls/open", "p-closed": "hub/pulls/closed", "p-dead": "dead/pulls/open",
		"p-unknown": "nowhere/pulls/open", "p-own": "member-x/pulls/open"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: name,
			Labels: map[string]string{annotations.LabelPull: "true"}, Annotations: map[string]string{annotations.AnnotationMirrorFrom: from}}}
		g.Expect(memR.Client.Create(ctx, s)).To(Succeed())
	}
	for _, tc := range []struct {
		name   string
		state  cli.State
		reason string
	}{
		{"p-open", cli.Pending, "the content of hub/pulls/open is to be written"},
		{"p-closed", cli.Excluded, "does not allow pulls into member-x/shared"},
		{"p-dead", cli.Unreachable, "the cluster dead of the source dead/pulls/open cannot be read"},
		{"p-unknown", cli.Missing, "not registered with the hub"},
		{"p-own", cli.Excluded, "names the pull mirror's own cluster member-x"},
	} {
		out := plugin("status", "secret/"+tc.name, "-n", "shared", "-o", "json")
		var r cli.Report
		g.Expect(json.Unmarshal([]byte(out), &r)).To(Succeed(), out)
		g.Expect(r.Pull).NotTo(BeNil(), out)
		g.Expect(r.Pull.ServedBy).To(Equal("hub"))
		g.Expect(r.Pull.State).To(Equal(tc.state), "%s: %s", tc.name, r.Pull.Reason)
		g.Expect(r.Pull.Reason).To(ContainSubstring(tc.reason), tc.name)
	}
	g.Expect(plugin("why", "secret/p-closed", "-n", "shared")).To(ContainSubstring(
		"kubectl annotate --overwrite secret/closed -n pulls fleetmirror.io/allow-pull-into=member-x/shared"))
}
