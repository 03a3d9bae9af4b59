#!/usr/bin/env bash
# compare.sh — chronik-bench against Kafka's own ProducerPerformance, on two
# brokers: chronik-server (release, --wal-profile medium) and Apache Kafka
# 4.3.1 (KRaft, single node, from the kafka-anchor). Each broker is driven by
# both tools at 256 B and 1 KiB, acks=all, batch.size 64 KiB, linger.ms 5,
# 1 partition, one broker at a time, and a Markdown table is printed:
#
#   broker | tool | size | msg/s | tool CPU µs/msg | broker CPU µs/msg
#
# How each figure is taken (the same way for both tools):
#   msg/s             chronik-bench: acknowledged msg/s over its measured window
#                     (after a warmup); ProducerPerformance: its own records/sec
#   tool CPU µs/msg   user+sys CPU of the whole tool process (bash `time`, JVM
#                     start-up and warmup included) / every message it sent
#   broker CPU µs/msg utime+stime of the broker process (/proc/PID/stat) over
#                     the tool's run / every message sent
# chronik-bench carries its 32-byte envelope header on every record;
# ProducerPerformance sends bare values. Both run with enable.idempotence=false
# (librdkafka's default; the Java client's default is true).
#
# Prerequisites: a release build (`cargo build --release -p chronik-bench -p
# chronik-server`), Java 17, Maven (the anchor's setup.sh fetches the Kafka
# jars from Maven Central once), python3. Each tool run is bounded (~20 s).
#
# Usage: bench/compare.sh            (env knobs below; re-runnable)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"   # free_port, cpu_ticks (its log, die and stop_pid are replaced below)
BENCHCTL="$ROOT/scripts/benchctl.py"
ANCHOR="${ANCHOR:-$ROOT/.tools/kafka-anchor}"
ANCHOR_SOURCE="${ANCHOR_SOURCE:-$ROOT/../shared/tools/kafka-anchor}"
BENCH_BIN="${BENCH_BIN:-$ROOT/target/release/chronik-bench}"
SERVER_BIN="${SERVER_BIN:-$ROOT/target/release/chronik-server}"
SIZES="${SIZES:-256 1024}"
BENCH_SECS="${BENCH_SECS:-12}"       # chronik-bench measured window
WARMUP_SECS="${WARMUP_SECS:-3}"      # chronik-bench warmup (excluded from msg/s)
BROKER_WARMUP_SECS="${BROKER_WARMUP_SECS:-10}"  # untimed load on each fresh broker (JVM JIT) before measuring
PP_SECS="${PP_SECS:-12}"             # ProducerPerformance: records = rate seen by chronik-bench x this
PP_MAX_RECORDS="${PP_MAX_RECORDS:-5000000}"
PP_MIN_RECORDS="${PP_MIN_RECORDS:-200000}"
BROKERS="${BROKERS:-chronik kafka}"
OUT="${OUT:-$ROOT/results/bench-compare-$(date -u +%Y%m%dT%H%M%SZ)}"

die() { echo "compare: $*" >&2; exit 1; }
log() { echo "compare: $*" >&2; }

[[ -x "$BENCH_BIN" && -x "$SERVER_BIN" ]] \
  || die "missing release binaries; run: cargo build --release -p chronik-bench -p chronik-server"
command -v java >/dev/null || die "java (17+) not found"

if [[ ! -d "$ANCHOR" ]]; then
  [[ -d "$ANCHOR_SOURCE" ]] || die "no kafka-anchor at $ANCHOR nor $ANCHOR_SOURCE"
  mkdir -p "$(dirname "$ANCHOR")"
  cp -r "$ANCHOR_SOURCE" "$ANCHOR"
fi
if [[ ! -f "$ANCHOR/lib/broker/.kafka-version" || ! -f "$ANCHOR/lib/tools/.kafka-version" ]]; then
  log "fetching Kafka jars (anchor setup.sh)"
  "$ANCHOR/setup.sh"
