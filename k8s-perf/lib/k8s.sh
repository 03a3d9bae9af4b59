# shellcheck shell=bash
# k8s-perf/lib/k8s.sh - kubectl access shared by k8s-perf/run.sh and
# k8s-perf/cleanup.sh. Sourced, not run.
#
# Owns: the one place kubectl is invoked (kc), so --context and --dry-run
# apply everywhere: in dry-run mode a mutating command is printed
# ("+ kubectl ...") instead of run; reads go through kc_read, which dry-run
# skips (printing the command, returning nothing). Also: reaching pods'
# HTTP endpoints and Prometheus through the API server's proxy (no
# port-forward, no curl in the images), rendering a kustomization.
# Needs: kubectl (with kustomize, built in), python3.
#
# Globals read: CONTEXT (kubectl context, empty = current), NAMESPACE, DRY_RUN (0/1).

K8S_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_ROOT="$(cd "$K8S_DIR/.." && pwd)"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

kubectl_cmd() {
  local cmd=(kubectl)
  [[ -n "${CONTEXT:-}" ]] && cmd+=(--context "$CONTEXT")
  printf '%s\n' "${cmd[@]}"
}

# kc ARGS... - a kubectl command that changes the cluster (printed in dry-run,
# on stderr, so `kc create ... -o yaml | kc apply -f -` shows both commands).
kc() {
  local cmd
  mapfile -t cmd < <(kubectl_cmd)
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    printf '+ %s\n' "${cmd[*]} $*" >&2
    # `... | kc apply -f -`: read what is piped in, as kubectl would; a
    # reader that exits first kills the writer with SIGPIPE (and, under
    # pipefail, the dry run).
    if [[ " $* " == *" -f - "* ]]; then cat > /dev/null; fi
    return 0
  fi
  "${cmd[@]}" "$@"
}

# kc_read ARGS... - a kubectl command that only reads (skipped in dry-run).
kc_read() {
  local cmd
  mapfile -t cmd < <(kubectl_cmd)
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    printf '+ %s\n' "${cmd[*]} $*" >&2
    return 0
  fi
  "${cmd[@]}" "$@"
}

# urlencode TEXT
urlencode() { python3 "$REPO_ROOT/scripts/runctl.py" urlencode "$1"; }

# pod_get POD PORT PATH - GET http://POD:PORT/PATH through the API server proxy
# (the body on stdout as it comes, binary included). POD_GET_TIMEOUT (a
# kubectl duration, e.g. 10s) bounds it; unset: kubectl's default (none).
pod_get() {
  kc_read get --raw "/api/v1/namespaces/$NAMESPACE/pods/$1:$2/proxy/${3#/}" \
    ${POD_GET_TIMEOUT:+--request-timeout="$POD_GET_TIMEOUT"}
}

# pod_delete POD PORT PATH - DELETE http://POD:PORT/PATH through the API
# server proxy (a generator's "results collected").
pod_delete() {
  kc delete --raw "/api/v1/namespaces/$NAMESPACE/pods/$1:$2/proxy/${3#/}" > /dev/null
}

# prom_get PATH_AND_QUERY - GET against Prometheus (PROM_SERVICE = ns/name:port)
# through the API server's service proxy, e.g. prom_get "api/v1/query?query=up".
prom_get() {
  local ns=${PROM_SERVICE%%/*} rest=${PROM_SERVICE#*/}
  kc_read get --raw "/api/v1/namespaces/$ns/services/${rest%%:*}:${rest##*:}/proxy/${1#/}"
}

# pods SELECTOR - names of the namespace's pods matching a label selector.
pods() {
  kc_read get pods -n "$NAMESPACE" -l "$1" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
}

# render DIR - the kustomization in DIR as YAML on stdout, as stock kubectl
# or kustomize builds it (no flags).
render() {
  if command -v kubectl > /dev/null 2>&1; then
    kubectl kustomize "$1"
  elif [[ -x "$REPO_ROOT/.tools/bin/kustomize" ]]; then
    "$REPO_ROOT/.tools/bin/kustomize" build "$1"
  else
    die "neither kubectl nor .tools/bin/kustomize found (scripts/install-k8s-tools.sh installs kustomize)"
  fi
}
