#!/usr/bin/env bash
# go-install.sh NAME PACKAGE VERSION BINDIR: builds PACKAGE@VERSION into
# BINDIR/NAME-VERSION and points BINDIR/NAME at it (the Makefile's pinned
# tools: helm, golangci-lint).
#
# Test packages run in parallel and several may ask for the same tool on a
# fresh clone (test/charts and test/e2e both need helm): the first builds it
# under a lock, the others wait and then find it. The build goes to a
# directory of its own and the result is moved into place whole, so nobody
# ever runs a half-written binary and a failed build leaves nothing behind.
set -euo pipefail

name=$1 pkg=$2 version=$3 bindir=$4
out="$bindir/$name-$version"
mkdir -p "$bindir"

if command -v flock >/dev/null; then
	exec 9>"$bindir/.$name-$version.lock"
	flock 9
fi

if [[ ! -x "$out" ]]; then
	echo "Building $name $version" >&2
	tmp=$(mktemp -d "$bindir/.build-$name.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	GOBIN="$tmp" go install "$pkg@$version"
	mv "$tmp/$name" "$out"
fi
ln -sfn "$name-$version" "$bindir/$name"
