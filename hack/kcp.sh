#!/usr/bin/env bash
# hack/kcp.sh: prints the path of a kcp binary, the control plane whose one
# process serves many logical clusters, for the bench's hub-kcp workload
# (test/bench/README.md): a thousand member clusters on one machine.
#
# KCP_BIN, when set to an executable, wins and nothing is built. Otherwise
# kcp KCP_VERSION (v0.30.0) is built from source once, in a per-user cache
# keyed by version, so every clone on the same machine shares one build; the
# first build takes 10 to 20 minutes on 2 cores.
#
# The source is a snapshot of github.com/kcp-dev/kcp, a bare git repository
# with the release's tag (KCP_SRC, default /work/.mirror/kcp-dev+kcp/repo):
# the Go module proxy refuses kcp's own versions, so `go install` cannot
# fetch it. Its dependencies come from the module proxy; kcp's fork of
# Kubernetes (github.com/kcp-dev/kubernetes) is served by the proxy but not
# known to the checksum database, hence GONOSUMDB (the snapshot's go.sum
# still pins every module's hash).
set -euo pipefail

KCP_VERSION=${KCP_VERSION:-v0.30.0}
KCP_SRC=${KCP_SRC:-/work/.mirror/kcp-dev+kcp/repo}

if [[ -n "${KCP_BIN:-}" ]]; then
	[[ -x "$KCP_BIN" ]] || {
		echo "hack/kcp.sh: KCP_BIN=$KCP_BIN is not an executable" >&2
		exit 1
	}
	echo "$KCP_BIN"
	exit 0
fi

dir="${XDG_CACHE_HOME:-$HOME/.cache}/fleetmirror/kcp/$KCP_VERSION"
out="$dir/kcp"
mkdir -p "$dir"

# Two benches started at once: one builds, the other waits and finds it.
if command -v flock >/dev/null; then
	exec 9>"$dir/.lock"
	flock 9
fi

# stamped succeeds when the binary says it is of KCP_VERSION: an
# interrupted or older build is built again.
stamped() {
	[[ "$("$1" --version 2>/dev/null)" == *"+kcp-$KCP_VERSION"* ]]
}

if [[ -x "$out" ]] && stamped "$out"; then
	echo "$out"
	exit 0
fi

git=(git --git-dir="$KCP_SRC")
if ! "${git[@]}" rev-parse -q --verify "refs/tags/$KCP_VERSION^{commit}" >/dev/null 2>&1; then
	echo "hack/kcp.sh: no snapshot of github.com/kcp-dev/kcp with tag $KCP_VERSION at $KCP_SRC;" \
		"set KCP_SRC to a clone (bare or not) of it, or KCP_BIN to a kcp binary of $KCP_VERSION" >&2
	exit 1
fi
echo "building kcp $KCP_VERSION from $KCP_SRC (first time only, 10 to 20 minutes)..." >&2

src=$(mktemp -d "$dir/.src.XXXXXX")
trap 'chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"' EXIT
"${git[@]}" archive "$KCP_VERSION" | tar -x -C "$src"

# The stamps of kcp's Makefile (its LDFLAGS): the Kubernetes release kcp
# forks, then +kcp-<tag>. kcp serves it as /version; client-go sends it as
# its user agent.
kube=$(cd "$src" && go mod edit -json | sed -n '/"Path": "k8s.io\/kubernetes"/{n;s/.*"Version": "\(v[^"]*\)".*/\1/p;q}')
[[ "$kube" =~ ^v1\.([0-9]+)\. ]] || {
	echo "hack/kcp.sh: cannot read kcp's Kubernetes release from its go.mod (got '$kube')" >&2
	exit 1
}
minor=${BASH_REMATCH[1]}
commit=$("${git[@]}" rev-parse --short=14 "$KCP_VERSION^{commit}")
date=$("${git[@]}" log -1 --format=%cI "$KCP_VERSION^{commit}")
date=$(date -u -d "$date" +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	ldflags+=" -X $pkg.gitVersion=$kube+kcp-$KCP_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
done

# nice: the machine is shared, and the bench runs by hand beside other work.
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod \
	GONOSUMDB="github.com/kcp-dev/kcp,github.com/kcp-dev/kubernetes${GONOSUMDB:+,$GONOSUMDB}" \
	nice -n 10 go build -trimpath -ldflags="$ldflags" -o "$out.tmp" ./cmd/kcp) >&2
mv "$out.tmp" "$out"
echo "$out"
