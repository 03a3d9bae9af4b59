#!/usr/bin/env bash
# cpu-per-message.sh - broker CPU per message: chronik-server vs Apache Kafka,
# measured in the same run with the same client (Kafka's own Java
# ProducerPerformance, driven by the kafka-anchor's perf.sh).
#
# For each broker in turn (chronik first, then a single-node Apache Kafka
# 4.3.1 from the anchor), alone on the machine: an untimed warm-up, then one
# produce run per message size (256 B and 1 KiB), acks=all, 1 partition,
# batch.size 64 KiB, linger.ms 5 (perf.sh's "tuned" profile), unthrottled.
# perf.sh reads the broker's utime+stime from /proc/PID/stat before and after
# each run; µs/msg = that CPU time / records. Prints a Markdown table with the
# chronik/kafka ratio of CPU µs/msg, and keeps it with the raw TSV rows in
# results/bench-<id>/. With --tls every broker is also measured over TLS (an
# SSL listener beside the PLAINTEXT one, certificates from
# scripts/make-certs.sh, server-only TLS), with the same client and sizes,
# and the table adds each broker's TLS cost.
#
#   broker/bench/cpu-per-message.sh [--reps N] [--records-256 N] [--records-1k N]
#                                   [--warmup N] [--keep] [--no-kafka] [--tls]
#
#   --reps N         runs per (broker, size), shown side by side (default 1)
#   --records-256 N  records per 256 B run   (default 2000000)
#   --records-1k N   records per 1 KiB run   (default 1000000)
#   --warmup N       warm-up records per broker, 1 KiB, not reported (default 200000; 0 = none)
#   --keep           keep broker data and the anchor's run dir under .run/bench-<id>/
#   --no-kafka       measure chronik only (no ratio)
#   --tls            also measure over an SSL listener (tags *-tls)
#
# Needs: a release chronik-server (make build), Java 17+, Maven (the anchor's
# setup.sh fetches Kafka jars from Maven Central into its copy; cached after
# the first run), python3, curl, ~2 GB free disk under .run/.
#
# Env: ANCHOR_SRC (the read-only kafka-anchor; default ../shared/tools/kafka-anchor
#      beside the repo, else /work/shared/tools/kafka-anchor), ANCHOR_HOME (its
#      working copy, default <repo>/.tools/kafka-anchor), WAL_PROFILE (medium),
#      PRODUCE_PROFILE (balanced), RUN_TIMEOUT (max seconds per perf run, 300),
#      QUIET_WAIT (seconds to wait for a quiet machine before each run, 20),
#      PERF_EXTRA_PROPS (producer properties appended for BOTH brokers; default
#      "enable.idempotence=false": the Java client is idempotent by default,
#      which needs InitProducerId; set "" to measure the client defaults),
#      CHRONIK_SERVER_BIN, BENCH_ID (default UTC timestamp).
#
# Bounded: every perf run is killed after RUN_TIMEOUT; the trap stops both
# brokers by pid on any exit. Safe to re-run; ./cleanup.sh stops leftovers.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/lib.sh
source "$BENCH_DIR/../../scripts/lib.sh"

REPS="${REPS:-1}"
RECORDS_256="${RECORDS_256:-2000000}"
RECORDS_1K="${RECORDS_1K:-1000000}"
WARMUP="${WARMUP:-200000}"
KEEP="${KEEP:-0}"
WITH_KAFKA="${WITH_KAFKA:-1}"
WITH_TLS="${WITH_TLS:-0}"
WAL_PROFILE="${WAL_PROFILE:-medium}"
PRODUCE_PROFILE="${PRODUCE_PROFILE:-balanced}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
export QUIET_WAIT="${QUIET_WAIT:-20}"
PERF_EXTRA_PROPS="${PERF_EXTRA_PROPS-enable.idempotence=false}"
BENCH_ID="${BENCH_ID:-$(date -u +%Y%m%dT%H%M%SZ)}"
ANCHOR_HOME="${ANCHOR_HOME:-$REPO_ROOT/.tools/kafka-anchor}"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --reps) REPS=$2; shift;;
    --records-256) RECORDS_256=$2; shift;;
    --records-1k) RECORDS_1K=$2; shift;;
    --warmup) WARMUP=$2; shift;;
    --keep) KEEP=1;;
    --no-kafka) WITH_KAFKA=0;;
    --tls) WITH_TLS=1;;
    -h|--help) usage 0;;
    *) echo "unknown option: $1" >&2; usage;;
  esac
  shift
