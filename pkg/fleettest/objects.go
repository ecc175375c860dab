package fleettest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// The helpers below read and write objects in a Cluster the way a person
// with kubectl would, and wait for what an agent does. Every test tree (the
// agents' envtest suites, the end-to-end tests, the benchmark) uses them, so
// a wait or a read means the same everywhere.

// Wait is how long a suite waits for an agent's outcome and how often it
// looks. Each suite keeps its own: a fleet of processes is slower than an
// agent in the test process.
type Wait struct {
	// Timeout bounds every wait.
	Timeout time.Duration
	// Poll is the interval between two looks.
	Poll time.Duration
}

// SourceMeta is the metadata of a source: enabled, synced, with the given
// target-namespaces annotation.
func SourceMeta(ns, name, targets string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: ns, Name: name,
		Labels: map[string]string{annotations.LabelEnabled: "true"},
		Annotations: map[string]string{
			annotations.AnnotationSync:             "true",
			annotations.AnnotationTargetNamespaces: targets,
		},
	}
}

// Secret is an empty Secret with the given namespace and name, to read into.
func Secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// ConfigMap is an empty ConfigMap with the given namespace and name, to read
// into.
func ConfigMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// CreateNamespaces creates namespace name in each cluster, unless it exists.
// envtest never finishes deleting a namespace, so tests that share a name
// keep their objects apart by name.
func CreateNamespaces(t testing.TB, name string, labels map[string]string, cs ...*Cluster) {
	t.Helper()
	for _, c := range cs {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := c.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// Lookup reads obj (namespace and name set) from c into a fresh object of
// its type and returns that, or nil when it does not exist.
func Lookup[T client.Object](c *Cluster, obj T) (T, error) {
	got := fresh(obj)
	err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), got)
	if apierrors.IsNotFound(err) {
		var none T
		return none, nil
	}
	return got, err
}

// fresh returns an empty object of obj's type with obj's kind (which an
// unstructured object needs to be read), namespace and name: every read
// starts from nothing, so no field of an earlier read lingers.
func fresh[T client.Object](obj T) T {
	got := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	got.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	got.SetNamespace(obj.GetNamespace())
	got.SetName(obj.GetName())
	return got
}

// EventuallyExists waits until obj (namespace and name set) exists in c and
// check, given the object as read, passes. It returns the object as last
// read and leaves obj set to it.
func EventuallyExists[T client.Object](t testing.TB, w Wait, c *Cluster, obj T, check func(g gomega.Gomega, obj T)) T {
	t.Helper()
	var got T
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		read, err := Lookup(c, obj)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(read).NotTo(gomega.BeNil(), "%T %s/%s/%s does not exist", obj, c.Name, obj.GetNamespace(), obj.GetName())
		if check != nil {
			check(g, read)
		}
		got = read
	}, w.Timeout, w.Poll).Should(gomega.Succeed())
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(got).Elem())
	return got
}

// EventuallyGone waits until obj (namespace and name set) no longer exists
// in c.
func EventuallyGone(t testing.TB, w Wait, c *Cluster, obj client.Object) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		return c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh(obj))
	}, w.Timeout, w.Poll).Should(gomega.Satisfy(apierrors.IsNotFound), "%T %s/%s/%s still exists", obj, c.Name, obj.GetNamespace(), obj.GetName())
}

// Change reads obj from c, applies fn and updates it, retrying on
// conflicts.
func Change[T client.Object](t testing.TB, w Wait, c *Cluster, obj T, fn func(T)) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		fn(obj)
		return c.Client.Update(context.Background(), obj)
	}, w.Timeout, w.Poll).Should(gomega.Succeed())
}

// Status returns a function reading the status annotation of obj in c, or
// the error that kept it from reading it.
func Status(c *Cluster, obj client.Object) func() string {
	return func() string {
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err.Error()
		}
		return obj.GetAnnotations()[annotations.AnnotationStatus]
	}
}

// Events lists the events in c about the object ns/name with reason; nil
// when they cannot be listed.
func Events(c *Cluster, ns, name, reason string) []corev1.Event {
	var list corev1.EventList
	if err := c.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// EventMessages returns the messages of Events(c, ns, name, reason).
func EventMessages(c *Cluster, ns, name, reason string) []string {
	var out []string
	for _, e := range Events(c, ns, name, reason) {
		out = append(out, e.Message)
	}
	return out
}
