#!/usr/bin/env bash
# install-k8s-node.sh - the parts of a real one-machine Kubernetes node, built
# once and cached under .tools/k8s-node/bin (scripts/k8s-node.sh starts them).
# Prints that directory.
#
#   kube-apiserver, controller-manager, scheduler, kubectl, etcd
#                    scripts/install-kube.sh's (linked, not rebuilt)
#   kubelet, kube-proxy        the same k8s.io/kubernetes release, same wrapper module
#   containerd, containerd-shim-runc-v2, ctr   github.com/containerd/containerd/v2
#   bridge, host-local, loopback, portmap     github.com/containernetworking/plugins
#   coredns          github.com/coredns/coredns (runs as a process of this machine)
#   prometheus       github.com/prometheus/prometheus, Kubernetes discovery only
#                    (-tags remove_all_sd,enable_kubernetes_sd), for the node's
#                    monitoring pod: Debian's package is built without Kubernetes
#                    discovery ("field kubernetes_sd_configs not found")
#   runc, conntrack  Debian's packages
#   pause            k8s-perf/node/pause (our own; the pod sandbox's process)
#
# About 12 minutes and 3 GB of memory cold on 2 cores (Go builds; the module
# sources and build cache are deleted at the end, the binaries keep ~0.5 GB);
# a re-run with every binary present at its pinned version does nothing.
#
# Env: KUBE_VERSION (install-kube.sh's), CONTAINERD_VERSION (v2.4.2),
#      CNI_PLUGINS_VERSION (v1.10.0), COREDNS_VERSION (v1.15.0), PROMETHEUS_VERSION
#      (v0.316.0: the Go module's numbering of Prometheus 3.16), TOOLS_DIR.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${TOOLS_DIR:-$REPO_ROOT/.tools}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.10.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
HOME_DIR="$TOOLS_DIR/k8s-node"
BIN="$HOME_DIR/bin"
STAMP="$BIN/.versions"

log() { printf '[install-k8s-node] %s\n' "$*" >&2; }
mkdir -p "$BIN"

KUBE_BIN="$("$REPO_ROOT/scripts/install-kube.sh")"
KUBE_VERSION="$("$KUBE_BIN/kube-apiserver" --version | awk '{print $2}')"
WANT="kubernetes=$KUBE_VERSION containerd=$CONTAINERD_VERSION cni=$CNI_PLUGINS_VERSION coredns=$COREDNS_VERSION prometheus=$PROMETHEUS_VERSION"
NEED=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr bridge host-local loopback portmap coredns prometheus pause)
all_present() {
  local b
  for b in "${NEED[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl etcd; do
  ln -sf "$KUBE_BIN/$b" "$BIN/$b"
done

# -- Debian: runc, conntrack (kube-proxy's), iptables ----------------------------------------
missing=()
command -v runc > /dev/null 2>&1 || missing+=(runc)
command -v conntrack > /dev/null 2>&1 || missing+=(conntrack)
command -v iptables > /dev/null 2>&1 || missing+=(iptables)
if ((${#missing[@]})); then
  log "apt-get install ${missing[*]}"
  SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
    || { $SUDO apt-get update -q >&2 && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; }
fi
ln -sf "$(command -v runc)" "$BIN/runc"

if [[ "$(cat "$STAMP" 2>/dev/null || true)" == "$WANT" ]] && all_present; then
  echo "$BIN"
  exit 0
fi
# a component whose pinned version changed is built again (its binaries removed)
declare -A BINARIES=([kubernetes]="kubelet kube-proxy" [containerd]="containerd containerd-shim-runc-v2 ctr"
  [cni]="bridge host-local loopback portmap" [coredns]=coredns [prometheus]=prometheus)
for pin in $WANT; do
  if ! tr ' ' '\n' < "$STAMP" 2> /dev/null | grep -qx "$pin"; then
    for b in ${BINARIES[${pin%%=*}]}; do rm -f "$BIN/$b"; done
  fi
done

# shellcheck source=scripts/go-scratch.sh
source "$REPO_ROOT/scripts/go-scratch.sh"
go_find || { log "error: go not found"; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
go_scratch "$HOME_DIR"
# gobin PKG@VERSION NAME... - go install each package of one module release into $BIN
gobin() {
  local mod=$1; shift
  local pkg
  for pkg in "$@"; do
    [[ -x "$BIN/$(basename "$pkg")" ]] && continue
    log "go install $pkg@${mod#*@}"
    CGO_ENABLED=0 GOBIN="$BIN" go install -trimpath -tags "${GO_TAGS:-}" -ldflags "-s -w ${GO_LDFLAGS:-}" "$pkg@${mod#*@}" >&2
  done
}

# -- the pod sandbox's process ------------------------------------------------------------------
if [[ ! -x "$BIN/pause" ]]; then
  log "go build pause (k8s-perf/node/pause)"
  (cd "$REPO_ROOT/k8s-perf/node/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/pause" .) >&2
fi

# -- containerd v2 and its runc shim ------------------------------------------------------------
cd_mod="github.com/containerd/containerd/v2@$CONTAINERD_VERSION"
GO_LDFLAGS="-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
  gobin "$cd_mod" github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr

# -- CNI plugins ------------------------------------------------------------------------------------
cni="github.com/containernetworking/plugins/plugins"
gobin "x@$CNI_PLUGINS_VERSION" "$cni/main/bridge" "$cni/ipam/host-local" "$cni/main/loopback" "$cni/meta/portmap"

# -- kubelet, kube-proxy: the API server's release, through its wrapper module ------------------------
if [[ ! -x "$BIN/kubelet" || ! -x "$BIN/kube-proxy" ]]; then
  "$REPO_ROOT/scripts/install-kube.sh" --build "$BIN" kubelet kube-proxy > /dev/null
fi

# -- CoreDNS -------------------------------------------------------------------------------------------
gobin "x@$COREDNS_VERSION" github.com/coredns/coredns

# -- Prometheus, for the monitoring pod -------------------------------------------------------------
# (its version string: the module v0.3XY.Z is Prometheus 3.XY.Z)
prom_version=${PROMETHEUS_VERSION#v0.3}; prom_version="3.$((10#${prom_version%%.*})).${prom_version#*.}"
GO_LDFLAGS="-X github.com/prometheus/common/version.Version=$prom_version" GO_TAGS=remove_all_sd,enable_kubernetes_sd gobin "x@$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/prometheus

all_present || { log "error: missing after build: $(for b in "${NEED[@]}"; do [[ -x "$BIN/$b" ]] || printf '%s ' "$b"; done)"; exit 1; }
echo "$WANT" > "$STAMP"
echo "$BIN"
