#!/usr/bin/env bash
# go-install.sh NAME PACKAGE VERSION BINDIR [FILE [LDFLAGS]]: builds
# PACKAGE@VERSION into BINDIR/FILE (NAME-VERSION by default) and points
# BINDIR/NAME at it (the Makefile's pinned tools: helm, golangci-lint).
# LDFLAGS are the tool's -ldflags; a FILE of their own (helm-v3.22.0-k8s1.37)
# keeps a binary linked without them, in a bin/ of before, from being used.
#
# Test packages run in parallel and several may ask for the same tool on a
# fresh clone (test/charts and test/e2e both need helm): the first builds it
# under a lock, the others wait and then find it. The build goes to a
# directory of its own and the result is moved into place whole, so nobody
# ever runs a half-written binary and a failed build leaves nothing behind.
set -euo pipefail

name=$1 pkg=$2 version=$3 bindir=$4 file=${5:-$1-$3} ldflags=${6:-}
out="$bindir/$file"
mkdir -p "$bindir"

if command -v flock >/dev/null; then
	exec 9>"$bindir/.$file.lock"
	flock 9
fi

if [[ ! -x "$out" ]]; then
	echo "Building $name $version" >&2
	tmp=$(mktemp -d "$bindir/.build-$name.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	GOBIN="$tmp" go install ${ldflags:+-ldflags="$ldflags"} "$pkg@$version"
	mv "$tmp/$name" "$out"
fi
ln -sfn "$file" "$bindir/$name"
