#!/usr/bin/env bash
# share-consumer-perf.sh - share groups (KIP-932) on one node: Kafka's own
# ShareConsumerPerformance (kafka-tools 4.3.1) against a Chronik node (fsync
# on, its default) and against the kafka-anchor's Apache Kafka 4.3.1 (one
# KRaft node, no fsync: its default), each alone on the machine. A topic of
# 3 partitions is filled once per broker with ProducerPerformance (RECORDS
# records of SIZE bytes, acks=1); then for each consumer count (1 and 3:
# ShareConsumerPerformance --threads) a fresh share group reads every record
# from the earliest offset (share.auto.offset.reset=earliest set on the group
# with kafka-configs), accepting each. Prints one TSV row per run: records/s
# as the tool measured it, and the broker's CPU (utime+stime over the whole
# consumer run, joining included) per record. Each broker first gets an
# unreported warm-up read. Rows kept in results/share-perf-<id>/.
#
#   broker/bench/share-consumer-perf.sh [--records N] [--size B] [--reps R] [--no-kafka]
#
# Needs a release chronik-server and Java 17 + Maven (the anchor fetches
# Kafka's jars once). Bounded: every tool run has a timeout; the trap stops
# both brokers by pid.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
source "$BENCH_DIR/../../scripts/lib.sh"
# shellcheck source=scripts/pipeline.sh
source "$BENCH_DIR/../../scripts/pipeline.sh"

RECORDS=500000
SIZE=256
REPS=1
WITH_KAFKA=1
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
while (($#)); do
  case $1 in
    --records) RECORDS=$2; shift;;
    --size) SIZE=$2; shift;;
    --reps) REPS=$2; shift;;
    --no-kafka) WITH_KAFKA=0;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    *) die "unknown option: $1";;
  esac
  shift
done

ID=$(date +%Y%m%dT%H%M%S)
WORK="$RUN_DIR/share-perf-$ID"; OUT="$REPO_ROOT/results/share-perf-$ID"
mkdir -p "$WORK" "$OUT"
KAFKA_DIR="$WORK/kafka"
TSV="$OUT/runs.tsv"
printf 'broker\tconsumers\trecords\tsize\trecords_per_s\tbroker_cpu_us_per_record\n' > "$TSV"
HZ=$(getconf CLK_TCK)
ANCHOR_HOME=$(kafka_anchor)
TOOLS="$ANCHOR_HOME/lib/tools/*"
# kafka-configs.sh's class (kafka.admin.ConfigCommand) is in the broker's jars
CORE="$ANCHOR_HOME/lib/broker/*"

on_exit() {
  local rc=$?
  trap - EXIT
  [[ -n "${CHRONIK_PID:-}" ]] && { stop_pid "$CHRONIK_PID" 10 || true; pid_forget "$CHRONIK_PID"; }
  stop_kafka "$KAFKA_DIR"
  [[ -n "${KEEP_WORK:-}" ]] || rm -rf "$WORK"
  exit "$rc"
}
trap on_exit EXIT

# tool MAIN ARGS... - one of Kafka's tools, bounded, quiet.
tool() {
  local cp=$TOOLS
  [[ $1 == kafka.admin.* ]] && cp=$CORE
  timeout --kill-after=15 "$RUN_TIMEOUT" java -Xmx1g -cp "$cp" "$@" 2>> "$WORK/tools.err"
}

# fill BOOTSTRAP - the topic, RECORDS records of SIZE bytes.
fill() {
  local bootstrap=$1
  tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$bootstrap" --create --topic share-perf \
    --partitions 3 --replication-factor 1 > /dev/null
  tool org.apache.kafka.tools.ProducerPerformance --topic share-perf --num-records "$RECORDS" \
    --record-size "$SIZE" --throughput -1 --producer-props "bootstrap.servers=$bootstrap" acks=1 \
    linger.ms=5 batch.size=65536 > "$WORK/produce.log"
  log "filled share-perf: $(tail -1 "$WORK/produce.log")"
}

# read_all BROKER BOOTSTRAP CONSUMERS GROUP REPORT PID - one
# ShareConsumerPerformance read of every record by a new group.
read_all() {
  local broker=$1 bootstrap=$2 consumers=$3 group=$4 report=$5 pid=$6 c0 c1 out="$WORK/scp.log"
  tool kafka.admin.ConfigCommand --bootstrap-server "$bootstrap" --alter --entity-type groups \
    --entity-name "$group" --add-config share.auto.offset.reset=earliest > /dev/null
  c0=$(cpu_ticks "$pid")
  tool org.apache.kafka.tools.ShareConsumerPerformance --bootstrap-server "$bootstrap" --topic share-perf \
    --group "$group" --num-records "$RECORDS" --threads "$consumers" --timeout 30000 > "$out" \
    || { log "ShareConsumerPerformance ($broker, $consumers) failed: $(tail -3 "$out" "$WORK/tools.err")"; return 0; }
  c1=$(cpu_ticks "$pid")
  ((report)) || return 0
  # the tool's last line: start, end, MB, MB/s, nMsg/s, nMsg, fetch ms
  awk -F', ' -v b="$broker" -v c="$consumers" -v n="$RECORDS" -v s="$SIZE" -v t=$((c1 - c0)) -v hz="$HZ" \
    'NF >= 7 && $6 ~ /^[0-9]+$/ {rate=$5; got=$6} END {
       if (got == "") exit 1;
       printf "%s\t%d\t%d\t%d\t%.0f\t%.2f\n", b, c, got, s, rate, t / hz * 1e6 / got }' "$out" | tee -a "$TSV"
}

# bench BROKER BOOTSTRAP PID - warm-up, then each consumer count REPS times.
bench() {
  local broker=$1 bootstrap=$2 pid=$3 consumers rep
  fill "$bootstrap"
  read_all "$broker" "$bootstrap" 1 "warmup-$broker" 0 "$pid"
  for ((rep = 1; rep <= REPS; rep++)); do
    for consumers in 1 3; do
      read_all "$broker" "$bootstrap" "$consumers" "perf-$broker-$consumers-$rep" 1 "$pid"
    done
  done
}

start_chronik "$WORK/chronik"
bench chronik "$CHRONIK_KAFKA" "$CHRONIK_PID"
stop_pid "$CHRONIK_PID" 20 || true; pid_forget "$CHRONIK_PID"; CHRONIK_PID=""

if ((WITH_KAFKA)); then
  start_kafka "$KAFKA_DIR" 1
  bench kafka "$KAFKA_BOOTSTRAP" "$KAFKA_PID"
  stop_kafka "$KAFKA_DIR"
fi
column -t -s $'\t' "$TSV"
log "results: $TSV"
