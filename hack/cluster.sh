#!/usr/bin/env bash
# One real Kubernetes node on this machine, from pinned sources, without
# systemd, Docker or a registry:
#
#   hack/cluster.sh up      # make cluster: start it (or find it running)
#   hack/cluster.sh down    # make cluster-down: stop it, undo every host change
#   hack/cluster.sh status  # exit 0 when it runs and its node is Ready
#   hack/cluster.sh env     # print the variables tests read (KUBECONFIG, ...)
#   hack/cluster.sh restart kubelet|containerd|...  # stop and start one process
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy are built from hack/tools/kube (the k8s.io/kubernetes version
# pinned there) and cached per version, as hack/envtest.sh does; kubeadm,
# built from the same module, writes the certificates and kubeconfigs.
# containerd, runc and the CNI plugins come from Debian and are installed
# when missing. CoreDNS (hack/coredns.sh) answers cluster names only.
#
# The node lives on its own address, NODE_IP on a link of its own, and its
# network is closed: whatever a Pod sends that is not for the Pod range is
# dropped before it can be forwarded (kube-proxy first turns Service
# addresses into Pod or node addresses), so nothing leaves this machine, and
# containerd pulls from no registry (every registry host is 127.0.0.1:9).
# Images come from `make image` and from this script (pause, busybox).
#
# Everything this script changes on the host is undone by `down`, which `up`
# also runs first when it finds the leftovers of a node that is not healthy
# (after a crash, a second `make cluster` works).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Addresses. NODE_IP is the node's InternalIP and where its servers listen.
NODE_NAME=fleetmirror-node
NODE_IP=10.213.0.1
NODE_LINK=fmnode0
POD_CIDR=10.214.0.0/24
SERVICE_CIDR=10.215.0.0/24
CNI_BRIDGE=fmcni0
APISERVER_PORT=6443
ETCD_PORT=12379

# Host paths this node owns. The repository's .fleet/node holds the
# kubeconfig and logs a user reads.
VAR=/var/lib/fleetmirror-node
RUN=/run/fleetmirror-node
STATE="${FLEETMIRROR_NODE_STATE:-$root/.fleet/node}"
CONTAINERD_SOCK=$RUN/containerd/containerd.sock
KUBECONFIG_OUT=$STATE/kubeconfig

# Local images the node needs; never pulled.
PAUSE_IMAGE=localhost/fleetmirror/pause:1
BUSYBOX_IMAGE=localhost/fleetmirror/busybox:debian

KUBE_VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print substr($3, 2)}' "$root/hack/tools/kube/go.mod")
cache="${XDG_CACHE_HOME:-$HOME/.cache}/fleetmirror"
nodebin="$cache/node/k8s-$KUBE_VERSION"

