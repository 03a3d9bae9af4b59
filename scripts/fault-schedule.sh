#!/usr/bin/env bash
# fault-schedule.sh - the long randomized fault schedule: a 3-node cluster in
# network namespaces under an idempotent acks=all producer and a committing
# consumer group, with kill -9 / restart, SIGSTOP, isolation and
# non-transitive cuts drawn from a printed seed, then the checker (no
# acknowledged loss, no duplicates, per-partition order, committed offsets
# never going backwards). `make test` runs a 40 s schedule of the same test.
#
#   scripts/fault-schedule.sh [SECONDS] [SEED]     (default 600 s, a fresh seed)
#
# Needs root (network namespaces) and iproute2; bounded: the schedule stops
# after SECONDS, each fault lasts at most 5 s and recovery at most 40 s.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECS="${1:-600}"
export CHRONIK_FAULT_SECS="$SECS"
[[ -n "${2:-}" ]] && export CHRONIK_FAULT_SEED="$2"
cd "$REPO_ROOT"
"${CARGO:-cargo}" test --release --workspace --test fault_schedule -- --nocapture 2>&1 | tee "${FAULT_LOG:-/dev/null}" \
  | grep -E '^fault schedule|^\[ *[0-9.]+ s\]|^Error|passed|FAILED|panicked'
