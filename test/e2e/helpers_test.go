package e2e

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// wait is how long this suite waits for the fleet, and how often it looks.
var wait = fleettest.Wait{Timeout: timeout, Poll: poll}

// mkNamespaces creates namespace name in each cluster, unless it exists.
// envtest never finishes deleting a namespace, so tests share namespaces and
// keep their objects apart by name.
func mkNamespaces(t *testing.T, name string, cs ...*fleettest.Cluster) {
	t.Helper()
	fleettest.CreateNamespaces(t, name, nil, cs...)
}

// createUnmanaged creates obj in c, an object no fleetmirror agent owns, and
// deletes it when the test ends, so that the test can run again (-count).
func createUnmanaged(t *testing.T, c *fleettest.Cluster, obj client.Object) {
	t.Helper()
	if err := c.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}

// sourceMeta is the metadata of a source: enabled, synced, with the given
// target-namespaces annotation.
func sourceMeta(ns, name, targets string) metav1.ObjectMeta {
	return fleettest.SourceMeta(ns, name, targets)
}

// secret is an empty Secret with the given namespace and name, to read into.
func secret(ns, name string) *corev1.Secret { return fleettest.Secret(ns, name) }

// configMap is an empty ConfigMap with the given namespace and name, to read into.
func configMap(ns, name string) *corev1.ConfigMap { return fleettest.ConfigMap(ns, name) }

// eventuallyExists waits until obj (namespace and name set) exists in c and
// check, given the object as read, passes.
func eventuallyExists[T client.Object](t *testing.T, c *fleettest.Cluster, obj T, check func(g Gomega, obj T)) {
	t.Helper()
	fleettest.EventuallyExists(t, wait, c, obj, check)
}

// eventuallyGone waits until obj (namespace and name set) no longer exists in c.
func eventuallyGone(t *testing.T, c *fleettest.Cluster, obj client.Object) {
	t.Helper()
	fleettest.EventuallyGone(t, wait, c, obj)
}

// expectAbsent checks that obj (namespace and name set) does not exist in c.
func expectAbsent(t *testing.T, c *fleettest.Cluster, obj client.Object) {
	t.Helper()
	err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if !apierrors.IsNotFound(err) {
		t.Errorf("%T %s/%s/%s: want none, got error %v", obj, c.Name, obj.GetNamespace(), obj.GetName(), err)
	}
}

// expectMirror checks the stamps of a mirror written by managedBy (member or
// hub) from the source sourceRef (cluster/namespace/name).
func expectMirror(g Gomega, obj client.Object, managedBy, sourceRef string) {
	g.Expect(obj.GetLabels()).To(HaveKeyWithValue(annotations.LabelMirror, "true"))
	g.Expect(obj.GetLabels()).To(HaveKeyWithValue(annotations.LabelManagedBy, managedBy))
	g.Expect(obj.GetAnnotations()).To(HaveKeyWithValue(annotations.AnnotationSource, sourceRef))
}

// change reads obj from c, applies fn and updates it, retrying on conflicts.
func change[T client.Object](t *testing.T, c *fleettest.Cluster, obj T, fn func(T)) {
	t.Helper()
	fleettest.Change(t, wait, c, obj, fn)
}

// status returns a function reading the status annotation of obj in c.
func status(c *fleettest.Cluster, obj client.Object) func() string { return fleettest.Status(c, obj) }
