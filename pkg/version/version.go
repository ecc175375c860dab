// Package version says which build of fleetmirror is running: the release
// version and the commit, stamped at link time, and the Go version. It sits
// beside the pipeline: the binaries print it for --version, and
// pkg/metrics exports it as fleetmirror_build_info.
//
// Release builds set both variables (see the Makefile's LDFLAGS):
//
//	go build -ldflags "-X github.com/fleetmirror/fleetmirror/pkg/version.Version=v1.2.3 \
//	  -X github.com/fleetmirror/fleetmirror/pkg/version.Revision=$(git rev-parse HEAD)"
//
// A plain `go build` in a git checkout still gets the revision, from the
// VCS information the Go toolchain stamps, and `go install …@v1.2.3` the
// module version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"golang.org/x/mod/module"
)

// Version is the release, e.g. v1.2.3 or the output of git describe;
// "dev" when the linker did not set it.
var Version = "dev"

// Revision is the git commit the binary was built from; "unknown" when
// neither the linker nor the toolchain's VCS stamp set it.
var Revision = "unknown"

// GoVersion is the Go toolchain the binary was built with.
var GoVersion = runtime.Version()

func init() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	Version, Revision = fromBuildInfo(Version, Revision, bi)
}

// fromBuildInfo fills in what the linker left at its default from the
// build information of the toolchain.
func fromBuildInfo(version, revision string, bi *debug.BuildInfo) (string, string) {
	if version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	if revision == "unknown" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	// `go install …@main` or `@<commit>` builds a pseudo-version
	// (v0.0.0-20261127161000-0123456789ab) and records no VCS settings:
	// the pseudo-version names the commit (its first 12 hex digits).
	if revision == "unknown" && module.IsPseudoVersion(version) {
		if rev, err := module.PseudoVersionRev(version); err == nil {
			revision = rev
		}
	}
	return version, revision
}

// String is what `binary --version` prints, e.g.
// "fleetmirror-member v1.2.3 (revision 0123abc…, go1.26.0)".
func String(binary string) string {
	return fmt.Sprintf("%s %s (revision %s, %s)", binary, Version, Revision, GoVersion)
}
