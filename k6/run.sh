#!/usr/bin/env bash
# k6/run.sh - run one k6 scenario against running ingestors and keep its summary.
#
#   k6/run.sh SCENARIO [extra k6 run args...]
#   INGESTOR_URLS=http://127.0.0.1:8080 k6/run.sh smoke
#   INGESTOR_URLS=... VU_SCALE=0.01 DURATION_SCALE=0.05 k6/run.sh blocking-batch
#
# SCENARIO is a file name in k6/scenarios/ without .js. Every scenario knob is
# read by k6 from the environment (k6/README.md lists them). This wrapper
# installs k6 when missing (scripts/install-k6.sh), creates RESULTS_DIR (k6's
# handleSummary cannot), stamps the run with RUN_ID and GIT_COMMIT, and
# fails when the summary JSON was not written even if k6 itself exited 0.
#
# Exit status: k6's (0 ok, 99 a threshold failed, 107 script error, ...), or
# 1 when the summary file is missing.
#
# Needs: Go (first run only, to build k6), a running chronik-ingestor.
#
# Env knobs (all optional):
#   K6_BIN        k6 binary             (default: scripts/install-k6.sh's, built if missing)
#   RESULTS_DIR   where the summary goes (default <repo>/results/k6-<UTC timestamp>)
#   RUN_ID        recorded in the summary (default k6-<scenario>-<UTC timestamp>)
set -euo pipefail

K6_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$K6_DIR/.." && pwd)"

if [[ $# -lt 1 ]]; then
  names=("$K6_DIR"/scenarios/*.js)
  names=("${names[@]##*/}")
  echo "usage: $0 SCENARIO [k6 run args...]   (scenarios: ${names[*]%.js})" >&2
  exit 2
fi
SCENARIO="$1"
shift
SCRIPT="$K6_DIR/scenarios/$SCENARIO.js"
[[ -f "$SCRIPT" ]] || { echo "no such scenario: $SCRIPT" >&2; exit 2; }

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
K6_BIN="${K6_BIN:-$("$REPO_ROOT/scripts/install-k6.sh")}"
RESULTS_DIR="${RESULTS_DIR:-$REPO_ROOT/results/k6-$STAMP}"
RUN_ID="${RUN_ID:-k6-$SCENARIO-$STAMP}"
GIT_COMMIT="${GIT_COMMIT:-$(git -C "$REPO_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}"
export RESULTS_DIR RUN_ID GIT_COMMIT

mkdir -p "$RESULTS_DIR"
SUMMARY="$RESULTS_DIR/k6-$SCENARIO-summary.json"
rm -f "$SUMMARY"

rc=0
"$K6_BIN" run --quiet "$@" "$SCRIPT" || rc=$?

if [[ ! -s "$SUMMARY" ]]; then
  echo "k6/run.sh: $SUMMARY was not written (k6 exit $rc)" >&2
  exit $(( rc == 0 ? 1 : rc ))
fi
echo "k6/run.sh: summary $SUMMARY (k6 exit $rc)" >&2
exit "$rc"
