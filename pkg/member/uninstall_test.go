package member_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/clusters"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
	"github.com/fleetmirror/fleetmirror/pkg/leader"
	"github.com/fleetmirror/fleetmirror/pkg/member"
)

// The Lease the uninstall tests' agents share, and its timing.
var uninstallLease = []string{
	"--leader-elect", "--leader-election-id=uninstall-test",
	"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms",
}

// uninstallScene is what an agent leaves in its own API server: sources
// with mirrors and our part of the status, a pull mirror with the status
// we wrote, and look-alikes of mirrors that are not ours.
type uninstallScene struct {
	c *fleettest.Cluster
	w fleettest.Wait
	// secret targets a and b; its status has the hub's part too.
	secret *corev1.Secret
	// configMap targets a; pulled is pulled into pulls/pull.
	configMap *corev1.ConfigMap
	pulled    *corev1.Secret
	// mirrors are the mirrors the agent wrote.
	mirrors []client.Object
	// lookalikes are objects that look like mirrors of secret, with their
	// UID@resourceVersion.
	lookalikes map[client.Object]string
}

const hubStatus = "remote: 1 cluster, 1/1 synced"

// newUninstallScene starts an API server of its own: an uninstall cleans
// the whole cluster, which must not touch the other tests' objects.
func newUninstallScene(t *testing.T) *uninstallScene {
	api, _ := fleettest.APIServer(t)
	s := &uninstallScene{c: api.Hub, w: wait}
	for _, ns := range []string{agentNS, "src", "a", "b", "pulls", "other"} {
		fleettest.CreateNamespaces(t, ns, nil, s.c)
	}
	s.secret = sourceSecret("src", "creds", "a,b", map[string]string{"k": "v"})
	s.secret.Annotations[annotations.AnnotationStatus] = hubStatus
	s.configMap = sourceConfigMap("src", "settings", "a", map[string]string{"k": "v"})
	s.pulled = pullSource("src", "pulled", "pulls", map[string]string{"k": "v"})
	for _, o := range []client.Object{s.secret, s.configMap, s.pulled, pullMirror("pulls", "pull", "src/pulled")} {
		s.create(t, o)
	}
	s.mirrors = []client.Object{fleettest.Secret("a", "creds"), fleettest.Secret("b", "creds"), fleettest.ConfigMap("a", "settings")}

	// Not ours: the same name without our labels, the labels of the other
	// writer with our source reference, and our labels without one.
	foreign := fleettest.Secret("other", "creds")
	foreign.StringData = map[string]string{"k": "theirs"}
	hubs := fleettest.Secret("other", "hub-copy")
	hubs.Labels = map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByHub}
	hubs.Annotations = map[string]string{annotations.AnnotationSource: clusterName + "/src/creds"}
	unref := fleettest.Secret("other", "unreferenced")
	unref.Labels = map[string]string{annotations.LabelMirror: "true", annotations.LabelManagedBy: annotations.ManagedByMember}
	s.lookalikes = map[client.Object]string{}
	for _, o := range []client.Object{foreign, hubs, unref} {
		s.create(t, o)
		s.lookalikes[o] = string(o.GetUID()) + "@" + o.GetResourceVersion()
	}
	return s
}

