// Package cluster_test runs fleetmirror the way users run it: the image of
// `make image` and the charts of charts/, unmodified, installed, upgraded,
// rolled back and uninstalled with Helm on the real node of `make cluster`
// (hack/cluster.sh), whose kubelet, containerd and namespace controller are
// real. `make test-cluster` runs it; without a node (FLEETMIRROR_NODE_IP
// unset, as in `make test`) the package is skipped with a message.
//
// The tests share the node and run one after the other; each installs the
// releases it needs in namespaces of its own and removes them at its end.
package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// env is what hack/cluster.sh env and the Makefile pass in.
var env struct {
	root       string // the repository
	kubeconfig string // the node's admin kubeconfig
	nodeIP     string // the node's InternalIP, where host processes are reached from Pods
	podCIDR    string // the node's Pod addresses
	imageRepo  string // the image of make image, as repository and tag
	imageTag   string
	busybox    string // the image of the helm test Pods
	helm       string // the pinned helm
	kubectl    string // kubectl of the node's Kubernetes version
	auditLog   string // the node's API server audit log: every write and who made it
	assets     string // envtest's binaries, for member API servers
	plugin     string // kubectl-fleetmirror, built from this tree
	sock       string // the node's containerd socket
}

func TestMain(m *testing.M) {
	if os.Getenv("FLEETMIRROR_NODE_IP") == "" {
		fmt.Println("test/cluster: skipped, no node: run `make cluster`, then `make test-cluster`")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf.SetLogger(logr.Discard()) // envtest's, for the member API servers
	_, file, _, _ := runtime.Caller(0)
	env.root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	env.kubeconfig = mustEnv("KUBECONFIG")
	env.nodeIP = mustEnv("FLEETMIRROR_NODE_IP")
	env.podCIDR = mustEnv("FLEETMIRROR_NODE_POD_CIDR")
	image := mustEnv("FLEETMIRROR_IMAGE")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		fmt.Fprintf(os.Stderr, "FLEETMIRROR_IMAGE %q has no tag\n", image)
		return 1
	}
	env.imageRepo, env.imageTag = image[:i], image[i+1:]
	env.busybox = mustEnv("FLEETMIRROR_NODE_BUSYBOX_IMAGE")
	env.helm = mustEnv("FLEETMIRROR_HELM")
	env.auditLog = mustEnv("FLEETMIRROR_NODE_AUDIT_LOG")
	env.sock = mustEnv("FLEETMIRROR_NODE_CONTAINERD_SOCK")
	env.assets = mustEnv("KUBEBUILDER_ASSETS")
	env.kubectl = filepath.Join(env.assets, "kubectl")
	tmp, err := os.MkdirTemp("", "fleetmirror-cluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	env.plugin = filepath.Join(tmp, "kubectl-fleetmirror")
	if err := fleettest.GoBuild(env.plugin, "./cmd/kubectl-fleetmirror"); err != nil {
		fmt.Fprintf(os.Stderr, "building the plugin: %v\n", err)
		return 1
	}
	return m.Run()
}

func mustEnv(key string) string {
	v := os.Getenv(key)
	if v == "" {
		fmt.Fprintf(os.Stderr, "test/cluster: %s is not set (make test-cluster sets it)\n", key)
		os.Exit(1)
	}
	return v
}
