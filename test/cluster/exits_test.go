package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// policyResource is the MirrorPolicy CRD's name, as the member chart installs it.
const policyResource = "mirrorpolicies.fleetmirror.io"

// The releases of TestExits, named apart from the other tests' so that
// what one of those leaves cluster-wide never stops an install here.
const (
	exitsMember = "fmx-member"
	exitsHub    = "fmx-hub"
)

// deleteWithin is how long deleting a source's namespace, a policy's
// namespace or the CRD may take after any way out: nothing of ours may
// hold them.
const deleteWithin = 10 * time.Second

// fleetWorld is what one way out removes fleetmirror from: both agents
// in agentNS on the node (the hub's own cluster is the node, named hub;
// it serves member m1 through register-cluster), annotated sources with
// local and m1/ targets and pulls into both clusters, a MirrorPolicy with
// local and m1/ targets, and a pull mirror in each cluster. Names end in
// the way out's short name, so that what a run leaves behind in m1 (whose
// namespaces envtest never deletes) or on the node never meets the next.
type fleetWorld struct {
	agentNS                   string
	src, kept, pol, tgt, pull string
	// rendered is the manifest file the GitOps way out applied and prunes.
	rendered string
}

func newFleetWorld(short string) *fleetWorld {
	p := "fmx-" + short
	return &fleetWorld{agentNS: p, src: p + "-src", kept: p + "-kept", pol: p + "-pol", tgt: p + "-tgt", pull: p + "-pull"}
}

// A way out of fleetmirror, as users take it.
type exit struct {
	name, short string
	// gitops installs the agents from `helm template` with kubectl, as a
	// GitOps tool does, instead of with Helm.
	gitops bool
	// leave takes the way out.
	leave func(t *testing.T, w *fleetWorld)
	// hooks: the way out runs our uninstall, which leaves no status and
	// no mirror.
	hooks bool
	// agentsStay: the agents still run afterwards, and remove what they
	// must themselves; kubectl fleetmirror cleanup is not needed.
	agentsStay bool
}

// TestExits removes fleetmirror from a working fleet in each way users
// do: helm uninstall, helm uninstall --no-hooks, deleting the agents'
// namespace, a GitOps prune of the rendered manifests, deleting the
// MirrorPolicy CRD with policies in place, scaling the agents to zero.
// After each, no object holds a fleetmirror.io/ finalizer, and deleting a
// source's namespace, a policy's namespace and the CRD each completes
// within 10 s. Helm's hooks leave no mirror and no status; after the ways
// out that run none of our code, kubectl fleetmirror cleanup (dry run,
// then --apply) against each cluster leaves none either.
func TestExits(t *testing.T) {
	RegisterTestingT(t)
	cs := node(t)
	// Another agent on the node would serve these sources too, and keep
	// their mirrors whatever way out this one takes.
	Expect(runningAgents(t, cs)).To(BeEmpty(), "TestExits needs a node where no other fleetmirror agent runs")
	m1 := startMember(t, "m1")
	kubeconfig := kubeconfigFor(t, m1)
	t.Cleanup(func() { ensureCRD(t) }) // for the tests after this one

	helmOut := func(args ...string) func(t *testing.T, w *fleetWorld) {
		return func(t *testing.T, w *fleetWorld) {
			eachRelease(t, func(name string) (string, error) {
				return tryCommand(env.helm, append([]string{"uninstall", name, "--namespace", w.agentNS, "--wait", "--timeout", "3m"}, args...)...)
			})
		}
	}
	exits := []exit{
		{name: "helm uninstall", short: "un", leave: helmOut(), hooks: true},
		{name: "helm uninstall --no-hooks", short: "nohooks", leave: helmOut("--no-hooks")},
		{name: "agent namespace deleted", short: "ns", leave: func(t *testing.T, w *fleetWorld) {
			deleteNamespace(t, cs, w.agentNS)
			namespaceGone(t, cs, w.agentNS, 2*time.Minute)
		}},
		{name: "GitOps prune", short: "prune", gitops: true, leave: func(t *testing.T, w *fleetWorld) {
			kubectl(t, "delete", "--namespace", w.agentNS, "--wait", "--timeout", "2m", "-f", w.rendered)
		}},
		{name: "CRD deleted with policies in place", short: "crd", agentsStay: true, leave: func(t *testing.T, w *fleetWorld) {
			deletedWithin(t, "the CRD", deleteCRDNow, crdGone)
			// The agents see their policies go and remove their mirrors.
			gone(t, cs, w.tgt, "pdata", time.Minute)
			gone(t, m1.client, w.tgt, "pdata", time.Minute)
		}},
		{name: "agents scaled to zero", short: "zero", leave: func(t *testing.T, w *fleetWorld) {
			kubectl(t, "scale", "deployment", "--all", "--namespace", w.agentNS, "--replicas=0")
			Eventually(func() []string { return runningAgents(t, cs) }).WithTimeout(time.Minute).Should(BeEmpty())
		}},
	}
	for _, e := range exits {
		t.Run(e.name, func(t *testing.T) {
			RegisterTestingT(t)
			start := time.Now()
			w := newFleetWorld(e.short)
			installFleet(t, cs, m1, kubeconfig, w, e.gitops)
			populateFleet(t, cs, m1, w)
			t.Logf("fleet ready after %s", time.Since(start).Round(time.Second))

			e.leave(t, w)
			t.Logf("%s done after %s", e.name, time.Since(start).Round(time.Second))
			Expect(ourFinalizers(t, cs, m1.client)).To(BeEmpty())
			if e.hooks {
				Expect(ourMarks(t, cs, m1.client, w)).To(BeEmpty(), "the uninstall hooks leave no mirror and no status")
			}

			// Nothing of ours holds a deletion.
			for _, ns := range []string{w.src, w.pol} {
				deletedWithin(t, "namespace "+ns, func() error { return cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) },
					func() bool { return namespaceDeleted(cs, ns) })
			}
			if !crdGone() {
				deletedWithin(t, "the CRD", deleteCRDNow, crdGone)
			}

			switch {
			case e.agentsStay:
				// The way out of the agents that stay: helm uninstall.
				helmOut()(t, w)
				Expect(ourMarks(t, cs, m1.client, w)).To(BeEmpty())
			case !e.hooks:
				Expect(ourMarks(t, cs, m1.client, w)).NotTo(BeEmpty(), "a way out without hooks leaves the mirrors and statuses")
				for _, cluster := range []string{"hub", "m1"} {
					cleanup(t, kubeconfig, cluster)
				}
				Expect(ourMarks(t, cs, m1.client, w)).To(BeEmpty(), "kubectl fleetmirror cleanup leaves no mirror and no status")
			}
			Expect(ourFinalizers(t, cs, m1.client)).To(BeEmpty())
			t.Logf("%s: %s in all", e.name, time.Since(start).Round(time.Second))
		})
	}
}