done
for v in REPS RECORDS_256 RECORDS_1K WARMUP RUN_TIMEOUT; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer"
done

if [[ -z "${ANCHOR_SRC:-}" ]]; then
  for c in "$REPO_ROOT/../shared/tools/kafka-anchor" /work/shared/tools/kafka-anchor; do
    [[ -f "$c/perf.sh" ]] && { ANCHOR_SRC=$(cd "$c" && pwd); break; }
  done
fi
[[ -f "${ANCHOR_SRC:-}/perf.sh" ]] || die "kafka-anchor not found (set ANCHOR_SRC)"
[[ -x "$CHRONIK_SERVER_BIN" ]] || die "$CHRONIK_SERVER_BIN missing: run make build"

base_id=$BENCH_ID; n=1
while [[ -e "$RUN_DIR/bench-$BENCH_ID" || -e "$REPO_ROOT/results/bench-$BENCH_ID" ]]; do
  n=$((n + 1)); BENCH_ID="$base_id-$n"
done
WORK="$RUN_DIR/bench-$BENCH_ID"
OUT="$REPO_ROOT/results/bench-$BENCH_ID"
mkdir -p "$WORK" "$OUT"
TSV="$OUT/perf.tsv"
export ANCHOR_RUN_DIR="$WORK/anchor-run"
PERF_PID=""
KAFKA_PID=""

on_exit() {
  local rc=$?
  trap - EXIT INT TERM
  # a perf run still going (interrupted): its timeout forwards TERM to the tool
  if [[ -n "$PERF_PID" ]] && kill -0 "$PERF_PID" 2>/dev/null; then
    kill -TERM "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
  fi
  stop_chronik || true
  stop_kafka || true
  if ((KEEP)); then log "kept $WORK"; else rm -rf "$WORK"; fi
  ((rc == 0)) || log "cpu-per-message: FAILED (exit $rc); partial results in $OUT"
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

stop_kafka() {
  [[ -n "$KAFKA_PID" ]] || return 0
  log "stopping Apache Kafka (pid $KAFKA_PID)"
  STOP_TIMEOUT="$STOP_TIMEOUT" "$ANCHOR_HOME/stop.sh" > "$WORK/kafka-stop.log" 2>&1 || true
  stop_pid "$KAFKA_PID" 5 || true     # stop.sh already waited; this only reaps a straggler
  pid_forget "$KAFKA_PID"
  KAFKA_PID=""
}

# --- the anchor: a writable copy of the read-only tool, jars fetched once ---
install_anchor() {
  mkdir -p "$ANCHOR_HOME"
  # refresh scripts and configs; keep lib/ (jars) and results/ of earlier runs
  tar -C "$ANCHOR_SRC" --exclude=./lib --exclude=./run --exclude=./results --exclude=./.venv -cf - . \
    | tar -C "$ANCHOR_HOME" -xf -
  chmod -R u+w "$ANCHOR_HOME"
  log "kafka-anchor: $ANCHOR_SRC -> $ANCHOR_HOME"
  "$ANCHOR_HOME/setup.sh"
}

# ProducerPerformance gets PERF_EXTRA_PROPS, then the current transport's
# properties ($WORK/transport.props: empty, or the SSL listener as
# bootstrap.servers plus security.protocol=SSL and the trust store), appended
# to its --command-property list (the last option perf.sh passes; the last
# bootstrap.servers wins), through the JAVA hook of common.sh. Topics are
# created and deleted by perf.sh over PLAINTEXT.
write_java_wrapper() {
  local real_java; real_java=$(command -v "${JAVA:-java}") || die "java not found"
  : > "$WORK/transport.props"
  cat > "$WORK/java" <<EOF
#!/usr/bin/env bash
# generated by cpu-per-message.sh: java, plus extra producer properties for ProducerPerformance
for a in "\$@"; do
  # shellcheck disable=SC2046
  [[ \$a == org.apache.kafka.tools.ProducerPerformance ]] && exec "$real_java" "\$@" $PERF_EXTRA_PROPS \$(cat "$WORK/transport.props")
done
exec "$real_java" "\$@"
EOF
  chmod +x "$WORK/java"
  export JAVA="$WORK/java"
}

# use_transport plaintext | tls ADDR - what the next perf runs' producer connects over.
use_transport() {
  case $1 in
    plaintext) : > "$WORK/transport.props";;
    tls) echo "bootstrap.servers=$2 security.protocol=SSL ssl.truststore.type=PEM" \
           "ssl.truststore.location=$WORK/certs/ca.pem" > "$WORK/transport.props";;
  esac
}

