package fleettest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelNamespace sets label key of namespace name in c to value, or removes
// it when value is empty, as `kubectl label namespace` would.
func LabelNamespace(t testing.TB, w Wait, c *Cluster, name, key, value string) {
	t.Helper()
	Change(t, w, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, func(n *corev1.Namespace) {
		if value == "" {
			delete(n.Labels, key)
			return
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[key] = value
	})
}
