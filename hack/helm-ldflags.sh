#!/usr/bin/env bash
# hack/helm-ldflags.sh HELM_VERSION KUBE_VERSION: prints the -ldflags that
# helm's own Makefile links a release with: the version it says, and the
# Kubernetes release it assumes when it asks no cluster (helm template,
# helm lint: .Capabilities.KubeVersion, which a chart's kubeVersion is
# checked against). That release is the one of the k8s.io/client-go its
# go.mod requires (v0.37.x is Kubernetes 1.37); a plain go install assumes
# Kubernetes 1.20, which the charts' kubeVersion refuses.
#
# KUBE_VERSION is what the Makefile names the binary after (1.37): the
# script fails when helm's go.mod says otherwise, so that a new helm is not
# linked under an old name.
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 HELM_VERSION KUBE_VERSION" >&2; exit 2; }
helm=$1 want=$2

gomod=$(GOFLAGS= go mod download -json "helm.sh/helm/v3@$helm" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
clientgo=$(awk '$1 == "require" && $2 == "k8s.io/client-go" {print $3; exit} $1 == "k8s.io/client-go" {print $2; exit}' "$gomod")
[[ "$clientgo" =~ ^v0\.([0-9]+)\. ]] || { echo "$0: helm $helm's go.mod requires no k8s.io/client-go v0.X.Y (${clientgo:-none})" >&2; exit 1; }
minor=${BASH_REMATCH[1]}
if [[ "$want" != "1.$minor" ]]; then
	echo "$0: helm $helm is built with k8s.io/client-go $clientgo, Kubernetes 1.$minor: set HELM_KUBE_VERSION to 1.$minor in the Makefile" >&2
	exit 1
fi

flags=("-X helm.sh/helm/v3/internal/version.version=$helm")
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	flags+=("-X $pkg.k8sVersionMajor=1" "-X $pkg.k8sVersionMinor=$minor")
done
echo "${flags[*]}"
