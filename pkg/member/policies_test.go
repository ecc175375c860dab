package member_test

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
)

// ownedSecret is a Secret as another controller writes it: none of our
// labels or annotations, which its owner would take away again.
func ownedSecret(ns, name string, labels map[string]string, data map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Type: corev1.SecretTypeOpaque, StringData: data}
}

// secretPolicy returns a MirrorPolicy of Secrets in ns named names,
// mirrored into targets.
func secretPolicy(ns, name string, names []string, targets ...string) *v1alpha1.MirrorPolicy {
	return &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Names: names},
		TargetNamespaces: targets,
	}}
}

// eventuallyPolicy waits until check passes on the policy.
func eventuallyPolicy(t *testing.T, p *v1alpha1.MirrorPolicy, check func(g Gomega, p *v1alpha1.MirrorPolicy)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		got := &v1alpha1.MirrorPolicy{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(p), got)).To(Succeed())
		check(g, got)
	}, timeout, poll).Should(Succeed())
}

// condition expects p's condition typ to have status and reason, and
// returns its message.
func condition(g Gomega, p *v1alpha1.MirrorPolicy, typ string, status metav1.ConditionStatus, reason string) string {
	c := meta.FindStatusCondition(p.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "condition %s", typ)
	g.Expect(c.Status).To(Equal(status), "condition %s: %s", typ, c.Message)
	g.Expect(c.Reason).To(Equal(reason), "condition %s: %s", typ, c.Message)
	g.Expect(c.ObservedGeneration).To(Equal(p.Generation))
	return c.Message
}

// synced expects the policy to report its sources' mirrors all in place.
func synced(sources, mirrors int32) func(g Gomega, p *v1alpha1.MirrorPolicy) {
	return func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		g.Expect(p.Status.Sources).To(Equal(sources))
		g.Expect(p.Status.TargetsSynced).To(Equal(mirrors))
		condition(g, p, v1alpha1.ConditionReady, metav1.ConditionTrue, "Synced")
		condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionFalse, "Synced")
	}
}

// mirrorOf expects s to be our mirror of the source ns/name.
func mirrorOf(ns, name string, data map[string]string) func(g Gomega, s *corev1.Secret) {
	return func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
		g.Expect(s.Labels).To(HaveKeyWithValue(annotations.LabelManagedBy, annotations.ManagedByMember))
		g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationSource, desired.SourceRef(clusterName, ns, name)))
		for k, v := range data {
			g.Expect(string(s.Data[k])).To(Equal(v))
		}
	}
}

// untouched expects the source never to have been written by the agent:
// the resourceVersion is the test's last write's.
func untouched(t *testing.T, src *corev1.Secret) {
	t.Helper()
	got := &corev1.Secret{}
	NewWithT(t).Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(src), got)).To(Succeed())
	NewWithT(t).Expect(got.ResourceVersion).To(Equal(src.ResourceVersion), "the agent wrote to a source that is not its own")
	NewWithT(t).Expect(got.Finalizers).To(BeEmpty())
	NewWithT(t).Expect(got.Annotations).NotTo(HaveKey(annotations.AnnotationStatus))
}

