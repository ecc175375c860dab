#!/usr/bin/env bash
# Prints a directory holding promtool and prometheus, built from the pinned
# version with `go install` (one command, so both share the compiled
# packages), without Prometheus' service discovery plugins (build tag
# remove_all_sd): the federation test scrapes static targets, and the cloud
# SDKs those plugins bring were most of the build. make prom-check runs promtool from it; the federation test in
# test/e2e runs prometheus from it. They land in a per-user cache keyed by
# version, so every clone on the same machine shares one build (about 6
# minutes the first time on 2 cores). A FLEETMIRROR_PROMETHEUS_DIR that is
# already set wins and nothing is built.
set -euo pipefail

# Prometheus v3.x is published as Go module version v0.3xx.y.
PROMETHEUS_VERSION=v0.316.0

if [[ -n "${FLEETMIRROR_PROMETHEUS_DIR:-}" ]]; then
	echo "$FLEETMIRROR_PROMETHEUS_DIR"
	exit 0
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/fleetmirror/prometheus"
dir="$cache/$PROMETHEUS_VERSION-nosd"
mkdir -p "$dir"

# Test packages and make targets may call this at once: one builds, the
# others wait for it and then find the binaries.
if command -v flock >/dev/null; then
	exec 9>"$dir/.lock"
	flock 9
fi

if [[ ! -x "$dir/promtool" || ! -x "$dir/prometheus" ]]; then
	echo "building promtool and prometheus $PROMETHEUS_VERSION from source (first time only, several minutes)..." >&2
	tmp=$(mktemp -d "$dir/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && GOBIN="$tmp" go install -tags remove_all_sd \
		"github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" \
		"github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION") >&2
	mv "$tmp/promtool" "$tmp/prometheus" "$dir/"
fi
echo "$dir"
