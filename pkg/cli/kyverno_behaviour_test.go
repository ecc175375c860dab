package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// kyvernoScene is one Kyverno ClusterPolicy migrated with the plugin and
// served by the agent: the namespace of its sources, the prefix of the
// namespaces its rule matches, and the MirrorPolicies migrate printed,
// applied.
type kyvernoScene struct {
	t        *testing.T
	k8s      client.Client
	src      string
	prefix   string
	made     int
	policy   *unstructured.Unstructured
	applied  []*v1alpha1.MirrorPolicy
	copyName string
}

// migrate runs kubectl fleetmirror migrate -o json on the scene's source
// namespace and applies what it prints for the scene's policy: creates the
// MirrorPolicies it prints, deletes those it no longer prints (a rule
// removed), as a user following its output does.
func (s *kyvernoScene) migrate() *cli.KyvernoRule {
	s.t.Helper()
	g := NewWithT(s.t)
	out, err := run("migrate", "-n", s.src, "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	var mig cli.Migration
	g.Expect(json.Unmarshal([]byte(out), &mig)).To(Succeed(), out)
	var rule *cli.KyvernoRule
	printed := map[string]bool{}
	for i, r := range mig.Kyverno {
		if r.Policy != s.policy.GetName() {
			continue
		}
		rule = &mig.Kyverno[i]
		for _, p := range r.MirrorPolicies {
			printed[p.Name] = true
			if s.has(p.Name) {
				continue
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.k8s.Create(context.Background(), &unstructured.Unstructured{Object: obj})).To(Succeed())
			s.applied = append(s.applied, p.DeepCopy())
		}
	}
	kept := s.applied[:0]
	for _, p := range s.applied {
		if printed[p.Name] {
			kept = append(kept, p)
			continue
		}
		g.Expect(client.IgnoreNotFound(s.k8s.Delete(context.Background(), p))).To(Succeed())
	}
	s.applied = kept
	return rule
}

// translated migrates and expects the scene's rule to translate without
// a decision.
func (s *kyvernoScene) translated() {
	s.t.Helper()
	rule := s.migrate()
	NewWithT(s.t).Expect(rule).NotTo(BeNil(), "migrate printed nothing for the policy")
	NewWithT(s.t).Expect(rule.Decisions).To(BeEmpty())
	NewWithT(s.t).Expect(rule.MirrorPolicies).NotTo(BeEmpty())
}

func (s *kyvernoScene) has(name string) bool {
	for _, p := range s.applied {
		if p.Name == name {
			return true
		}
	}
	return false
}

// namespace creates the next namespace the rule matches.
func (s *kyvernoScene) namespace() string {
	s.t.Helper()
	s.made++
	name := fmt.Sprintf("%s-%d", s.prefix, s.made)
	NewWithT(s.t).Expect(s.k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	s.t.Cleanup(func() {
		_ = s.k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

// copyHas waits until the copy in ns has value v under key k.
func (s *kyvernoScene) copyHas(ns, k, v string) {
	s.t.Helper()
	fleettest.EventuallyExists(s.t, wait, api.Hub, fleettest.Secret(ns, s.copyName), func(g Gomega, c *corev1.Secret) {
		g.Expect(string(c.Data[k])).To(Equal(v))
	})
}

func (s *kyvernoScene) copyGone(ns string) {
	s.t.Helper()
	fleettest.EventuallyGone(s.t, wait, api.Hub, fleettest.Secret(ns, s.copyName))
}

func (s *kyvernoScene) copyAbsent(ns string) {
	s.t.Helper()
	got, err := fleettest.Lookup(api.Hub, fleettest.Secret(ns, s.copyName))
	NewWithT(s.t).Expect(err).NotTo(HaveOccurred())
	NewWithT(s.t).Expect(got).To(BeNil(), "a copy in %s", ns)
}

// plain waits until the copy in ns is no mirror any more: none of our keys.
func (s *kyvernoScene) plain(ns, k, v string) {
	s.t.Helper()
	fleettest.EventuallyExists(s.t, wait, api.Hub, fleettest.Secret(ns, s.copyName), func(g Gomega, c *corev1.Secret) {
		g.Expect(c.Labels).NotTo(HaveKey(annotations.LabelMirror))
		g.Expect(c.Annotations).NotTo(HaveKey(annotations.AnnotationSource))
		g.Expect(string(c.Data[k])).To(Equal(v))
	})
}

// mirror waits until the copy in ns is our mirror with value v under k.
func (s *kyvernoScene) mirror(ns, k, v string) {
	s.t.Helper()
	fleettest.EventuallyExists(s.t, wait, api.Hub, fleettest.Secret(ns, s.copyName), func(g Gomega, c *corev1.Secret) {
		g.Expect(c.Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
		g.Expect(c.Annotations).NotTo(HaveKey(annotations.AnnotationReleasedFrom))
		g.Expect(string(c.Data[k])).To(Equal(v))
	})
}

func (s *kyvernoScene) editCopy(ns string, fn func(*corev1.Secret)) {
	s.t.Helper()
	fleettest.Change(s.t, wait, api.Hub, fleettest.Secret(ns, s.copyName), fn)
}

// newKyvernoScene creates the sources' namespace, the Kyverno
// ClusterPolicy of rules (with PREFIX and SRC in them replaced), and
// returns the scene before migrating.
func newKyvernoScene(t *testing.T, k8s client.Client, copyName, rules string) *kyvernoScene {
	t.Helper()
	g := NewWithT(t)
	src := newNamespaces(t, "kyvsrc")[0]
	s := &kyvernoScene{t: t, k8s: k8s, src: src, prefix: "kyvt-" + src, copyName: copyName}
	s.policy = kyvernoPolicy(t, "", src, fmt.Sprintf(rules, s.prefix+"-*", src))
	s.policy.SetNamespace("")
	g.Expect(k8s.Create(context.Background(), s.policy)).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), s.policy)
		for _, p := range s.applied {
			_ = k8s.Delete(context.Background(), p)
		}
	})
	return s
}

// What Kyverno's documentation says a generate rule with clone or
// cloneList does, synchronized or not, checked on the MirrorPolicies
// `kubectl fleetmirror migrate` prints for it, applied, with the agent
// running: a new namespace gets the copy; with synchronize the source's
// updates follow, edits are reverted, a deleted copy comes back and the
// source's deletion takes the copies; without, the copy is made once and
// left alone, and nothing deletes it. Deleting the rule or the policy
// keeps a clone's copies, deletes a synchronized cloneList's unless
// orphanDownstreamOnPolicyDelete, and never deletes those made once. A rule
// triggered by another object than a Namespace copies into the namespace
// of each such object: synchronized, the copy goes with its trigger; made
// once, it stays.
func TestKyvernoBehaviours(t *testing.T) {
	k8s := setup(t)
	g := NewWithT(t)
	_, err := fleettest.InstallPolicyCRD(api.Hub.Config)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fleettest.InstallPolicyCRD(api.Hub.Config, "pkg/cli/testdata/kyverno-crds.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	startAgent(t)
	ctx := context.Background()
	source := func(t *testing.T, ns, name string, labels map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, StringData: map[string]string{"v": "1"}}
		NewWithT(t).Expect(k8s.Create(ctx, s)).To(Succeed())
		return s
	}
	update := func(t *testing.T, s *corev1.Secret, v string) {
		fleettest.Change(t, wait, api.Hub, s, func(s *corev1.Secret) { s.StringData = map[string]string{"v": v} })
	}
	const cloneRules = `  - name: copy
    match: {any: [{resources: {kinds: [Namespace], names: ["%[1]s"]}}]}
    generate:
      apiVersion: v1
      kind: Secret
      name: regcred
      namespace: "{{request.object.metadata.name}}"
      synchronize: %[3]s
      clone: {namespace: %[2]s, name: registry-credentials}
`
	const cloneListRules = `  - name: copy
    match: {any: [{resources: {kinds: [Namespace], names: ["%[1]s"]}}]}
    generate:
      namespace: "{{request.object.metadata.name}}"
      synchronize: %[3]s
      orphanDownstreamOnPolicyDelete: %[4]s
      cloneList:
        namespace: %[2]s
        kinds: [v1/Secret]
        selector: {matchLabels: {share: "true"}}
`

	t.Run("clone, synchronized", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "regcred", fmt.Sprintf(cloneRules, "%[1]s", "%[2]s", "true"))
		src := source(t, s.src, "registry-credentials", nil)
		s.translated()
		a := s.namespace()
		s.copyHas(a, "v", "1") // a new namespace gets the copy, under generate.name
		update(t, src, "2")
		s.copyHas(a, "v", "2") // the source's update follows
		s.editCopy(a, func(c *corev1.Secret) { c.Data["v"] = []byte("edited") })
		s.copyHas(a, "v", "2") // an edit is reverted
		g.Expect(k8s.Delete(ctx, fleettest.Secret(a, "regcred"))).To(Succeed())
		s.copyHas(a, "v", "2") // a deleted copy comes back
		g.Expect(k8s.Delete(ctx, src)).To(Succeed())
		s.copyGone(a) // the source's deletion takes its copies
	})

	t.Run("clone, synchronized, policy deleted, then installed again", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "regcred", fmt.Sprintf(cloneRules, "%[1]s", "%[2]s", "true"))
		src := source(t, s.src, "registry-credentials", nil)
		s.translated()
		a := s.namespace()
		s.copyHas(a, "v", "1")
		uid := s.policy.GetUID()
		g.Expect(k8s.Delete(ctx, s.policy)).To(Succeed())
		s.migrate()          // prints nothing for it: its MirrorPolicy goes
		s.plain(a, "v", "1") // and a clone's copy stays, as Kyverno keeps it
		update(t, src, "2")
		// Kyverno's cpol-clone-sync-reinstall-policy: the policy installed
		// again takes its copies back and they follow the source again.
		again := s.policy.DeepCopy()
		again.SetResourceVersion("")
		again.SetUID("")
		g.Expect(k8s.Create(ctx, again)).To(Succeed())
		g.Expect(again.GetUID()).NotTo(Equal(uid))
		s.policy = again
		s.translated()
		s.mirror(a, "v", "2")
		update(t, src, "3")
		s.mirror(a, "v", "3")
	})

	t.Run("clone, synchronized, the copies Kyverno made", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "regcred", fmt.Sprintf(cloneRules, "%[1]s", "%[2]s", "true"))
		src := source(t, s.src, "registry-credentials", nil)
		a, b := s.namespace(), s.namespace()
		// What Kyverno left in a (a clone of this source, an older
		// version) and in b (a clone of an earlier source of that name).
		kyvernoCopy := func(ns string, uid types.UID) *corev1.Secret {
			c := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred", Labels: map[string]string{
				"app.kubernetes.io/managed-by":         "kyverno",
				"generate.kyverno.io/policy-name":      s.policy.GetName(),
				"generate.kyverno.io/rule-name":        "copy",
				"generate.kyverno.io/source-kind":      "Secret",
				"generate.kyverno.io/source-namespace": s.src,
				"generate.kyverno.io/source-uid":       string(uid),
			}}, StringData: map[string]string{"v": "0"}}
			g.Expect(k8s.Create(ctx, c)).To(Succeed())
			return c
		}
		inA, inB := kyvernoCopy(a, src.UID), kyvernoCopy(b, "an-earlier-uid")
		s.translated()
		s.mirror(a, "v", "1") // taken over: the same object, the source's content
		got := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(inA), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(inA.UID))
		g.Expect(got.Labels).NotTo(HaveKey("generate.kyverno.io/source-uid"))
		// Not proven a copy of this source: left alone, a conflict.
		g.Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(inB), got)).To(Succeed())
			g.Expect(got.ResourceVersion).To(Equal(inB.ResourceVersion))
		}, "2s", "100ms").Should(Succeed())
	})

	t.Run("clone, not synchronized, the copies Kyverno made", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "regcred", fmt.Sprintf(cloneRules, "%[1]s", "%[2]s", "false"))
		src := source(t, s.src, "registry-credentials", nil)
		a := s.namespace()
		// Kyverno's copy, edited since in its namespace, as copies made
		// once may be.
		made := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "regcred", Labels: map[string]string{
			"app.kubernetes.io/managed-by":         "kyverno",
			"generate.kyverno.io/policy-name":      s.policy.GetName(),
			"generate.kyverno.io/source-namespace": s.src,
			"generate.kyverno.io/source-uid":       string(src.UID),
		}}, StringData: map[string]string{"v": "edited"}}
		g.Expect(k8s.Create(ctx, made)).To(Succeed())
		s.translated()
		// Counted as the copy made once: the policy is Ready with it,
		// and it is left as it is.
		g.Eventually(func(g Gomega) {
			p := &v1alpha1.MirrorPolicy{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(s.applied[0]), p)).To(Succeed())
			g.Expect(p.Status.Copied).To(ContainElement(a + "/registry-credentials"))
			g.Expect(meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady)).To(BeTrue(), "%v", p.Status.Conditions)
		}, wait.Timeout, wait.Poll).Should(Succeed())
		got := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(made), got)).To(Succeed())
		g.Expect(got.ResourceVersion).To(Equal(made.ResourceVersion))
		// Deleted, it is not made again.
		g.Expect(k8s.Delete(ctx, made)).To(Succeed())
		g.Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKeyFromObject(made), &corev1.Secret{})
		}, "2s", "100ms").ShouldNot(Succeed())
	})

	t.Run("clone, not synchronized", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "regcred", fmt.Sprintf(cloneRules, "%[1]s", "%[2]s", "false"))
		src := source(t, s.src, "registry-credentials", nil)
		s.translated()
		a := s.namespace()
		s.copyHas(a, "v", "1")
		b := s.namespace()
		s.copyHas(b, "v", "1")
		update(t, src, "2")
		s.editCopy(a, func(c *corev1.Secret) { c.Data["added"] = []byte("by hand") })
		g.Expect(k8s.Delete(ctx, fleettest.Secret(b, "regcred"))).To(Succeed())
		s.copyGone(b)
		c := s.namespace()
		s.copyHas(c, "v", "2") // a namespace made now gets the content of now...
		s.copyHas(a, "v", "1") // ...the copies made before are not updated,
		s.copyHas(a, "added", "by hand")
		s.copyAbsent(b) // and a deleted copy is not made again
		g.Expect(k8s.Delete(ctx, src)).To(Succeed())
		s.plain(a, "v", "1") // the source's deletion leaves the copies
		s.plain(c, "v", "2")
	})

	// Kyverno's documented example of a trigger other than a Namespace: a
	// Secret cloned, under another name (the fourth argument), into the
	// namespace of a ConfigMap test-org labelled create-secret: "true".
	const triggerRules = `  - name: copy
    match: {any: [{resources: {kinds: [ConfigMap], names: [test-org], selector: {matchLabels: {create-secret: "true"}}}}]}
    generate:
      apiVersion: v1
      kind: Secret
      name: %[4]s
      namespace: "{{request.object.metadata.namespace}}"
      synchronize: %[3]s
      clone: {namespace: %[2]s, name: source-secret}
`
	testOrg := func(t *testing.T, ns string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "test-org", Labels: map[string]string{"create-secret": "true"}}}
		NewWithT(t).Expect(k8s.Create(ctx, cm)).To(Succeed())
		return cm
	}

	t.Run("clone on a ConfigMap trigger", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "downstream-secret", fmt.Sprintf(triggerRules, "%[1]s", "%[2]s", "true", "downstream-secret"))
		src := source(t, s.src, "source-secret", nil)
		s.translated()
		a, b := s.namespace(), s.namespace()
		inA := testOrg(t, a)
		s.copyHas(a, "v", "1") // the trigger's namespace gets the copy
		testOrg(t, s.src)
		s.copyHas(s.src, "v", "1") // beside the source, under its other name
		got := &corev1.Secret{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), got)).To(Succeed())
		g.Expect(got.Labels).NotTo(HaveKey(annotations.LabelMirror))
		s.copyAbsent(b) // no trigger there
		update(t, src, "2")
		s.copyHas(a, "v", "2")
		// The trigger stops matching: its copy goes, the others stay.
		fleettest.Change(t, wait, api.Hub, inA, func(cm *corev1.ConfigMap) { cm.Labels["create-secret"] = "false" })
		s.copyGone(a)
		s.copyHas(s.src, "v", "2")

		// Not synchronized: made once, the copy stays, a plain object,
		// when its trigger is deleted. (Another name: the rule above
		// copies into every namespace with a trigger too.)
		once := newKyvernoScene(t, k8s, "downstream-once", fmt.Sprintf(triggerRules, "%[1]s", "%[2]s", "false", "downstream-once"))
		source(t, once.src, "source-secret", nil)
		once.translated()
		c := once.namespace()
		inC := testOrg(t, c)
		once.mirror(c, "v", "1")
		g.Expect(k8s.Delete(ctx, inC)).To(Succeed())
		once.plain(c, "v", "1")
	})

	t.Run("cloneList, synchronized, policy deleted", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "shared", fmt.Sprintf(cloneListRules, "%[1]s", "%[2]s", "true", "false"))
		source(t, s.src, "shared", map[string]string{"share": "true"})
		source(t, s.src, "private", nil)
		s.translated()
		a := s.namespace()
		s.copyHas(a, "v", "1")
		got, err := fleettest.Lookup(api.Hub, fleettest.Secret(a, "private"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(BeNil(), "an object the selector does not select was copied")
		// The rule removed from the policy: migrate prints no
		// MirrorPolicy for it any more, and the one applied goes.
		fleettest.Change(t, wait, api.Hub, s.policy, func(p *unstructured.Unstructured) {
			rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
			rule := rules[0].(map[string]any)
			delete(rule, "generate")
			rule["name"], rule["validate"] = "not-a-copy", map[string]any{"message": "no generate rule left"}
			g.Expect(unstructured.SetNestedSlice(p.Object, []any{rule}, "spec", "rules")).To(Succeed())
		})
		s.migrate()
		s.copyGone(a) // a synchronized cloneList's copies go with the rule
	})

	t.Run("cloneList, synchronized, orphanDownstreamOnPolicyDelete", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "shared", fmt.Sprintf(cloneListRules, "%[1]s", "%[2]s", "true", "true"))
		source(t, s.src, "shared", map[string]string{"share": "true"})
		s.translated()
		a := s.namespace()
		s.copyHas(a, "v", "1")
		g.Expect(k8s.Delete(ctx, s.policy)).To(Succeed())
		s.migrate() // prints nothing for it: its MirrorPolicies go
		s.plain(a, "v", "1")
	})

	t.Run("cloneList, not synchronized, policy deleted", func(t *testing.T) {
		g := NewWithT(t)
		s := newKyvernoScene(t, k8s, "shared", fmt.Sprintf(cloneListRules, "%[1]s", "%[2]s", "false", "false"))
		src := source(t, s.src, "shared", map[string]string{"share": "true"})
		s.translated()
		a := s.namespace()
		s.copyHas(a, "v", "1")
		update(t, src, "2")
		b := s.namespace()
		s.copyHas(b, "v", "2")
		s.copyHas(a, "v", "1")
		g.Expect(k8s.Delete(ctx, s.policy)).To(Succeed())
		s.migrate()
		s.plain(a, "v", "1")
		s.plain(b, "v", "2")
	})
}
