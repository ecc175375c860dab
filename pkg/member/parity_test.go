package member_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
	"github.com/fleetmirror/fleetmirror/pkg/desired"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// secretRef is the Secret ns/name, for Get and Delete.
func secretRef(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// plainCopy expects s to be no mirror any more: none of our labels or
// annotations, its data as given. A copy made once is let go like this.
func plainCopy(data map[string]string) func(g Gomega, s *corev1.Secret) {
	return releasedCopy("", data)
}

// releasedCopy expects s to be a synchronized mirror of the source ref
// (a source reference) released as a plain object: none of our labels,
// none of our annotations but the record of where it came from, which
// claims nothing; its data as given. With ref "", no record at all.
func releasedCopy(ref string, data map[string]string) func(g Gomega, s *corev1.Secret) {
	return func(g Gomega, s *corev1.Secret) {
		for k := range s.Labels {
			g.Expect(k).NotTo(HavePrefix(annotations.Prefix), "label %s left on a copy let go", k)
		}
		record := map[string]bool{annotations.AnnotationReleasedFrom: ref != "", annotations.AnnotationReleasedFromUID: ref != ""}
		for k := range s.Annotations {
			g.Expect(!strings.HasPrefix(k, annotations.Prefix) || record[k]).To(BeTrue(), "annotation %s left on a copy let go", k)
		}
		if ref != "" {
			g.Expect(s.Annotations).To(HaveKeyWithValue(annotations.AnnotationReleasedFrom, ref))
			g.Expect(s.Annotations).To(HaveKey(annotations.AnnotationReleasedFromUID))
		}
		for k, v := range data {
			g.Expect(string(s.Data[k])).To(Equal(v))
		}
	}
}

// A source's mirrors can have another name than the source
// (fleetmirror.io/target-name, a policy's spec.targetName): the same
// ownership and conflict rules, the source reference names the source, a
// new name moves the mirrors, and an invalid one is reported.
func TestTargetName(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "tname", nil, "src", "a", "b")

	src := sourceSecret(ns[0], "app-credentials", ns[1]+","+ns[2], map[string]string{"k": "v"})
	src.Annotations[annotations.AnnotationTargetName] = "regcred"
	create(t, src)
	for _, target := range ns[1:] {
		eventuallySecret(t, target, "regcred", mirrorOf(ns[0], "app-credentials", map[string]string{"k": "v"}))
	}
	g.Eventually(status(src), timeout, poll).Should(Equal("2/2 namespaces synced"))
	g.Expect(secretsIn("app-credentials", ns[1:]...)).To(BeEmpty())

	// A name taken by an object that is not ours: left alone, reported.
	taken := ownedSecret(ns[2], "taken", nil, map[string]string{"mine": "yes"})
	create(t, taken)
	change(t, src, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationTargetName] = "taken" })
	eventuallySecret(t, ns[1], "taken", mirrorOf(ns[0], "app-credentials", nil))
	eventuallyEvent(t, ns[0], "app-credentials", "TargetConflict", ns[2])
	eventuallyGone(t, secretRef(ns[1], "regcred"))
	eventuallyGone(t, secretRef(ns[2], "regcred"))
	untouched(t, taken)

	// An invalid name: reported, and the mirrors keep the source's name.
	change(t, src, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationTargetName] = "Not_A_Name" })
	eventuallyEvent(t, ns[0], "app-credentials", "InvalidAnnotation", annotations.AnnotationTargetName)
	eventuallySecret(t, ns[2], "app-credentials", mirrorOf(ns[0], "app-credentials", nil))
	eventuallyGone(t, secretRef(ns[1], "taken"))

	// The same through a policy.
	owned := ownedSecret(ns[0], "db", nil, map[string]string{"password": "one"})
	create(t, owned)
	p := secretPolicy(ns[0], "renamed", []string{"db"}, ns[1])
	p.Spec.TargetName = "db-copy"
	create(t, p)
	eventuallySecret(t, ns[1], "db-copy", mirrorOf(ns[0], "db", map[string]string{"password": "one"}))
	eventuallyPolicy(t, p, synced(1, 1))

	// A targetName for a policy of more than one source is refused by
	// the CRD.
	bad := secretPolicy(ns[0], "bad", []string{"db", "other"}, ns[1])
	bad.Spec.TargetName = "same"
	g.Expect(k8s.Create(context.Background(), bad)).NotTo(Succeed())

	g.Expect(k8s.Delete(context.Background(), owned)).To(Succeed())
	eventuallyGone(t, secretRef(ns[1], "db-copy"))
}

