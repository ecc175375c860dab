package clusters

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IdentityNamespace is the Namespace whose UID identifies a cluster: the
// convention of KEP-2149's ClusterProperty cluster.clusterset.k8s.io, also
// followed by Cluster API and Open Cluster Management. Every cluster has
// it from its first start, and it is never deleted.
const IdentityNamespace = metav1.NamespaceSystem

// Identity reads the cluster's identity: the UID of its kube-system
// Namespace, with one metadata GET. Two kubeconfigs that reach the same
// cluster (two names, two addresses, two users) read the same identity.
func (c *Cluster) Identity(ctx context.Context) (string, error) {
	ns, err := c.md.Resource(namespacesGVR).Get(ctx, IdentityNamespace, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the cluster's identity (the UID of Namespace %s): %w", IdentityNamespace, err)
	}
	if ns.UID == "" {
		return "", fmt.Errorf("the cluster's Namespace %s has no UID", IdentityNamespace)
	}
	return string(ns.UID), nil
}
