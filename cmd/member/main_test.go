package main

import (
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetmirror/fleetmirror/pkg/fleettest"
)

// TestLinkerPrunesUnusedMethods builds the member as the image does and
// checks that the linker still drops the methods nothing calls. One
// reachable call of reflect.Value.MethodByName with a name not known at
// compile time (text/template's method lookup is the usual one; see
// pkg/transform/template.go) makes it keep every exported method of every
// type instead: 9 MB more binary, most of it resident.
//
// Lease.SwaggerDoc stands for those methods: Lease is in every build (the
// agent's leader election holds one, and its package registers it), and
// nothing in the agent asks a Lease for its documentation.
func TestLinkerPrunesUnusedMethods(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "fleetmirror-member")
	if err := fleettest.GoBuild(bin, "./cmd/member"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "nm", bin).Output() //nolint:gosec // the binary this test built
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	syms := string(out)
	if !strings.Contains(syms, "k8s.io/api/coordination/v1.(*Lease).Unmarshal") {
		t.Fatal("k8s.io/api/coordination/v1.Lease is not in the binary: pick another type to stand for unused methods")
	}
	if strings.Contains(syms, "k8s.io/api/coordination/v1.Lease.SwaggerDoc") {
		t.Error("the linker kept Lease.SwaggerDoc, which nothing calls: something reachable calls reflect.Value.MethodByName " +
			"or Method with a name not known at compile time (text/template executes so). " +
			"Its callers: go build -ldflags=-dumpdep -o /dev/null ./cmd/member 2>&1 | grep -- '-> reflect.Value.Method'")
	}
}

// TestNoSchemeOfAllTypes checks that the member links none of the packages
// that register every built-in API type: client-go's scheme (imported by
// its discovery client, typed clients and leader election) and
// controller-runtime's client, cache, manager and controller, which import
// it. Each would bring back every k8s.io/api group: 7 MB of the binary,
// and pages of it in memory. The agent uses coordination/v1 (its Lease)
// and apidiscovery/v2 (discovery) only: not even core/v1, whose package
// registers every core type (1.7 MB of code), nor client-go's Event
// recorder, which needs core/v1 and strategic merge patches (kube-openapi,
// gnostic, YAML; pkg/events writes Events without them).
func TestNoSchemeOfAllTypes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// controller-runtime's logging, health handler and signal handler.
	allowedRuntime := map[string]bool{
		"sigs.k8s.io/controller-runtime/pkg/log": true, "sigs.k8s.io/controller-runtime/pkg/log/zap": true,
		"sigs.k8s.io/controller-runtime/pkg/internal/log": true, "sigs.k8s.io/controller-runtime/pkg/healthz": true,
		"sigs.k8s.io/controller-runtime/pkg/manager/signals": true,
	}
	allowedAPI := map[string]bool{"k8s.io/api/coordination/v1": true, "k8s.io/api/apidiscovery/v2": true}
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "k8s.io/client-go/tools/record", p == "k8s.io/apimachinery/pkg/util/strategicpatch":
			t.Errorf("the member links %s: client-go's Event recorder and its strategic merge patches (4 MB with core/v1); pkg/events records Events", p)
		case p == "k8s.io/client-go/kubernetes/scheme", p == "k8s.io/client-go/discovery",
			strings.HasPrefix(p, "k8s.io/client-go/tools/leaderelection"),
			strings.HasPrefix(p, "sigs.k8s.io/controller-runtime") && !allowedRuntime[p]:
			t.Errorf("the member links %s, which brings every built-in API type", p)
		case strings.HasPrefix(p, "k8s.io/api/") && !allowedAPI[p]:
			t.Errorf("the member links %s; only %v are expected", p, slices.Sorted(maps.Keys(allowedAPI)))
		}
	}
}
