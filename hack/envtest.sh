#!/usr/bin/env bash
# Prints a directory holding kube-apiserver, etcd and kubectl for envtest.
#
# Prebuilt envtest binaries cannot be downloaded on our machines, so they are
# built from the pinned sources in hack/tools/{kube,etcd} through the Go module
# proxy. They land in a per-user cache keyed by version, so every clone on the
# same machine shares one build. A KUBEBUILDER_ASSETS that is already set (for
# example by setup-envtest) wins and nothing is built.
set -euo pipefail

KUBE_VERSION=1.36.3
ETCD_VERSION=3.6.7

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
	echo "$KUBEBUILDER_ASSETS"
	exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fleetmirror/envtest"
dir="$cache/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$dir"

# Test packages run in parallel and each may call this script: one builds,
# the others wait for it and then find the binaries.
if command -v flock >/dev/null; then
	exec 9>"$dir/.lock"
	flock 9
fi

build() { # build <module dir> <package> <output name>
	local out="$dir/$3"
	[[ -x "$out" ]] && return 0
	echo "building $3 from source (first time only, several minutes)..." >&2
	(cd "$root/hack/tools/$1" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$out.tmp" "$2") >&2
	mv "$out.tmp" "$out"
}

build etcd go.etcd.io/etcd/server/v3 etcd
build kube k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver
build kube k8s.io/kubernetes/cmd/kubectl kubectl
echo "$dir"
