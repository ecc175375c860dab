package apply

import "k8s.io/apimachinery/pkg/runtime/schema"

// Remembers reports whether the Applier still holds the memo of its last
// write of a mirror, which it keeps only until the cache has caught up.
func (a *Applier) Remembers(cluster string, gvk schema.GroupVersionKind, namespace, name string) bool {
	_, ok := a.written.Load(target{cluster: cluster, gvk: gvk, namespace: namespace, name: name})
	return ok
}
