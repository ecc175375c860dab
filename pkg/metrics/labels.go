package metrics

import "k8s.io/apimachinery/pkg/runtime/schema"

// KindLabel is the value of the kind label for gvk: the kind, qualified by
// its API group unless it is in the core group ("Secret",
// "apps/Deployment"), so that kinds of the same name in two groups stay
// apart, and the label does not change when a group serves a new version.
func KindLabel(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind
	}
	return gvk.Group + "/" + gvk.Kind
}
