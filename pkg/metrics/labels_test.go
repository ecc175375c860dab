package metrics

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKindLabel(t *testing.T) {
	for _, tt := range []struct {
		gvk  schema.GroupVersionKind
		want string
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, "Secret"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "apps/Deployment"},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1alpha1", Kind: "Deployment"}, "example.com/Deployment"},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, "networking.k8s.io/Ingress"},
	} {
		if got := KindLabel(tt.gvk); got != tt.want {
			t.Errorf("KindLabel(%v) = %q, want %q", tt.gvk, got, tt.want)
		}
	}
}
