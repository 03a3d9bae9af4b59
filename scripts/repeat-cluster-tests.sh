#!/usr/bin/env bash
# scripts/repeat-cluster-tests.sh - runs the 3-node cluster tests N times in a
# row (default 20) and stops at the first failure, keeping that run's output.
# Intermittent cluster failures (timing, restarts, elections) show up only
# when a suite is repeated; this is how a fix for one is shown to hold.
#
#   scripts/repeat-cluster-tests.sh [N]        (make cluster-soak)
#
# Needs: cargo. Output: .run/cluster-soak/run-<i>.log, a summary line per run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

RUNS="${1:-${RUNS:-20}}"
OUT="${OUT:-.run/cluster-soak}"
CARGO="${CARGO:-cargo}"
mkdir -p "$OUT"

# Build once, then run the test executables themselves, so every run tests
# the same code even if the tree changes meanwhile.
binaries=()
while read -r exe; do binaries+=("$exe"); done < <(
  { "$CARGO" test --release --workspace --test cluster --no-run 2>&1
    "$CARGO" test --release --workspace --test restart_readiness --test quorum --no-run 2>&1; } \
    | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
[ "${#binaries[@]}" -eq 3 ] || { echo "expected 3 test executables, found ${#binaries[@]}" >&2; exit 1; }
# The broker binary the tests start is pinned too (a later build replaces
# target/release/chronik-server). --release --workspace: the artifacts make
# build and make test use, so nothing is compiled a second time.
CARGO="$CARGO" bash scripts/build-release.sh
cp target/release/chronik-server "$OUT/chronik-server"
export CHRONIK_TEST_SERVER_BIN="$PWD/$OUT/chronik-server"
pinned=()
for exe in "${binaries[@]}"; do
  cp "$exe" "$OUT/$(basename "$exe")"
  pinned+=("$PWD/$OUT/$(basename "$exe")")
done
binaries=("${pinned[@]}")

started=$(date +%s)
for i in $(seq 1 "$RUNS"); do
  log="$OUT/run-$i.log"
  t0=$(date +%s)
  ok=1
  : >"$log"
  for exe in "${binaries[@]}"; do
    "$exe" >>"$log" 2>&1 || { ok=0; break; }
  done
  if [ "$ok" -eq 1 ]; then
    echo "run $i/$RUNS: ok ($(( $(date +%s) - t0 )) s)"
  else
    echo "run $i/$RUNS: FAILED ($(( $(date +%s) - t0 )) s); output in $log" >&2
    grep -E '^test .*FAILED|^Error:|panicked at' "$log" >&2 || true
    exit 1
  fi
done
echo "all $RUNS runs passed in $(( $(date +%s) - started )) s"