log() { printf '%s cluster: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- binaries

# node_binaries builds kubelet, kube-proxy, kube-controller-manager,
# kube-scheduler and kubeadm once per Kubernetes version, in one go build
# (they share most packages), under a lock as hack/envtest.sh does. They are
# stamped with the release (hack/kube-ldflags.sh), so that the Node's
# kubeletVersion and every --version say it; a cache built before the stamp
# (v0.0.0-master) is relinked once, in a few minutes with the Go build cache
# warm.
node_binaries() {
	mkdir -p "$nodebin"
	exec 8>"$nodebin/.lock"
	flock 8
	local want=(kubelet kube-proxy kube-controller-manager kube-scheduler kubeadm) missing=() b
	for b in "${want[@]}"; do node_stamped "$nodebin/$b" || missing+=("k8s.io/kubernetes/cmd/$b"); done
	if ((${#missing[@]})); then
		log "building ${missing[*]##*/} $KUBE_VERSION from source (first time only, ~10 minutes on 2 cores)"
		local ldflags
		ldflags="-s -w $("$root/hack/kube-ldflags.sh" "$KUBE_VERSION")"
		rm -rf "$nodebin/.tmp" && mkdir -p "$nodebin/.tmp"
		(cd "$root/hack/tools/kube" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="$ldflags" -o "$nodebin/.tmp/" "${missing[@]}") >&2
		mv "$nodebin"/.tmp/* "$nodebin/" && rmdir "$nodebin/.tmp"
	fi
	exec 8>&-
}

# node_stamped BINARY succeeds when BINARY exists and names KUBE_VERSION.
node_stamped() {
	[[ -x "$1" ]] || return 1
	case "$(basename "$1")" in
	kubeadm) [[ "$("$1" version -o short 2>/dev/null)" == "v$KUBE_VERSION" ]] ;;
	*) [[ "$("$1" --version 2>/dev/null)" == "Kubernetes v$KUBE_VERSION" ]] ;;
	esac
}

# host_packages installs from Debian what the node runs on, when missing.
host_packages() {
	local need=() cmd pkg
	for pair in containerd:containerd runc:runc iptables:iptables conntrack:conntrack ip:iproute2 flock:util-linux \
		/usr/lib/cni/bridge:containernetworking-plugins /bin/busybox:busybox-static openssl:openssl; do
		cmd=${pair%%:*} pkg=${pair##*:}
		if [[ $cmd == /* ]]; then [[ -x $cmd ]] || need+=("$pkg"); else command -v "$cmd" >/dev/null || need+=("$pkg"); fi
	done
	((${#need[@]})) || return 0
	log "installing ${need[*]} from Debian"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
}

# ---------------------------------------------------------------- processes

# start NAME CMD...: runs CMD detached under a supervisor that starts it
# again a second after it exits, as systemd's Restart=always does for a
# node's daemons (a kubelet that starts while containerd restarts exits, and
# comes back). Logs go to $STATE/logs/NAME.log; the supervisor's pid, which
# is also its process group, to $RUN/NAME.pid. A TERM to the supervisor
# stops CMD and then the supervisor. The supervisor first closes every
# descriptor it inherited but stdin, stdout and stderr: a lock the caller
# holds (`flock /tmp/fleetmirror-node.lock make cluster`) would otherwise
# stay held for as long as the node runs.
start() {
	local name=$1; shift
	mkdir -p "$STATE/logs" "$RUN"
	# shellcheck disable=SC2016 # expanded by the supervisor's shell
	setsid bash -c '
		for fd in /proc/$$/fd/*; do
			fd=${fd##*/}
			if ((fd > 2)) && [[ -e /proc/$$/fd/$fd ]]; then eval "exec $fd>&-"; fi
		done
		trap '"'"'kill -TERM "$child" 2>/dev/null; wait "$child"; exit 0'"'"' TERM
		while :; do
			"$@" &
			child=$!
			wait "$child"
			echo "supervisor: $0 exited with status $?; starting it again in 1s"
			sleep 1
		done' "$name" "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

# child NAME: the pid of the process the supervisor of NAME runs now.
child() { pgrep -P "$(cat "$RUN/$1.pid")" | head -n1; }

running() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

# wait_for WHAT SECONDS CMD...: retries CMD until it succeeds.
wait_for() {
	local what=$1 secs=$2; shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			log "gave up waiting for $what after ${secs}s; logs in $STATE/logs"
			return 1
		fi
		sleep 0.5
	done
}

kubectl() { "$envtest/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }

# ---------------------------------------------------------------- host

save_sysctl() { # save_sysctl KEY: the value to restore on down, once
	local f="$VAR/sysctl.saved"
	grep -q "^$1=" "$f" 2>/dev/null || echo "$1=$(sysctl -n "$1")" >>"$f"
}

network_up() {
	mkdir -p "$VAR"
	# A bridge without ports: this kernel has no dummy links.
	ip link add "$NODE_LINK" type bridge
	ip addr add "$NODE_IP/32" dev "$NODE_LINK"
	ip link set "$NODE_LINK" up
	save_sysctl net.ipv4.ip_forward
	save_sysctl net.bridge.bridge-nf-call-iptables
	sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
	# The closure, before any Pod exists: the mangle table's FORWARD runs
	# before the filter table's, where kube-proxy and CNI plugins add their
	# ACCEPT rules, and after the nat table has turned Service addresses
	# into endpoints.
	iptables -w -t mangle -N FLEETMIRROR-NODE
	iptables -w -t mangle -A FLEETMIRROR-NODE -d "$POD_CIDR" -j RETURN
	iptables -w -t mangle -A FLEETMIRROR-NODE -j DROP
	iptables -w -t mangle -I FORWARD -s "$POD_CIDR" -j FLEETMIRROR-NODE
	ip6tables -w -t mangle -N FLEETMIRROR-NODE
	ip6tables -w -t mangle -A FLEETMIRROR-NODE -j DROP
	ip6tables -w -t mangle -I FORWARD -i "$CNI_BRIDGE" -j FLEETMIRROR-NODE
}

# iptables_clean removes every chain and rule of kube-proxy, the kubelet,
# the CNI plugins and ours, in every table, IPv4 and IPv6.
iptables_clean() {
	local v
	for v in iptables ip6tables; do
		command -v "$v-save" >/dev/null || continue
		"$v-save" | grep -vE -- '(KUBE-|CNI-|FLEETMIRROR-)' | "$v-restore" -w || true
	done
	if command -v nft >/dev/null; then
		nft delete table ip kube-proxy 2>/dev/null || true
		nft delete table ip6 kube-proxy 2>/dev/null || true
	fi
}

# ---------------------------------------------------------------- up

pki_up() {
	mkdir -p "$VAR/pki" "$STATE"
	cat >"$VAR/kubeadm.yaml" <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: $NODE_IP
  bindPort: $APISERVER_PORT
nodeRegistration:
  name: $NODE_NAME
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v$KUBE_VERSION
clusterName: $NODE_NAME
certificatesDir: $VAR/pki
networking:
  serviceSubnet: $SERVICE_CIDR
  podSubnet: $POD_CIDR
  dnsDomain: cluster.local
apiServer:
  certSANs: [127.0.0.1, localhost, $NODE_IP]
etcd:
  external:
    endpoints: [http://127.0.0.1:$ETCD_PORT]
EOF
	local k=("$nodebin/kubeadm")
	"${k[@]}" init phase certs all --config "$VAR/kubeadm.yaml" >/dev/null
	"${k[@]}" init phase kubeconfig super-admin --config "$VAR/kubeadm.yaml" --kubeconfig-dir "$VAR" >/dev/null
	"${k[@]}" init phase kubeconfig controller-manager --config "$VAR/kubeadm.yaml" --kubeconfig-dir "$VAR" >/dev/null
	"${k[@]}" init phase kubeconfig scheduler --config "$VAR/kubeadm.yaml" --kubeconfig-dir "$VAR" >/dev/null
	"${k[@]}" init phase kubeconfig kubelet --config "$VAR/kubeadm.yaml" --kubeconfig-dir "$VAR" >/dev/null
	"${k[@]}" kubeconfig user --config "$VAR/kubeadm.yaml" --client-name system:kube-proxy >"$VAR/proxy.conf"
	"${k[@]}" kubeconfig user --config "$VAR/kubeadm.yaml" --client-name system:coredns >"$VAR/coredns.conf"
	install -m 0600 "$VAR/super-admin.conf" "$KUBECONFIG_OUT"
	# The kubelet's serving certificate, signed by the cluster CA for the
	# node's address, so that the API server verifies the kubelet it talks
	# to (logs, exec) as kubeadm's serverTLSBootstrap would have it; kubeadm
	# has no phase for it.
	openssl req -new -newkey rsa:2048 -nodes -keyout "$VAR/pki/kubelet.key" -subj "/O=system:nodes/CN=system:node:$NODE_NAME" \
		-out "$VAR/pki/kubelet.csr" 2>/dev/null
	openssl x509 -req -in "$VAR/pki/kubelet.csr" -CA "$VAR/pki/ca.crt" -CAkey "$VAR/pki/ca.key" -CAcreateserial -days 30 \
		-extfile <(printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' "$NODE_IP" "$NODE_NAME") \
		-out "$VAR/pki/kubelet.crt" 2>/dev/null
	cat >"$VAR/audit-policy.yaml" <<'EOF'
# Every write, with who made it: tests count the agents' writes from it.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
EOF
}

control_plane_up() {
	start etcd "$envtest/etcd" --name "$NODE_NAME" --data-dir "$VAR/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
		--initial-cluster "$NODE_NAME=http://127.0.0.1:12380" --unsafe-no-fsync
	local p=$VAR/pki
	start kube-apiserver "$envtest/kube-apiserver" \
		--advertise-address "$NODE_IP" --bind-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged=true \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--client-ca-file "$p/ca.crt" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
		--kubelet-client-certificate "$p/apiserver-kubelet-client.crt" --kubelet-client-key "$p/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$p/ca.crt" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
		--proxy-client-cert-file "$p/front-proxy-client.crt" --proxy-client-key-file "$p/front-proxy-client.key" \
		--requestheader-client-ca-file "$p/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
		--requestheader-extra-headers-prefix X-Remote-Extra- --requestheader-group-headers X-Remote-Group \
		--requestheader-username-headers X-Remote-User \
		--audit-policy-file "$VAR/audit-policy.yaml" --audit-log-path "$STATE/logs/audit.log" \
		--audit-log-maxsize 200 --audit-log-maxbackup 1
	wait_for kube-apiserver 120 kubectl get --raw /readyz
	# What kubeadm init would have created: its admin group and the API
	# server's access to the kubelets.
	kubectl create clusterrolebinding kubeadm:cluster-admins --clusterrole cluster-admin --group kubeadm:cluster-admins >/dev/null
	kubectl create clusterrolebinding kube-apiserver-kubelet-client --clusterrole system:kubelet-api-admin --user kube-apiserver-kubelet-client >/dev/null
	kubectl apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:coredns}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: system:coredns}]
EOF
	start kube-controller-manager "$nodebin/kube-controller-manager" \
		--kubeconfig "$VAR/controller-manager.conf" --authentication-kubeconfig "$VAR/controller-manager.conf" \
		--authorization-kubeconfig "$VAR/controller-manager.conf" --bind-address 127.0.0.1 \
		--client-ca-file "$p/ca.crt" --root-ca-file "$p/ca.crt" \
		--cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key" \
		--service-account-private-key-file "$p/sa.key" --use-service-account-credentials \
		--service-cluster-ip-range "$SERVICE_CIDR" --cluster-name "$NODE_NAME" --leader-elect=false
	start kube-scheduler "$nodebin/kube-scheduler" \
		--kubeconfig "$VAR/scheduler.conf" --authentication-kubeconfig "$VAR/scheduler.conf" \
		--authorization-kubeconfig "$VAR/scheduler.conf" --bind-address 127.0.0.1 --leader-elect=false
	local corefile
	corefile=$(sed -e "s|@ADDR@|$NODE_IP|g" -e "s|@PORT@|53|g" -e "s|@KUBECONFIG@|$VAR/coredns.conf|g" "$root/hack/cluster/Corefile.tmpl")
	printf '%s\n' "$corefile" >"$VAR/Corefile"
	start coredns "$corednsdir/coredns" -conf "$VAR/Corefile"
}

# images_up builds the pause and busybox images and imports them.
images_up() {
	local dir="$VAR/images"
	mkdir -p "$dir"
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dir/pause" ./hack/pause)
	(cd "$root" && go run ./hack/image files -tag "$PAUSE_IMAGE" -o "$dir/pause.tar" -entrypoint /pause "$dir/pause:/pause")
	local links=() a
	for a in date sleep cat echo ls timeout nslookup; do links+=(-link "/bin/$a=busybox"); done
	# Debian's busybox 1.35 wget crashes on -T, which the charts' helm test
	# uses; /bin/wget is a script that applies the timeout with busybox
	# timeout instead. busybox sh would run its own wget applet rather than
	# the script, so /bin/sh is Debian's dash (with the C library it needs).
	(cd "$root" && go run ./hack/image files -tag "$BUSYBOX_IMAGE" -o "$dir/busybox.tar" "${links[@]}" \
		/bin/busybox:/bin/busybox hack/cluster/wget:/bin/wget /bin/dash:/bin/sh \
		/lib/x86_64-linux-gnu/libc.so.6:/lib/x86_64-linux-gnu/libc.so.6 \
		"$(readlink -f /lib64/ld-linux-x86-64.so.2):/lib64/ld-linux-x86-64.so.2")
	ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$dir/pause.tar" >/dev/null
	ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$dir/busybox.tar" >/dev/null
	if [[ -f "$root/.fleet/images/fleetmirror.tar" ]]; then
		ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$root/.fleet/images/fleetmirror.tar" >/dev/null
	fi
}

containerd_up() {
	mkdir -p "$VAR/containerd" "$VAR/cni/net.d" "$VAR/cni/networks" "$RUN/containerd"
	local reg="$VAR/containerd/certs.d" h
	# No registry is reachable, and none may be tried: every host resolves
	# to a closed local port.
	for h in _default docker.io registry.k8s.io ghcr.io quay.io gcr.io; do
		mkdir -p "$reg/$h"
		printf 'server = "http://127.0.0.1:9"\n' >"$reg/$h/hosts.toml"
	done
	cat >"$VAR/containerd/config.toml" <<EOF
version = 2
root = "$VAR/containerd/root"
state = "$RUN/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$VAR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$reg"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
EOF
	cat >"$VAR/cni/net.d/10-fleetmirror.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "fleetmirror",
  "plugins": [
    {
      "type": "bridge", "bridge": "$CNI_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
               "dataDir": "$VAR/cni/networks"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	start containerd containerd --config "$VAR/containerd/config.toml"
	wait_for containerd 30 ctr --address "$CONTAINERD_SOCK" version
}

node_up() {
	printf 'nameserver %s\nsearch cluster.local\n' "$NODE_IP" >"$VAR/resolv.conf"
	cat >"$VAR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $VAR/proxy.conf
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [$NODE_IP/32]
conntrack:
  maxPerCore: 0
EOF
	# kube-proxy before the kubelet: no Pod runs before its rules are
	# there (until then the closure drops a Pod's packets to a Service
	# address). Its health waits for the Node, which the kubelet registers.
	start kube-proxy "$nodebin/kube-proxy" --config "$VAR/kube-proxy.yaml"
	cat >"$VAR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $VAR/pki/ca.crt}
authorization:
  mode: Webhook
tlsCertFile: $VAR/pki/kubelet.crt
tlsPrivateKeyFile: $VAR/pki/kubelet.key
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: $VAR/resolv.conf
podCIDR: $POD_CIDR
staticPodPath: ""
serializeImagePulls: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
	start kubelet "$nodebin/kubelet" --config "$VAR/kubelet.yaml" --kubeconfig "$VAR/kubelet.conf" \
		--root-dir "$VAR/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 1
	wait_for "node Ready" 120 kubectl wait --for condition=Ready "node/$NODE_NAME" --timeout 2s
	wait_for kube-proxy 60 curl -sf http://127.0.0.1:10256/healthz
	wait_for "default ServiceAccount" 60 kubectl -n default get serviceaccount default
}

healthy() {
	local p
	for p in etcd kube-apiserver kube-controller-manager kube-scheduler coredns containerd kube-proxy kubelet; do
		running "$p" || return 1
	done
	[[ -f "$KUBECONFIG_OUT" ]] && kubectl wait --for condition=Ready "node/$NODE_NAME" --timeout 5s >/dev/null 2>&1
}

up() {
	[[ $EUID -eq 0 ]] || die "a node needs root (network, cgroups, mounts)"
	host_packages
	envtest=$("$root/hack/envtest.sh")
	corednsdir=$("$root/hack/coredns.sh")
	node_binaries
	if [[ -d $VAR || -d $RUN ]] && healthy; then
		log "already running; KUBECONFIG=$KUBECONFIG_OUT"
		return 0
	fi
	down
	local t0=$SECONDS
	rm -rf "$STATE/logs" && mkdir -p "$STATE/logs"
	network_up
	pki_up
	control_plane_up
	containerd_up
	images_up
	node_up
	log "node $NODE_NAME Ready in $((SECONDS - t0))s (Kubernetes $KUBE_VERSION); KUBECONFIG=$KUBECONFIG_OUT"
}

# ---------------------------------------------------------------- down

down() {
	local p
	# The kubelet first, so that it restarts nothing; then every container
	# of the node (its processes sit in the kubepods cgroups), containerd and
	# its shims, the rest.
	for p in kubelet kube-proxy; do stop "$p"; done
	kill_kubepods
	stop containerd
	pkill -9 -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null || true
	for p in coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$p"; done
	kill_kubepods
	remove_cgroups
	unmount_under "$VAR"
	unmount_under "$RUN"
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do ip netns delete "$ns" 2>/dev/null || true; done
	iptables_clean
	ip link delete "$CNI_BRIDGE" 2>/dev/null || true
	ip link delete "$NODE_LINK" 2>/dev/null || true
	if [[ -f "$VAR/sysctl.saved" ]]; then
		local kv
		while read -r kv; do sysctl -qw "$kv" || true; done <"$VAR/sysctl.saved"
	fi
	rm -rf "$VAR" "$RUN" "$KUBECONFIG_OUT"
}

stop() { # stop NAME: TERM, then KILL of its process group after 10 s
	local pidf="$RUN/$1.pid" pid i
	[[ -f $pidf ]] || return 0
	pid=$(cat "$pidf")
	kill "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 -- "-$pid" 2>/dev/null || true
	rm -f "$pidf"
}

# kill_kubepods kills every process in the kubelet's cgroups.
kill_kubepods() {
	local f pid
	for f in $(find /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods -name cgroup.procs 2>/dev/null); do
		while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done <"$f"
	done
}

remove_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
		[[ -d $d ]] || continue
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
}

unmount_under() { # every mount at or below $1, deepest first
	local m
	for m in $(awk -v d="$1" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
}

# restart NAME: stops the process NAME runs (test/cluster restarts the
# kubelet and containerd), which its supervisor starts again, and waits until
# it answers.
restart() {
	local name=$1 old
	running "$name" || die "$name does not run"
	old=$(child "$name")
	kill -TERM "$old"
	wait_for "$name to stop" 30 bash -c "! kill -0 $old"
	wait_for "$name to start again" 30 bash -c "[[ -n \$(pgrep -P $(cat "$RUN/$name.pid")) ]]"
	case $name in
	kubelet) wait_for kubelet 60 curl -sf http://127.0.0.1:10248/healthz ;;
	containerd) wait_for containerd 30 ctr --address "$CONTAINERD_SOCK" version ;;
	kube-proxy) wait_for kube-proxy 60 curl -sf http://127.0.0.1:10256/healthz ;;
	kube-apiserver) envtest=$("$root/hack/envtest.sh"); wait_for kube-apiserver 60 kubectl get --raw /readyz ;;
	esac
	log "$name restarted"
}

# ---------------------------------------------------------------- main

case "${1:-}" in
up) up ;;
down) down; log "down; host restored" ;;
restart) restart "${2:?restart what}" ;;
status)
	envtest=$("$root/hack/envtest.sh")
	healthy
	;;
env)
	echo "KUBECONFIG=$KUBECONFIG_OUT"
	echo "FLEETMIRROR_NODE_IP=$NODE_IP"
	echo "FLEETMIRROR_NODE_POD_CIDR=$POD_CIDR"
	echo "FLEETMIRROR_NODE_CONTAINERD_SOCK=$CONTAINERD_SOCK"
	echo "FLEETMIRROR_NODE_AUDIT_LOG=$STATE/logs/audit.log"
	echo "FLEETMIRROR_NODE_BUSYBOX_IMAGE=$BUSYBOX_IMAGE"
	;;
*)
	echo "usage: $0 up|down|status|env|restart NAME" >&2
	exit 2
	;;
esac
