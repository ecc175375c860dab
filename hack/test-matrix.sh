#!/usr/bin/env bash
# hack/test-matrix.sh [LEG...]: the version matrix (make test-matrix). A
# core set of the envtest and end-to-end tests, the parts of the agents
# that talk to the API server most directly, runs against the oldest and
# the newest supported Kubernetes and against a mixed fleet:
#
#   oldest  every API server 1.34
#   newest  every API server 1.37
#   mixed   the hub 1.37, the members 1.34 and 1.36 (only the packages whose
#           tests have a hub and members: pkg/hub, test/e2e)
#
# LEG names the legs to run (default: all three, in that order). Each leg
# runs its packages one after another (go test -count=1, without -race:
# make test runs everything with it on one version), with
# FLEETMIRROR_KUBE_VERSIONS set (pkg/fleettest: which API server runs which
# release; it checks each one's /version) and KUBEBUILDER_ASSETS the hub's
# binaries. hack/envtest.sh builds each version first (5 to 15 minutes the
# first time, cached after).
#
# A test of the core set that does not run (renamed, removed) fails its
# leg, as a failing test does. The summary at the end gives each leg's
# result and time, and each package's.
#
# MATRIX_PACKAGES, when set, keeps only the legs' packages it lists
# (MATRIX_PACKAGES=./pkg/clusters).
#
# MATRIX_DEADLINE, when set, is a time (seconds since the epoch) by which
# the matrix must be done (.ci/run sets it). A build of a version must end
# MATRIX_LEG_MINUTES (default 15) before it, or it is stopped (timeout(1),
# its whole process group; the cache keeps only finished binaries) and the
# legs that need that version are not run. A leg that would start closer
# to the deadline than MATRIX_LEG_MINUTES is not run either, and go test's
# -timeout never goes past it. Legs not run are reported so and do not
# fail the matrix; failed legs do.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OLDEST=1.34
NEWEST=1.37

# The core set: per package, the tests that run (exact names).
declare -A CORE=(
	# The hand-written watch loop (streamed lists and the LIST fallback),
	# the discovery client (aggregated discovery), and a cluster's watches.
	[./pkg/clusters]="TestWatchOnAPIServer TestWatchWithoutStreamedLists TestWatchConnection TestDiscovery TestDiscoveryDocuments TestDiscoveryResourcesFor TestClusterWatches TestKindsNoticeNewSourcesWithoutPolling"
	# Leader election on a Lease.
	[./pkg/leader]="TestOneCandidate TestTakeoverAfterRelease TestTakeoverAfterCrash TestLostToAnotherWriter TestLostWhenRenewalsFail TestRenewsWhileLeadWindsDown"
	# The member agent: create, update, delete, drift, pull, its API
	# server's outage, discovery of kinds, leadership, restart.
	[./pkg/member]="TestCreateCopiesContentAndStripsMetadata TestUpdatePropagates TestDriftIsCorrected TestRemoval TestPullMirror TestOwnAPIServerOutage TestDiscoveredKindsAndLazyWatches TestLeadershipLost TestRestartWritesNothing"
	# The hub with members.
	[./pkg/hub]="TestHubSourceReachesEveryOtherCluster TestMemberSourceAndClusterPatterns TestClusterSelector TestUnreachableMemberConvergesWhenBack TestPullAcrossClusters TestMemberAndHubSideBySide"
	# The charts' ValidatingAdmissionPolicy, and their table of plurals,
	# on the API server.
	[./test/charts]="TestAdmissionPolicyOnAPIServer TestPluralsMatchDiscovery"
	# The built binaries: failover, and mirroring across the fleet.
	[./test/e2e]="TestLeaderFailover TestHubSecretAcrossTheFleet TestMemberConfigMapReachesAnotherMember TestRemoteConflictLeavesUnmanagedSecretAlone"
)
ALL_PACKAGES="./pkg/clusters ./pkg/leader ./pkg/member ./pkg/hub ./test/charts ./test/e2e"
FLEET_PACKAGES="./pkg/hub ./test/e2e"

# leg NAME: its FLEETMIRROR_KUBE_VERSIONS, the hub's version, the versions
# it needs built, and its packages.
leg_versions() {
	case $1 in
	oldest) echo "$OLDEST" ;;
	newest) echo "$NEWEST" ;;
	mixed) echo "hub=$NEWEST,members=$OLDEST,1.36" ;;
	*) return 1 ;;
	esac
}
leg_hub() { case $1 in oldest) echo "$OLDEST" ;; *) echo "$NEWEST" ;; esac }
leg_builds() { case $1 in oldest) echo "$OLDEST" ;; newest) echo "$NEWEST" ;; mixed) echo "$NEWEST $OLDEST 1.36" ;; esac }
leg_packages() {
	local pkgs
	case $1 in mixed) pkgs=$FLEET_PACKAGES ;; *) pkgs=$ALL_PACKAGES ;; esac
	for p in $pkgs; do
		if [[ -z "${MATRIX_PACKAGES:-}" || " $MATRIX_PACKAGES " == *" $p "* ]]; then
			echo "$p"
		fi
	done
}