// Copy once (a policy's spec.copyOnce, Kyverno's synchronize: false): a
// copy is made in each target once and left to its namespace: source
// changes are not propagated, edits are kept, a deleted copy is not made
// again (not even by an agent started afresh), and the copies stay, as
// plain objects, when the source goes. A target that appears later gets
// its copy, with the content of then.
func TestCopyOncePolicy(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "once", nil, "src", "a", "b", "c", "d", "e", "f")
	src := ownedSecret(ns[0], "regcred", nil, map[string]string{"v": "1"})
	create(t, src)
	p := secretPolicy(ns[0], "once", []string{"regcred"}, ns[1], ns[2])
	p.Spec.CopyOnce = true
	create(t, p)
	for _, target := range ns[1:3] {
		eventuallySecret(t, target, "regcred", mirrorOf(ns[0], "regcred", map[string]string{"v": "1"}))
	}
	eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		synced(1, 2)(g, p)
		g.Expect(p.Status.Copied).To(ConsistOf(ns[1]+"/regcred", ns[2]+"/regcred"))
	})

	// The source changes, a copy is edited, another deleted; then a new
	// target proves the agent looked at the source again.
	change(t, src, func(s *corev1.Secret) { s.StringData = map[string]string{"v": "2"} })
	edited := mustSecret(t, ns[1], "regcred")
	change(t, edited, func(s *corev1.Secret) { s.Data["added"] = []byte("by hand") })
	g.Expect(k8s.Delete(context.Background(), secretRef(ns[2], "regcred"))).To(Succeed())
	eventuallyGone(t, secretRef(ns[2], "regcred"))
	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.TargetNamespaces = append(p.Spec.TargetNamespaces, ns[3]) })
	eventuallySecret(t, ns[3], "regcred", mirrorOf(ns[0], "regcred", map[string]string{"v": "2"}))
	eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.Copied).To(ConsistOf(ns[1]+"/regcred", ns[2]+"/regcred", ns[3]+"/regcred"))
	})
	eventuallySecret(t, ns[1], "regcred", func(g Gomega, s *corev1.Secret) {
		g.Expect(string(s.Data["v"])).To(Equal("1"), "a copy made once is not updated")
		g.Expect(string(s.Data["added"])).To(Equal("by hand"), "a copy made once keeps its edits")
	})
	g.Expect(secretsIn("regcred", ns[2])).To(BeEmpty(), "a deleted copy is not made again")

	// An agent started afresh reads where it copied from the policy.
	start := stopAgent(t)
	start()
	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.TargetNamespaces = append(p.Spec.TargetNamespaces, ns[4]) })
	eventuallySecret(t, ns[4], "regcred", mirrorOf(ns[0], "regcred", map[string]string{"v": "2"}))
	g.Expect(secretsIn("regcred", ns[2])).To(BeEmpty(), "a deleted copy is not made again after a restart")

	// A copy deleted the moment it is made, before the policy's status
	// has it: remembered all the same.
	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.TargetNamespaces = append(p.Spec.TargetNamespaces, ns[5]) })
	eventuallySecret(t, ns[5], "regcred", nil)
	g.Expect(k8s.Delete(context.Background(), secretRef(ns[5], "regcred"))).To(Succeed())
	eventuallyGone(t, secretRef(ns[5], "regcred"))
	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.TargetNamespaces = append(p.Spec.TargetNamespaces, ns[6]) })
	eventuallySecret(t, ns[6], "regcred", nil)
	eventuallyPolicy(t, p, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		g.Expect(p.Status.Copied).To(ContainElements(ns[5]+"/regcred", ns[6]+"/regcred"))
	})
	g.Expect(secretsIn("regcred", ns[5])).To(BeEmpty(), "a copy deleted at once is made again")

	// The source goes: the copies stay, nothing of ours on them.
	g.Expect(k8s.Delete(context.Background(), src)).To(Succeed())
	eventuallySecret(t, ns[1], "regcred", plainCopy(map[string]string{"v": "1", "added": "by hand"}))
	for _, target := range []string{ns[3], ns[4]} {
		eventuallySecret(t, target, "regcred", plainCopy(map[string]string{"v": "2"}))
	}
}

