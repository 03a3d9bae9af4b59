#!/usr/bin/env bash
# install-k6.sh - make sure k6 (pinned version) is installed in the project-local
# tool dir and print its path on stdout (the only thing printed there, so callers
# can do `K6=$(scripts/install-k6.sh)`).
#
# Builds k6 from source with `go install` through the Go module proxy (about
# 4 minutes and ~70 MiB on a cold 2-core machine; no prebuilt binary is fetched).
# Idempotent: when <repo>/.tools/bin/k6 already reports the pinned version,
# nothing is built and no network is touched.
#
# Needs: Go >= 1.24 on PATH (or at /usr/local/go/bin).
#
# Env knobs (all optional):
#   K6_VERSION   version to install            (default v1.8.1)
#   TOOLS_BIN    where the binary goes         (default <repo>/.tools/bin)
#   K6_FORCE=1   rebuild even when present
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K6_VERSION="${K6_VERSION:-v1.8.1}"
TOOLS_BIN="${TOOLS_BIN:-$REPO_ROOT/.tools/bin}"
K6_FORCE="${K6_FORCE:-0}"
K6_BIN="$TOOLS_BIN/k6"

log() { printf '[install-k6] %s\n' "$*" >&2; }

installed_version() {
  # `k6 version` prints e.g. "k6 v1.8.1 (commit/..., go1.26.8, linux/amd64)"
  "$K6_BIN" version 2>/dev/null | awk 'NR == 1 { print $2 }'
}

if [[ "$K6_FORCE" != 1 && -x "$K6_BIN" && "$(installed_version)" == "$K6_VERSION" ]]; then
  log "k6 $K6_VERSION already installed"
  echo "$K6_BIN"
  exit 0
fi

# shellcheck source=scripts/go-scratch.sh
source "$REPO_ROOT/scripts/go-scratch.sh"
go_find || { log "error: go not found (needed to build k6 from source)"; exit 1; }
go_scratch "$REPO_ROOT/.tools"

mkdir -p "$TOOLS_BIN"
log "building k6 $K6_VERSION with $(go version | awk '{print $3}') into $TOOLS_BIN (takes a few minutes cold)"
GOBIN="$TOOLS_BIN" go install "go.k6.io/k6@$K6_VERSION" >&2

got="$(installed_version)"
if [[ "$got" != "$K6_VERSION" ]]; then
  log "error: $K6_BIN reports '${got:-nothing}', wanted $K6_VERSION"
  exit 1
fi
log "installed k6 $got"
echo "$K6_BIN"
