#!/usr/bin/env bash
# cluster-bench.sh - 3 nodes, RF=3, min.insync.replicas=2, acks=all on this
# machine: a local Chronik cluster (127.0.0.1-3, fsync on, --wal-profile
# medium) against the kafka-anchor's 3-node Apache Kafka 4.3.1 (no fsync, its
# default), each alone on the machine, driven by Kafka's ProducerPerformance
# (perf.sh "tuned": batch 64 KiB, linger 5 ms, 1 partition) and by
# chronik-bench (closed loop, 4 tasks, 1 partition), at 256 B and 1 KiB.
# Broker CPU is the sum of the three nodes' utime+stime. Prints one TSV row
# per run and keeps them in results/cluster-bench-<id>/. Each broker first gets
# an unreported warm-up run (WARMUP records of 1 KiB, default 300000).
#
#   broker/bench/cluster-bench.sh [--records-256 N] [--records-1k N] [--bench-secs S] [--no-kafka]
#
# Needs a release build (chronik-server, chronik-bench), Java 17 + Maven (the
# anchor fetches Kafka jars once), ~3 GB free disk under .run/. Bounded: each
# run has a timeout; the trap stops every broker by pid.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
source "$BENCH_DIR/../../scripts/lib.sh"
# shellcheck source=scripts/pipeline.sh
source "$BENCH_DIR/../../scripts/pipeline.sh"

RECORDS_256="${RECORDS_256:-1000000}"
RECORDS_1K="${RECORDS_1K:-400000}"
BENCH_SECS="${BENCH_SECS:-15}"
WARMUP="${WARMUP:-300000}"   # unreported 1 KiB ProducerPerformance records per broker (JVM and page cache)
WITH_KAFKA=1
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
while (($#)); do
  case $1 in
    --records-256) RECORDS_256=$2; shift;;
    --records-1k) RECORDS_1K=$2; shift;;
    --bench-secs) BENCH_SECS=$2; shift;;
    --no-kafka) WITH_KAFKA=0;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) die "unknown option: $1";;
  esac
  shift
done
BENCH_BIN="$REPO_ROOT/target/release/chronik-bench"
[[ -x "$CHRONIK_SERVER_BIN" && -x "$BENCH_BIN" ]] || die "release binaries missing: cargo build --release -p chronik-server -p chronik-bench"
ID="$(date -u +%Y%m%dT%H%M%SZ)"
WORK="$RUN_DIR/cluster-bench-$ID"; OUT="$REPO_ROOT/results/cluster-bench-$ID"
mkdir -p "$WORK" "$OUT"
KAFKA_DIR="$WORK/kafka"
TSV="$OUT/runs.tsv"
printf 'broker\ttool\tsize\tmsg_per_s\tbroker_cpu_us_per_msg\n' > "$TSV"

on_exit() {
  local rc=$? pid
  trap - EXIT
  for pid in "${CHRONIK_PIDS[@]:-}"; do [[ -n "$pid" ]] && { stop_pid "$pid" 10 || true; pid_forget "$pid"; }; done
  stop_kafka "$KAFKA_DIR"
  rm -rf "$WORK"
  exit "$rc"
}
trap on_exit EXIT

BENCHCTL="$BENCH_DIR/../../scripts/benchctl.py"
HZ=$(getconf CLK_TCK)

# warm_up - one unreported ProducerPerformance run against $BOOTSTRAP.
warm_up() {
  warm_up_kafka "$BOOTSTRAP" 3 2 "$WARMUP" "$WORK/warmup.log"
}

# perf_pp BROKER SIZE RECORDS PIDS...
perf_pp() {
  local broker=$1 size=$2 records=$3; shift 3
  local c0 c1 out="$OUT/pp-$broker-$size.tsv"
  c0=$(cpu_ticks "$@")
  timeout --kill-after=15 "$RUN_TIMEOUT" "$ANCHOR_HOME/perf.sh" run --bootstrap "$BOOTSTRAP" --rf 3 --min-isr 2 \
    --size "$size" --acks all --profile tuned --records "$records" --tag "$broker" --out "$out" > "$WORK/pp.log" 2>&1 \
    || { log "ProducerPerformance on $broker ${size}B failed: $(tail -3 "$WORK/pp.log")"; return 0; }
  c1=$(cpu_ticks "$@")
  # perf.sh's own msg/s excludes topic creation; CPU is over the whole run
  local rate; rate=$(awk -F'\t' 'NR==1{for(i=1;i<=NF;i++) if($i=="msg_s") c=i} NR>1 && c {v=$c} END{print v+0}' "$out")
  python3 "$BENCHCTL" cluster-row "$broker" ProducerPerformance "$size" "$rate" "$((c1 - c0))" "$HZ" "$records" | tee -a "$TSV"
}

# perf_bench BROKER SIZE PIDS...
perf_bench() {
  local broker=$1 size=$2; shift 2
  local topic="cb-$broker-$size-$RANDOM" c0 c1 csv="$OUT/bench-$broker-$size.csv"
  create_topic "$BOOTSTRAP" "$topic" 1 3 2 2> /dev/null
  "$BENCH_BIN" --bootstrap-servers "$BOOTSTRAP" --topic "$topic" --acks all --message-size "$size" --concurrency 4 \
    --warmup-duration 3s --duration "${BENCH_SECS}s" --csv-output "$csv" > "$WORK/bench.log" 2>&1 &
  local pid=$!
  sleep 3; c0=$(cpu_ticks "$@")
  wait "$pid" || { log "chronik-bench on $broker ${size}B failed: $(tail -3 "$WORK/bench.log")"; return 0; }
  c1=$(cpu_ticks "$@")
  python3 "$BENCHCTL" cluster-bench-row "$csv" "$broker" "$size" "$((c1 - c0))" "$HZ" | tee -a "$TSV"
}

# --- the anchor (jars fetched once) ---
ANCHOR_HOME=$(kafka_anchor)

# --- chronik, 3 nodes ---
start_chronik_cluster "$WORK/chronik" 3 --wal-profile medium --auto-create-topics false
BOOTSTRAP=$CHRONIK_KAFKA
export BROKER_PIDS="${CHRONIK_PIDS[*]}"
warm_up
perf_pp chronik 256 "$RECORDS_256" "${CHRONIK_PIDS[@]}"
perf_pp chronik 1024 "$RECORDS_1K" "${CHRONIK_PIDS[@]}"
perf_bench chronik 256 "${CHRONIK_PIDS[@]}"
perf_bench chronik 1024 "${CHRONIK_PIDS[@]}"
for pid in "${CHRONIK_PIDS[@]}"; do stop_pid "$pid" 20 || true; pid_forget "$pid"; done
CHRONIK_PIDS=()

# --- Apache Kafka, 3 nodes ---
if ((WITH_KAFKA)); then
  start_kafka "$KAFKA_DIR" 3
  BOOTSTRAP=$KAFKA_BOOTSTRAP
  KPIDS=("${KAFKA_PIDS[@]}")
  export BROKER_PIDS="${KPIDS[*]}"
  warm_up
  perf_pp kafka 256 "$RECORDS_256" "${KPIDS[@]}"
  perf_pp kafka 1024 "$RECORDS_1K" "${KPIDS[@]}"
  perf_bench kafka 256 "${KPIDS[@]}"
  perf_bench kafka 1024 "${KPIDS[@]}"
  stop_kafka "$KAFKA_DIR"
fi
column -t -s $'\t' "$TSV"
log "results: $TSV"
