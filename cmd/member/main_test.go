package main

import (
	"os/exec"
	"path/filepath"
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
// that register every built-in API type (fleettest.LeanDeps). The agent
// uses coordination/v1 (its Lease) and apidiscovery/v2 (discovery) only:
// not even core/v1, whose package registers every core type (1.7 MB of
// code).
func TestNoSchemeOfAllTypes(t *testing.T) {
	fleettest.LeanDeps(t, "member", "k8s.io/api/apidiscovery/v2", "k8s.io/api/coordination/v1")
}
