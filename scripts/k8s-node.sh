#!/usr/bin/env bash
# k8s-node.sh - a real one-machine Kubernetes cluster (`make k8s-node`): the
# control plane and a node whose kubelet runs pods under containerd and runc,
# every part a process of this machine, started here and stopped by pid.
#
#   scripts/k8s-node.sh up       start (or check) everything; idempotent
#   scripts/k8s-node.sh down     stop every process, container and mount; the
#                                state (etcd, images, certificates) stays for the next up
#   scripts/k8s-node.sh purge    down, then delete the state as well
#   scripts/k8s-node.sh status   which processes run (exit 1 if any is missing)
#   scripts/k8s-node.sh images [PODMAN_IMAGE[=NAME]...]   import podman images into the
#                                node, each also under NAME (the name a manifest uses:
#                                chronik-server:dev); default the project's two images
#   scripts/k8s-node.sh volumes  make the local PersistentVolumes (again): a released
#                                one is wiped and made anew (k8s-perf/run.sh calls this)
#   scripts/k8s-node.sh kubeconfig          print the admin kubeconfig's path
#
# What runs (binaries: scripts/install-k8s-node.sh, cached under .tools/):
#   etcd (127.0.0.1:12379), kube-apiserver (${NODE_IP}:16443), kube-controller-manager,
#   kube-scheduler, containerd v2 (CRI; runc under cgroupfs; overlayfs), kubelet
#   (node chronik-node; cgroup v1 with failCgroupV1: false), kube-proxy (iptables),
#   CoreDNS (cluster.local, on the node's bridge address), and, as a pod, Prometheus
#   (namespace monitoring, Service prometheus-operated:9090; its scrape
#   configuration is k8s-perf/base/monitoring's monitors translated by
#   k8s-perf/node/scrape_config.py) - no Prometheus Operator.
# Storage: StorageClass chronik-local (the default), VOLUMES local PersistentVolumes,
# directories under NODE_DIR/volumes; their capacity is the disk's free space
# (nothing enforces a size: they share this machine's disk).
# Networking: CNI bridge ${NODE_BRIDGE} (${POD_CIDR}, gateway ${NODE_IP}), no masquerade
# and no route out: pods reach each other, Services and this machine only.
# NetworkPolicy is not enforced (no policy agent runs). One client certificate
# (system:masters) serves every component: a test node, not a hardened one.
# The kubeconfig's context chronik-local-node is merged into the current
# kubeconfig (KUBECONFIG or ~/.kube/config) and made current by `up`, as kind
# does; `down` removes it.
#
# Needs: root, Go (first up builds, ~12 min), podman (images), openssl, iptables.
# Env: NODE_DIR (default .run/k8s-node), POD_CIDR (10.244.0.0/16), NODE_IP
# (10.244.0.1), SERVICE_CIDR (10.97.0.0/16), NODE_BRIDGE (chronik0).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_SRC="$REPO_ROOT/k8s-perf/node"
export NODE_DIR="${NODE_DIR:-$REPO_ROOT/.run/k8s-node}"
export POD_CIDR="${POD_CIDR:-10.244.0.0/16}"
export NODE_IP="${NODE_IP:-10.244.0.1}"
export SERVICE_CIDR="${SERVICE_CIDR:-10.97.0.0/16}"
export NODE_BRIDGE="${NODE_BRIDGE:-chronik0}"
export NODE_NAME=chronik-node
VOLUMES="${VOLUMES:-12}"
export PAUSE_IMAGE=localhost/chronik-node-pause:dev
PROMETHEUS_IMAGE=localhost/chronik-node-prometheus:dev
CONTEXT=chronik-local-node
APISERVER_PORT=16443
ETCD_PORT=12379
KUBECONFIG_NODE="$NODE_DIR/admin.kubeconfig"
PKI="$NODE_DIR/pki"
PIDS="$NODE_DIR/pids"
LOGS="$NODE_DIR/logs"
RUNC_ROOT=/run/containerd/runc/k8s.io   # the runc shim's default root for namespace k8s.io
# start order; down stops them in reverse
PROCESSES=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy coredns)