// Copy once on an annotated source: the record of where it copied is the
// annotation fleetmirror.io/copied on the source.
func TestCopyOnceAnnotated(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "oncea", nil, "src", "a", "b")
	src := sourceSecret(ns[0], "token", ns[1], map[string]string{"v": "1"})
	src.Annotations[annotations.AnnotationCopyOnce] = "true"
	create(t, src)
	eventuallySecret(t, ns[1], "token", mirrorOf(ns[0], "token", map[string]string{"v": "1"}))
	annotation := func() string {
		got := &corev1.Secret{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(src), got); err != nil {
			return err.Error()
		}
		return got.Annotations[annotations.AnnotationCopied]
	}
	g.Eventually(annotation, timeout, poll).Should(Equal(ns[1]))

	g.Expect(k8s.Delete(context.Background(), secretRef(ns[1], "token"))).To(Succeed())
	eventuallyGone(t, secretRef(ns[1], "token"))
	change(t, src, func(s *corev1.Secret) {
		s.Annotations[annotations.AnnotationTargetNamespaces] = ns[1] + "," + ns[2]
		s.StringData = map[string]string{"v": "2"}
	})
	eventuallySecret(t, ns[2], "token", mirrorOf(ns[0], "token", map[string]string{"v": "2"}))
	g.Eventually(annotation, timeout, poll).Should(Equal(ns[1] + "," + ns[2]))
	g.Expect(secretsIn("token", ns[1])).To(BeEmpty(), "a deleted copy is not made again")

	// Mirroring turned off: the copy stays, a plain object.
	change(t, src, func(s *corev1.Secret) { s.Annotations[annotations.AnnotationSync] = "false" })
	eventuallySecret(t, ns[2], "token", plainCopy(map[string]string{"v": "2"}))
}