// installFleet installs the member and hub charts in w.agentNS, with Helm
// or, for gitops, from their `helm template` output with kubectl, and
// registers m1 with the hub. Everything is removed at the end of the test.
func installFleet(t *testing.T, cs kubernetes.Interface, m1 *member, kubeconfig string, w *fleetWorld, gitops bool) {
	t.Helper()
	ensureCRD(t)
	for _, ns := range []string{w.src, w.kept, w.pol, w.tgt, w.pull} {
		namespace(t, cs, ns, nil)
	}
	for _, ns := range []string{w.tgt, w.pull} {
		_, err := m1.client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// m1 has no namespace controller: its objects go by hand, so that
		// the hubs of the ways out after this one find nothing of it.
		t.Cleanup(func() {
			_ = m1.client.CoreV1().Secrets(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		})
	}
	t.Cleanup(func() {
		for _, r := range []string{exitsMember, exitsHub} {
			_, _ = tryCommand(env.helm, "uninstall", r, "--namespace", w.agentNS, "--no-hooks", "--wait", "--timeout", "2m")
			sweep(t, r)
		}
		if w.rendered != "" {
			_, _ = tryCommand(env.kubectl, "delete", "--namespace", w.agentNS, "--ignore-not-found", "--wait=false", "-f", w.rendered)
		}
		_, _ = tryCommand(env.kubectl, "delete", "namespace", w.agentNS, "--ignore-not-found", "--wait=false")
	})
	values := imageValues(env.imageRepo, env.imageTag)
	charts := map[string]string{exitsMember: memberChart, exitsHub: hubChart}
	if !gitops {
		handOverCRD(t, exitsMember, w.agentNS) // as charts/member/README.md says for a CRD another release made
		eachRelease(t, func(name string) (string, error) {
			args := []string{"upgrade", "--install", name, charts[name], "--namespace", w.agentNS, "--create-namespace", "--wait", "--timeout", "3m"}
			return tryCommand(env.helm, append(args, values...)...)
		})
	} else {
		// As a GitOps tool renders a chart: no hooks, no tests; the CRD
		// is there already (crds.enabled=false, as for a second release).
		namespace(t, cs, w.agentNS, nil)
		v, err := cs.Discovery().ServerVersion()
		Expect(err).NotTo(HaveOccurred())
		var manifests []string
		for _, name := range []string{exitsMember, exitsHub} {
			args := []string{"template", name, charts[name], "--namespace", w.agentNS, "--no-hooks", "--skip-tests", "--kube-version", v.GitVersion}
			if name == exitsMember {
				args = append(args, "--set", "crds.enabled=false")
			}
			manifests = append(manifests, helm(t, append(args, values...)...))
		}
		w.rendered = filepath.Join(t.TempDir(), "rendered.yaml")
		Expect(os.WriteFile(w.rendered, []byte(strings.Join(manifests, "\n---\n")), 0o600)).To(Succeed())
		kubectl(t, "apply", "--namespace", w.agentNS, "-f", w.rendered)
		kubectl(t, "wait", "--namespace", w.agentNS, "--for", "condition=Available", "deployment", "--all", "--timeout", "3m")
	}
	out, err := pluginRun(kubeconfig, "register-cluster", "m1", "--hub-context", "hub", "--member-context", "m1",
		"--hub-namespace", w.agentNS, "--token-duration", "30m", "--server", fmt.Sprintf("https://%s:%d", env.nodeIP, m1.port))
	Expect(err).NotTo(HaveOccurred(), out)
}

// populateFleet creates the sources, the policy and the pull mirrors of w
// and waits until every mirror is in place and the sources carry both
// agents' status.
func populateFleet(t *testing.T, cs kubernetes.Interface, m1 *member, w *fleetWorld) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []*corev1.Secret{
		// Mirrored into both clusters, and pulled into both.
		{ObjectMeta: metav1.ObjectMeta{Namespace: w.src, Name: "db", Labels: map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: w.tgt + ", m1/" + w.tgt,
				annotations.AnnotationAllowPullInto: w.pull + ", m1/" + w.pull}}},
		// A source whose namespace stays: its status is ours to take off.
		{ObjectMeta: metav1.ObjectMeta{Namespace: w.kept, Name: "kept", Labels: map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: w.tgt + ", m1/" + w.tgt}}},
		// Named by the policy: it carries none of our keys.
		{ObjectMeta: metav1.ObjectMeta{Namespace: w.pol, Name: "pdata"}},
		// The pull mirror the member serves.
		{ObjectMeta: metav1.ObjectMeta{Namespace: w.pull, Name: "mine", Labels: map[string]string{annotations.LabelPull: "true"},
			Annotations: map[string]string{annotations.AnnotationMirrorFrom: w.src + "/db"}}},
	} {
		s.StringData = map[string]string{"value": "v1"}
		_, err := cs.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	// The pull mirror the hub serves.
	_, err := m1.client.CoreV1().Secrets(w.pull).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.pull, Name: "mine",
		Labels: map[string]string{annotations.LabelPull: "true"}, Annotations: map[string]string{annotations.AnnotationMirrorFrom: "hub/" + w.src + "/db"}}},
		metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	out, err := applyStdin(fmt.Sprintf(`apiVersion: fleetmirror.io/v1alpha1
kind: MirrorPolicy
metadata: {namespace: %s, name: share}
spec:
  source: {apiVersion: v1, kind: Secret, names: [pdata]}
  targetNamespaces: [%s, m1/%s]
`, w.pol, w.tgt, w.tgt))
	Expect(err).NotTo(HaveOccurred(), out)

	Eventually(func(g Gomega) {
		for _, c := range []kubernetes.Interface{cs, m1.client} {
			for _, name := range []string{"db", "kept", "pdata"} {
				s, err := c.CoreV1().Secrets(w.tgt).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred(), "mirror %s/%s", w.tgt, name)
				g.Expect(string(s.Data["value"])).To(Equal("v1"))
			}
			s, err := c.CoreV1().Secrets(w.pull).Get(ctx, "mine", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(s.Data["value"])).To(Equal("v1"), "pull mirror %s/mine", w.pull)
			g.Expect(s.Annotations).To(HaveKey(annotations.AnnotationStatus))
		}
		for _, ns := range []string{w.src, w.kept} {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, map[string]string{w.src: "db", w.kept: "kept"}[ns], metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Annotations[annotations.AnnotationStatus]).To(MatchRegexp(`namespaces synced.* \| remote: `), "both agents' status on %s", ns)
		}
	}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// eachRelease runs fn for the member and the hub release at once and
