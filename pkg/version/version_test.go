package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"}}
	tests := []struct {
		name                 string
		version, revision    string
		bi                   debug.BuildInfo
		wantVersion, wantRev string
	}{
		{"linker set both", "v1.2.3", "def456", debug.BuildInfo{Main: debug.Module{Version: "v0.0.1"}, Settings: vcs}, "v1.2.3", "def456"},
		{"go build in a checkout", "dev", "unknown", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "dev", "abc123"},
		{"go install at a version", "dev", "unknown", debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0", "unknown"},
		{"go install at a commit", "dev", "unknown", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261127161000-0123456789ab"}}, "v0.0.0-20261127161000-0123456789ab", "0123456789ab"},
		{"go install after a tag", "dev", "unknown", debug.BuildInfo{Main: debug.Module{Version: "v1.4.1-0.20261127161000-0123456789ab"}}, "v1.4.1-0.20261127161000-0123456789ab", "0123456789ab"},
		{"linker revision wins over a pseudo-version", "dev", "def456", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261127161000-0123456789ab"}}, "v0.0.0-20261127161000-0123456789ab", "def456"},
		{"no information", "dev", "unknown", debug.BuildInfo{}, "dev", "unknown"},
	}
	for _, tt := range tests {
		v, r := fromBuildInfo(tt.version, tt.revision, &tt.bi)
		if v != tt.wantVersion || r != tt.wantRev {
			t.Errorf("%s: got %q, %q; want %q, %q", tt.name, v, r, tt.wantVersion, tt.wantRev)
		}
	}
}

func TestString(t *testing.T) {
	got := String("fleetmirror-member")
	want := "fleetmirror-member " + Version + " (revision " + Revision + ", go"
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, ")") {
		t.Errorf("String = %q, want %q…)", got, want)
	}
}
