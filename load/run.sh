#!/usr/bin/env bash
# load/run.sh - run one load plan against running ingestors and keep its results.
#
#   load/run.sh PLAN --targets URL[,URL...] [--results DIR] [--generators N]
#               [--prometheus-addrs ADDR[,ADDR...]] [chronik-loadgen run flags...]
#   load/run.sh smoke --targets http://127.0.0.1:8080 --rate 50 --duration 30s
#   load/run.sh blocking-batch --targets http://127.0.0.1:8080 --scale 0.01 --duration-scale 0.05 --generators 2
#
# PLAN is a file name in load/plans/ without .json, or a path to a plan file.
# Builds chronik-loadgen when missing or stale (scripts/install-loadgen.sh),
# records RUN_ID and GIT_COMMIT, and with --generators N starts N generators
# on this machine behind one start barrier (generator 0 listens on a free
# loopback port), each offering 1/N of the plan's rates, then pools their raw
# results (`chronik-loadgen merge`) into DIR/merged-<plan>.json.
# --prometheus-addrs gives generator i the i-th address for its live /metrics.
#
# Exit status: chronik-loadgen's (0 thresholds held, 99 a threshold failed,
# 2 bad plan or flag, 3 a target not ready, 1 other); with several generators
# the first generator failure other than 99, else the merge's verdict.
#
# Env knobs (all optional):
#   LOADGEN_BIN   the binary            (default: scripts/install-loadgen.sh's)
#   RUN_ID        recorded in the results (default load-<plan>-<UTC timestamp>)
#   GIT_COMMIT    recorded in the results (default git rev-parse HEAD)
set -euo pipefail

LOAD_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$LOAD_DIR/.." && pwd)"

if [[ $# -lt 1 || "$1" == -* ]]; then
  names=("$LOAD_DIR"/plans/*.json); names=("${names[@]##*/}")
  echo "usage: $0 PLAN --targets URL[,URL...] [--results DIR] [--generators N] [flags]   (plans: ${names[*]%.json})" >&2
  exit 2
fi
PLAN="$1"; shift
[[ -f "$PLAN" ]] || PLAN="$LOAD_DIR/plans/$PLAN.json"
[[ -f "$PLAN" ]] || { echo "no such plan: $PLAN" >&2; exit 2; }
NAME="$(basename "$PLAN" .json)"

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
RESULTS="" GENERATORS=1 PROM_ADDRS="" ARGS=()
while (($#)); do
  case $1 in
    --results) RESULTS=$2; shift 2 ;;
    --results=*) RESULTS=${1#*=}; shift ;;
    --generators) GENERATORS=$2; shift 2 ;;
    --generators=*) GENERATORS=${1#*=}; shift ;;
    --prometheus-addrs) PROM_ADDRS=$2; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
[[ "$GENERATORS" =~ ^[1-9][0-9]?$ ]] || { echo "--generators must be 1..99" >&2; exit 2; }
RESULTS="${RESULTS:-$REPO_ROOT/results/load-$STAMP}"
RUN_ID="${RUN_ID:-load-$NAME-$STAMP}"
GIT_COMMIT="${GIT_COMMIT:-$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}"
LOADGEN_BIN="${LOADGEN_BIN:-$("$REPO_ROOT/scripts/install-loadgen.sh")}"
mkdir -p "$RESULTS"
rm -rf "$RESULTS"/gen-* "$RESULTS/merged-$NAME.json"
COMMON=(--results "$RESULTS" --run-id "$RUN_ID" --git-commit "$GIT_COMMIT" --generators "$GENERATORS")
IFS=, read -r -a PROM <<< "$PROM_ADDRS"
# prom_flag I - generator I's --prometheus-addr, when one was given
prom_flag() { [[ -n "${PROM[$1]:-}" ]] && echo "--prometheus-addr=${PROM[$1]}"; }

if ((GENERATORS == 1)); then
  rc=0
  # shellcheck disable=SC2046 # prom_flag prints one word or nothing
  "$LOADGEN_BIN" run "$PLAN" "${COMMON[@]}" --index 0 $(prom_flag 0) "${ARGS[@]}" || rc=$?
else
  # a free loopback port for generator 0's barrier
  port=$(python3 "$REPO_ROOT/scripts/runctl.py" free-port)
  pids=()
  for ((i = 0; i < GENERATORS; i++)); do
    if ((i == 0)); then barrier=(--barrier-listen "127.0.0.1:$port"); else barrier=(--barrier-peer "http://127.0.0.1:$port"); fi
    # shellcheck disable=SC2046 # prom_flag prints one word or nothing
    "$LOADGEN_BIN" run "$PLAN" "${COMMON[@]}" --index "$i" $(prom_flag "$i") "${barrier[@]}" "${ARGS[@]}" \
      > "$RESULTS/gen-$i.log" 2>&1 &
    pids+=($!)
  done
  trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM
  rc=0
  for ((i = 0; i < GENERATORS; i++)); do
    grc=0; wait "${pids[$i]}" || grc=$?
    if ((grc != 0 && grc != 99)); then
      echo "load/run.sh: generator $i exited $grc (log: $RESULTS/gen-$i.log)" >&2
      tail -n 5 "$RESULTS/gen-$i.log" >&2
      ((rc == 0)) && rc=$grc
    fi
  done
  trap - EXIT INT TERM
  if ((rc == 0)); then
    "$LOADGEN_BIN" merge --results "$RESULTS" || rc=$?
  fi
fi
if [[ ! -s "$RESULTS/merged-$NAME.json" ]]; then
  echo "load/run.sh: $RESULTS/merged-$NAME.json was not written (exit $rc)" >&2
  exit $((rc == 0 ? 1 : rc))
fi
echo "load/run.sh: results in $RESULTS (exit $rc)" >&2
exit "$rc"