// A Secret another controller owns, named by a MirrorPolicy: mirrored as
// an annotated source is (same mirrors, drift corrected, updates followed,
// targets changed with the policy), without one write to the source, and
// every mirror removed before the policy goes.
func TestPolicyMirrorsNamedSource(t *testing.T) {
	ns := namespaces(t, "pol", nil, "src", "a", "b", "c")
	src := ownedSecret(ns[0], "db-credentials", map[string]string{"app": "db"}, map[string]string{"password": "one"})
	create(t, src)
	p := secretPolicy(ns[0], "share-db", []string{"db-credentials"}, ns[1], ns[2])
	create(t, p)

	eventuallySecret(t, ns[1], "db-credentials", mirrorOf(ns[0], "db-credentials", map[string]string{"password": "one"}))
	eventuallySecret(t, ns[2], "db-credentials", mirrorOf(ns[0], "db-credentials", map[string]string{"password": "one"}))
	eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Finalizers).To(BeEmpty(), "the agent holds no finalizer on a policy")
		synced(1, 2)(g, p)
	})
	untouched(t, src)

	// The owner updates its Secret: the mirrors follow.
	change(t, src, func(s *corev1.Secret) { s.StringData = map[string]string{"password": "two"} })
	eventuallySecret(t, ns[1], "db-credentials", mirrorOf(ns[0], "db-credentials", map[string]string{"password": "two"}))
	eventuallySecret(t, ns[2], "db-credentials", mirrorOf(ns[0], "db-credentials", map[string]string{"password": "two"}))

	// Somebody edits a mirror: it is put back.
	mirror := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "db-credentials"}}
	change(t, mirror, func(s *corev1.Secret) { s.Data["password"] = []byte("tampered") })
	eventuallySecret(t, ns[1], "db-credentials", mirrorOf(ns[0], "db-credentials", map[string]string{"password": "two"}))

	// The policy's targets change: a new one gets its mirror, one no
	// longer named loses it.
	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.TargetNamespaces = []string{ns[1], ns[3]} })
	eventuallySecret(t, ns[3], "db-credentials", mirrorOf(ns[0], "db-credentials", map[string]string{"password": "two"}))
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[2], Name: "db-credentials"}})
	eventuallyPolicy(t, p, synced(1, 2))
	eventuallyEvent(t, ns[0], "share-db", "MirrorsSynced", "1 sources, 2 mirrors in place")

	// The policy is deleted: it goes at once (nothing of ours holds it),
	// then its mirrors; the source stays as its owner left it.
	NewWithT(t).Expect(k8s.Delete(context.Background(), p)).To(Succeed())
	eventuallyGone(t, p)
	for _, target := range []string{ns[1], ns[3]} {
		eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "db-credentials"}})
	}
	untouched(t, src)
}

// A policy created before its source (Kyverno's generate rules do not
// clone then): the source is mirrored as it appears, and its deletion
// removes the mirrors; the policy's count follows.
func TestPolicyBeforeItsSource(t *testing.T) {
	ns := namespaces(t, "polfirst", nil, "src", "a")
	p := secretPolicy(ns[0], "early", []string{"later"}, ns[1])
	create(t, p)
	eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.Sources).To(BeZero())
		condition(g, p, v1alpha1.ConditionReady, metav1.ConditionTrue, "NoSources")
	})

	src := ownedSecret(ns[0], "later", nil, map[string]string{"k": "v"})
	create(t, src)
	eventuallySecret(t, ns[1], "later", mirrorOf(ns[0], "later", map[string]string{"k": "v"}))
	eventuallyPolicy(t, p, synced(1, 1))

	NewWithT(t).Expect(k8s.Delete(context.Background(), src)).To(Succeed())
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "later"}})
	eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.Sources).To(BeZero())
	})
}

// A policy that selects its sources by labels: those that match are
// mirrored, one that stops matching loses its mirrors, one that never
// matched gets none.
func TestPolicySelector(t *testing.T) {
	ns := namespaces(t, "polsel", nil, "src", "a")
	one := ownedSecret(ns[0], "one", map[string]string{"app": "db"}, map[string]string{"k": "1"})
	two := ownedSecret(ns[0], "two", map[string]string{"app": "db"}, map[string]string{"k": "2"})
	other := ownedSecret(ns[0], "other", map[string]string{"app": "web"}, map[string]string{"k": "3"})
	for _, s := range []*corev1.Secret{one, two, other} {
		create(t, s)
	}
	p := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns[0], Name: "dbs"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Secret", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		TargetNamespaces: []string{ns[1]},
		MaxTargets:       ptr.To[int32](5),
	}}
	create(t, p)
	eventuallySecret(t, ns[1], "one", mirrorOf(ns[0], "one", map[string]string{"k": "1"}))
	eventuallySecret(t, ns[1], "two", mirrorOf(ns[0], "two", map[string]string{"k": "2"}))
	eventuallyPolicy(t, p, synced(2, 2))
	consistentlyAbsent(t, ns[1], "other")

	change(t, two, func(s *corev1.Secret) { delete(s.Labels, "app") })
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "two"}})
	eventuallyPolicy(t, p, synced(1, 1))
	untouched(t, one)
}