legs=("$@")
[[ ${#legs[@]} -gt 0 ]] || legs=(oldest newest mixed)
for l in "${legs[@]}"; do
	leg_versions "$l" >/dev/null || {
		echo "hack/test-matrix.sh: unknown leg $l (want oldest, newest or mixed)" >&2
		exit 2
	}
done

leg_minutes=${MATRIX_LEG_MINUTES:-15}
deadline=${MATRIX_DEADLINE:-}
logs=$(mktemp -d "${TMPDIR:-/tmp}/fleetmirror-matrix.XXXXXX")

duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
now() { date +%s; }

summary=()
failed=0
matrix_start=$(now)

# The binaries of every version the legs need, built first: their build
# time is not a leg's. Under a deadline a build that would leave no time
# for a leg is stopped; a build that fails otherwise fails the matrix.
declare -A assets=() unbuilt=()
for l in "${legs[@]}"; do
	for v in $(leg_builds "$l"); do
		[[ -n "${assets[$v]:-}" || -n "${unbuilt[$v]:-}" ]] && continue
		start=$(now)
		echo "matrix: Kubernetes $v: hack/envtest.sh $v"
		build=(hack/envtest.sh "$v")
		if [[ -n "$deadline" ]]; then
			left=$((deadline - leg_minutes * 60 - start))
			if ((left <= 0)); then
				unbuilt[$v]=1
				summary+=("$(printf '%-8s %-34s %-9s %s' build "Kubernetes $v" "NOT RUN" "(deadline)")")
				continue
			fi
			build=(timeout "${left}s" "${build[@]}")
		fi
		status=0
		assets[$v]=$("${build[@]}") || status=$?
		if ((status == 124)); then
			unset "assets[$v]"
			unbuilt[$v]=1
			echo "matrix: building Kubernetes $v stopped: no time left for a leg after it"
			summary+=("$(printf '%-8s %-34s %-9s %s' build "Kubernetes $v" stopped "$(duration $(($(now) - start))) (deadline)")")
			continue
		elif ((status != 0)); then
			echo "matrix: building Kubernetes $v failed" >&2
			exit 1
		fi
		summary+=("$(printf '%-8s %-34s %-9s %s' build "Kubernetes $v" done "$(duration $(($(now) - start)))")")
	done
done

for l in "${legs[@]}"; do
	versions=$(leg_versions "$l")
	missing=()
	for v in $(leg_builds "$l"); do
		[[ -n "${assets[$v]:-}" ]] || missing+=("$v")
	done
	if [[ ${#missing[@]} -gt 0 ]]; then
		echo "matrix: leg $l ($versions) NOT RUN: Kubernetes ${missing[*]} not built in time"
		summary+=("$(printf '%-8s %-34s %-9s %s' "$l" "$versions" "NOT RUN" "(not built)")")
		continue
	fi
	if [[ -n "$deadline" ]] && (($(now) + leg_minutes * 60 > deadline)); then
		echo "matrix: leg $l ($versions) NOT RUN: less than ${leg_minutes} minutes before the deadline"
		summary+=("$(printf '%-8s %-34s %-9s %s' "$l" "$versions" "NOT RUN" "(deadline)")")
		continue
	fi
	echo "matrix: leg $l: FLEETMIRROR_KUBE_VERSIONS=$versions"
	leg_start=$(now)
	leg_status=ok
	pkg_lines=()
	for pkg in $(leg_packages "$l"); do
		tests=${CORE[$pkg]}
		regexp="^($(tr ' ' '|' <<<"$tests"))\$"
		log="$logs/$l-$(tr '/.' '-_' <<<"${pkg#./}").log"
		timeout=30m
		if [[ -n "$deadline" ]]; then
			left=$((deadline - $(now)))
			((left > 60)) || left=60
			timeout="${left}s"
		fi
		start=$(now)
		status=ok
		FLEETMIRROR_KUBE_VERSIONS="$versions" KUBEBUILDER_ASSETS="${assets[$(leg_hub "$l")]}" \
			go test -count=1 -v -timeout "$timeout" -run "$regexp" "$pkg" >"$log" 2>&1 || status=FAIL
		# Every test of the core set must have run.
		missing=()
		for t in $tests; do
			grep -qE -- "^--- (PASS|FAIL|SKIP): $t \(" "$log" || missing+=("$t")
		done
		if [[ ${#missing[@]} -gt 0 ]]; then
			status=FAIL
			echo "matrix: $l $pkg: did not run: ${missing[*]}" | tee -a "$log"
		fi
		elapsed=$(($(now) - start))
		echo "matrix: $l $pkg: $status ($(duration $elapsed))"
		if [[ $status != ok ]]; then
			leg_status=FAIL
			grep -E -- '^\s*--- FAIL|^panic:|^FAIL' "$log" | sed 's/^/matrix:   /' || true
			echo "matrix:   the whole output: $log"
		fi
		pkg_lines+=("$(printf '  %-6s %-34s %-9s %s' '' "$pkg" "$status" "$(duration $elapsed)")")
	done
	[[ $leg_status == ok ]] || failed=1
	summary+=("$(printf '%-8s %-34s %-9s %s' "$l" "$versions" "$leg_status" "$(duration $(($(now) - leg_start)))")" "${pkg_lines[@]}")
done

echo
echo "=== version matrix summary ==="
printf '%s\n' "${summary[@]}"
echo "total $(duration $(($(now) - matrix_start)))"
if ((failed)); then
	echo "version matrix: FAILED (logs in $logs)"
	exit 1
fi
rm -rf "$logs"
echo "version matrix: passed"
