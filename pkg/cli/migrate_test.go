package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/cli"
	"github.com/fleetmirror/fleetmirror/pkg/peers"
)

// resourceVersions maps every Secret, ConfigMap and Namespace of the
// cluster to its resourceVersion: equal maps mean nothing was written.
func resourceVersions(g Gomega, k8s client.Client) map[string]string {
	out := map[string]string{}
	for _, l := range []client.ObjectList{&corev1.SecretList{}, &corev1.ConfigMapList{}, &corev1.NamespaceList{}} {
		g.Expect(k8s.List(context.Background(), l)).To(Succeed())
		switch l := l.(type) {
		case *corev1.SecretList:
			for _, o := range l.Items {
				out["secret "+o.Namespace+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.ConfigMapList:
			for _, o := range l.Items {
				out["configmap "+o.Namespace+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.NamespaceList:
			for _, o := range l.Items {
				out["namespace "+o.Name] = o.ResourceVersion
			}
		}
	}
	return out
}

// get reads obj (namespace and name set) afresh: it must exist.
func get[T client.Object](g Gomega, obj T) T { return getIn(g, api.Hub, obj) }

// TestMigrate migrates sources, pull mirrors and a namespace of the three
// tools, written as each tool's users and the tools themselves write them,
// through the dry run, --apply and --remove-old.
func TestMigrate(t *testing.T) {
	k8s := setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	nss := newNamespaces(t, "mig-src", "mig-a", "mig-b")
	src, a, b := nss[0], nss[1], nss[2]
	objMeta := func(ns, name string, labels, annots map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annots}
	}
	data := map[string]string{"password": "s3cret"}
	objects := []client.Object{
		// kubernetes-reflector: a source copied into a and pullable into
		// a and b, its copy in a, and a pull mirror in b.
		&corev1.Secret{ObjectMeta: objMeta(src, "ref-src", nil, map[string]string{
			peers.ReflectorAllowed: "true", peers.ReflectorAllowedNamespaces: a + "," + b,
			peers.ReflectorAutoEnabled: "true", peers.ReflectorAutoNamespaces: a,
		}), StringData: data},
		&corev1.Secret{ObjectMeta: objMeta(a, "ref-src", nil, map[string]string{
			peers.ReflectorReflects: src + "/ref-src", peers.ReflectorAutoReflects: "True",
			peers.ReflectorReflectedVersion: "1", peers.ReflectorReflectedAt: "2026-11-01T10:00:00.0000000+00:00",
		}), StringData: data},
		&corev1.Secret{ObjectMeta: objMeta(b, "ref-pull", nil, map[string]string{
			peers.ReflectorReflects: src + "/ref-src", peers.ReflectorAutoReflects: "False", peers.ReflectorReflectedVersion: "1",
		}), StringData: data},

		// kubernetes-replicator: a source pushed by a grouped regexp with
		// strip-labels, its push copy, a pull-only source and its pull
		// mirror, and a source whose regexp has no glob.
		&corev1.ConfigMap{ObjectMeta: objMeta(src, "rep-src", map[string]string{"app.kubernetes.io/managed-by": "strimzi-kafka-operator"}, map[string]string{
			peers.ReplicatorReplicateTo: "(" + a + "|" + b + ")", peers.ReplicatorStripLabels: "true",
		}), Data: data},
		&corev1.ConfigMap{ObjectMeta: objMeta(a, "rep-src", nil, map[string]string{
			peers.ReplicatorReplicatedAt: "2026-11-01T10:00:00Z", peers.ReplicatorReplicatedFromVersion: "1", peers.ReplicatorReplicatedKeys: "password",
		}), Data: data},
		&corev1.ConfigMap{ObjectMeta: objMeta(src, "rep-allow", nil, map[string]string{
			peers.ReplicatorReplicationAllowed: "true", peers.ReplicatorReplicationAllowedNamespaces: b,
		}), Data: data},
		&corev1.ConfigMap{ObjectMeta: objMeta(b, "rep-pull", nil, map[string]string{
			peers.ReplicatorReplicateFrom: src + "/rep-allow", peers.ReplicatorReplicatedFromVersion: "1",
		}), Data: data},
		&corev1.ConfigMap{ObjectMeta: objMeta(src, "rep-regex", nil, map[string]string{
			peers.ReplicatorReplicateTo: "app-ns-[0-9]*",
		}), Data: data},

		// kubemirror: a source with its finalizer and status, and its copy.
		&corev1.Secret{ObjectMeta: func() metav1.ObjectMeta {
			m := objMeta(src, "km-src", map[string]string{peers.KubemirrorEnabled: "true"}, map[string]string{
				peers.KubemirrorSync: "true", peers.KubemirrorTargetNamespaces: "all-labeled",
				peers.KubemirrorPrefix + "sync-status": "reconciled:1,errors:0",
			})
			m.Finalizers = []string{peers.KubemirrorFinalizer}
			return m
		}(), StringData: data},
		&corev1.Secret{ObjectMeta: objMeta(a, "km-src", map[string]string{peers.KubemirrorMirror: "true", peers.KubemirrorPrefix + "managed-by": "kubemirror"}, map[string]string{
			peers.KubemirrorSourceNamespace: src, peers.KubemirrorSourceName: "km-src", peers.KubemirrorSourceUID: "0000",
		}), StringData: data},
	}
	for _, o := range objects {
		g.Expect(k8s.Create(ctx, o)).To(Succeed())
	}
	t.Cleanup(func() {
		// kubemirror's finalizer would keep the Secret (and its namespace) forever.
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "km-src"}}
		_ = k8s.Patch(ctx, s, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	// kubemirror's opt-in label on a.
	nsA := get(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a}})
	nsA.Labels[peers.KubemirrorAllowMirrors] = "true"
	g.Expect(k8s.Update(ctx, nsA)).To(Succeed())

	// The dry run writes nothing, anywhere.
	before := resourceVersions(g, k8s)
	out, err := run("migrate", "-n", src)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HavePrefix("Dry run: nothing is written."))
	g.Expect(out).To(ContainSubstring(strings.Join([]string{
		"Secret " + src + "/ref-src (reflector source)",
		"  + label fleetmirror.io/enabled: true",
		"  + annotation fleetmirror.io/adopt: reflector",
		"  + annotation fleetmirror.io/allow-pull-into: " + a + "," + b,
		"  + annotation fleetmirror.io/sync: true",
		"  + annotation fleetmirror.io/target-namespaces: " + a,
		"  - annotation reflector.v1.k8s.emberstack.com/reflection-allowed: true",
		"  - annotation reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces: " + a + "," + b,
		"  - annotation reflector.v1.k8s.emberstack.com/reflection-auto-enabled: true",
		"  - annotation reflector.v1.k8s.emberstack.com/reflection-auto-namespaces: " + a,
		"",
	}, "\n")), out)
	g.Expect(out).To(ContainSubstring("ConfigMap " + src + "/rep-src (replicator source)\n"))
	g.Expect(out).To(ContainSubstring(`  + annotation fleetmirror.io/transform: "rules:\n  - path: metadata.labels\n    delete: true\n"`))
	g.Expect(out).To(ContainSubstring("  + annotation fleetmirror.io/target-namespaces: " + a + "," + b + "\n"))
	g.Expect(out).To(ContainSubstring("  - finalizer kubemirror.raczylo.com/finalizer\n"))
	g.Expect(out).To(MatchRegexp(`Needs a decision \(nothing is written to these\):\n  ConfigMap ` + src + `/rep-regex \(replicator source\)\n    why: replicator.v1.mittwald.de/replicate-to: entry "app-ns-\[0-9\]\*": a character class`))
	g.Expect(out).To(ContainSubstring("Note: namespaces were not scanned"))
	g.Expect(out).To(HaveSuffix("4 objects to migrate, 1 need a decision, 0 copies made by the old tools (the agent adopts them once their source carries fleetmirror.io/adopt).\n"))

	var mig cli.Migration
	out, err = run("migrate", "-A", "-o", "json")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(json.Unmarshal([]byte(out), &mig)).To(Succeed(), out)
	g.Expect(mig.Copies).To(Equal(3), "the reflector's, replicator's and kubemirror's copies in "+a)
	byName := map[string]cli.Migrated{}
	for _, o := range mig.Objects {
		byName[o.Kind+" "+o.Namespace+"/"+o.Name] = o
	}
	g.Expect(byName).To(HaveKeyWithValue("Secret "+b+"/ref-pull", And(HaveField("Role", peers.RolePull), HaveField("Add", ConsistOf(
		peers.Key{Label: true, Key: annotations.LabelPull, Value: "true"},
		peers.Key{Key: annotations.AnnotationMirrorFrom, Value: src + "/ref-src"},
	)))))
	g.Expect(byName).To(HaveKeyWithValue("ConfigMap "+b+"/rep-pull", HaveField("Add", ContainElement(peers.Key{Key: annotations.AnnotationMirrorFrom, Value: src + "/rep-allow"}))))
	g.Expect(byName).To(HaveKeyWithValue("ConfigMap "+src+"/rep-allow", HaveField("Add", ContainElement(peers.Key{Key: annotations.AnnotationAllowPullInto, Value: b}))))
	g.Expect(byName).To(HaveKeyWithValue("Namespace /"+a, HaveField("Add", ConsistOf(peers.Key{Label: true, Key: annotations.LabelAllowMirrors, Value: "true"}))))
	g.Expect(byName).To(HaveKeyWithValue("ConfigMap "+src+"/rep-regex", HaveField("Decisions", HaveLen(1))))
	g.Expect(resourceVersions(g, k8s)).To(Equal(before), "a dry run writes nothing")

	// --apply and --remove-old are separate steps.
	_, err = run("migrate", "-A", "--apply", "--remove-old")
	g.Expect(err).To(MatchError(ContainSubstring("separate steps")))

	// --apply sets our keys and leaves the old ones.
	out, err = run("migrate", "-A", "--apply")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.Count(out, "=> applied")).To(Equal(7), out)
	refSrc := get(g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "ref-src"}})
	g.Expect(refSrc.Labels).To(HaveKeyWithValue(annotations.LabelEnabled, "true"))
	g.Expect(refSrc.Annotations).To(And(
		HaveKeyWithValue(annotations.AnnotationTargetNamespaces, a), HaveKeyWithValue(annotations.AnnotationAdopt, "reflector"),
		HaveKeyWithValue(peers.ReflectorAllowed, "true"), HaveKeyWithValue(peers.ReflectorAutoNamespaces, a)))
	g.Expect(refSrc.ManagedFields).To(ContainElement(And(HaveField("Manager", cli.FieldManager), HaveField("Operation", metav1.ManagedFieldsOperationApply))))
	g.Expect(refSrc.Data).To(HaveKeyWithValue("password", []byte("s3cret")))
	g.Expect(get(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a}}).Labels).To(And(
		HaveKeyWithValue(annotations.LabelAllowMirrors, "true"), HaveKeyWithValue(peers.KubemirrorAllowMirrors, "true")))
	after := resourceVersions(g, k8s)
	for _, untouched := range []string{"configmap " + src + "/rep-regex", "secret " + a + "/ref-src", "configmap " + a + "/rep-src", "secret " + a + "/km-src"} {
		g.Expect(after[untouched]).To(Equal(before[untouched]), untouched+" needs a decision or is a copy: never written")
	}
	// Applying again writes nothing.
	out, err = run("migrate", "-A", "--apply")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("=> applied"))
	g.Expect(resourceVersions(g, k8s)).To(Equal(after))

	// --remove-old refuses for a tool that still runs.
	tools := newNamespaces(t, "mig-tools")[0]
	replicator := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tools, Name: "replicator"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "replicator"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "replicator"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "replicator", Image: "quay.io/mittwald/kubernetes-replicator:v2.12.4",
				}}},
			},
		},
	}
	g.Expect(k8s.Create(ctx, replicator)).To(Succeed())
	out, err = run("migrate", "-A", "--remove-old")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("=> skipped: replicator still runs (Deployment " + tools + "/replicator)"))
	refSrc = get(g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "ref-src"}})
	for k := range refSrc.Annotations {
		g.Expect(k).NotTo(HavePrefix(peers.ReflectorPrefix))
	}
	g.Expect(refSrc.Annotations).To(HaveKeyWithValue(annotations.AnnotationTargetNamespaces, a))
	km := get(g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "km-src"}})
	g.Expect(km.Finalizers).To(BeEmpty())
	g.Expect(km.Labels).To(And(Not(HaveKey(peers.KubemirrorEnabled)), HaveKeyWithValue(annotations.LabelEnabled, "true")))
	g.Expect(km.Annotations).NotTo(HaveKey(peers.KubemirrorSync))
	g.Expect(get(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a}}).Labels).NotTo(HaveKey(peers.KubemirrorAllowMirrors))
	g.Expect(get(g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "rep-src"}}).Annotations).To(HaveKey(peers.ReplicatorReplicateTo))

	// Uninstalled (scaled to zero), the replicator's keys go too.
	zero := int32(0)
	replicator.Spec.Replicas = &zero
	g.Expect(k8s.Update(ctx, replicator)).To(Succeed())
	out, err = run("migrate", "-A", "--remove-old")
	g.Expect(err).NotTo(HaveOccurred(), out)
	for _, name := range []string{"rep-src", "rep-allow"} {
		cm := get(g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: name}})
		for k := range cm.Annotations {
			g.Expect(k).NotTo(HavePrefix(peers.ReplicatorPrefix), name)
		}
		g.Expect(cm.Labels).To(HaveKeyWithValue(annotations.LabelEnabled, "true"), name)
	}
	pull := get(g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "rep-pull"}})
	g.Expect(pull.Annotations).To(And(Not(HaveKey(peers.ReplicatorReplicateFrom)), HaveKeyWithValue(annotations.AnnotationMirrorFrom, src+"/rep-allow")))
	// What needs a decision and the copies were never written.
	final := resourceVersions(g, k8s)
	for _, untouched := range []string{"configmap " + src + "/rep-regex", "secret " + a + "/ref-src", "configmap " + a + "/rep-src", "secret " + a + "/km-src"} {
		g.Expect(final[untouched]).To(Equal(before[untouched]), untouched)
	}
	// Only the object that needs a decision is left to show.
	out, err = run("migrate", "-A")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(HaveSuffix("0 objects to migrate, 1 need a decision, 3 copies made by the old tools (the agent adopts them once their source carries fleetmirror.io/adopt).\n"))
}

