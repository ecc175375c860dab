package fleettest

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// plainSecretSuffix ends the name of a plain registration Secret.
const plainSecretSuffix = "-fleetmirror"

// CAPISecretName is the name of the Cluster API kubeconfig Secret of cluster.
func CAPISecretName(cluster string) string {
	return secret.Name(cluster, secret.Kubeconfig)
}

// PlainSecretName is the name RegisterPlain gives the Secret of cluster.
func PlainSecretName(cluster string) string {
	return cluster + plainSecretSuffix
}

// RegisterCAPI registers member with the hub the way Cluster API publishes a
// workload cluster: Secret "<name>-kubeconfig" of type cluster.x-k8s.io/secret,
// labelled cluster.x-k8s.io/cluster-name=<name>, kubeconfig under data key
// "value". It has no owner reference, since there is no Cluster object. A nil
// kubeconfig registers member's admin kubeconfig. An existing Secret is
// updated in place, which is how tests rotate credentials.
func RegisterCAPI(ctx context.Context, hub client.Client, namespace string, member *Cluster, kubeconfig []byte) error {
	labels := map[string]string{clusterv1.ClusterNameLabel: member.Name}
	return register(ctx, hub, namespace, CAPISecretName(member.Name), clusterv1.ClusterSecretType, labels, member, kubeconfig)
}

// RegisterPlain registers member with the hub in fleetmirror's own form: an
// Opaque Secret "<name>-fleetmirror" labelled fleetmirror.io/cluster-name=<name>
// with the kubeconfig under data key "value". extraLabels are the cluster's
// labels, which target cluster selectors match. The Secret carries exactly
// these labels, also when it is updated. A nil kubeconfig registers member's
// admin kubeconfig.
func RegisterPlain(ctx context.Context, hub client.Client, namespace string, member *Cluster, kubeconfig []byte, extraLabels map[string]string) error {
	labels := maps.Clone(extraLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[annotations.LabelClusterName] = member.Name
	return register(ctx, hub, namespace, PlainSecretName(member.Name), corev1.SecretTypeOpaque, labels, member, kubeconfig)
}

// register creates or updates one registration Secret.
func register(ctx context.Context, hub client.Client, namespace, name string, typ corev1.SecretType,
	labels map[string]string, member *Cluster, kubeconfig []byte,
) error {
	if kubeconfig == nil {
		var err error
		if kubeconfig, err = member.Kubeconfig(); err != nil {
			return err
		}
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, hub, s, func() error {
		s.Type = typ // immutable: an existing Secret of another type fails the update
		s.Labels = labels
		s.Data = map[string][]byte{secret.KubeconfigDataName: kubeconfig}
		return nil
	})
	if err != nil {
		return fmt.Errorf("registering cluster %s in %s/%s: %w", member.Name, namespace, name, err)
	}
	return nil
}

// Unregister deletes the registration Secrets of member in namespace, in
// whichever form they exist. Absent Secrets are no error.
func Unregister(ctx context.Context, hub client.Client, namespace string, member *Cluster) error {
	var errs []error
	for _, name := range []string{CAPISecretName(member.Name), PlainSecretName(member.Name)} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
		if err := hub.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("unregistering cluster %s: deleting %s/%s: %w", member.Name, namespace, name, err))
		}
	}
	return errors.Join(errs...)
}