# perf_run TAG SIZE RECORDS OUTFILE - one bounded ProducerPerformance run.
perf_run() {
  local tag=$1 size=$2 records=$3 out=$4 rc=0
  timeout --kill-after=15 "$RUN_TIMEOUT" "$ANCHOR_HOME/perf.sh" run --bootstrap "$BOOTSTRAP" \
    --size "$size" --acks all --profile tuned --records "$records" --tag "$tag" --out "$out" &
  PERF_PID=$!
  wait "$PERF_PID" || rc=$?
  PERF_PID=""
  if ((rc == 124 || rc == 137)); then
    log "perf run $tag ${size}B timed out after ${RUN_TIMEOUT}s"
  elif ((rc != 0)); then
    log "perf run $tag ${size}B failed (exit $rc); raw log: $ANCHOR_HOME/results/raw/"
  fi
  return "$rc"
}

# measure TAG - warm-up + REPS x {256, 1024} against $BOOTSTRAP / $BROKER_PIDS.
FAILED_RUNS=0
measure() {
  local tag=$1 r
  if ((WARMUP > 0)); then
    log "$tag: warm-up, $WARMUP x 1 KiB (not reported)"
    perf_run "$tag-warmup" 1024 "$WARMUP" "$OUT/warmup.tsv" || FAILED_RUNS=$((FAILED_RUNS + 1))
  fi
  for ((r = 1; r <= REPS; r++)); do
    perf_run "$tag" 256 "$RECORDS_256" "$TSV" || FAILED_RUNS=$((FAILED_RUNS + 1))
    perf_run "$tag" 1024 "$RECORDS_1K" "$TSV" || FAILED_RUNS=$((FAILED_RUNS + 1))
  done
}

install_anchor
write_java_wrapper
if ((WITH_TLS)); then
  bash "$REPO_ROOT/scripts/make-certs.sh" "$WORK/certs" > "$WORK/make-certs.log" 2>&1 \
    || die "scripts/make-certs.sh failed (log: $WORK/make-certs.log)"
fi
KAFKA_VERSION=$(cut -d/ -f1 "$ANCHOR_HOME/lib/broker/.kafka-version")
log "bench $BENCH_ID: reps=$REPS records 256B=$RECORDS_256 1KiB=$RECORDS_1K warmup=$WARMUP" \
    "extra producer props='${PERF_EXTRA_PROPS}'"

# --- chronik -------------------------------------------------------------
tls_args=()
((WITH_TLS)) && tls_args=(--listeners "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
  --ssl-keystore-location "$WORK/certs/broker.keystore.pem" --ssl-truststore-location "$WORK/certs/ca.pem")
start_chronik "$WORK/chronik" --wal-profile "$WAL_PROFILE" --produce-profile "$PRODUCE_PROFILE" \
  --auto-create-topics false "${tls_args[@]}"
