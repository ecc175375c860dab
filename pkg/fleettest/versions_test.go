package fleettest

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
)

func TestParseKubeVersions(t *testing.T) {
	tests := []struct {
		in   string
		want kubeVersions
		// of lists the versions of the hub and the first members.
		of      []string
		wantErr string
	}{
		{in: "", of: []string{"", "", ""}},
		{in: "1.34", want: kubeVersions{hub: "1.34", members: []string{"1.34"}}, of: []string{"1.34", "1.34", "1.34"}},
		{in: " 1.37.2 ", want: kubeVersions{hub: "1.37.2", members: []string{"1.37.2"}}, of: []string{"1.37.2", "1.37.2"}},
		{
			in:   "hub=1.37,members=1.34,1.36",
			want: kubeVersions{hub: "1.37", members: []string{"1.34", "1.36"}},
			of:   []string{"1.37", "1.34", "1.36", "1.34"},
		},
		{
			in:   "members=1.34, hub=1.36.3",
			want: kubeVersions{hub: "1.36.3", members: []string{"1.34"}},
			of:   []string{"1.36.3", "1.34", "1.34"},
		},
		{in: "members=1.35", want: kubeVersions{members: []string{"1.35"}}, of: []string{"", "1.35"}},
		{in: "hub=1.37", want: kubeVersions{hub: "1.37"}, of: []string{"1.37", "1.37"}},
		{in: "1.34,1.35", wantErr: "want one version, or hub=VERSION"},
		{in: "hub=1.37,1.34", wantErr: "the hub has one version"},
		{in: "hub=1.37,hub=1.36", wantErr: "hub given twice"},
		{in: "members=1.34,members=1.35", wantErr: "members given twice"},
		{in: "node=1.34", wantErr: `unknown key "node"`},
		{in: "hub=latest", wantErr: `"latest" is not a Kubernetes version`},
		{in: "hub=v1.34", wantErr: `"v1.34" is not a Kubernetes version`},
		{in: "members=", wantErr: `"" is not a Kubernetes version`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseKubeVersions(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parsed %+v, want %+v", got, tc.want)
			}
			for i, want := range tc.of {
				if v := got.of(i); v != want {
					t.Errorf("cluster %d: version %q, want %q", i, v, want)
				}
			}
		})
	}
}

func TestVersionMatches(t *testing.T) {
	stamped := func(v string) *version.Info {
		return &version.Info{GitVersion: v, EmulationMajor: "1", EmulationMinor: "99"}
	}
	unstamped := func(minor string) *version.Info {
		return &version.Info{GitVersion: "v0.0.0-master+$Format:%H$", EmulationMajor: "1", EmulationMinor: minor}
	}
	tests := []struct {
		name string
		info *version.Info
		want string
		ok   bool
	}{
		{"minor asked, a patch of it", stamped("v1.34.4"), "1.34", true},
		{"patch asked, that patch", stamped("v1.34.4"), "1.34.4", true},
		{"patch asked, another patch", stamped("v1.34.3"), "1.34.4", false},
		{"minor asked, another minor", stamped("v1.35.4"), "1.34", false},
		{"a prefix is not a minor", stamped("v1.340.0"), "1.34", false},
		{"unstamped, its emulated minor", unstamped("36"), "1.36", true},
		{"unstamped, patch asked, its minor", unstamped("36"), "1.36.3", true},
		{"unstamped, another minor", unstamped("36"), "1.37", false},
		{"unstamped without emulation version", &version.Info{GitVersion: "v0.0.0-master"}, "1.36", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := versionMatches(tc.info, tc.want)
			if (err == nil) != tc.ok {
				t.Errorf("versionMatches(%s, %s) = %v, want ok=%v", tc.info.GitVersion, tc.want, err, tc.ok)
			}
		})
	}
}

// A fleet of FLEETMIRROR_KUBE_VERSIONS runs each API server from
// hack/envtest.sh VERSION, and refuses to start one whose /version is
// another release than it was meant to be.
func TestKubeVersionsOnAPIServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts API servers")
	}
	pinned := minorOf(pinnedKube(t))
	t.Setenv(EnvKubeVersions, "hub="+pinned+",members="+pinned)
	dir, err := assetsOf(pinned)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Assets(); err != nil || got != dir {
		t.Errorf("Assets() = %q, %v; want the hub's %q", got, err, dir)
	}
	f, err := Start("", "member-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, c := range f.Clusters() {
		if c.kubeVersion != pinned {
			t.Errorf("cluster %s: meant to be %q, want %q", c.Name, c.kubeVersion, pinned)
		}
		if err := checkVersion(c.Config, pinned); err != nil {
			t.Errorf("cluster %s: %v", c.Name, err)
		}
	}

	// Binaries of one release posing as another's: the member does not start.
	const other = "1.20"
	assetsByVersionMu.Lock()
	assetsByVersion[other] = &scriptDir{found: dir}
	assetsByVersionMu.Unlock()
	t.Cleanup(func() {
		assetsByVersionMu.Lock()
		delete(assetsByVersion, other)
		assetsByVersionMu.Unlock()
	})
	t.Setenv(EnvKubeVersions, "hub="+pinned+",members="+other)
	if f, err := Start("", "member-1"); err == nil {
		_ = f.Stop()
		t.Fatalf("a member of Kubernetes %s started from the binaries of %s", other, pinned)
	} else if !strings.Contains(err.Error(), "cluster member-1: /version says") {
		t.Errorf("refused otherwise: %v", err)
	}
}

func TestMinorAtLeast(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"", false}, {"1.36", false}, {"1.36.3", false}, {"1.37", true}, {"1.37.2", true}, {"1.40", true}, {"1", false}, {"1.x", false},
	} {
		if got := minorAtLeast(tc.version, 37); got != tc.want {
			t.Errorf("minorAtLeast(%q, 37) = %v, want %v", tc.version, got, tc.want)
		}
	}
}
