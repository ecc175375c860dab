package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

var api *fleettest.Fleet

func TestMain(m *testing.M) { fleettest.Main(m, &api) }

const agentNS = "fleetmirror-system"

// agentArgs are the in-process agent's arguments, and those of the
// Deployment the plugin reads them from.
var agentArgs = []string{
	"--cluster-name=test",
	"--namespace=" + agentNS,
	"--resource-types=Secret.v1,ConfigMap.v1",
	"--metrics-bind-address=0",
	"--health-probe-bind-address=0",
	"--resync-period=0",
	"--lazy-probe-interval=200ms",
}

var wait = fleettest.Wait{Timeout: 30 * time.Second, Poll: 200 * time.Millisecond}

var (
	setupOnce  sync.Once
	kubeconfig string
	setupErr   error
)

// setup skips the test without API servers; otherwise it creates, once,
// the agent's namespace with its Deployment (never run: envtest has no
// controllers; the plugin reads its arguments) and a kubeconfig file.
func setup(t *testing.T) client.Client {
	t.Helper()
	if api == nil {
		t.Skip("needs an API server")
	}
	setupOnce.Do(func() {
		ctx := context.Background()
		c := api.Hub.Client
		if setupErr = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}}); setupErr != nil {
			return
		}
		labels := map[string]string{"app.kubernetes.io/name": "fleetmirror-member"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "fleetmirror-member", Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "member", Image: "fleetmirror:dev", Command: []string{"/usr/local/bin/fleetmirror-member"}, Args: agentArgs,
					}}},
				},
			},
		}
		if setupErr = c.Create(ctx, d); setupErr != nil {
			return
		}
		var kc []byte
		if kc, setupErr = api.Hub.Kubeconfig(); setupErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "kubectl-fleetmirror-")
		if setupErr = err; err != nil {
			return
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		setupErr = os.WriteFile(kubeconfig, kc, 0o600)
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	return api.Hub.Client
}

// startAgent runs the member agent in the test process until the test ends
// or the returned function stops it.
func startAgent(t *testing.T) (stop func()) {
	t.Helper()
	o, err := member.ParseOptions(agentArgs...)
	if err != nil {
		t.Fatal(err)
	}
	o.RESTConfig = api.Hub.Config
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- member.Run(ctx, o) }()
	stop = sync.OnceFunc(func() { fleettest.StopInProcess("agent", cancel, done) })
	t.Cleanup(stop)
	return stop
}

// run runs the plugin with args against the test API server and returns
// what it printed.
func run(args ...string) (string, error) { return runWith(kubeconfig, args...) }