func (s *uninstallScene) create(t *testing.T, o client.Object) {
	t.Helper()
	if err := s.c.Client.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

// run runs the member agent against the scene's API server with flags.
func (s *uninstallScene) run(args ...string) *runningAgent { return startAgentOn(s.c.Config, args...) }

// mirrored waits until the agent has written everything; it holds no
// source.
func (s *uninstallScene) mirrored(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	for _, m := range s.mirrors {
		fleettest.EventuallyExists(t, s.w, s.c, m, nil)
	}
	g.Eventually(fleettest.Status(s.c, s.secret), timeout, poll).Should(Equal("2/2 namespaces synced | " + hubStatus))
	g.Eventually(fleettest.Status(s.c, s.configMap), timeout, poll).Should(Equal("1/1 namespaces synced"))
	for _, src := range []client.Object{s.secret, s.configMap} {
		g.Expect(s.finalizers(src)()).To(BeEmpty(), "%s held", src.GetName())
	}
	fleettest.EventuallyExists(t, s.w, s.c, fleettest.Secret("pulls", "pull"), func(g Gomega, p *corev1.Secret) {
		g.Expect(p.Annotations).To(HaveKeyWithValue(annotations.AnnotationStatus, "InSync: pulled from src/pulled"))
	})
}

// finalizers returns the finalizers of obj, as kubectl shows them.
func (s *uninstallScene) finalizers(obj client.Object) func() []string {
	return func() []string {
		got, err := fleettest.Lookup(s.c, obj)
		if err != nil || got == nil {
			return nil
		}
		return got.GetFinalizers()
	}
}

// released checks what the uninstall leaves on the sources, the pull
// mirror and the look-alikes, whether mirrors were kept or not.
func (s *uninstallScene) released(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	for _, src := range []client.Object{s.secret, s.configMap, s.pulled} {
		got, err := fleettest.Lookup(s.c, src)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.GetFinalizers()).NotTo(ContainElement(member.Finalizer), "%s keeps the finalizer", src.GetName())
		want := ""
		if src == s.secret {
			want = hubStatus // the hub's part is the hub's
		}
		g.Expect(got.GetAnnotations()[annotations.AnnotationStatus]).To(Equal(want), "status of %s", src.GetName())
	}
	pull, err := fleettest.Lookup(s.c, fleettest.Secret("pulls", "pull"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pull.Annotations).NotTo(HaveKey(annotations.AnnotationStatus), "our status on the pull mirror")
	g.Expect(pull.Data).To(HaveKeyWithValue("k", []byte("v")), "the content pulled stays: the pull mirror is its owner's")
	for o, was := range s.lookalikes {
		got, err := fleettest.Lookup(s.c, o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).NotTo(BeNil(), "%s/%s deleted", o.GetNamespace(), o.GetName())
		g.Expect(string(got.GetUID())+"@"+got.GetResourceVersion()).To(Equal(was), "%s/%s written", o.GetNamespace(), o.GetName())
	}
}

// lease returns the holder of the agents' Lease.
func (s *uninstallScene) lease() (string, error) {
	var l coordinationv1.Lease
	if err := s.c.Client.Get(context.Background(), types.NamespacedName{Namespace: agentNS, Name: "uninstall-test"}, &l); err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

// holdLease holds the agents' Lease as another replica would, until the
// returned function releases it.
func (s *uninstallScene) holdLease(t *testing.T) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	held, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- leader.Run(ctx, leader.Config{Config: s.c.Config, Namespace: agentNS, Name: "uninstall-test", Identity: "winding-down",
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond, ReleaseOnCancel: true},
			func(ctx context.Context) { close(held); <-ctx.Done() })
	}()
	select {
	case <-held:
	case <-time.After(timeout):
		t.Fatal("the Lease was not acquired")
	}
	release = sync.OnceFunc(func() { fleettest.StopInProcess("lease holder", cancel, done) })
	t.Cleanup(release)
	return release
}