fi
# shellcheck source=/dev/null
source "$ANCHOR/common.sh"   # JAVA, TOOLS_CP, TOOLS_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, kafka_tool

mkdir -p "$OUT"
ROWS="$OUT/rows.tsv"
: > "$ROWS"
CLK_TCK="$(getconf CLK_TCK)"
STARTED_PIDS=()
# Broker data (GBs per run) lives in scratch space and is removed afterwards;
# only logs and figures stay in $OUT.
CHRONIK_DATA="$(mktemp -d "${TMPDIR:-/tmp}/chronik-compare.XXXXXX")"

cleanup() {
  local p
  for p in "${STARTED_PIDS[@]:-}"; do
    [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null && kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${STARTED_PIDS[@]:-}"; do
    [[ -z "$p" ]] && continue
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$CHRONIK_DATA" "${ANCHOR_RUN_DIR:-/nonexistent}/single/data"
}
trap cleanup EXIT

stop_pid() {
  local p=$1
  kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
}

create_topic() { # bootstrap topic
  kafka_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$1" --create --topic "$2" \
    --partitions 1 --replication-factor 1 > /dev/null
}

bench_one() { # broker_name bootstrap broker_pid size
  local name=$1 bs=$2 bpid=$3 size=$4
  local topic
  topic="cmp-cb-${size}-$(date +%s%N)"
  local json="$OUT/$name-chronik-bench-$size.json" timing="$OUT/$name-chronik-bench-$size.time"
  local b0; b0=$(cpu_ticks "$bpid")
  log "$name: chronik-bench ${size} B for ${WARMUP_SECS}+${BENCH_SECS} s"
  local TIMEFORMAT='%U %S'
  { time timeout 60 "$BENCH_BIN" --bootstrap-servers "$bs" --topic "$topic" --message-size "$size" \
      --acks all --batch-size 65536 --linger-ms 5 --create-topic --partitions 1 --duration "${BENCH_SECS}s" \
      --warmup-duration "${WARMUP_SECS}s" --report-interval-secs 5 --broker-pid "$bpid" \
      --json-output "$json" > "$OUT/$name-chronik-bench-$size.out" 2> "$OUT/$name-chronik-bench-$size.err" ; } 2> "$timing"
  local b1; b1=$(cpu_ticks "$bpid")
  python3 "$BENCHCTL" bench-cpu-row "$name" "$size" "$json" "$timing" "$b0" "$b1" "$CLK_TCK" >> "$ROWS"
  python3 "$BENCHCTL" bench-rate "$json"
}

pp_one() { # broker_name bootstrap broker_pid size records
  local name=$1 bs=$2 bpid=$3 size=$4 records=$5
  local topic
  topic="cmp-pp-${size}-$(date +%s%N)"
  local raw="$OUT/$name-producer-perf-$size.log" timing="$OUT/$name-producer-perf-$size.time"
  create_topic "$bs" "$topic"
  local b0; b0=$(cpu_ticks "$bpid")
  log "$name: ProducerPerformance ${size} B x $records records"
  local TIMEFORMAT='%U %S'
  # shellcheck disable=SC2086
  { time timeout 90 "$JAVA" $TOOLS_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS \
      -Dlog4j2.configurationFile="$ANCHOR/config/log4j2-tools.properties" -cp "$TOOLS_CP" \
      org.apache.kafka.tools.ProducerPerformance --topic "$topic" --num-records "$records" \
      --record-size "$size" --throughput -1 --command-property bootstrap.servers="$bs" acks=all \
      batch.size=65536 linger.ms=5 enable.idempotence=false > "$raw" 2>&1 ; } 2> "$timing"
  local b1; b1=$(cpu_ticks "$bpid")
  local rate
  rate=$(grep -E '^[0-9]+ records sent,.*99.9th' "$raw" | tail -1 | sed -E 's/^[0-9]+ records sent, ([0-9.]+) records\/sec.*/\1/')
  [[ -n "$rate" ]] || { tail -20 "$raw" >&2; die "no ProducerPerformance summary in $raw"; }
  python3 "$BENCHCTL" cpu-row "$name" ProducerPerformance "$size" "$rate" "$records" "$timing" "$b0" "$b1" "$CLK_TCK" >> "$ROWS"
}

# Untimed load first: a cold JVM broker runs several times slower until its
# hot paths are compiled, which would penalise whichever tool goes first.
warm_broker() { # broker_name bootstrap
  log "$1: warming the broker up for ${BROKER_WARMUP_SECS} s (not measured)"
  timeout 60 "$BENCH_BIN" --bootstrap-servers "$2" --topic "cmp-warmup-$(date +%s%N)" --create-topic \
    --message-size 1024 --acks all --batch-size 65536 --linger-ms 5 --duration "${BROKER_WARMUP_SECS}s" \
    --warmup-duration 0s --report-interval-secs 60 > "$OUT/$1-warmup.out" 2>&1
}

drive() { # broker_name bootstrap broker_pid
  local size rate records
  warm_broker "$1" "$2"
  for size in $SIZES; do
    rate=$(bench_one "$1" "$2" "$3" "$size")
    records=$(( rate * PP_SECS ))
    (( records > PP_MAX_RECORDS )) && records=$PP_MAX_RECORDS
    (( records < PP_MIN_RECORDS )) && records=$PP_MIN_RECORDS
    pp_one "$1" "$2" "$3" "$size" "$records"
  done
}

for broker in $BROKERS; do
  case $broker in
    chronik)
      log "starting chronik-server (release, --wal-profile medium)"
      rm -rf "${CHRONIK_DATA:?}"/*
      "$SERVER_BIN" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --data-dir "$CHRONIK_DATA" \
        --wal-profile medium > "$OUT/chronik.stdout" 2> "$OUT/chronik.stderr" &
      cpid=$!; STARTED_PIDS+=("$cpid")
      addr=""
      for _ in $(seq 1 300); do
        addr=$(sed -n 's/^LISTENING kafka=\([^ ]*\).*/\1/p' "$OUT/chronik.stdout" | head -1)
        [[ -n "$addr" ]] && break
        kill -0 "$cpid" 2>/dev/null || die "chronik-server exited: $(tail -5 "$OUT/chronik.stderr")"
        sleep 0.1
      done
      [[ -n "$addr" ]] || die "chronik-server did not print LISTENING"
      drive chronik "$addr" "$cpid"
      stop_pid "$cpid"
      rm -rf "${CHRONIK_DATA:?}"/*
      ;;
    kafka)
      ports=$(free_port 2); read -r port cport <<< "$ports"
      log "starting Apache Kafka $(cat "$ANCHOR/lib/broker/.kafka-version") on 127.0.0.1:$port"
      export ANCHOR_RUN_DIR="$OUT/kafka-run"
      BROKER_PORT=$port CONTROLLER_PORT=$cport "$ANCHOR/start-single.sh" > "$OUT/kafka-start.log" 2>&1 \
        || { STARTED_PIDS+=("$(cat "$ANCHOR_RUN_DIR/single/pid" 2>/dev/null)"); tail -20 "$OUT/kafka-start.log" >&2; die "Kafka did not start"; }
      kpid=$(cat "$ANCHOR_RUN_DIR/single/pid"); STARTED_PIDS+=("$kpid")
      drive kafka "127.0.0.1:$port" "$kpid"
      stop_pid "$kpid"
      rm -rf "$ANCHOR_RUN_DIR/single/data"
      ;;
    *) die "unknown broker $broker (chronik | kafka)";;
  esac
done

{
  echo "| broker | tool | size | msg/s | tool CPU µs/msg | broker CPU µs/msg |"
  echo "|---|---|---|---|---|---|"
  awk -F'\t' '{printf "| %s | %s | %s B | %d | %s | %s |\n", $1, $2, $3, $4, $5, $6}' "$ROWS"
} | tee "$OUT/table.md"
log "raw outputs in $OUT"
