#!/usr/bin/env bash
# hack/kube-ldflags.sh KUBE_VERSION: prints the -X flags that stamp a binary
# built from k8s.io/kubernetes at KUBE_VERSION (1.36.3) with its release, as
# Kubernetes' hack/lib/version.sh does for its own builds. Without them,
# --version, /version and a Node's kubeletVersion say v0.0.0-master, which
# the charts' kubeVersion refuses. hack/envtest.sh and hack/cluster.sh link
# with them.
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 KUBE_VERSION" >&2; exit 2; }
version=${1#v}
[[ "$version" =~ ^1\.([0-9]+)\.[0-9]+$ ]] || { echo "$0: $1 is not a Kubernetes release (1.36.3)" >&2; exit 2; }
minor=${BASH_REMATCH[1]}

# buildDate is the release's own time, as the module proxy records it, not
# the time of the build (version.sh's SOURCE_DATE_EPOCH): two builds of a
# release link the same binary, and the date says which source it is.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
info=$(cd "$root/hack/tools/kube" && GOFLAGS= go mod download -json "k8s.io/kubernetes@v$version" |
	sed -n 's/^[[:space:]]*"Info": "\(.*\)",$/\1/p')
date=$(sed -n 's/.*"Time": *"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)
[[ -n "$date" ]] || { echo "$0: the module proxy has no time for k8s.io/kubernetes v$version" >&2; exit 1; }
date=$(date -u -d "$date" +%Y-%m-%dT%H:%M:%SZ)

# gitCommit is empty rather than version.sh's placeholder "$Format:%H$": a
# module carries no commit, and the proxy does not say which one a tag is.
# The tree is the release's as published, so it is clean.
flags=()
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	flags+=("-X $pkg.gitVersion=v$version" "-X $pkg.gitMajor=1" "-X $pkg.gitMinor=$minor"
		"-X $pkg.gitCommit=" "-X $pkg.gitTreeState=clean" "-X $pkg.buildDate=$date")
done
echo "${flags[*]}"
