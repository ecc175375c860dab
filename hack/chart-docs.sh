#!/usr/bin/env bash
# chart-docs.sh regenerates the values table of charts/member/README.md and
# charts/hub/README.md from the comments in their values.yaml.
# With --check it changes nothing and fails when a README is out of date
# (test/charts runs that check).
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [[ "${1-}" == "--check" ]]; then
	args+=(-check)
fi
exec go run ./hack/chart-docs "${args[@]+"${args[@]}"}" charts/member charts/hub
