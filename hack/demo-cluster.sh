#!/usr/bin/env bash
# make demo-cluster: the demo of `make demo` on the real node of `make
# cluster`, with the charts as they ship and the image of `make image`:
# installs the member chart, applies examples/secret-shared.yaml and shows
# where the Secret was mirrored. It leaves everything running; `helm
# uninstall fleetmirror-member -n fleetmirror-system` removes the agent and
# its mirrors, `make cluster-down` the node.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

eval "$(hack/cluster.sh env)"
export KUBECONFIG
kubectl="$(hack/envtest.sh)/kubectl"
helm=${HELM:?make demo-cluster passes the pinned helm}
image=${IMAGE:-fleetmirror:dev}

echo "== helm install fleetmirror-member (image $image) on node $FLEETMIRROR_NODE_IP"
"$helm" upgrade --install fleetmirror-member charts/member --namespace fleetmirror-system --create-namespace \
	--set image.repository="${image%:*}" --set image.tag="${image##*:}" \
	--set test.image="$FLEETMIRROR_NODE_BUSYBOX_IMAGE" --wait --timeout 3m
"$kubectl" -n fleetmirror-system get pods -o wide

echo "== kubectl apply -f examples/secret-shared.yaml"
"$kubectl" apply -f examples/secret-shared.yaml

echo "== waiting for the mirrors"
# shared is named as */shared: a hub entry, which the member leaves to the hub.
for ns in team-a team-b app-1; do
	until "$kubectl" -n "$ns" get secret db-credentials >/dev/null 2>&1; do sleep 1; done
done
"$kubectl" get secrets -A -l fleetmirror.io/mirror=true \
	-o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,SOURCE:.metadata.annotations.fleetmirror\.io/source'
echo
echo "== helm test"
"$helm" test fleetmirror-member --namespace fleetmirror-system --timeout 3m
cat <<EOF

Look for yourself:
  export KUBECONFIG=$KUBECONFIG
  $kubectl -n team-a get secret db-credentials -o yaml
  $kubectl events -n platform --for secret/db-credentials
The node runs until \`make cluster-down\`.
EOF