// TestMigrateFlags covers the mistakes a person may make.
func TestMigrateFlags(t *testing.T) {
	setup(t)
	for _, args := range [][]string{
		{"migrate", "--kinds", "nosuchkind"},
		{"migrate", "--kinds", "namespaces"},
		{"migrate", "-o", "yaml"},
	} {
		if out, err := run(args...); err == nil {
			t.Errorf("%v succeeded:\n%s", args, out)
		}
	}
}

// TestMigrateWritesOnlyWhatItScanned changes and deletes objects between
// the scan and the writes: --apply never recreates a deleted object nor
// writes a changed one, and --remove-old never removes a key that changed.
func TestMigrateWritesOnlyWhatItScanned(t *testing.T) {
	k8s := setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespaces(t, "mig-race")[0]
	source := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			peers.ReplicatorReplicateTo: "team-a",
		}}}
	}
	for _, name := range []string{"deleted", "changed", "recreated"} {
		g.Expect(k8s.Create(ctx, source(name))).To(Succeed())
	}
	m, err := cli.NewMigrator(api.Hub.Config)
	g.Expect(err).NotTo(HaveOccurred())
	mapping, err := k8s.RESTMapper().RESTMapping(schema.GroupKind{Kind: "ConfigMap"}, "v1")
	g.Expect(err).NotTo(HaveOccurred())
	scan := func() *cli.Migration {
		mig, err := m.Scan(ctx, ns, []*meta.RESTMapping{mapping})
		g.Expect(err).NotTo(HaveOccurred())
		return mig
	}
	results := func(mig *cli.Migration) map[string]string {
		out := map[string]string{}
		for _, o := range mig.Objects {
			out[o.Name] = o.Result
		}
		return out
	}

	mig := scan()
	g.Expect(k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deleted"}})).To(Succeed())
	changed := get(g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "changed"}})
	changed.Data = map[string]string{"k": "v"}
	g.Expect(k8s.Update(ctx, changed)).To(Succeed())
	g.Expect(k8s.Delete(ctx, source("recreated"))).To(Succeed())
	g.Expect(k8s.Create(ctx, source("recreated"))).To(Succeed())
	m.Apply(ctx, mig)
	for _, name := range []string{"deleted", "changed", "recreated"} {
		g.Expect(results(mig)).To(HaveKeyWithValue(name, HavePrefix("failed: it changed or went away since the scan")))
	}
	g.Expect(get(g, source("recreated")).Labels).NotTo(HaveKey(annotations.LabelEnabled))
	err = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "deleted"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "not recreated: %v", err)
	g.Expect(get(g, changed).Labels).NotTo(HaveKey(annotations.LabelEnabled))

	// Scanned again, it is applied; then its old key changes before
	// --remove-old, which then keeps it.
	mig = scan()
	m.Apply(ctx, mig)
	g.Expect(results(mig)).To(HaveKeyWithValue("changed", "applied"))
	mig = scan()
	changed = get(g, changed)
	changed.Annotations[peers.ReplicatorReplicateTo] = "team-a,team-b"
	g.Expect(k8s.Update(ctx, changed)).To(Succeed())
	g.Expect(m.RemoveOld(ctx, mig)).To(Succeed())
	g.Expect(results(mig)).To(HaveKeyWithValue("changed", HavePrefix("failed: it changed or went away since the scan")))
	g.Expect(get(g, changed).Annotations).To(HaveKeyWithValue(peers.ReplicatorReplicateTo, "team-a,team-b"))
}