// A source named twice: by its own annotations and a policy, or by two
// policies. The first claim keeps it (the annotations always come first);
// the later policy mirrors nothing of it and says so in its status and
// an Event, as the source's Events name both. When the first goes, the
// next takes over.
func TestPolicyClaims(t *testing.T) {
	ns := namespaces(t, "polclaim", nil, "src", "a", "b", "c")

	annotated := sourceSecret(ns[0], "annotated", ns[1], map[string]string{"k": "v"})
	create(t, annotated)
	eventuallySecret(t, ns[1], "annotated", nil)
	late := secretPolicy(ns[0], "late", []string{"annotated"}, ns[2])
	create(t, late)
	eventuallyPolicy(t, late, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.Conflicts).To(Equal(int32(1)))
		g.Expect(condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "SourceClaimed")).To(ContainSubstring("its own annotations"))
	})
	eventuallyEvent(t, ns[0], "late", "SourceClaimed", "Secret annotated is mirrored by its own annotations")
	eventuallyEvent(t, ns[0], "annotated", "SourceClaimed", "not by MirrorPolicy late")
	consistentlyAbsent(t, ns[2], "annotated")

	shared := ownedSecret(ns[0], "shared", nil, map[string]string{"k": "v"})
	create(t, shared)
	first := secretPolicy(ns[0], "first", []string{"shared"}, ns[1])
	create(t, first)
	eventuallySecret(t, ns[1], "shared", mirrorOf(ns[0], "shared", nil))
	eventuallyPolicy(t, first, synced(1, 1))
	// Created in the same second or later, "second" comes after "first"
	// either way: creation time, then name.
	second := secretPolicy(ns[0], "second", []string{"shared"}, ns[3])
	create(t, second)
	eventuallyPolicy(t, second, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "SourceClaimed")).To(ContainSubstring("MirrorPolicy first"))
	})
	eventuallyEvent(t, ns[0], "shared", "SourceClaimed", "Mirrored by MirrorPolicy first, which came first; not by MirrorPolicy second")
	consistentlyAbsent(t, ns[3], "shared")

	// The first policy goes: its mirror goes with it, and the second
	// mirrors the source from then on.
	NewWithT(t).Expect(k8s.Delete(context.Background(), first)).To(Succeed())
	eventuallyGone(t, first)
	eventuallySecret(t, ns[3], "shared", mirrorOf(ns[0], "shared", nil))
	eventuallyGone(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns[1], Name: "shared"}})
	eventuallyPolicy(t, second, synced(1, 1))
	untouched(t, shared)
}