log() { printf '[%s] k8s-node: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

alive() { local pid; pid=$(cat "$PIDS/$1.pid" 2> /dev/null) && [[ -n "$pid" ]] && kill -0 "$pid" 2> /dev/null; }

# start NAME ARGS... - run a binary of $NODE_BIN in the background, its own session, pid kept
start() {
  local name=$1; shift
  if alive "$name"; then return 0; fi
  log "start $name"
  PATH="$NODE_BIN:$PATH" setsid "$NODE_BIN/$name" "$@" > "$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$PIDS/$name.pid"
}

# stop NAME - TERM, then KILL after 15 s
stop() {
  local pid t
  pid=$(cat "$PIDS/$1.pid" 2> /dev/null) || return 0
  if [[ -n "$pid" ]] && kill -0 "$pid" 2> /dev/null; then
    log "stop $1 (pid $pid)"
    kill "$pid" 2> /dev/null || true
    for ((t = 0; t < 30; t++)); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2> /dev/null || true
  fi
  rm -f "$PIDS/$1.pid"
}

# wait_for WHAT SECONDS CMD... - poll CMD every second; the process's log tail on timeout
wait_for() {
  local what=$1 secs=$2 t; shift 2
  for ((t = 0; t < secs; t++)); do
    "$@" > /dev/null 2>&1 && return 0
    sleep 1
  done
  die "$what not ready after ${secs}s (logs: $LOGS/)"
}

# shellcheck disable=SC2016 # the names envsubst may replace, literally
render() {  # TEMPLATE - k8s-perf/node/TEMPLATE with the node's variables filled in
  envsubst '${NODE_DIR} ${NODE_BIN} ${POD_CIDR} ${NODE_IP} ${NODE_BRIDGE} ${NODE_NAME} ${PAUSE_IMAGE}' < "$NODE_SRC/$1"
}

# render_to FILE TEMPLATE - FILE rewritten only when its content changes (kube-proxy
# exits when its configuration file is written: "configuration file was updated")
render_to() {
  render "$2" > "$1.tmp"
  if cmp -s "$1.tmp" "$1"; then rm -f "$1.tmp"; else mv "$1.tmp" "$1"; fi
}

kc() { "$NODE_BIN/kubectl" --kubeconfig "$KUBECONFIG_NODE" "$@"; }

# -- certificates ----------------------------------------------------------------------------
# cert NAME SUBJECT [SANS] - a key and a certificate signed by the node's CA
cert() {
  [[ -s "$PKI/$1.crt" ]] && return 0
  local ext="$PKI/$1.ext"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' > "$ext"
  [[ -z "${3:-}" ]] || echo "subjectAltName=$3" >> "$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -subj "$2" -out "$PKI/$1.csr" 2> /dev/null
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -extfile "$ext" -out "$PKI/$1.crt" 2> /dev/null
  rm -f "$PKI/$1.csr" "$ext"
}

pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  if [[ ! -s "$PKI/ca.crt" ]]; then
    log "certificates (CA, API server, kubelet, admin, service-account key)"
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -subj "/CN=chronik-local-node-ca" \
      -days 3650 -out "$PKI/ca.crt" 2> /dev/null
  fi
  local svc_ip
  svc_ip=$(python3 "$REPO_ROOT/scripts/runctl.py" first-host "$SERVICE_CIDR")
  cert apiserver "/CN=kube-apiserver" \
    "IP:$NODE_IP,IP:$svc_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  cert kubelet "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
  cert admin "/O=system:masters/CN=chronik-local-node-admin"
  [[ -s "$PKI/sa.key" ]] || { openssl genrsa -out "$PKI/sa.key" 2048 2> /dev/null && openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2> /dev/null; }
  cat > "$KUBECONFIG_NODE" << EOF
apiVersion: v1
kind: Config
clusters:
  - name: $CONTEXT
    cluster:
      server: https://$NODE_IP:$APISERVER_PORT
      certificate-authority: $PKI/ca.crt
users:
  - name: $CONTEXT-admin
    user:
      client-certificate: $PKI/admin.crt
      client-key: $PKI/admin.key
contexts:
  - name: $CONTEXT
    context:
      cluster: $CONTEXT
      user: $CONTEXT-admin
current-context: $CONTEXT
EOF
}

# -- the bridge the pods hang off, and the host's forwarding ------------------------------------------
network() {
  if ! ip link show "$NODE_BRIDGE" > /dev/null 2>&1; then
    log "bridge $NODE_BRIDGE $NODE_IP/${POD_CIDR#*/}"
    ip link add "$NODE_BRIDGE" type bridge
  fi
  ip addr show dev "$NODE_BRIDGE" | grep -q "inet $NODE_IP/" || ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$NODE_BRIDGE"
  ip link set "$NODE_BRIDGE" up
  # Services' DNAT must see bridged pod-to-pod traffic; the kernel has br_netfilter built in
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
}