// fails with the output of those that failed.
func eachRelease(t *testing.T, fn func(release string) (string, error)) {
	t.Helper()
	var wg sync.WaitGroup
	outs, errs := make([]string, 2), make([]error, 2)
	for i, r := range []string{exitsMember, exitsHub} {
		wg.Go(func() { outs[i], errs[i] = fn(r) })
	}
	wg.Wait()
	for i, r := range []string{exitsMember, exitsHub} {
		Expect(errs[i]).NotTo(HaveOccurred(), "%s: %s", r, outs[i])
	}
}

// cleanup runs kubectl fleetmirror cleanup against the kubeconfig's
// context cluster: the dry run, which lists changes and writes nothing,
// then --apply.
func cleanup(t *testing.T, kubeconfig, cluster string) {
	t.Helper()
	out, err := pluginRun(kubeconfig, "cleanup", "--context", cluster)
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(out).To(ContainSubstring("Run again with --apply"))
	start := time.Now()
	out, err = pluginRun(kubeconfig, "cleanup", "--context", cluster, "--apply")
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(out).To(MatchRegexp(`; 0 not done\.\n$`))
	t.Logf("cleanup --apply in %s: %s\n%s", cluster, time.Since(start).Round(time.Millisecond), out)
	out, err = pluginRun(kubeconfig, "cleanup", "--context", cluster)
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(out).To(HaveSuffix("Nothing of the fleetmirror agents' found.\n"))
}

