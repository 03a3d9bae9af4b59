#!/usr/bin/env bash
# install-loadgen.sh - build chronik-loadgen (load/generator, the project's Go
# load generator on the vegeta library) into the project-local tool dir and
# print its path on stdout (the only thing printed there, so callers can do
# `LOADGEN=$(scripts/install-loadgen.sh)`).
#
# Static (CGO_ENABLED=0), so the same binary runs on the host and in the
# harness image. Modules come through the Go module proxy (pinned by
# load/generator/go.sum; about 20 s cold). Idempotent: nothing is built when
# the binary is newer than every file of load/generator/.
#
# Needs: Go >= 1.24 on PATH (or at /usr/local/go/bin).
#
# Env knobs (all optional):
#   TOOLS_BIN        where the binary goes   (default <repo>/.tools/bin)
#   LOADGEN_FORCE=1  rebuild even when up to date
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$REPO_ROOT/load/generator"
TOOLS_BIN="${TOOLS_BIN:-$REPO_ROOT/.tools/bin}"
BIN="$TOOLS_BIN/chronik-loadgen"

log() { printf '[install-loadgen] %s\n' "$*" >&2; }

if [[ "${LOADGEN_FORCE:-0}" != 1 && -x "$BIN" && -z "$(find "$SRC" -newer "$BIN" -type f -print -quit)" ]]; then
  echo "$BIN"
  exit 0
fi

# shellcheck source=scripts/go-scratch.sh
source "$REPO_ROOT/scripts/go-scratch.sh"
go_find || { log "error: go not found (needed to build chronik-loadgen)"; exit 1; }
# The module and build caches stay under .tools (a rebuild after an edit is
# seconds, not a fresh download).
export GOPATH="$REPO_ROOT/.tools/go" GOMODCACHE="$REPO_ROOT/.tools/go/pkg/mod" GOCACHE="$REPO_ROOT/.tools/go/cache"
mkdir -p "$TOOLS_BIN"
log "building chronik-loadgen with $(go version | awk '{print $3}') into $TOOLS_BIN"
(cd "$SRC" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o "$BIN.tmp" .) >&2
mv "$BIN.tmp" "$BIN"
"$BIN" version >&2
echo "$BIN"
