#!/usr/bin/env bash
# run-all.sh - the project's main job (for now; the k6 pipeline replaces it):
# build the release broker, start it on 127.0.0.1 (free ports), run a real
# produce/consume round trip with confluent-kafka that verifies every message
# came back exactly once and in order, write results/<run-id>/summary.json,
# stop the broker. Exit status non-zero on any failure.
#
#   ./run-all.sh [--messages N] [--size BYTES] [--partitions P] [--keep] [--no-build]
#
#   --messages N    messages in the round trip (default 10000)
#   --size BYTES    value size (default 256)
#   --partitions P  topic partitions (default 1)
#   --keep          keep the broker's data dir (.run/<run-id>/) after the run
#   --no-build      use the existing target/release/chronik-server
#
# Needs: cargo, python3 (the .venv with confluent-kafka is created on demand
# by scripts/install-python-deps.sh), curl.
# Env: RUN_ID (default UTC timestamp), RESULTS_ROOT (default <repo>/results),
#      WAL_PROFILE (default medium), PRODUCE_PROFILE (default balanced),
#      ACKS (default all), COMPRESSION (default none), CHRONIK_SERVER_BIN.
# Processes it starts are recorded in .run/pids; ./cleanup.sh stops leftovers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source scripts/lib.sh

MESSAGES="${MESSAGES:-10000}"
SIZE="${SIZE:-256}"
PARTITIONS="${PARTITIONS:-1}"
KEEP="${KEEP:-0}"
BUILD="${BUILD:-1}"
WAL_PROFILE="${WAL_PROFILE:-medium}"
PRODUCE_PROFILE="${PRODUCE_PROFILE:-balanced}"
ACKS="${ACKS:-all}"
COMPRESSION="${COMPRESSION:-none}"
RUN_ID="${RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)}"
RESULTS_ROOT="${RESULTS_ROOT:-$REPO_ROOT/results}"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --messages) MESSAGES=$2; shift;;
    --size) SIZE=$2; shift;;
    --partitions) PARTITIONS=$2; shift;;
    --keep) KEEP=1;;
    --no-build) BUILD=0;;
    -h|--help) usage 0;;
    *) echo "unknown option: $1" >&2; usage;;
  esac
  shift
done
[[ "$MESSAGES" =~ ^[1-9][0-9]*$ ]] || die "--messages must be a positive integer"

# two runs in the same second get distinct ids
base_id=$RUN_ID; n=1
while [[ -e "$RUN_DIR/$RUN_ID" || -e "$RESULTS_ROOT/$RUN_ID" ]]; do n=$((n + 1)); RUN_ID="$base_id-$n"; done
WORK="$RUN_DIR/$RUN_ID"
OUT="$RESULTS_ROOT/$RUN_ID"
mkdir -p "$WORK" "$OUT"
STATUS=failed
STARTED_AT=$(date -u +%FT%TZ)

on_exit() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "${SMOKE_PID:-}" ]]; then
    stop_pid "$SMOKE_PID" 5 || true
    pid_forget "$SMOKE_PID"
  fi
  stop_chronik || log "broker did not shut down cleanly (see $WORK/stderr.log)"
  # broker logs are results too; the data dir is bulk and goes unless --keep
  cp "$WORK"/stdout.log "$WORK"/stderr.log "$OUT"/ 2>/dev/null || true
  if ((KEEP)); then
    log "kept broker data in $WORK/data"
  else
    rm -rf "$WORK"
  fi
  if ((rc != 0)); then log "run-all: FAILED (exit $rc); results in $OUT"; fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "run-all: run id $RUN_ID"
if ((BUILD)); then
  log "building release broker"
  cargo build --release -p chronik-server
fi
bash scripts/install-python-deps.sh
PY="${VENV:-$REPO_ROOT/.venv}/bin/python"

start_chronik "$WORK" --wal-profile "$WAL_PROFILE" --produce-profile "$PRODUCE_PROFILE" \
  --auto-create-topics false
BROKER_LINE=$(grep -m1 '^LISTENING ' "$WORK/stdout.log")

SMOKE_RC=0
"$PY" scripts/smoke_roundtrip.py --bootstrap "$CHRONIK_KAFKA" --messages "$MESSAGES" \
  --size "$SIZE" --partitions "$PARTITIONS" --acks "$ACKS" --compression "$COMPRESSION" \
  --json-out "$OUT/smoke.json" &
SMOKE_PID=$!
pid_record "$SMOKE_PID" smoke_roundtrip
wait "$SMOKE_PID" || SMOKE_RC=$?
pid_forget "$SMOKE_PID"
SMOKE_PID=""

SHUTDOWN_RC=0
stop_chronik || SHUTDOWN_RC=$?
((SMOKE_RC == 0 && SHUTDOWN_RC == 0)) && STATUS=passed

# summary.json: the smoke figures plus what is needed to reproduce the run
RUN_ID="$RUN_ID" STATUS="$STATUS" STARTED_AT="$STARTED_AT" GIT="$(git_describe)" \
BIN="$CHRONIK_SERVER_BIN" BROKER_LINE="$BROKER_LINE" SMOKE_RC="$SMOKE_RC" SHUTDOWN_RC="$SHUTDOWN_RC" \
WAL_PROFILE="$WAL_PROFILE" PRODUCE_PROFILE="$PRODUCE_PROFILE" SMOKE_JSON="$OUT/smoke.json" \
"$PY" - > "$OUT/summary.json" <<'PY'
import json, os, platform, datetime
e = os.environ
try:
    smoke = json.load(open(e["SMOKE_JSON"]))
except (OSError, ValueError):
    smoke = None
print(json.dumps({
    "schema": "chronik.run-all.summary/1",
    "run_id": e["RUN_ID"],
    "status": e["STATUS"],
    "started_at": e["STARTED_AT"],
    "finished_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "git": e["GIT"],
    "host": {"cores": os.cpu_count(), "machine": platform.machine(), "kernel": platform.release()},
    "broker": {"binary": e["BIN"], "listening": e["BROKER_LINE"],
               "wal_profile": e["WAL_PROFILE"], "produce_profile": e["PRODUCE_PROFILE"],
               "shutdown_exit_status": int(e["SHUTDOWN_RC"])},
    "smoke_exit_status": int(e["SMOKE_RC"]),
    "smoke": smoke,
}, indent=2))
PY

log "summary: $OUT/summary.json"
if [[ $STATUS != passed ]]; then
  ((SMOKE_RC != 0)) && log "smoke round trip failed (exit $SMOKE_RC)"
  ((SHUTDOWN_RC != 0)) && log "broker exit status $SHUTDOWN_RC after SIGTERM (graceful shutdown expected 0)"
  exit 1
fi
log "run-all: passed"
