package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

// The Cluster API conventions of a kubeconfig Secret, as sigs.k8s.io/cluster-api
// defines them in api/core/v1beta2 (ClusterNameLabel, ClusterSecretType)
// and util/secret (Name, Kubeconfig, KubeconfigDataName). They are written
// here because those packages cost the hub far more than four strings:
// util/secret links controller-runtime's client and, through it, the
// scheme of every built-in API type, and api/core/v1beta2 registers Cluster
// API's own types with their CRD schemas (the hub's binary was 33.0 MB with
// them; see clusters.TypedREST for the rest of that cost).
// TestClusterAPIConventions holds them to cluster-api's.
const (
	capiClusterNameLabel                   = "cluster.x-k8s.io/cluster-name"
	capiSecretType       corev1.SecretType = "cluster.x-k8s.io/secret" //nolint:gosec // a Secret type, not a credential
	capiKubeconfigKey                      = "value"
)

// capiKubeconfigName is the name Cluster API gives the kubeconfig Secret
// of cluster.
func capiKubeconfigName(cluster string) string { return cluster + "-kubeconfig" }

// errPlugin marks kubeconfigs refused for running plugins.
var errPlugin = errors.New("plugin refused")

// registration is what a kubeconfig Secret says about one cluster.
type registration struct {
	name   string
	labels map[string]string
	config *rest.Config
	// hash identifies the kubeconfig, so a rotation is noticed at once.
	hash string
}

// clusterName returns the cluster a Secret registers, and false when the
// Secret is not a registration at all (Cluster API keeps other Secrets,
// such as <cluster>-ca, under the same label).
func clusterName(s *corev1.Secret) (string, bool) {
	if name := s.Labels[annotations.LabelClusterName]; name != "" {
		return name, true
	}
	name := s.Labels[capiClusterNameLabel]
	if name == "" || s.Name != capiKubeconfigName(name) {
		return "", false
	}
	return name, true
}

// mirrored says why a registration Secret is refused for being a mirror,
// or "" when it is not one. A mirror's content is chosen by whoever
// annotated its source, possibly a tenant of another cluster; were it
// trusted, that tenant could register a cluster of their choosing and
// receive every Secret mirrored fleet-wide. The mirror labels and the
// source reference are set by every fleetmirror writer and cannot be
// changed by transforms, so they mark a mirror in whatever namespace it
// lands.
func mirrored(s *corev1.Secret) string {
	for _, key := range []string{annotations.LabelMirror, annotations.LabelManagedBy} {
		if v, ok := s.Labels[key]; ok {
			return fmt.Sprintf("Secret carries the mirror label %s=%s: a mirror never registers a cluster; registration Secrets are written by the fleet's administrators (or Cluster API)", key, v)
		}
	}
	for _, key := range []string{annotations.AnnotationSource, annotations.AnnotationSourceUID} {
		if v, ok := s.Annotations[key]; ok {
			return fmt.Sprintf("Secret carries the source reference %s=%s: a mirror never registers a cluster; registration Secrets are written by the fleet's administrators (or Cluster API)", key, v)
		}
	}
	return ""
}

// parseRegistration validates a registration Secret. Errors are meant for
// the Event on the Secret.
func parseRegistration(s *corev1.Secret, allowPlugins bool) (*registration, error) {
	name, _ := clusterName(s)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("cluster name %q is invalid: %s", name, strings.Join(errs, "; "))
	}
	if s.Labels[annotations.LabelClusterName] == "" && s.Type != capiSecretType {
		return nil, fmt.Errorf("a Cluster API kubeconfig Secret must have type %s, not %q", capiSecretType, s.Type)
	}
	data := s.Data[capiKubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("data key %q with the kubeconfig is missing", capiKubeconfigKey)
	}
	cfg, err := parseKubeconfig(data, allowPlugins)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return &registration{name: name, labels: s.Labels, config: cfg, hash: hex.EncodeToString(sum[:])}, nil
}

// parseKubeconfig returns the REST config of a kubeconfig that the fleet
// may use: self-contained, and without plugins unless allowed.
func parseKubeconfig(data []byte, allowPlugins bool) (*rest.Config, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig does not parse: %w", err)
	}
	if err := selfContained(kc, allowPlugins); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig is unusable: %w", err)
	}
	return cfg, nil
}

// selfContained refuses kubeconfigs that would make the hub run programs
// (exec and auth-provider plugins) or read its own files.
func selfContained(kc *clientcmdapi.Config, allowPlugins bool) error {
	ctxName := kc.CurrentContext
	ctx, ok := kc.Contexts[ctxName]
	if !ok {
		return fmt.Errorf("kubeconfig has no current context")
	}
	auth, ok := kc.AuthInfos[ctx.AuthInfo]
	if !ok {
		return fmt.Errorf("kubeconfig context %q names no user", ctxName)
	}
	if (auth.Exec != nil || auth.AuthProvider != nil) && !allowPlugins {
		return fmt.Errorf("%w: "+"kubeconfig uses an exec or auth-provider plugin, which would run a program on the hub; use a token or client certificate (or start the hub with --allow-kubeconfig-plugins)", errPlugin)
	}
	if auth.TokenFile != "" || auth.ClientCertificate != "" || auth.ClientKey != "" {
		return fmt.Errorf("kubeconfig refers to files on the hub; embed the credentials (token, client-certificate-data, client-key-data)")
	}
	if cl, ok := kc.Clusters[ctx.Cluster]; !ok {
		return fmt.Errorf("kubeconfig context %q names no cluster", ctxName)
	} else if cl.CertificateAuthority != "" {
		return fmt.Errorf("kubeconfig refers to a CA file on the hub; embed certificate-authority-data")
	}
	return nil
}