# -- images: podman's, imported into the node's containerd (nothing is pulled here) ----------------------
ctr_() { "$NODE_BIN/ctr" --address "$NODE_DIR/containerd.sock" -n k8s.io "$@"; }
podman_() { podman --runtime runc --cgroup-manager=cgroupfs "$@"; }

# import_images PODMAN_IMAGE[=NAME]... - podman's image into containerd (skipped when the
# node has it already: same config digest), also named NAME if given (docker.io/library/
# is how the kubelet spells a name without a registry)
import_images() {
  local spec img name id stamp
  for spec in "$@"; do
    img=${spec%%=*}; name=${spec#*=}; [[ "$spec" == *=* ]] || name=""
    [[ -z "$name" || "$name" == */* ]] || name="docker.io/library/$name"
    podman_ image exists "$img" || die "podman has no image $img (make images builds the project's)"
    id=$(podman_ image inspect --format '{{.Id}}' "$img")
    stamp="$NODE_DIR/images/${img//[\/:]/_}"
    if [[ "$(cat "$stamp" 2> /dev/null)" != "$id" ]] || ! ctr_ images ls -q "name==$img" 2> /dev/null | grep -q .; then
      log "import $img into the node's containerd"
      podman_ save --format oci-archive "$img" | ctr_ images import --base-name "${img%:*}" - > /dev/null 2> "$LOGS/ctr-import.log" \
        || die "ctr images import $img failed: $(tail -n 3 "$LOGS/ctr-import.log")"
      mkdir -p "$NODE_DIR/images"
      echo "$id" > "$stamp"
    fi
    if [[ -n "$name" && "$name" != "$img" ]]; then
      ctr_ images tag --force "$img" "$name" > /dev/null 2>&1 || die "ctr images tag $img $name failed"
    fi
  done
}

# image_of_binary IMAGE DOCKERFILE BINARY - build IMAGE around $NODE_BIN/BINARY unless the
# image already holds that very binary (label chronik.node/binary-sha256)
image_of_binary() {
  local sum ctx="$NODE_DIR/build"
  sum=$(sha256sum "$NODE_BIN/$3" | cut -c1-64)
  [[ "$(podman_ image inspect --format '{{index .Labels "chronik.node/binary-sha256"}}' "$1" 2> /dev/null)" == "$sum" ]] && return 0
  podman_ image exists localhost/debian:bookworm-slim \
    || die "no localhost/debian:bookworm-slim base: make images first (scripts/build-images.sh makes it)"
  log "podman build $1"
  rm -rf "$ctx"; mkdir -p "$ctx"
  cp "$NODE_BIN/$3" "$ctx/$3"
  podman_ build -q --label "chronik.node/binary-sha256=$sum" -t "$1" -f "$NODE_SRC/$2" "$ctx" > /dev/null
  rm -rf "$ctx"
}

node_images() {
  image_of_binary "$PAUSE_IMAGE" pause.Dockerfile pause
  image_of_binary "$PROMETHEUS_IMAGE" prometheus.Dockerfile prometheus
  import_images "$PAUSE_IMAGE" "$PROMETHEUS_IMAGE"
}

# -- storage: local PersistentVolumes, recycled once their claim is gone --------------------------------
volumes() {
  local i name phase size
  size="$(df -BG --output=avail "$NODE_DIR" | tail -n 1 | tr -d ' G')Gi"
  for ((i = 0; i < VOLUMES; i++)); do
    name="chronik-local-$i"
    phase=$(kc get pv "$name" -o jsonpath='{.status.phase}' 2> /dev/null || true)
    [[ "$phase" == Available || "$phase" == Bound || "$phase" == Pending ]] && continue
    if [[ -n "$phase" ]]; then
      log "recycle volume $name ($phase)"
      kc delete pv "$name" --wait=true --timeout 60s > /dev/null
    fi
    rm -rf "$NODE_DIR/volumes/$i"
    mkdir -p "$NODE_DIR/volumes/$i"
    kc apply -f - > /dev/null << EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $name
  labels:
    chronik.perf/local-node: volume
spec:
  capacity:
    storage: $size
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: chronik-local
  volumeMode: Filesystem
  local:
    path: $NODE_DIR/volumes/$i
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - key: kubernetes.io/hostname
              operator: In
              values: [$NODE_NAME]
EOF
  done
}

# -- the user's kubeconfig: context chronik-local-node, as kind does ---------------------------------------
user_kubeconfig() { echo "${KUBECONFIG:-$HOME/.kube/config}" | cut -d: -f1; }
merge_context() {
  local target
  target=$(user_kubeconfig)
  mkdir -p "$(dirname "$target")"
  [[ -f "$target" ]] || printf 'apiVersion: v1\nkind: Config\n' > "$target"
  KUBECONFIG="$target:$KUBECONFIG_NODE" "$NODE_BIN/kubectl" config view --flatten > "$target.tmp"
  mv "$target.tmp" "$target"
  KUBECONFIG="$target" "$NODE_BIN/kubectl" config use-context "$CONTEXT" > /dev/null
  log "kubeconfig $target: context $CONTEXT is current"
}
unmerge_context() {
  local target
  target=$(user_kubeconfig)
  [[ -f "$target" ]] || return 0
  if [[ "$(KUBECONFIG="$target" "$NODE_BIN/kubectl" config current-context 2> /dev/null)" == "$CONTEXT" ]]; then
    KUBECONFIG="$target" "$NODE_BIN/kubectl" config unset current-context > /dev/null 2>&1 || true
  fi
  KUBECONFIG="$target" "$NODE_BIN/kubectl" config delete-context "$CONTEXT" > /dev/null 2>&1 || true
  KUBECONFIG="$target" "$NODE_BIN/kubectl" config delete-cluster "$CONTEXT" > /dev/null 2>&1 || true
  KUBECONFIG="$target" "$NODE_BIN/kubectl" config delete-user "$CONTEXT-admin" > /dev/null 2>&1 || true
}

# -- up ----------------------------------------------------------------------------------------------------------
up() {
  [[ $(id -u) == 0 ]] || die "needs root (kubelet, containerd, the bridge)"
  NODE_BIN="$("$REPO_ROOT/scripts/install-k8s-node.sh")"
  export NODE_BIN
  mkdir -p "$NODE_DIR" "$PIDS" "$LOGS" "$NODE_DIR/etcd" "$NODE_DIR/cni/net.d" "$NODE_DIR/kubelet"
  pki
  network
  local curl_admin=(curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")

  start etcd --name chronik-node --data-dir "$NODE_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-cluster "chronik-node=http://127.0.0.1:$((ETCD_PORT + 1))" \
    --quota-backend-bytes 2147483648 --snapshot-count 10000
  wait_for etcd 60 curl -sf "http://127.0.0.1:$ETCD_PORT/health"

  start kube-apiserver --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --profiling=false
  wait_for kube-apiserver 120 "${curl_admin[@]}" "https://$NODE_IP:$APISERVER_PORT/readyz"

  start kube-controller-manager --kubeconfig "$KUBECONFIG_NODE" \
    --authentication-kubeconfig "$KUBECONFIG_NODE" --authorization-kubeconfig "$KUBECONFIG_NODE" \
    --secure-port 0 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --controllers '*'
  start kube-scheduler --kubeconfig "$KUBECONFIG_NODE" \
    --authentication-kubeconfig "$KUBECONFIG_NODE" --authorization-kubeconfig "$KUBECONFIG_NODE" \
    --secure-port 0 --leader-elect=false

  render_to "$NODE_DIR/containerd.toml" containerd.toml
  render_to "$NODE_DIR/cni/net.d/10-chronik-node.conflist" cni.conflist
  start containerd --config "$NODE_DIR/containerd.toml"
  wait_for containerd 60 ctr_ version
  node_images

  render_to "$NODE_DIR/kubelet.yaml" kubelet.yaml
  start kubelet --config "$NODE_DIR/kubelet.yaml" --kubeconfig "$KUBECONFIG_NODE" \
    --root-dir "$NODE_DIR/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" -v 1 \
    --containerd "$NODE_DIR/containerd.sock"  # cAdvisor's: per-container cgroups (CPU, RSS by container)
  wait_for "node $NODE_NAME" 180 kc wait --for condition=Ready --timeout 5s "node/$NODE_NAME"

  render_to "$NODE_DIR/kube-proxy.yaml" kube-proxy.yaml
  start kube-proxy --config "$NODE_DIR/kube-proxy.yaml"
  render_to "$NODE_DIR/Corefile" Corefile
  start coredns -conf "$NODE_DIR/Corefile"
  wait_for coredns 60 curl -sf http://127.0.0.1:18080/health

  # the ServiceMonitor/PodMonitor CRDs k8s-perf applies (no operator acts on them
  # here), and the venv with PyYAML that scrape_config.py needs
  bash "$REPO_ROOT/scripts/install-k8s-tools.sh" > /dev/null 2>&1 || die "scripts/install-k8s-tools.sh failed"
  local crds
  crds=$(cat "$REPO_ROOT/.tools/k8s-crd-dir")
  kc apply --server-side -f "$crds/monitoring.coreos.com_servicemonitors.yaml" \
    -f "$crds/monitoring.coreos.com_podmonitors.yaml" > /dev/null
  "$REPO_ROOT/.tools/k8s-venv/bin/python" "$NODE_SRC/scrape_config.py" "$REPO_ROOT"/k8s-perf/base/monitoring/*monitors.yaml \
    > "$NODE_DIR/prometheus.yml"
  kc apply -f "$NODE_SRC/addons.yaml" > /dev/null
  volumes
  kc create configmap prometheus-config -n monitoring --from-file=prometheus.yml="$NODE_DIR/prometheus.yml" \
    --dry-run=client -o yaml | kc apply -f - > /dev/null
  kc rollout status -n monitoring deployment/prometheus --timeout 180s > /dev/null \
    || die "Prometheus did not roll out: $(kc get pods -n monitoring -o wide 2>&1 | tail -n 2)"
  merge_context
  log "up: node $NODE_NAME Ready; kubectl --context $CONTEXT (or KUBECONFIG=$KUBECONFIG_NODE)"
}

# -- down ----------------------------------------------------------------------------------------------------------
down() {
  NODE_BIN="$REPO_ROOT/.tools/k8s-node/bin"
  local name i
  # the kubelet first, so that nothing restarts what is stopped next
  stop kubelet
  # every container the node's shims run, then the shims
  if [[ -d "$RUNC_ROOT" ]]; then
    for i in $("$NODE_BIN/runc" --root "$RUNC_ROOT" list -q 2> /dev/null); do
      "$NODE_BIN/runc" --root "$RUNC_ROOT" delete --force "$i" > /dev/null 2>&1 || true
    done
  fi
  pkill -f "containerd-shim-runc-v2 -namespace k8s.io -address $NODE_DIR/containerd.sock" 2> /dev/null || true
  for ((i = ${#PROCESSES[@]} - 1; i >= 0; i--)); do
    name=${PROCESSES[$i]}
    [[ "$name" == kubelet ]] || stop "$name"
  done
  # kube-proxy's rules, the pods' network namespaces, the bridge
  if [[ -x "$NODE_BIN/kube-proxy" ]]; then "$NODE_BIN/kube-proxy" --cleanup > /dev/null 2>&1 || true; fi
  iptables_cleanup
  for i in /run/netns/cni-*; do
    [[ -e "$i" ]] || continue
    umount "$i" 2> /dev/null || true
    rm -f "$i"
  done
  ip link del "$NODE_BRIDGE" 2> /dev/null || true
  rm -rf "$NODE_DIR/cni/ipam"
  # everything mounted under the node's directory (pod volumes, container root filesystems)
  { grep -o " $NODE_DIR/[^ ]*" /proc/self/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2> /dev/null || true; done
  [[ -x "$NODE_BIN/kubectl" ]] && unmerge_context
  log "down"
}

# iptables_cleanup - the kubelet's own chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY,
# KUBE-IPTABLES-HINT), which kube-proxy --cleanup leaves: the jumps to them, then them
iptables_cleanup() {
  local t rule chain
  for t in filter nat mangle; do
    while read -r rule; do
      # shellcheck disable=SC2086 # a rule is words
      iptables -t "$t" -D ${rule#-A } 2> /dev/null || true
    done < <(iptables -t "$t" -S 2> /dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j KUBE-' || true)
    for chain in $(iptables -t "$t" -S 2> /dev/null | sed -n 's/^-N \(KUBE-[A-Z0-9-]*\)$/\1/p'); do
      iptables -t "$t" -F "$chain" 2> /dev/null || true
      iptables -t "$t" -X "$chain" 2> /dev/null || true
    done
  done
}

status() {
  local name rc=0
  for name in "${PROCESSES[@]}"; do
    if alive "$name"; then printf '%-24s running (pid %s)\n' "$name" "$(cat "$PIDS/$name.pid")"
    else printf '%-24s stopped\n' "$name"; rc=1; fi
  done
  return $rc
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  purge) down; rm -rf "$NODE_DIR"; log "purged $NODE_DIR" ;;
  volumes) NODE_BIN="$REPO_ROOT/.tools/k8s-node/bin"; alive kube-apiserver || die "the node is not up"; volumes ;;
  status) status ;;
  images) shift; NODE_BIN="$REPO_ROOT/.tools/k8s-node/bin"; alive containerd || die "the node is not up"
    (($#)) || set -- localhost/chronik-server:dev=chronik-server:dev localhost/chronik-harness:dev=chronik-harness:dev
    import_images "$@" ;;
  kubeconfig) echo "$KUBECONFIG_NODE" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
