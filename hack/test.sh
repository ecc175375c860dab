#!/usr/bin/env bash
# hack/test.sh HELM: what `make test` runs. Vets every package and runs every
# test with the race detector against real API servers, then lints the
# charts and checks the alert rules. HELM is the Makefile's pinned helm
# (bin/helm-<version>-k8s<release>), its target.
#
# On a fresh machine most of a first run is building: the packages with the
# race detector, and the tools the tests run (kube-apiserver, etcd and
# kubectl by hack/envtest.sh, helm, promtool and prometheus by
# hack/prometheus.sh). Built one after the other, the tools left a core
# idle for minutes: downloads and links are single-threaded, and the suite
# itself mostly waits on API servers. So the tools are built in the
# background, in the order the tests need them, while go compiles and the
# tests run; each is built once under its lock, and a test package that
# needs one before it is ready waits at that lock (the tests ask the same
# scripts, pkg/fleettest). A variable that names a tool already
# (KUBEBUILDER_ASSETS, FLEETMIRROR_PROMETHEUS_DIR, FLEETMIRROR_HELM) wins, as
# before, and nothing is built for it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ $# -ne 1 ]]; then
	echo "usage: $0 HELM (the Makefile's bin/helm-<version>-k8s<release>)" >&2
	exit 2
fi
helm=$1

# Its own process group (job control), so that it can be stopped whole, go
# builds included, when the run ends early.
set -m
(
	hack/envtest.sh >/dev/null
	if [[ -z "${FLEETMIRROR_HELM:-}" ]]; then
		make --no-print-directory "$helm" >/dev/null
	fi
	hack/prometheus.sh >/dev/null
) &
tools=$!
set +m
stop_tools() { kill -- -"$tools" 2>/dev/null || true; }
trap stop_tools EXIT

# With -race: vet then shares the packages the tests compile, instead of
# compiling every dependency a second time without it.
go vet -race ./...
# -p 3 on 2 cores: go test's -p bounds builds, links and test runs
# together, and a test binary holds its slot for its whole run, mostly
# waiting on API servers (the suite uses about 1.2 of 2 cores). With -p 2,
# pkg/hub and pkg/member (about 6 and 4 minutes) held both slots and no
# other package was linked meanwhile. The longest packages are named first:
# go test starts runs in the order of its list (a package named twice runs
# once), so they do not start last and leave a slot idle at the end.
go test -race -p 3 -timeout 30m ./pkg/hub ./pkg/member ./pkg/clusters ./test/e2e ./...

# Whatever the tests did not need yet (prometheus when test/e2e was cached)
# is finished before the checks that use it; a build that failed fails here.
wait "$tools"
trap - EXIT
make --no-print-directory helm-lint prom-check
