package fleettest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// EnvKubeVersions names the Kubernetes release of each API server a fleet
// starts, for the version matrix (make test-matrix): a comma-separated
// list of hub=VERSION and members=VERSION[,VERSION...], or one VERSION for
// every cluster. Members take the members' versions in turn, the first
// member the first. A VERSION is what hack/envtest.sh takes: 1.34 (its
// newest patch) or 1.34.4. Examples: "1.34"; "hub=1.37,members=1.34,1.36".
// Unset, every API server is the one of Assets. Each started API server's
// /version is checked against the release it was meant to be.
const EnvKubeVersions = "FLEETMIRROR_KUBE_VERSIONS"

// PinnedKubeVersion is the Kubernetes release hack/tools/kube pins
// (1.36.3): the one hack/envtest.sh builds by default and the node of
// make cluster runs.
func PinnedKubeVersion() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(root, "hack", "tools", "kube", "go.mod"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^require k8s\.io/kubernetes v(\S+)$`).FindSubmatch(data)
	if m == nil {
		return "", errors.New("hack/tools/kube/go.mod requires no k8s.io/kubernetes")
	}
	return string(m[1]), nil
}

// kubeVersions is a parsed EnvKubeVersions. An empty version is the one
// of Assets.
type kubeVersions struct {
	hub     string
	members []string
}

var versionPattern = regexp.MustCompile(`^1\.[0-9]+(\.[0-9]+)?$`)

// parseKubeVersions parses the value of EnvKubeVersions; empty is the
// default for every cluster.
func parseKubeVersions(s string) (kubeVersions, error) {
	var v kubeVersions
	s = strings.TrimSpace(s)
	if s == "" {
		return v, nil
	}
	if versionPattern.MatchString(s) {
		return kubeVersions{hub: s, members: []string{s}}, nil
	}
	key := ""
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		val := item
		if k, rest, ok := strings.Cut(item, "="); ok {
			key, val = strings.TrimSpace(k), strings.TrimSpace(rest)
			if seen[key] {
				return kubeVersions{}, fmt.Errorf("%s=%q: %s given twice", EnvKubeVersions, s, key)
			}
			seen[key] = true
		}
		if !versionPattern.MatchString(val) {
			return kubeVersions{}, fmt.Errorf("%s=%q: %q is not a Kubernetes version such as 1.34 or 1.34.4", EnvKubeVersions, s, val)
		}
		switch key {
		case "hub":
			if v.hub != "" {
				return kubeVersions{}, fmt.Errorf("%s=%q: the hub has one version", EnvKubeVersions, s)
			}
			v.hub = val
		case "members":
			v.members = append(v.members, val)
		case "":
			return kubeVersions{}, fmt.Errorf("%s=%q: want one version, or hub=VERSION and members=VERSION[,VERSION...]", EnvKubeVersions, s)
		default:
			return kubeVersions{}, fmt.Errorf("%s=%q: unknown key %q (want hub or members)", EnvKubeVersions, s, key)
		}
	}
	return v, nil
}

// of returns the version of the i-th cluster of a fleet, the hub being
// the 0th.
func (v kubeVersions) of(i int) string {
	if i == 0 || len(v.members) == 0 {
		return v.hub
	}
	return v.members[(i-1)%len(v.members)]
}

// configuredVersions reads EnvKubeVersions.
func configuredVersions() (kubeVersions, error) {
	return parseKubeVersions(os.Getenv(EnvKubeVersions))
}

var (
	assetsByVersionMu sync.Mutex
	assetsByVersion   = map[string]*scriptDir{}
)

// assetsOf returns the directory of the envtest binaries of version, as
// hack/envtest.sh VERSION prints it (building them on first use); for the
// empty version, KUBEBUILDER_ASSETS or hack/envtest.sh's default.
func assetsOf(version string) (string, error) {
	if version == "" {
		return assets.dir()
	}
	assetsByVersionMu.Lock()
	s, ok := assetsByVersion[version]
	if !ok {
		s = &scriptDir{script: "envtest.sh", args: []string{version}}
		assetsByVersion[version] = s
	}
	assetsByVersionMu.Unlock()
	return s.dir()
}

// checkVersion returns an error unless the API server's /version is the
// release want (1.34: any patch of it; 1.34.4: that one). Binaries built
// without the version stamp (gitVersion v0.0.0-...) are judged by their
// emulation version, which is their own minor release.
func checkVersion(cfg *rest.Config, want string) error {
	if want == "" {
		return nil
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 30 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	var info *version.Info
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		if info, err = dc.ServerVersion(); err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("reading /version: %w", err)
	}
	return versionMatches(info, want)
}

// versionMatches is checkVersion's judgement of one /version.
func versionMatches(info *version.Info, want string) error {
	got := strings.TrimPrefix(info.GitVersion, "v")
	if strings.HasPrefix(got, "0.0.0") { // not stamped
		if info.EmulationMajor == "" {
			return fmt.Errorf("/version says %s without an emulation version: cannot tell whether it is Kubernetes %s", info.GitVersion, want)
		}
		got = info.EmulationMajor + "." + info.EmulationMinor
		if minor := minorOf(want); got != minor {
			return fmt.Errorf("/version says Kubernetes %s (emulated; the binary is not stamped), want %s", got, want)
		}
		return nil
	}
	if got == want || minorOf(got) == want {
		return nil
	}
	return fmt.Errorf("/version says Kubernetes %s, want %s", info.GitVersion, want)
}

// minorOf returns 1.34 for 1.34.4 and 1.34.
func minorOf(v string) string {
	if parts := strings.SplitN(v, ".", 3); len(parts) >= 2 {
		return parts[0] + "." + parts[1]
	}
	return v
}

// clusterAssets returns, for each of names (the hub first), the
// directory of the envtest binaries its API server runs from and the
// version it must report, as EnvKubeVersions says.
func clusterAssets(names []string) (assets, versions []string, err error) {
	kv, err := configuredVersions()
	if err != nil {
		return nil, nil, err
	}
	assets = make([]string, len(names))
	versions = make([]string, len(names))
	var errs []error
	for i := range names {
		versions[i] = kv.of(i)
		if assets[i], err = assetsOf(versions[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return assets, versions, errors.Join(errs...)
}

// versionAssets is where one cluster's envtest binaries are and the
// release they must be.
type versionAssets struct {
	dir     string
	version string
}