// The member agent's uninstall mode, as the chart's post-delete hook runs
// it after Helm deleted the agent: it waits while a replica still holds the
// Lease, writing nothing; then it deletes every mirror of ours (those of a
// source deleted meanwhile too), takes our part of the status off every
// source and the finalizer an older version held off sources and policies,
// removes our status from the pull mirror, and leaves alone everything
// that is not provably ours. It deletes the Lease last.
func TestUninstall(t *testing.T) {
	g := NewWithT(t)
	s := newUninstallScene(t)
	agent := s.run(uninstallLease...)
	s.mirrored(t)
	doomed := sourceSecret("src", "doomed", "a", map[string]string{"k": "v"})
	s.create(t, doomed)
	fleettest.EventuallyExists(t, s.w, s.c, fleettest.Secret("a", "doomed"), nil)
	// A copy-once source whose copy is renamed: the uninstall leaves the
	// copy, a plain object, and takes the record off the source.
	once := sourceSecret("src", "once", "a", map[string]string{"k": "v"})
	once.Annotations[annotations.AnnotationCopyOnce] = "true"
	once.Annotations[annotations.AnnotationTargetName] = "once-copy"
	s.create(t, once)
	fleettest.EventuallyExists(t, s.w, s.c, fleettest.Secret("a", "once-copy"), nil)
	g.Eventually(func() string {
		got, _ := fleettest.Lookup(s.c, once)
		return got.GetAnnotations()[annotations.AnnotationCopied]
	}, timeout, poll).Should(Equal("a"))

	// helm uninstall deletes the Deployment: the agent stops and steps down.
	agent.stop()
	g.Expect(s.lease()).To(BeEmpty(), "the agent released its Lease")
	// A kinds object left by a leader that died without deleting it: the
	// uninstall takes it away, or the hub would trust it until it is stale.
	leftover := kindsObject(true)
	s.create(t, leftover)
	// A source deleted now goes at once: nothing of ours holds it. Its
	// mirror stays until the uninstall.
	g.Expect(s.c.Client.Delete(context.Background(), doomed)).To(Succeed())
	g.Eventually(func() (client.Object, error) { return fleettest.Lookup(s.c, doomed) }, timeout, poll).Should(BeNil())
	// What an older version held, in a cluster where no agent of this
	// version ran since: its finalizer on a source and on a policy.
	fleettest.Change(t, s.w, s.c, s.configMap, func(c *corev1.ConfigMap) { c.Finalizers = append(c.Finalizers, member.Finalizer) })
	_, err := fleettest.InstallPolicyCRD(s.c.Config)
	g.Expect(err).NotTo(HaveOccurred())
	older := secretPolicy("src", "older", []string{"creds"}, "a")
	older.Finalizers = []string{policyFinalizer, "example.com/keep"}
	g.Eventually(func() error { return s.c.Client.Create(context.Background(), older) }, timeout, poll).Should(Succeed())

	// Another replica still winding down holds the Lease: the uninstall
	// waits, and writes nothing.
	release := s.holdLease(t)
	uninstall := s.run(append([]string{"--uninstall", "--uninstall-timeout=1m"}, uninstallLease...)...)
	g.Consistently(uninstall.done, 3*time.Second, poll).ShouldNot(Receive(), "the uninstall finished while the Lease was held")
	g.Expect(uninstall.requests.writes()).To(BeEmpty(), "written while the Lease was held")
	for _, m := range s.mirrors {
		g.Expect(fleettest.Lookup(s.c, m)).NotTo(BeNil())
	}

	release()
	g.Eventually(uninstall.done, timeout, poll).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range append(slices.Clone(s.mirrors), fleettest.Secret("a", "doomed")) {
		g.Expect(fleettest.Lookup(s.c, m)).To(BeNil(), "mirror %s/%s", m.GetNamespace(), m.GetName())
	}
	copy, err := fleettest.Lookup(s.c, fleettest.Secret("a", "once-copy"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(copy).NotTo(BeNil(), "the uninstall deleted a copy-once copy")
	g.Expect(copy.GetLabels()).NotTo(HaveKey(annotations.LabelMirror))
	g.Expect(copy.GetAnnotations()).NotTo(HaveKey(annotations.AnnotationSource))
	gotOnce, err := fleettest.Lookup(s.c, once)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotOnce.GetAnnotations()).NotTo(HaveKey(annotations.AnnotationCopied))
	g.Expect(s.finalizers(older)()).To(Equal([]string{"example.com/keep"}), "the older version's finalizer on a policy")
	g.Expect(fleettest.Lookup(s.c, leftover)).To(BeNil(), "the kinds object stays")
	s.released(t)
	_, err = s.lease()
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the uninstall left the Lease: %v", err)
	g.Expect(writesTo(uninstall.requests, "other")).To(BeEmpty(), "written to objects that are not ours")
}

// With keep-mirrors the mirrors stay as they are; finalizers and statuses
// go all the same.
func TestUninstallKeepMirrors(t *testing.T) {
	g := NewWithT(t)
	s := newUninstallScene(t)
	agent := s.run()
	s.mirrored(t)
	kept := map[string]string{}
	for _, m := range s.mirrors {
		got, err := fleettest.Lookup(s.c, m)
		g.Expect(err).NotTo(HaveOccurred())
		kept[m.GetNamespace()+"/"+m.GetName()] = string(got.GetUID()) + "@" + got.GetResourceVersion()
	}
	agent.stop()
	// A ConfigMap of the kinds object's name without its label is not ours.
	// The agent may have written its own before it stopped: this one takes
	// its place.
	g.Expect(client.IgnoreNotFound(s.c.Client.Delete(context.Background(), kindsObject(true)))).To(Succeed())
	theirs := kindsObject(false)
	s.create(t, theirs)
	was := string(theirs.GetUID()) + "@" + theirs.GetResourceVersion()

	uninstall := s.run("--uninstall", "--uninstall-keep-mirrors", "--uninstall-timeout=1m")
	var err error
	g.Eventually(uninstall.done, timeout, poll).Should(Receive(&err))
	g.Expect(err).NotTo(HaveOccurred())
	got, err := fleettest.Lookup(s.c, theirs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(BeNil(), "a ConfigMap of the kinds object's name without its label deleted")
	g.Expect(string(got.GetUID())+"@"+got.GetResourceVersion()).To(Equal(was), "a ConfigMap of the kinds object's name without its label written")
	for _, m := range s.mirrors {
		got, err := fleettest.Lookup(s.c, m)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).NotTo(BeNil(), "mirror %s/%s deleted", m.GetNamespace(), m.GetName())
		g.Expect(string(got.GetUID()) + "@" + got.GetResourceVersion()).To(Equal(kept[m.GetNamespace()+"/"+m.GetName()]))
	}
	s.released(t)
}

// kindsObject is a ConfigMap of the member kinds object's name in the
// agent's namespace, with the kinds object's label when ours.
func kindsObject(ours bool) *corev1.ConfigMap {
	cm := fleettest.ConfigMap(agentNS, clusters.MemberKindsName)
	cm.Data = clusters.FormatKindsHint(nil, nil, time.Now())
	if ours {
		cm.Labels = map[string]string{clusters.LabelMemberKinds: "true"}
	}
	return cm
}

// writesTo returns the requests of log that changed something in namespace.
func writesTo(log *requestLog, namespace string) []string {
	var out []string
	for _, r := range log.detailed() {
		if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/namespaces/"+namespace+"/") {
			out = append(out, r.Method+" "+r.URL.Path)
		}
	}
	return out
}
