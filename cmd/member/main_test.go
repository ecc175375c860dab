package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkerPrunesUnusedMethods builds the member as the image does and
// checks that the linker still drops the methods nothing calls. One
// reachable call of reflect.Value.MethodByName with a name not known at
// compile time (text/template's method lookup is the usual one; see
// pkg/transform/template.go) makes it keep every exported method of every
// type instead: 9 MB more binary, most of it resident.
//
// Secret.SwaggerDoc stands for those methods: Secret is in every build (the
// client's scheme registers it), and nothing in the agent asks a Secret for
// its documentation.
func TestLinkerPrunesUnusedMethods(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "fleetmirror-member")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "tool", "nm", bin).Output() //nolint:gosec // the binary this test built
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	syms := string(out)
	if !strings.Contains(syms, "k8s.io/api/core/v1.(*Secret).Unmarshal") {
		t.Fatal("k8s.io/api/core/v1.Secret is not in the binary: pick another type to stand for unused methods")
	}
	if strings.Contains(syms, "k8s.io/api/core/v1.Secret.SwaggerDoc") {
		t.Error("the linker kept Secret.SwaggerDoc, which nothing calls: something reachable calls reflect.Value.MethodByName " +
			"or Method with a name not known at compile time (text/template executes so). " +
			"Its callers: go build -ldflags=-dumpdep -o /dev/null ./cmd/member 2>&1 | grep -- '-> reflect.Value.Method'")
	}
}