// status runs status -o json and decodes it.
func status(g Gomega, ns, obj string) cli.Report {
	out, err := run("status", obj, "-n", ns, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var r cli.Report
	g.Expect(json.Unmarshal([]byte(out), &r)).To(Succeed(), out)
	return r
}

// states maps the target namespaces of r to their states.
func states(r cli.Report) map[string]cli.State {
	out := map[string]cli.State{}
	for _, t := range r.Targets {
		out[t.Namespace] = t.State
	}
	return out
}

func reasonIn(r cli.Report, ns string) string {
	for _, t := range r.Targets {
		if t.Namespace == ns {
			return t.Reason
		}
	}
	return ""
}

func newNamespaces(t *testing.T, prefixes ...string) []string {
	t.Helper()
	var out []string
	for _, p := range prefixes {
		ns, err := fleettest.NewNamespace(api.Hub, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ns)
	}
	return out
}

// TestStatus follows one source through every state a target can be in,
// as a person running the plugin sees them.
func TestStatus(t *testing.T) {
	k8s := setup(t)
	ctx := context.Background()
	nss := newNamespaces(t, "src", "a", "b", "c")
	src, a, b, c := nss[0], nss[1], nss[2], nss[3]

	// An unowned Secret of the source's name in c.
	taken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c, Name: "creds"}, StringData: map[string]string{"mine": "yes"}}
	if err := k8s.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	stopAgent := startAgent(t)
	source := &corev1.Secret{ObjectMeta: fleettest.SourceMeta(src, "creds", strings.Join([]string{a, b, c, "kube-system"}, ", ")), StringData: map[string]string{"password": "s3cret"}}
	if err := k8s.Create(ctx, source); err != nil {
		t.Fatal(err)
	}

	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		r := status(g, src, "secret/creds")
		got := states(r)
		g.Expect(got).To(HaveKeyWithValue(a, cli.InSync))
		g.Expect(got).To(HaveKeyWithValue(b, cli.InSync))
		g.Expect(got).To(HaveKeyWithValue(c, cli.Conflict))
		g.Expect(got).To(HaveKeyWithValue("kube-system", cli.Excluded))
		g.Expect(reasonIn(r, "kube-system")).To(ContainSubstring("--excluded-namespaces"))
		g.Expect(reasonIn(r, c)).To(ContainSubstring("not managed by fleetmirror"))
		g.Expect(r.Source.Agent).To(ContainSubstring(agentNS + "/fleetmirror-member"))
		g.Expect(r.Source.Entries).To(Equal([]string{a, b, c, "kube-system"}))
		g.Expect(r.Source.Events).To(ContainElement(HaveField("Reason", "TargetConflict")))
	}, wait.Timeout, wait.Poll).Should(Succeed())

	// The JSON contract: exactly these fields, by these names.
	out, err := run("status", "secret/creds", "-n", src, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred())
	var raw map[string]json.RawMessage
	g.Expect(json.Unmarshal([]byte(out), &raw)).To(Succeed())
	g.Expect(raw).To(HaveLen(2))
	var rows []map[string]any
	g.Expect(json.Unmarshal(raw["targets"], &rows)).To(Succeed())
	g.Expect(rows).NotTo(BeEmpty())
	for _, row := range rows {
		g.Expect(row).To(HaveLen(4))
		g.Expect(row).To(HaveKey("cluster"))
		g.Expect(row).To(HaveKey("namespace"))
		g.Expect(row).To(HaveKey("state"))
		g.Expect(row).To(HaveKey("reason"))
	}

	// With the agent stopped, nothing corrects what people do to mirrors.
	stopAgent()
	fleettest.Change(t, wait, api.Hub, fleettest.Secret(a, "creds"), func(s *corev1.Secret) { s.Data["password"] = []byte("changed by hand") })
	if err := k8s.Delete(ctx, fleettest.Secret(b, "creds")); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func(g Gomega) {
		got := states(status(g, src, "secret/creds"))
		g.Expect(got).To(HaveKeyWithValue(a, cli.Drifted))
		g.Expect(got).To(HaveKeyWithValue(b, cli.Missing))
		g.Expect(got).To(HaveKeyWithValue(c, cli.Conflict))
	}, wait.Timeout, wait.Poll).Should(Succeed())

	// Every spelling of the kind names the same object.
	for _, kind := range []string{"secrets", "Secret.v1", "secret"} {
		r := status(g, src, kind+"/creds")
		g.Expect(states(r)).To(HaveKeyWithValue(a, cli.Drifted), kind)
	}

	// why --in: the Decision, or the state.
	out, err = run("why", "secret/creds", "-n", src, "--in", "kube-system")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("Not mirrored into kube-system"))
	g.Expect(out).To(ContainSubstring("excluded by the agent's --excluded-namespaces"))
	g.Expect(out).To(ContainSubstring("Fix: "))
	out, err = run("why", "secret/creds", "-n", src, "--in", a)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("its state is Drifted"))

	// list counts the source's targets by state, alone in its namespace
	// and among all.
	for _, scope := range [][]string{{"-n", src}, {"-A"}} {
		out, err := run(append([]string{"list", "-o", "json"}, scope...)...)
		g.Expect(err).NotTo(HaveOccurred(), out)
		var l cli.Listing
		g.Expect(json.Unmarshal([]byte(out), &l)).To(Succeed())
		g.Expect(l.Sources).To(ContainElement(And(
			HaveField("Namespace", src), HaveField("Kind", "Secret"), HaveField("Name", "creds"), HaveField("Targets", 3),
			HaveField("States", And(HaveKeyWithValue(cli.Drifted, 1), HaveKeyWithValue(cli.Missing, 1), HaveKeyWithValue(cli.Conflict, 1),
				HaveKeyWithValue(cli.Excluded, BeNumerically(">=", 1)))),
		)), out)
		if scope[0] == "-n" {
			g.Expect(l.Sources).To(HaveLen(1))
		}
	}
	out, err = run("list", "-n", src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`(?m)^` + src + `\s+Secret\s+creds\s+3\s+0\s+0\s+1\s+1\s+1\s+\d+\s+0$`))
}