// spec.deletionPolicy: with Orphan, deleting the policy leaves its copies
// as plain objects, while a deleted source still takes its copies with
// it; with Delete (the default) deleting the policy deletes them.
func TestDeletionPolicy(t *testing.T) {
	g := NewWithT(t)
	ns := namespaces(t, "delpol", nil, "src", "a")
	kept := ownedSecret(ns[0], "kept", nil, map[string]string{"v": "1"})
	gone := ownedSecret(ns[0], "gone", nil, map[string]string{"v": "1"})
	deleted := ownedSecret(ns[0], "deleted", nil, map[string]string{"v": "1"})
	for _, s := range []*corev1.Secret{kept, gone, deleted} {
		create(t, s)
	}
	orphan := secretPolicy(ns[0], "orphan", []string{"kept", "deleted"}, ns[1])
	orphan.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
	create(t, orphan)
	plain := secretPolicy(ns[0], "plain", []string{"gone"}, ns[1])
	create(t, plain)
	for _, name := range []string{"kept", "gone", "deleted"} {
		eventuallySecret(t, ns[1], name, mirrorOf(ns[0], name, map[string]string{"v": "1"}))
	}

	// The source of an Orphan policy deleted: its copy goes with it.
	g.Expect(k8s.Delete(context.Background(), deleted)).To(Succeed())
	eventuallyGone(t, secretRef(ns[1], "deleted"))

	g.Expect(k8s.Delete(context.Background(), orphan)).To(Succeed())
	g.Expect(k8s.Delete(context.Background(), plain)).To(Succeed())
	eventuallyGone(t, secretRef(ns[1], "gone"))
	ref := desired.SourceRef(clusterName, ns[0], "kept")
	copyUID := eventuallySecret(t, ns[1], "kept", releasedCopy(ref, map[string]string{"v": "1"})).UID

	// Nothing claims it any more: a new policy for the same source finds
	// the name taken by an object that is not ours, and leaves it alone.
	change(t, kept, func(s *corev1.Secret) { s.StringData = map[string]string{"v": "2"} })
	again := secretPolicy(ns[0], "again", []string{"kept"}, ns[1])
	create(t, again)
	eventuallyPolicy(t, again, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		condition(g, p, v1alpha1.ConditionReady, metav1.ConditionFalse, "TargetConflict")
	})
	eventuallySecret(t, ns[1], "kept", releasedCopy(ref, map[string]string{"v": "1"}))

	// A policy that adopts fleetmirror's own released copies (Kyverno's
	// reinstalled policy) takes it back: the same object, our mirror
	// again, following the source.
	change(t, again, func(p *v1alpha1.MirrorPolicy) { p.Spec.Adopt = []string{"fleetmirror"} })
	eventuallySecret(t, ns[1], "kept", mirrorOf(ns[0], "kept", map[string]string{"v": "2"}))
	eventuallyPolicy(t, again, synced(1, 1))
	s, err := getSecret(ns[1], "kept")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.UID).To(Equal(copyUID), "adopted, not made again")
	g.Expect(s.Annotations).NotTo(HaveKey(annotations.AnnotationReleasedFrom))

	// A released copy of an earlier source of that name is not taken.
	g.Expect(k8s.Delete(context.Background(), again)).To(Succeed())
	eventuallyGone(t, secretRef(ns[1], "kept"))
	stale := ownedSecret(ns[1], "kept", nil, map[string]string{"v": "old"})
	stale.Annotations = map[string]string{annotations.AnnotationReleasedFrom: ref, annotations.AnnotationReleasedFromUID: "an-earlier-uid"}
	create(t, stale)
	third := secretPolicy(ns[0], "third", []string{"kept"}, ns[1])
	third.Spec.Adopt = []string{"fleetmirror", "kyverno"}
	create(t, third)
	eventuallyPolicy(t, third, func(g Gomega, p *v1alpha1.MirrorPolicy) {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring("earlier object"))
	})
	eventuallySecret(t, ns[1], "kept", releasedCopy(ref, map[string]string{"v": "old"}))
}

// A source's own exclusions (fleetmirror.io/exclude-namespaces, a
// policy's spec.excludeNamespaces) take namespaces out of what its
// entries match; a mirror already there goes when its namespace becomes
// excluded.
func TestExcludeNamespaces(t *testing.T) {
	ns := namespaces(t, "excl", nil, "src", "a", "b", "kyverno")
	glob := nsGlob(ns[0], "")
	src := ownedSecret(ns[0], "shared", nil, map[string]string{"v": "1"})
	create(t, src)
	p := secretPolicy(ns[0], "all-but", []string{"shared"}, glob)
	p.Spec.ExcludeNamespaces = []string{ns[3]}
	create(t, p)
	eventuallySecret(t, ns[1], "shared", mirrorOf(ns[0], "shared", nil))
	eventuallySecret(t, ns[2], "shared", mirrorOf(ns[0], "shared", nil))
	eventuallyPolicy(t, p, synced(1, 2))
	NewWithT(t).Expect(secretsIn("shared", ns[3])).To(BeEmpty())

	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.ExcludeNamespaces = []string{ns[3], nsGlob(ns[0], "b")} })
	eventuallyGone(t, secretRef(ns[2], "shared"))
	eventuallyPolicy(t, p, synced(1, 1))
}