// ourMarks lists what of ours is left in w's namespaces of the node and
// m1: mirrors (by our label) and fleetmirror.io/status annotations.
func ourMarks(t *testing.T, cs, m1 kubernetes.Interface, w *fleetWorld) []string {
	t.Helper()
	var out []string
	for cluster, c := range map[string]kubernetes.Interface{"hub": cs, "m1": m1} {
		for _, ns := range []string{w.src, w.kept, w.pol, w.tgt, w.pull} {
			secrets, err := c.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			for _, s := range secrets.Items {
				if s.Labels[annotations.LabelMirror] == "true" {
					out = append(out, fmt.Sprintf("%s: mirror %s/%s", cluster, ns, s.Name))
				}
				if v, ok := s.Annotations[annotations.AnnotationStatus]; ok {
					out = append(out, fmt.Sprintf("%s: %s/%s has %s %q", cluster, ns, s.Name, annotations.AnnotationStatus, v))
				}
			}
		}
	}
	return out
}

// ourFinalizers lists every Secret and ConfigMap of the node and m1, and
// every MirrorPolicy of the node, that holds a fleetmirror.io/ finalizer.
func ourFinalizers(t *testing.T, cs, m1 kubernetes.Interface) []string {
	t.Helper()
	held := fleetmirrorFinalizers(t, cs)
	for _, f := range fleetmirrorFinalizers(t, m1) {
		held = append(held, "m1: "+f)
	}
	out, err := tryCommand(env.kubectl, "get", policyResource, "--all-namespaces", "--ignore-not-found",
		"-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.finalizers}{"\n"}{end}`)
	if err != nil && !strings.Contains(out, "the server doesn't have a resource type") {
		t.Fatalf("listing MirrorPolicies: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if err == nil && strings.Contains(line, annotations.Prefix) {
			held = append(held, "mirrorpolicy/"+line)
		}
	}
	return held
}

// runningAgents lists the Deployments of the node, in any namespace, that
// run a fleetmirror agent with replicas, or still have its Pods.
func runningAgents(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	ds, err := cs.AppsV1().Deployments("").List(context.Background(), metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, d := range ds.Items {
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 && d.Status.Replicas == 0 {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if len(c.Command) > 0 && slices.Contains([]string{"fleetmirror-member", "fleetmirror-hub"}, filepath.Base(c.Command[0])) {
				out = append(out, d.Namespace+"/"+d.Name)
			}
		}
	}
	return out
}

// deletedWithin deletes something and fails unless it is gone within
// deleteWithin.
func deletedWithin(t *testing.T, what string, del func() error, gone func() bool) {
	t.Helper()
	start := time.Now()
	Expect(del()).To(Succeed(), what)
	Eventually(gone).WithTimeout(deleteWithin).WithPolling(100*time.Millisecond).Should(BeTrue(), "deleting %s did not complete within %s", what, deleteWithin)
	t.Logf("deleting %s took %s", what, time.Since(start).Round(time.Millisecond))
}

func namespaceDeleted(cs kubernetes.Interface, ns string) bool {
	_, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// ensureCRD installs the MirrorPolicy CRD, as the member chart does, when
// it is not there, and waits until it is served.
func ensureCRD(t *testing.T) {
	t.Helper()
	kubectl(t, "apply", "--server-side", "-f", filepath.Join(memberChart, "files", "crds"))
	kubectl(t, "wait", "--for", "condition=Established", "--timeout", "1m", "customresourcedefinition/"+policyResource)
}

// deleteCRDNow deletes the MirrorPolicy CRD without waiting for it to go.
func deleteCRDNow() error {
	out, err := tryCommand(env.kubectl, "delete", "customresourcedefinition", policyResource, "--wait=false")
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func crdGone() bool {
	out, err := tryCommand(env.kubectl, "get", "customresourcedefinition", policyResource, "--ignore-not-found", "-o", "name")
	return err == nil && strings.TrimSpace(out) == ""
}
