#!/usr/bin/env bash
# Prints a directory holding a coredns binary for the cluster DNS of the
# one-node test cluster (hack/cluster.sh runs it as a host process with
# hack/cluster/Corefile.tmpl).
#
# It is built from the pinned source in hack/tools/coredns, which keeps only
# the plugins that cluster needs (kubernetes, cache, errors, log, health,
# ready, prometheus, bind, loop) and, on purpose, no forward: Pods must not
# resolve anything through a server off this machine. The binary lands in a
# per-user cache keyed by version, so every clone on the same machine shares
# one build. Measured cold (empty Go build cache, modules already
# downloaded) on 2 cores: 15 minutes wall while two Kubernetes builds ran
# beside it (load average 22), for 6 CPU-minutes of work, so about 3 minutes
# on an idle machine. A FLEETMIRROR_COREDNS_DIR that is already set wins and
# nothing is built.
set -euo pipefail

# Keep in step with the require line of hack/tools/coredns/go.mod.
COREDNS_VERSION=v1.15.0

if [[ -n "${FLEETMIRROR_COREDNS_DIR:-}" ]]; then
	echo "$FLEETMIRROR_COREDNS_DIR"
	exit 0
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fleetmirror/coredns"
dir="$cache/$COREDNS_VERSION"
mkdir -p "$dir"

# Tests and scripts may call this at once: one builds, the others wait for it
# and then find the binary.
if command -v flock >/dev/null; then
	exec 9>"$dir/.lock"
	flock 9
fi

if [[ ! -x "$dir/coredns" ]]; then
	echo "building coredns $COREDNS_VERSION from source (first time only, a few minutes)..." >&2
	(cd "$root/hack/tools/coredns" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$dir/coredns.tmp" .) >&2
	mv "$dir/coredns.tmp" "$dir/coredns"
fi
echo "$dir"
