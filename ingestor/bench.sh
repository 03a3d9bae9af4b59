#!/usr/bin/env bash
# ingestor/bench.sh - HTTP ingestor throughput and CPU per message, against a
# direct-to-Kafka baseline on the same broker, in one run.
#
# Starts chronik-server (release, --wal-profile medium) and chronik-ingestor
# (release, default settings: acks=1, linger.ms=5, batch.num.messages=10000,
# snappy), then runs ingestor-load (ingestor/src/bin/ingestor-load.rs), each
# step after an uncounted warm-up, for DURATION seconds:
#   1. direct   - rdkafka straight to the broker, same producer settings and
#                 values, envelope header included (the "no HTTP" figure);
#   2. batch    - POST /produce/batch, CONNECTIONS keep-alive connections,
#                 BATCH messages of VALUE_BYTES bytes per request;
#   3. fire     - POST /produce/fire/batch, same load.
# When target/release/chronik-bench exists (CHRONIK_BENCH_BIN), step 0 runs it
# too (produce mode, acks=1, snappy, linger 5 ms, batch.size 1 MB,
# batch.num.messages 10000, CHRONIK_BENCH_CONCURRENCY tasks): the project's
# own direct figure. Prints msg/s (direct and chronik-bench: acknowledged;
# batch: acknowledged in 200s; fire: accepted in 202s; each as a ratio of
# both direct figures), request latency, the load generator's own cores, and
# CPU µs per message of the ingestor
# and of the broker (utime+stime from /proc/PID/stat over the measured
# window). The load generator shares the 2 cores with both servers.
#
#   ingestor/bench.sh                 # build (release) and run all three
#   DURATION=5 ingestor/bench.sh      # quicker
#   SKIP_BUILD=1 ingestor/bench.sh    # use the binaries already in target/release
#
# Env: DURATION (15), WARMUP (3), CONNECTIONS (128), BATCH (100), VALUE_BYTES
# (256), PARTITIONS (1, partitions of auto-created topics), WAL_PROFILE
# (medium), SKIP_BUILD (0), RUN_DIR (<repo>/.run), CHRONIK_SERVER_BIN,
# CHRONIK_BENCH_BIN, CHRONIK_BENCH_CONCURRENCY (2).
# Needs: cargo, curl, python3 (scripts/lib.sh), ~1 GB free disk under .run/.
# Safe to re-run; the trap stops what it started (by pid); ./cleanup.sh
# stops leftovers of an interrupted run.
set -euo pipefail
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../scripts/lib.sh
source "$SCRIPT_DIR/../scripts/lib.sh"

DURATION="${DURATION:-15}"
WARMUP="${WARMUP:-3}"
CONNECTIONS="${CONNECTIONS:-128}"
BATCH="${BATCH:-100}"
VALUE_BYTES="${VALUE_BYTES:-256}"
PARTITIONS="${PARTITIONS:-1}"
WAL_PROFILE="${WAL_PROFILE:-medium}"
SKIP_BUILD="${SKIP_BUILD:-0}"
CHRONIK_BENCH_BIN="${CHRONIK_BENCH_BIN:-$REPO_ROOT/target/release/chronik-bench}"
CHRONIK_BENCH_CONCURRENCY="${CHRONIK_BENCH_CONCURRENCY:-2}"
INGESTOR_BIN="$REPO_ROOT/target/release/chronik-ingestor"
LOAD_BIN="$REPO_ROOT/target/release/ingestor-load"

BENCH_DIR="$RUN_DIR/ingestor-bench-$(date -u +%Y%m%dT%H%M%SZ)-$$"
INGESTOR_PID=""
cleanup() {
  local rc=$?
  if [[ -n "$INGESTOR_PID" ]]; then
    stop_pid "$INGESTOR_PID" || true
    wait "$INGESTOR_PID" 2>/dev/null || true
    pid_forget "$INGESTOR_PID"
  fi
  stop_chronik || true
  rm -rf "$BENCH_DIR/broker/data"
  exit "$rc"
}
trap cleanup EXIT INT TERM

if [[ "$SKIP_BUILD" != 1 ]]; then
  log "building release binaries (chronik-server, chronik-ingestor, ingestor-load)"
  (cd "$REPO_ROOT" && cargo build --release -p chronik-server -p chronik-ingestor)
fi
for bin in "$CHRONIK_SERVER_BIN" "$INGESTOR_BIN" "$LOAD_BIN"; do
  [[ -x "$bin" ]] || die "$bin not found (run without SKIP_BUILD=1)"
