package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// Names every test uses.
const (
	memberChart   = "charts/member"
	hubChart      = "charts/hub"
	memberRelease = "fleetmirror-member"
	hubRelease    = "fleetmirror-hub"
)

// node returns a client of the node's API server as its admin.
func node(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// command runs name with args and returns its combined output; a failure
// fails the test with the output.
func command(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := tryCommand(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func tryCommand(name string, args ...string) (string, error) {
	out, err := commandOf(name, args...).CombinedOutput()
	return string(out), err
}

// commandOf is name with args, run in the repository against the node.
func commandOf(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = env.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.kubeconfig, "HELM_CACHE_HOME="+os.TempDir()+"/fleetmirror-helm-cache",
		"HELM_CONFIG_HOME="+os.TempDir()+"/fleetmirror-helm-config", "HELM_DATA_HOME="+os.TempDir()+"/fleetmirror-helm-data")
	return cmd
}

func helm(t testing.TB, args ...string) string {
	t.Helper()
	return command(t, env.helm, args...)
}

func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	return command(t, env.kubectl, args...)
}

// imageValues are the values that point a chart at the image of make
// image and the helm test Pod at the node's busybox.
func imageValues(repo, tag string) []string {
	return []string{"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "test.image=" + env.busybox}
}

// install installs (or upgrades) chart as release in ns and waits for its
// Pods to be Ready. The member chart gets the MirrorPolicy CRD that an
// earlier test's release left (handOverCRD).
func install(t testing.TB, release, ns, chart string, args ...string) {
	t.Helper()
	if filepath.Base(chart) == filepath.Base(memberChart) {
		handOverCRD(t, release, ns)
	}
	base := []string{"upgrade", "--install", release, chart, "--namespace", ns, "--create-namespace", "--wait", "--timeout", "3m"}
	args = append(base, args...)
	if out, err := tryCommand(env.helm, args...); err != nil {
		t.Fatalf("helm %s: %v\n%s\n%s", strings.Join(args, " "), err, out, whyNotReady(ns))
	}
}

// whyNotReady is what the node says about the Pods of ns: their state,
// the namespace's Events, the last lines of each container's log, the
// node's conditions and the free disk, so that a release that did not get
// Ready says why.
func whyNotReady(ns string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods,deployments,replicasets", "-n", ns, "-o", "wide"},
		{"describe", "pods", "-n", ns},
		{"get", "events", "-n", ns, "--sort-by=.lastTimestamp"},
		{"logs", "-n", ns, "--all-containers", "--prefix", "--tail=40", "-l", "app.kubernetes.io/name"},
		{"get", "nodes", "-o", "wide"},
		{"describe", "nodes"},
	} {
		out, err := tryCommand(env.kubectl, args...)
		fmt.Fprintf(&b, "--- kubectl %s (%v)\n%s\n", strings.Join(args, " "), err, out)
	}
	// A full disk stops containerd from unpacking an image before the
	// kubelet reports DiskPressure.
	out, err := tryCommand("df", "-h", os.TempDir(), env.root)
	fmt.Fprintf(&b, "--- df (%v)\n%s\n", err, out)
	return b.String()
}

// release installs chart as release in ns, like install, and removes it at
// the end of the test: helm uninstall, then whatever cluster-wide objects of
// the release are left when its namespace went first (Helm's record of the
// release lives there).
func release(t testing.TB, name, ns, chart string, args ...string) {
	t.Helper()
	// The cleanup goes first: an install that fails half way leaves
	// cluster-wide objects that would stop every later test's install.
	t.Cleanup(func() {
		_, _ = tryCommand(env.helm, "uninstall", name, "--namespace", ns, "--wait", "--timeout", "5m")
		sweep(t, name)
		_, _ = tryCommand(env.kubectl, "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
	})
	install(t, name, ns, chart, args...)
}

// sweep deletes the cluster-wide objects of a release whose namespace,
// which holds Helm's record of it, was deleted.
func sweep(t testing.TB, name string) {
	t.Helper()
	_, _ = tryCommand(env.kubectl, "delete", "clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
		"-l", "app.kubernetes.io/instance="+name, "--ignore-not-found")
}

// namespace creates a namespace with labels, deleted at the end of the test
// (without waiting for the namespace controller).
func namespace(t testing.TB, cs kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// source creates a Secret that mirrors itself into targets.
func source(t testing.TB, cs kubernetes.Interface, ns, name, targets, value string) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{annotations.LabelEnabled: "true"},
			Annotations: map[string]string{annotations.AnnotationSync: "true", annotations.AnnotationTargetNamespaces: targets},
		},
		StringData: map[string]string{"value": value},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// setValue changes a source's data.
func setValue(t testing.TB, cs kubernetes.Interface, ns, name, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"stringData":{"value":%q}}`, value)
	if _, err := cs.CoreV1().Secrets(ns).Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mirrored waits until every namespace holds the mirror of ns/name with value.
func mirrored(t testing.TB, cs kubernetes.Interface, name, value string, timeout time.Duration, namespaces ...string) {
	t.Helper()
	Eventually(func(g Gomega) {
		for _, ns := range namespaces {
			s, err := cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "mirror in %s", ns)
			g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"), "mirror in %s", ns)
			g.Expect(string(s.Data["value"])).To(Equal(value), "mirror in %s", ns)
		}
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// gone waits until ns/name of a Secret no longer exists.
func gone(t testing.TB, cs kubernetes.Interface, ns, name string, timeout time.Duration) {
	t.Helper()
	Eventually(func() bool {
		_, err := cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(200*time.Millisecond).Should(BeTrue(), "%s/%s still exists", ns, name)
}

// namespaceGone waits until the namespace controller has deleted ns.
func namespaceGone(t testing.TB, cs kubernetes.Interface, ns string, timeout time.Duration) {
	t.Helper()
	Eventually(func() bool {
		_, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(timeout).WithPolling(500*time.Millisecond).Should(BeTrue(), "namespace %s is not deleted", ns)
}

// fleetmirrorFinalizers lists every Secret and ConfigMap of the node that
// holds a fleetmirror finalizer, as kind/ns/name.
func fleetmirrorFinalizers(t testing.TB, cs kubernetes.Interface) []string {
	t.Helper()
	var held []string
	secrets, err := cs.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if hasOurFinalizer(s.Finalizers) {
			held = append(held, "secret/"+s.Namespace+"/"+s.Name)
		}
	}
	cms, err := cs.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		if hasOurFinalizer(c.Finalizers) {
			held = append(held, "configmap/"+c.Namespace+"/"+c.Name)
		}
	}
	return held
}

func hasOurFinalizer(fins []string) bool {
	return slices.ContainsFunc(fins, func(f string) bool { return strings.HasPrefix(f, annotations.Prefix) })
}

// mirrorsOf lists the namespaces holding a mirror (by our label) of any
// source, as ns/name.
func mirrors(t testing.TB, cs kubernetes.Interface) []string {
	t.Helper()
	list, err := cs.CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{LabelSelector: annotations.LabelMirror + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// deletions watches Secrets labelled as mirrors in the namespaces and
// records every one deleted, until stop is called, which returns them.
func deletions(t testing.TB, cs kubernetes.Interface, namespaces ...string) (stop func() []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var deleted []string
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		w, err := cs.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{LabelSelector: annotations.LabelMirror + "=true"})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						mu.Lock()
						deleted = append(deleted, "watch of "+ns+" ended early")
						mu.Unlock()
						return
					}
					if ev.Type == watch.Deleted || ev.Type == watch.Error {
						mu.Lock()
						deleted = append(deleted, fmt.Sprintf("%s %s", ev.Type, describe(ev.Object)))
						mu.Unlock()
					}
				}
			}
		}()
	}
	return func() []string {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return deleted
	}
}

func describe(o any) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetNamespace() + "/" + m.GetName()
	}
	return fmt.Sprint(o)
}

// auditMark is a place in the node's audit log; writes(mark) reads what
// was logged after it.
type auditMark int64

func markAudit(t testing.TB) auditMark {
	t.Helper()
	fi, err := os.Stat(env.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	return auditMark(fi.Size())
}

// auditEvent is the part of an audit event the tests read.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// writes returns the writes logged since mark by user to resource in the
// namespaces, as "verb ns/name code".
func writes(t testing.TB, mark auditMark, user, resource string, namespaces ...string) []string {
	t.Helper()
	f, err := os.Open(env.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(int64(mark), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" {
			continue
		}
		if ev.User.Username != user || ev.ObjectRef.Resource != resource || !slices.Contains(namespaces, ev.ObjectRef.Namespace) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s/%s %d", ev.Verb, ev.ObjectRef.Namespace, ev.ObjectRef.Name, ev.ResponseStatus.Code))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// serviceAccount is the user name of a ServiceAccount's tokens.
func serviceAccount(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// agentPodList lists the agent Pods of a release by the Deployment's
// selector labels (the chart's name, which is the release's name in these
// tests, and the instance): not the helm test or uninstall hook Pods.
func agentPodList(t testing.TB, cs kubernetes.Interface, ns, release string) []corev1.Pod {
	t.Helper()
	selector := "app.kubernetes.io/name=" + release + ",app.kubernetes.io/instance=" + release
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// agentPods returns the names of the running agent Pods of a release.
func agentPods(t testing.TB, cs kubernetes.Interface, ns, release string) []string {
	t.Helper()
	var names []string
	for _, p := range agentPodList(t, cs, ns, release) {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			names = append(names, p.Name)
		}
	}
	return names
}

// leaseHolder returns the holder of the release's leader-election Lease.
func leaseHolder(t testing.TB, cs kubernetes.Interface, ns string) string {
	t.Helper()
	leases, err := cs.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return *l.Spec.HolderIdentity
		}
	}
	return ""
}
