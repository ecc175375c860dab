package charts_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// supportedMinors returns the oldest and the newest Kubernetes minor
// release that hack/envtest.sh builds (and hack/test-matrix.sh tests): the
// supported range.
func supportedMinors(t *testing.T) (oldest, newest int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "hack", "envtest.sh"))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^declare -A NEWEST_PATCH=\((.*)\)$`).FindSubmatch(data)
	if line == nil {
		t.Fatal("hack/envtest.sh has no NEWEST_PATCH")
	}
	var minors []int
	for _, m := range regexp.MustCompile(`\[1\.([0-9]+)\]=`).FindAllSubmatch(line[1], -1) {
		n, _ := strconv.Atoi(string(m[1]))
		minors = append(minors, n)
	}
	if len(minors) == 0 {
		t.Fatal("hack/envtest.sh's NEWEST_PATCH names no version")
	}
	return slices.Min(minors), slices.Max(minors)
}

// Helm installs the charts on the supported Kubernetes releases, the ones
// the version matrix tests, and refuses any other; the READMEs and
// hack/test-matrix.sh say the same range.
func TestKubeVersionRange(t *testing.T) {
	oldest, newest := supportedMinors(t)
	want := fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", oldest, newest+1)
	matrix, err := os.ReadFile(filepath.Join(root, "hack", "test-matrix.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{fmt.Sprintf("OLDEST=1.%d", oldest), fmt.Sprintf("NEWEST=1.%d", newest)} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(v) + `$`).Match(matrix) {
			t.Errorf("hack/test-matrix.sh does not set %s: the matrix must test the ends of the supported range", v)
		}
	}
	cases := []struct {
		kube string
		ok   bool
	}{
		{fmt.Sprintf("1.%d.0", oldest-1), false},
		{fmt.Sprintf("1.%d.9", oldest-1), false},
		{fmt.Sprintf("1.%d.0", oldest), true},
		{fmt.Sprintf("1.%d.4", oldest), true},
		{fmt.Sprintf("1.%d.0", newest), true},
		{fmt.Sprintf("1.%d.9", newest), true},
		{fmt.Sprintf("1.%d.0", newest+1), false},
	}
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(root, "charts", c.dir, "Chart.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				KubeVersion string `json:"kubeVersion"`
			}
			if err := yaml.Unmarshal(data, &meta); err != nil {
				t.Fatal(err)
			}
			if meta.KubeVersion != want {
				t.Errorf("Chart.yaml kubeVersion %q, want %q (hack/envtest.sh supports 1.%d to 1.%d)", meta.KubeVersion, want, oldest, newest)
			}
			readme, err := os.ReadFile(filepath.Join(root, "charts", c.dir, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			if says := fmt.Sprintf("Kubernetes 1.%d to 1.%d", oldest, newest); !strings.Contains(string(readme), says) {
				t.Errorf("README.md does not say %q", says)
			}
			for _, tc := range cases {
				_, err := templateChart(t, c.dir, nil, "--kube-version", tc.kube)
				switch {
				case tc.ok && err != nil:
					t.Errorf("Kubernetes %s refused: %v", tc.kube, err)
				case !tc.ok && err == nil:
					t.Errorf("Kubernetes %s accepted", tc.kube)
				case !tc.ok && !strings.Contains(err.Error(), "kubeVersion"):
					t.Errorf("Kubernetes %s refused for another reason than kubeVersion: %v", tc.kube, err)
				}
			}
		})
	}
}

// The pinned helm renders and lints the charts without --kube-version, as a
// user's helm does: it is linked to assume the Kubernetes release of its
// client libraries (the Makefile's HELM_KUBE_VERSION, within the supported
// range), not the 1.20 of a plain go install, which the charts' kubeVersion
// refuses.
func TestWithoutKubeVersion(t *testing.T) {
	for _, c := range charts {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(root, "charts", c.dir)
			for _, args := range [][]string{{"template", releaseName, dir}, {"lint", "--strict", dir}} {
				if out, err := exec.Command(helm(t), args...).CombinedOutput(); err != nil {
					t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
		})
	}
}