done

mkdir -p "$BENCH_DIR/broker" "$BENCH_DIR/ingestor"
start_chronik "$BENCH_DIR/broker" --wal-profile "$WAL_PROFILE" --default-partitions "$PARTITIONS"

"$INGESTOR_BIN" --listen 127.0.0.1:0 --bootstrap-servers "$CHRONIK_KAFKA" --topic bench-http \
  > "$BENCH_DIR/ingestor/stdout.log" 2> "$BENCH_DIR/ingestor/stderr.log" < /dev/null &
INGESTOR_PID=$!
pid_record "$INGESTOR_PID" chronik-ingestor
line=""
for ((i = 0; i < 600; i++)); do
  line=$(grep -m1 '^LISTENING ' "$BENCH_DIR/ingestor/stdout.log" 2>/dev/null || true)
  [[ -n "$line" ]] && break
  kill -0 "$INGESTOR_PID" 2>/dev/null || die "chronik-ingestor exited during startup (logs: $BENCH_DIR/ingestor)"
  sleep 0.1
done
INGESTOR_HTTP=$(sed -nE 's/.*http=([^ ]+).*/\1/p' <<<"$line")
[[ -n "$INGESTOR_HTTP" ]] || die "no LISTENING line from chronik-ingestor"
wait_http_ok "http://$INGESTOR_HTTP/ready" 60 "$INGESTOR_PID" || die "chronik-ingestor not ready"
log "chronik-ingestor pid $INGESTOR_PID http=$INGESTOR_HTTP"

load() {
  "$LOAD_BIN" --duration-secs "$DURATION" --warmup-secs "$WARMUP" --connections "$CONNECTIONS" \
    --batch "$BATCH" --value-bytes "$VALUE_BYTES" "$@"
}

wait_drained() {
  # Fire-and-forget leaves messages queued: let them finish before the next step.
  for ((i = 0; i < 600; i++)); do
    curl -fsS "http://$INGESTOR_HTTP/ledger" | grep -q '"in_flight":0' && return 0
    sleep 0.1
  done
  log "warning: ingestor still has messages in flight"
}

RESULTS="$BENCH_DIR/results.txt"
if [[ -x "$CHRONIK_BENCH_BIN" ]]; then
  log "step 0: chronik-bench direct produce (${DURATION}s)"
  if "$CHRONIK_BENCH_BIN" --bootstrap-servers "$CHRONIK_KAFKA" --topic bench-chronik-bench --mode produce \
      --concurrency "$CHRONIK_BENCH_CONCURRENCY" --message-size "$VALUE_BYTES" --duration "${DURATION}s" \
      --warmup-duration "${WARMUP}s" --acks 1 --compression snappy --linger-ms 5 --batch-size 1000000 \
      --client-property batch.num.messages=10000 --broker-pid "$CHRONIK_PID" \
      --json-output "$BENCH_DIR/chronik-bench.json" > "$BENCH_DIR/chronik-bench.txt" 2>&1; then
    python3 "$REPO_ROOT/scripts/benchctl.py" ingestor-row "$BENCH_DIR/chronik-bench.json" "$CHRONIK_BENCH_CONCURRENCY" >> "$RESULTS"
    tail -n 1 "$RESULTS"
  else
    log "chronik-bench failed (see $BENCH_DIR/chronik-bench.txt); continuing without it"
  fi
fi
log "step 1/3: direct rdkafka baseline (${DURATION}s)"
load --label direct --direct "$CHRONIK_KAFKA" --topic bench-direct --cpu-pid "$CHRONIK_PID" | tee -a "$RESULTS"
log "step 2/3: POST /produce/batch (${DURATION}s)"
load --label batch --target "$INGESTOR_HTTP" --route /produce/batch --cpu-pid "$INGESTOR_PID,$CHRONIK_PID" | tee -a "$RESULTS"
wait_drained
log "step 3/3: POST /produce/fire/batch (${DURATION}s)"
load --label fire --target "$INGESTOR_HTTP" --route /produce/fire/batch --cpu-pid "$INGESTOR_PID,$CHRONIK_PID" | tee -a "$RESULTS"
wait_drained
curl -fsS "http://$INGESTOR_HTTP/ledger" > "$BENCH_DIR/ledger.json"

python3 "$REPO_ROOT/scripts/benchctl.py" ingestor-table "$RESULTS" "$BENCH_DIR/ledger.json"
log "raw results: $RESULTS"
