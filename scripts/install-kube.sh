#!/usr/bin/env bash
# install-kube.sh - a real Kubernetes control plane for the tests, built once
# and cached under .tools/kube/: kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl from the k8s.io/kubernetes Go module, etcd from
# Debian's etcd-server, and kwok/kwokctl (sigs.k8s.io/kwok), which fakes the
# nodes the pods are scheduled on. Prints the directory of the binaries.
#
#   scripts/install-kube.sh        -> .tools/kube/bin (kube-apiserver, ..., kwokctl)
#   scripts/install-kube.sh --build OUTDIR CMD...   also build k8s.io/kubernetes/cmd/CMD
#                                  (kubelet, kube-proxy: install-k8s-node.sh) into OUTDIR
#
# k8s.io/kubernetes is not meant to be a dependency: its go.mod points every
# k8s.io/<staging> module at ./staging/src. A wrapper module
# (.tools/kube/src) requires it and `replace`s each of those with the staging
# module's own release (v0.<minor>.<patch>), read from its go.mod, and the
# version ldflags are set so clients see v1.36.3, not v0.0.0. About 5 minutes
# and 2.2 GB of memory cold, 5 GB of scratch disk released at the end (the
# binaries keep 0.4 GB); a re-run with the binaries present does nothing.
#
# Needs: Go, apt (etcd-server). Env: KUBE_VERSION (default v1.36.3),
# KWOK_VERSION (default v0.8.0), TOOLS_DIR.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${TOOLS_DIR:-$REPO_ROOT/.tools}"
KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
HOME_DIR="$TOOLS_DIR/kube"
BIN="$HOME_DIR/bin"
SRC="$HOME_DIR/src"
STAMP="$BIN/.versions"
WANT="kubernetes=$KUBE_VERSION kwok=$KWOK_VERSION"
EXTRA_OUT=""
EXTRA_CMDS=()
if [[ "${1:-}" == "--build" ]]; then
  EXTRA_OUT="$2"; shift 2; EXTRA_CMDS=("$@")
fi

log() { printf '[install-kube] %s\n' "$*" >&2; }
mkdir -p "$BIN" "$SRC"
# One build at a time: `make test` starts one early in the background
# (kube-prefetch) and k8s-apiserver-test's own call waits for it here.
exec 8> "$HOME_DIR/.install.lock"
flock 8
# shellcheck source=scripts/go-scratch.sh
source "$REPO_ROOT/scripts/go-scratch.sh"
go_find || { log "error: go not found"; exit 1; }

if [[ "$(cat "$STAMP" 2>/dev/null || true)" == "$WANT" ]] && ((${#EXTRA_CMDS[@]} == 0)) \
   && [[ -x "$BIN/kube-apiserver" && -x "$BIN/kwokctl" && -x "$BIN/etcd" ]]; then
  echo "$BIN"
  exit 0
fi

# -- etcd (Debian) -------------------------------------------------------------------
if ! command -v etcd > /dev/null 2>&1; then
  log "apt-get install etcd-server"
  SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get install -y -q --no-install-recommends etcd-server >&2 \
    || { $SUDO apt-get update -q >&2 && $SUDO apt-get install -y -q --no-install-recommends etcd-server >&2; }
  # Debian starts a system etcd on 2379; the tests run their own.
  if command -v systemctl > /dev/null 2>&1; then $SUDO systemctl disable --now etcd > /dev/null 2>&1 || true; fi
  pkill -x etcd 2> /dev/null || true
fi
ln -sf "$(command -v etcd)" "$BIN/etcd"

# -- kube-apiserver, controller-manager, scheduler, kubectl ------------------------------
minor=${KUBE_VERSION#v1.}
staging="v0.$minor"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
go_scratch "$HOME_DIR"
cd "$SRC"
if [[ ! -f go.mod ]] || ! grep -q "k8s.io/kubernetes $KUBE_VERSION" go.mod; then
  log "wrapper module for k8s.io/kubernetes $KUBE_VERSION"
  rm -f go.mod go.sum
  go mod init chronik.local/kubebuild > /dev/null 2>&1
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -nE 's/^\s*"GoMod": "(.*)",?$/\1/p')
  [[ -s "$gomod" ]] || { log "error: go mod download k8s.io/kubernetes@$KUBE_VERSION gave no go.mod"; exit 1; }
  {
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo "replace ("
    sed -nE 's#^\s*(k8s\.io/[a-z0-9-]+) => \./staging/src/.*#\t\1 => \1 '"$staging"'#p' "$gomod"
    echo ")"
  } >> go.mod
  printf 'package main\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n)\n\nfunc main() {}\n' > tools.go
  go mod tidy >&2
fi
ldflags="-s -w"
for v in "gitVersion=$KUBE_VERSION" "gitMajor=1" "gitMinor=${minor%%.*}" "gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
  ldflags+=" -X k8s.io/component-base/version.$v -X k8s.io/client-go/pkg/version.$v"
done
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  if [[ ! -x "$BIN/$cmd" || "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]]; then
    log "go build $cmd $KUBE_VERSION"
    go build -trimpath -ldflags "$ldflags" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd" >&2
  fi
done
for cmd in "${EXTRA_CMDS[@]}"; do
  log "go build $cmd $KUBE_VERSION -> $EXTRA_OUT"
  go build -trimpath -ldflags "$ldflags" -o "$EXTRA_OUT/$cmd" "k8s.io/kubernetes/cmd/$cmd" >&2
done
if ((${#EXTRA_CMDS[@]})) && [[ "$(cat "$STAMP" 2>/dev/null || true)" == "$WANT" ]]; then
  echo "$BIN"
  exit 0
fi

# -- kwok ------------------------------------------------------------------------------------
for cmd in kwok kwokctl; do
  log "go install sigs.k8s.io/kwok/cmd/$cmd@$KWOK_VERSION"
  GOBIN="$BIN" go install "sigs.k8s.io/kwok/cmd/$cmd@$KWOK_VERSION" >&2
done
echo "$WANT" > "$STAMP"
echo "$BIN"