// What the agent does not mirror, a policy cannot make it mirror: a
// denied kind is reported on the policy, and invalid transform rules
// change nothing until fixed, as on an annotated source.
func TestPolicyRefusals(t *testing.T) {
	ns := namespaces(t, "polref", nil, "src", "a")
	pods := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns[0], Name: "pods"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "Pod", Names: []string{"web"}},
		TargetNamespaces: []string{ns[1]},
	}}
	create(t, pods)
	eventuallyPolicy(t, pods, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "KindNotMirrored")
	})
	eventuallyEvent(t, ns[0], "pods", "KindNotMirrored", "does not mirror Pod")

	src := ownedSecret(ns[0], "cfg", nil, map[string]string{"k": "v"})
	create(t, src)
	bad := secretPolicy(ns[0], "bad-rules", []string{"cfg"}, ns[1])
	bad.Spec.Transform = "this is not a rule"
	create(t, bad)
	eventuallyPolicy(t, bad, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "InvalidPolicy")).To(ContainSubstring("spec.transform"))
	})
	consistentlyAbsent(t, ns[1], "cfg")
	change(t, bad, func(p *v1alpha1.MirrorPolicy) { p.Spec.Transform = "" })
	eventuallySecret(t, ns[1], "cfg", mirrorOf(ns[0], "cfg", map[string]string{"k": "v"}))
	eventuallyPolicy(t, bad, synced(1, 1))

	// The consent rules are the annotations': an excluded namespace gets
	// no mirror, and the policy says why.
	excluded := namespaces(t, "fm-excluded-", nil, "pol")[0]
	create(t, ownedSecret(ns[0], "consent", nil, map[string]string{"k": "v"}))
	consent := secretPolicy(ns[0], "consent", []string{"consent"}, ns[1], excluded)
	create(t, consent)
	eventuallySecret(t, ns[1], "consent", mirrorOf(ns[0], "consent", nil))
	eventuallyPolicy(t, consent, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.TargetsSynced).To(Equal(int32(1)))
		g.Expect(condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "NamespaceRefused")).To(ContainSubstring(excluded))
	})
	consistentlyAbsent(t, excluded, "consent")

	// What may never be a source is refused, named by a policy or not.
	release := ownedSecret(ns[0], "sh.helm.release.v1.web.v1", nil, map[string]string{"release": "x"})
	release.Type = "helm.sh/release.v1"
	create(t, release)
	helmPolicy := secretPolicy(ns[0], "helm", []string{release.Name}, ns[1])
	create(t, helmPolicy)
	eventuallyPolicy(t, helmPolicy, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(condition(g, p, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "SourceRefused")).To(ContainSubstring("helm.sh/release.v1"))
	})
	consistentlyAbsent(t, ns[1], release.Name)

	// The kind's watches for policies are the narrow ones (see
	// TestListsAndWatchesAreFiltered): nothing here watched every Secret.
	for _, r := range allRequests() {
		if r.Method == "GET" && r.URL.Path == "/api/v1/namespaces/"+ns[0]+"/secrets" {
			NewWithT(t).Expect(r.URL.Query().Get("fieldSelector")).To(HavePrefix("metadata.name="), "GET %s", r.URL.RequestURI())
		}
	}
	NewWithT(t).Expect(slices.ContainsFunc(allRequests(), func(r request) bool {
		return r.URL.Path == "/api/v1/namespaces/"+ns[0]+"/secrets"
	})).To(BeTrue(), "the policy's source was watched in its namespace")
}

// Restarted, the agent rewrites nothing of a policy whose mirrors are in
// place: its status does not flap through Pending while the new agent
// looks at its sources, and no Event repeats what was said.
func TestPolicyRestartWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "polrestart", nil, "src", "a", "probe")
	create(t, ownedSecret(ns[0], "steady", nil, map[string]string{"k": "v"}))
	steady := secretPolicy(ns[0], "steady", []string{"steady"}, ns[1])
	create(t, steady)
	eventuallyPolicy(t, steady, synced(1, 1))
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(steady), steady)).To(Succeed())
	events := len(eventsFor(ns[0], "steady", "MirrorsSynced"))

	start := stopAgent(t)
	start()
	// The new agent is working once a policy created after it started has
	// its mirror.
	create(t, ownedSecret(ns[0], "probe", nil, map[string]string{"k": "v"}))
	create(t, secretPolicy(ns[0], "probe", []string{"probe"}, ns[2]))
	eventuallySecret(t, ns[2], "probe", nil)

	g.Consistently(func() string {
		got := &v1alpha1.MirrorPolicy{}
		_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(steady), got)
		return got.ResourceVersion
	}, settle, poll).Should(Equal(steady.ResourceVersion), "the policy was rewritten after a restart with nothing changed")
	g.Expect(eventsFor(ns[0], "steady", "MirrorsSynced")).To(HaveLen(events))
	// Nor was the source read one by one: its mirror's events came before
	// the policy's watch of it had synced, and waited for it.
	for _, r := range agent.requests.all() {
		g.Expect(r).NotTo(HavePrefix("GET /api/v1/namespaces/"+ns[0]+"/secrets/steady"), "the restarted agent read the source by itself")
	}
}
