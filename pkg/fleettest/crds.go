package fleettest

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetmirror/fleetmirror/pkg/apis/v1alpha1"
)

// The test clients (client-go's scheme) read and write our own API types.
func init() { runtime.Must(v1alpha1.AddToScheme(clientgoscheme.Scheme)) }

// InstallPolicyCRD installs the MirrorPolicy CRD, as make generate writes
// it and the member chart installs it, in c, and waits until it is served.
func InstallPolicyCRD(c *Cluster) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd")}, ErrorIfPathMissing: true})
	return err
}
