#!/usr/bin/env bash
# install-k8s-tools.sh - the tools `make k8s-test` (k8s-perf/tests/test.sh)
# needs, project-local and pinned; prints nothing on stdout but the
# kustomize command to use (e.g. `KUSTOMIZE=$(scripts/install-k8s-tools.sh)`).
#
#   kustomize     `kubectl kustomize` when kubectl is installed, else
#                 sigs.k8s.io/kustomize/kustomize/v5 (go install) -> .tools/bin
#   kubeconform   github.com/yannh/kubeconform (go install) -> .tools/bin
#   .tools/k8s-venv   Python venv with k8s-perf/tests/requirements.txt
#                 (kubernetes-validate: the Kubernetes JSON schemas; PyYAML)
#   prometheus-operator   the Go module (go mod download) whose
#                 example/prometheus-operator-crd/ holds the ServiceMonitor and
#                 PodMonitor CRDs; its directory is written to
#                 .tools/k8s-crd-dir for k8s-perf/tests/gen_schemas.py
#   prometheus, promtool   Debian's package (scripts/install-system-deps.sh --run)
# (chronik-loadgen, which the live checks run, is scripts/install-loadgen.sh's.)
#
# Idempotent and offline-tolerant: what is installed at the pinned version is
# never fetched again (a re-run touches no network).
# Needs: Go (PATH or /usr/local/go/bin), python3 with venv.
# Env: TOOLS_DIR (default <repo>/.tools), KUSTOMIZE_VERSION, KUBECONFORM_VERSION,
#      PROMETHEUS_OPERATOR_VERSION, K8S_TOOLS_FORCE_GO_KUSTOMIZE=1 (ignore kubectl).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${TOOLS_DIR:-$REPO_ROOT/.tools}"
TOOLS_BIN="$TOOLS_DIR/bin"
VENV="$TOOLS_DIR/k8s-venv"
KUSTOMIZE_VERSION="${KUSTOMIZE_VERSION:-v5.8.2}"
KUBECONFORM_VERSION="${KUBECONFORM_VERSION:-v0.8.0}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
K8S_TOOLS_FORCE_GO_KUSTOMIZE="${K8S_TOOLS_FORCE_GO_KUSTOMIZE:-0}"
REQ="$REPO_ROOT/k8s-perf/tests/requirements.txt"

log() { printf '[install-k8s-tools] %s\n' "$*" >&2; }
mkdir -p "$TOOLS_BIN"

# shellcheck source=scripts/go-scratch.sh
source "$REPO_ROOT/scripts/go-scratch.sh"

# -- kustomize -------------------------------------------------------------------
if [[ "$K8S_TOOLS_FORCE_GO_KUSTOMIZE" != 1 ]] && command -v kubectl > /dev/null 2>&1 \
   && kubectl kustomize --help > /dev/null 2>&1; then
  KUSTOMIZE_CMD="kubectl kustomize"
  log "kustomize: $(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: //p') (kubectl kustomize)"
else
  # go-installed binaries report no version of their own: a stamp file records it
  if [[ ! -x "$TOOLS_BIN/kustomize" || "$(cat "$TOOLS_BIN/.kustomize-version" 2>/dev/null || true)" != "$KUSTOMIZE_VERSION" ]]; then
    go_find || { log "error: go not found (needed to install kustomize)"; exit 1; }
    log "installing kustomize $KUSTOMIZE_VERSION (go install)"
    (go_scratch "$TOOLS_DIR" && GOBIN="$TOOLS_BIN" GOFLAGS=-buildvcs=false go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION" >&2)
    echo "$KUSTOMIZE_VERSION" > "$TOOLS_BIN/.kustomize-version"
  fi
  KUSTOMIZE_CMD="$TOOLS_BIN/kustomize build"
  log "kustomize: $KUSTOMIZE_VERSION ($TOOLS_BIN/kustomize)"
fi

# -- kubeconform -------------------------------------------------------------------
if [[ ! -x "$TOOLS_BIN/kubeconform" || "$(cat "$TOOLS_BIN/.kubeconform-version" 2>/dev/null || true)" != "$KUBECONFORM_VERSION" ]]; then
  go_find || { log "error: go not found (needed to install kubeconform)"; exit 1; }
  log "installing kubeconform $KUBECONFORM_VERSION (go install)"
  (go_scratch "$TOOLS_DIR" && GOBIN="$TOOLS_BIN" GOFLAGS=-buildvcs=false go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" >&2)
  echo "$KUBECONFORM_VERSION" > "$TOOLS_BIN/.kubeconform-version"
fi
log "kubeconform: $KUBECONFORM_VERSION"

# -- Python venv (kubernetes-validate, PyYAML) --------------------------------------
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [[ -d "$VENV" ]] && ! "$VENV/bin/python" "$REPO_ROOT/scripts/runctl.py" has-modules 2>/dev/null; then
  log "$VENV is broken, recreating"
  rm -rf "$VENV"
fi
if [[ "$(cat "$VENV/.requirements.sha256" 2>/dev/null || true)" != "$want" ]] \
   || ! "$VENV/bin/python" "$REPO_ROOT/scripts/runctl.py" has-modules kubernetes_validate yaml 2>/dev/null; then
  log "creating $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ" >&2
  echo "$want" > "$VENV/.requirements.sha256"
fi
log "python: kubernetes-validate $("$VENV/bin/python" -m pip show --disable-pip-version-check kubernetes-validate | sed -n 's/^Version: //p')"

# -- prometheus-operator CRDs (Go module source) ---------------------------------------
crd_dir_file="$TOOLS_DIR/k8s-crd-dir"
crd_dir=$(cat "$crd_dir_file" 2>/dev/null || true)
if [[ -z "$crd_dir" || ! -f "$crd_dir/monitoring.coreos.com_servicemonitors.yaml" || "$crd_dir" != *"@$PROMETHEUS_OPERATOR_VERSION/"* ]]; then
  go_find || { log "error: go not found (needed to download the prometheus-operator module)"; exit 1; }
  log "downloading github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION (go mod download)"
  mod_dir=$(cd "$TOOLS_DIR" && go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
    | "$VENV/bin/python" "$REPO_ROOT/scripts/runctl.py" json-field Dir)
  crd_dir="$mod_dir/example/prometheus-operator-crd"
  [[ -f "$crd_dir/monitoring.coreos.com_servicemonitors.yaml" ]] || { log "error: no CRDs in $crd_dir"; exit 1; }
  echo "$crd_dir" > "$crd_dir_file"
fi
log "prometheus-operator CRDs: $crd_dir"

# -- prometheus + promtool (Debian) ----------------------------------------------------
if ! command -v prometheus > /dev/null 2>&1 || ! command -v promtool > /dev/null 2>&1; then
  bash "$REPO_ROOT/scripts/install-system-deps.sh" --run >&2
fi
log "prometheus: $(prometheus --version 2>&1 | head -n1)"

echo "$KUSTOMIZE_CMD"
