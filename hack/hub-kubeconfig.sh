#!/usr/bin/env bash
# hub-kubeconfig.sh prints the Secret that registers a member cluster with the
# fleetmirror hub, built from the hub identity the member chart creates
# (hubAccess.enabled=true): the long-lived token of its ServiceAccount and the
# member's CA. No admin kubeconfig leaves the member.
# `kubectl fleetmirror register-cluster` (docs/cli.md) does all of this, and
# creates the hub identity, in one command.
#
#   hack/hub-kubeconfig.sh --cluster-name member-1 \
#     --namespace fleetmirror-system --secret fleetmirror-member-hub-token \
#     --hub-namespace fleetmirror-system | kubectl --context hub apply -f -
#
# kubectl (with --context, or the current context) must reach the member and
# may read that one Secret. The output is a Secret labelled
# fleetmirror.io/cluster-name=<name> whose key "value" holds a self-contained
# kubeconfig (server, embedded CA, token), the form the hub accepts.
set -euo pipefail

usage() {
	cat <<'EOF'
Usage: hub-kubeconfig.sh --cluster-name NAME --secret TOKEN_SECRET [options]

Prints the hub's registration Secret (YAML) for one member cluster.

  --cluster-name NAME     name the hub knows the member by (the member chart's
                          config.clusterName); DNS-1123 subdomain
  --secret NAME           the member's token Secret (<release>-fleetmirror-member-hub-token
                          by default, see the member chart's NOTES)
  --namespace NS          namespace of the token Secret on the member (default:
                          kubectl's namespace of the context)
  --context CTX           kubectl context of the member (default: current)
  --kubeconfig FILE       kubeconfig of the member (default: kubectl's)
  --server URL            API server URL the hub reaches the member at (default:
                          the server of the member's kubectl context)
  --hub-namespace NS      namespace of the Secret on the hub: the hub's
                          config.clusterSecretsNamespace (default: fleetmirror-system)
  --secret-name NAME      name of the Secret on the hub (default: <cluster-name>-fleetmirror)
  --label KEY=VALUE       extra label of the cluster, for target cluster selectors
                          (repeatable)
  -h, --help              this help
EOF
}

die() {
	echo "hub-kubeconfig.sh: $*" >&2
	exit 1
}

cluster="" token_secret="" namespace="" context="" kubeconfig="" server=""
hub_namespace="fleetmirror-system" secret_name=""
labels=()
while (($# > 0)); do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	--*) (($# >= 2)) || die "$1 needs a value" ;;
	esac
	case "$1" in
	--cluster-name) cluster="${2-}"; shift 2 ;;
	--secret) token_secret="${2-}"; shift 2 ;;
	--namespace) namespace="${2-}"; shift 2 ;;
	--context) context="${2-}"; shift 2 ;;
	--kubeconfig) kubeconfig="${2-}"; shift 2 ;;
	--server) server="${2-}"; shift 2 ;;
	--hub-namespace) hub_namespace="${2-}"; shift 2 ;;
	--secret-name) secret_name="${2-}"; shift 2 ;;
	--label) labels+=("${2-}"); shift 2 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done

[[ -n "$cluster" ]] || die "--cluster-name is required"
[[ -n "$token_secret" ]] || die "--secret is required"
# The hub refuses names that are not DNS-1123 subdomains.
[[ "$cluster" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ && ${#cluster} -le 253 ]] ||
	die "--cluster-name $cluster is not a DNS-1123 subdomain"
secret_name="${secret_name:-$cluster-fleetmirror}"
for l in "${labels[@]+"${labels[@]}"}"; do
	[[ "$l" =~ ^[A-Za-z0-9./_-]+=[A-Za-z0-9._-]*$ ]] || die "--label $l is not KEY=VALUE"
done

kubectl_args=()
[[ -n "$context" ]] && kubectl_args+=(--context "$context")
[[ -n "$kubeconfig" ]] && kubectl_args+=(--kubeconfig "$kubeconfig")
[[ -n "$namespace" ]] && kubectl_args+=(--namespace "$namespace")
k() { kubectl "${kubectl_args[@]+"${kubectl_args[@]}"}" "$@"; }

type="$(k get secret "$token_secret" -o 'jsonpath={.type}')" ||
	die "cannot read Secret $token_secret on the member"
[[ "$type" == "kubernetes.io/service-account-token" ]] ||
	die "Secret $token_secret has type ${type:-<none>}, not kubernetes.io/service-account-token"
token_b64="$(k get secret "$token_secret" -o 'jsonpath={.data.token}')"
ca_b64="$(k get secret "$token_secret" -o 'jsonpath={.data.ca\.crt}')"
[[ -n "$token_b64" && -n "$ca_b64" ]] ||
	die "Secret $token_secret has no token or ca.crt yet: the token controller fills it in; retry in a moment"
token="$(printf '%s' "$token_b64" | base64 -d)"

if [[ -z "$server" ]]; then
	server="$(k config view --minify -o 'jsonpath={.clusters[0].cluster.server}')"
	[[ -n "$server" ]] || die "cannot find the member's server in the kubeconfig; pass --server"
fi
[[ "$server" == https://* ]] || die "server $server is not https://"

kubeconfig_yaml="$(
	cat <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: $cluster
    cluster:
      server: $server
      certificate-authority-data: $ca_b64
users:
  - name: fleetmirror-hub
    user:
      token: $token
contexts:
  - name: $cluster
    context:
      cluster: $cluster
      user: fleetmirror-hub
current-context: $cluster
EOF
)"

echo "apiVersion: v1"
echo "kind: Secret"
echo "metadata:"
echo "  name: $secret_name"
echo "  namespace: $hub_namespace"
echo "  labels:"
echo "    fleetmirror.io/cluster-name: \"$cluster\""
for l in "${labels[@]+"${labels[@]}"}"; do
	echo "    ${l%%=*}: \"${l#*=}\""
done
echo "type: Opaque"
echo "data:"
echo "  value: $(printf '%s\n' "$kubeconfig_yaml" | base64 | tr -d '\n')"
