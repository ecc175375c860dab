package controller

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Key is one work queue item: a source object in a cluster, with Pull a
// pull mirror (pull.go), with Policy a MirrorPolicy (policies.go).
type Key struct {
	Cluster   string
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	Pull      bool
	// Policy marks a MirrorPolicy (policies.go).
	Policy bool
}

func (k Key) String() string {
	s := fmt.Sprintf("%s/%s/%s/%s", k.Cluster, k.GVK.Kind, k.Namespace, k.Name)
	if k.Pull {
		s = "pull:" + s
	}
	if k.Policy {
		s = "policy:" + s
	}
	return s
}

// ParseSourceRef splits an AnnotationSource value into cluster, namespace
// and name.
func ParseSourceRef(ref string) (cluster, namespace, name string, ok bool) {
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}