// TestWhy asks why for objects that are not mirrored, one cause each.
func TestWhy(t *testing.T) {
	k8s := setup(t)
	ns := newNamespaces(t, "why")[0]
	source := func(name string, change func(m *metav1.ObjectMeta)) {
		meta := fleettest.SourceMeta(ns, name, "team-a")
		change(&meta)
		if err := k8s.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: meta}); err != nil {
			t.Fatal(err)
		}
	}
	source("no-label", func(m *metav1.ObjectMeta) { delete(m.Labels, annotations.LabelEnabled) })
	source("sync-off", func(m *metav1.ObjectMeta) { m.Annotations[annotations.AnnotationSync] = "false" })
	source("typo", func(m *metav1.ObjectMeta) {
		delete(m.Annotations, annotations.AnnotationTargetNamespaces)
		m.Annotations["fleetmirror.io/target-namespace"] = "team-a"
	})
	source("a-mirror", func(m *metav1.ObjectMeta) { m.Labels[annotations.LabelMirror] = "true" })
	if err := k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: fleettest.SourceMeta(ns, "robot", "team-a")}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		obj  string
		args []string
		want []string
	}{
		{"configmap/no-label", nil, []string{"no fleetmirror.io/enabled=true label", "Fix: kubectl label configmap/no-label -n " + ns + " fleetmirror.io/enabled=true"}},
		{"cm/sync-off", nil, []string{`fleetmirror.io/sync is not "true"`, "Fix: kubectl annotate --overwrite"}},
		{"ConfigMap.v1/typo", nil, []string{"fleetmirror.io/target-namespace is not a fleetmirror key (did you mean fleetmirror.io/target-namespaces?)",
			"Fix: rename fleetmirror.io/target-namespace to fleetmirror.io/target-namespaces"}},
		{"configmaps/a-mirror", nil, []string{"it is itself a mirror"}},
		{"serviceaccount/robot", nil, []string{"the agent does not watch ServiceAccount", "--resource-types (Secret.v1,ConfigMap.v1)"}},
		{"cm/no-label", []string{"--agent-namespace=nowhere"}, []string{"no fleetmirror.io/enabled=true label"}},
	} {
		t.Run(tt.obj, func(t *testing.T) {
			out, err := run(append([]string{"why", tt.obj, "-n", ns}, tt.args...)...)
			if err != nil {
				t.Fatal(err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("why %s printed\n%s\nwant it to contain %q", tt.obj, out, w)
				}
			}
		})
	}

	// Without a Deployment the agent's defaults count, and status says so.
	out, err := run("status", "cm/no-label", "-n", ns, "--agent-namespace=nowhere")
	if err != nil || !strings.Contains(out, "no member agent Deployment found; using the agent's default options") {
		t.Errorf("status with no agent Deployment: %v\n%s", err, out)
	}
	// Errors a person may make.
	for _, args := range [][]string{{"status", "nosuchkind/x", "-n", ns}, {"status", "cm/gone", "-n", ns}, {"status", "cm", "-n", ns}, {"status", "cm/x", "-o", "yaml"}} {
		if out, err := run(args...); err == nil {
			t.Errorf("%v succeeded:\n%s", args, out)
		} else if args[1] == "cm/gone" && !apierrors.IsNotFound(err) {
			t.Errorf("%v: %v, want not found", args, err)
		}
	}
}