BOOTSTRAP=$CHRONIK_KAFKA
export BROKER_PIDS=$CHRONIK_PID   # perf.sh reads this pid's CPU time
measure chronik
if ((WITH_TLS)); then
  ssl=$(sed -nE 's/.*listener\.SSL=([^ ]+).*/\1/p' <<<"$CHRONIK_LISTENING_LINE")
  [[ -n "$ssl" ]] || die "no listener.SSL= on chronik's LISTENING line: $CHRONIK_LISTENING_LINE"
  use_transport tls "$ssl"
  measure chronik-tls
  use_transport plaintext
fi
cp "$WORK/chronik/stderr.log" "$OUT/chronik-stderr.log" 2>/dev/null || true
stop_chronik || { log "chronik-server did not exit 0 on SIGTERM"; FAILED_RUNS=$((FAILED_RUNS + 1)); }

# --- Apache Kafka ----------------------------------------------------------
if ((WITH_KAFKA)); then
  PORTS=$(free_port 3); read -r KPORT CPORT SPORT <<< "$PORTS"
  if ((WITH_TLS)); then
    # an SSL listener beside PLAINTEXT in the anchor's (refreshed) template; Kafka's PEM stores
    tmpl="$ANCHOR_HOME/config/server.properties.template"
    sed -i -e "s#^listeners=PLAINTEXT://127.0.0.1:@PORT@,#listeners=PLAINTEXT://127.0.0.1:@PORT@,SSL://127.0.0.1:$SPORT,#" \
      -e "s#^advertised.listeners=PLAINTEXT://127.0.0.1:@PORT@#&,SSL://127.0.0.1:$SPORT#" \
      -e "s#^listener.security.protocol.map=.*#&,SSL:SSL#" "$tmpl"
    printf '%s\n' "ssl.keystore.type=PEM" "ssl.keystore.location=$WORK/certs/broker.keystore.pem" \
      "ssl.truststore.type=PEM" "ssl.truststore.location=$WORK/certs/ca.pem" >> "$tmpl"
    grep -q "SSL://127.0.0.1:$SPORT" "$tmpl" || die "could not add an SSL listener to $tmpl"
  fi
  BROKER_PORT=$KPORT CONTROLLER_PORT=$CPORT "$ANCHOR_HOME/start-single.sh" \
    || { KAFKA_PID=$(cat "$ANCHOR_RUN_DIR/single/pid" 2>/dev/null || true); die "Apache Kafka did not start"; }
  KAFKA_PID=$(cat "$ANCHOR_RUN_DIR/single/pid")
  pid_record "$KAFKA_PID" kafka-anchor
  # perf.sh finds the Kafka pid itself (pid files under ANCHOR_RUN_DIR)
  BOOTSTRAP=127.0.0.1:$KPORT
  export BROKER_PIDS=""
  measure "kafka-$KAFKA_VERSION"
  if ((WITH_TLS)); then
    use_transport tls "127.0.0.1:$SPORT"
    measure "kafka-$KAFKA_VERSION-tls"
    use_transport plaintext
  fi
  stop_kafka
fi

# --- the table ----------------------------------------------------------------
{
  echo "chronik-server $(git_describe) (--wal-profile $WAL_PROFILE --produce-profile $PRODUCE_PROFILE)" \
       "vs Apache Kafka $KAFKA_VERSION single node; Java ProducerPerformance, 1 partition, acks=all," \
       "batch.size 65536, linger.ms 5${PERF_EXTRA_PROPS:+, $PERF_EXTRA_PROPS}; $(nproc) cores; bench $BENCH_ID"
  echo
  [[ -s "$TSV" ]] && python3 "$BENCH_DIR/cpu_table.py" "$TSV"
} | tee "$OUT/table.md"
log "results: $OUT (perf.tsv, table.md, warmup.tsv)"
((FAILED_RUNS == 0)) || die "$FAILED_RUNS perf run(s) failed or timed out"
