package fleettest

import (
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// The test clients (client-go's scheme) read and write our own API types.
func init() { runtime.Must(v1alpha1.AddToScheme(clientgoscheme.Scheme)) }

// InstallPolicyCRD installs the MirrorPolicy CRD, as make generate writes
// it and the member chart installs it, and the CRDs of the files extra
// (paths from the repository's root), in the API server of cfg, waits until
// they are served and returns them.
func InstallPolicyCRD(cfg *rest.Config, extra ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	paths := []string{filepath.Join(root, "config", "crd")}
	for _, p := range extra {
		paths = append(paths, filepath.Join(root, p))
	}
	return envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
}