// With keepAdditions (fleetmirror.io/keep-additions), a mirror keeps what
// another writer adds to it, while what the source sets is corrected and
// follows the source; turned off, the mirror is an exact copy again.
func TestKeepAdditions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespaces(t, "keepadd", nil, "src", "a")
	src := ownedSecret(ns[0], "cfg", nil, map[string]string{"v": "1"})
	create(t, src)
	p := secretPolicy(ns[0], "keep", []string{"cfg"}, ns[1])
	p.Spec.KeepAdditions = true
	create(t, p)
	eventuallySecret(t, ns[1], "cfg", mirrorOf(ns[0], "cfg", map[string]string{"v": "1"}))

	// editMirror writes the mirror as a person with kubectl would.
	editMirror := func(fn func(s *corev1.Secret)) {
		g.Eventually(func() error {
			s, err := getSecret(ns[1], "cfg")
			if err != nil {
				return err
			}
			fn(s)
			return k8s.Update(ctx, s, client.FieldOwner("kubectl-edit"))
		}, timeout, poll).Should(Succeed())
	}
	editMirror(func(s *corev1.Secret) { s.Data["mine"] = []byte("x") })
	change(t, src, func(s *corev1.Secret) { s.StringData = map[string]string{"v": "2"} })
	eventuallySecret(t, ns[1], "cfg", mirrorOf(ns[0], "cfg", map[string]string{"v": "2", "mine": "x"}))
	editMirror(func(s *corev1.Secret) { s.Data["v"] = []byte("hacked") })
	eventuallySecret(t, ns[1], "cfg", mirrorOf(ns[0], "cfg", map[string]string{"v": "2", "mine": "x"}))
	eventuallyPolicy(t, p, synced(1, 1))

	change(t, p, func(p *v1alpha1.MirrorPolicy) { p.Spec.KeepAdditions = false })
	eventuallySecret(t, ns[1], "cfg", func(g Gomega, s *corev1.Secret) {
		g.Expect(s.Data).To(Equal(map[string][]byte{"v": []byte("2")}))
	})

	// A field at the top of the object the source does not have (a
	// ConfigMap's binaryData) stays too.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns[0], Name: "cm"}, Data: map[string]string{"v": "1"}}
	create(t, cm)
	pcm := &v1alpha1.MirrorPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns[0], Name: "keep-cm"}, Spec: v1alpha1.MirrorPolicySpec{
		Source:           v1alpha1.PolicySource{APIVersion: "v1", Kind: "ConfigMap", Names: []string{"cm"}},
		TargetNamespaces: []string{ns[1]},
		KeepAdditions:    true,
	}}
	create(t, pcm)
	mirrorCM := fleettest.ConfigMap(ns[1], "cm")
	fleettest.EventuallyExists(t, wait, fleet.Hub, mirrorCM, func(g Gomega, c *corev1.ConfigMap) {
		g.Expect(c.Labels).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
	})
	g.Eventually(func() error {
		c, err := fleettest.Lookup(fleet.Hub, fleettest.ConfigMap(ns[1], "cm"))
		if err != nil || c == nil {
			return fmt.Errorf("no mirror: %v", err)
		}
		c.BinaryData = map[string][]byte{"blob": {1, 2}}
		return k8s.Update(ctx, c, client.FieldOwner("kubectl-edit"))
	}, timeout, poll).Should(Succeed())
	change(t, cm, func(c *corev1.ConfigMap) { c.Data = map[string]string{"v": "2"} })
	fleettest.EventuallyExists(t, wait, fleet.Hub, fleettest.ConfigMap(ns[1], "cm"), func(g Gomega, c *corev1.ConfigMap) {
		g.Expect(c.Data).To(Equal(map[string]string{"v": "2"}))
		g.Expect(c.BinaryData).To(Equal(map[string][]byte{"blob": {1, 2}}))
	})
}
