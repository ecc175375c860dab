package fleettest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// LeanDeps checks that the package in the working directory (an agent's
// main package) links none of the packages that register every built-in
// API type, and of k8s.io/api only the groups allowedAPI names. What it
// forbids, each bringing back every k8s.io/api group (about 7 MB of an
// agent's binary, and most of those pages in memory):
//
//   - client-go's scheme, imported by its discovery client, typed clients
//     and leader election, and controller-runtime's client, cache,
//     manager and controller, which import it (clusters.TypedREST reads
//     the few typed kinds the agents need);
//   - Cluster API's packages: util/secret links controller-runtime's
//     client (pkg/providers repeats its conventions);
//   - client-go's Event recorder and strategic merge patches (kube-openapi,
//     gnostic, YAML: 4 MB with core/v1; pkg/events records Events).
//
// binary names the agent in the errors.
func LeanDeps(t testing.TB, binary string, allowedAPI ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// controller-runtime's logging, health handler and signal handler.
	allowedRuntime := []string{
		"sigs.k8s.io/controller-runtime/pkg/log", "sigs.k8s.io/controller-runtime/pkg/log/zap",
		"sigs.k8s.io/controller-runtime/pkg/internal/log", "sigs.k8s.io/controller-runtime/pkg/healthz",
		"sigs.k8s.io/controller-runtime/pkg/manager/signals",
	}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "k8s.io/client-go/tools/record", p == "k8s.io/apimachinery/pkg/util/strategicpatch":
			t.Errorf("the %s links %s: client-go's Event recorder and its strategic merge patches (4 MB with core/v1); pkg/events records Events", binary, p)
		case p == "k8s.io/client-go/kubernetes/scheme", p == "k8s.io/client-go/discovery", p == "k8s.io/client-go/gentype",
			strings.HasPrefix(p, "k8s.io/client-go/kubernetes/"),
			strings.HasPrefix(p, "k8s.io/client-go/tools/leaderelection"),
			strings.HasPrefix(p, "sigs.k8s.io/cluster-api"),
			strings.HasPrefix(p, "sigs.k8s.io/controller-runtime") && !slices.Contains(allowedRuntime, p):
			t.Errorf("the %s links %s, which brings every built-in API type", binary, p)
		case strings.HasPrefix(p, "k8s.io/api/") && !slices.Contains(allowedAPI, p):
			t.Errorf("the %s links %s; only %v are expected", binary, p, allowedAPI)
		}
	}
}
