#!/usr/bin/env bash
# fetch-session-cpu.sh - broker CPU for one Java consumer (kafka-clients
# 4.3.1, which uses incremental fetch sessions) of a 1,000-partition topic,
# with fetch sessions off (--max-incremental-fetch-session-cache-slots 0:
# every Fetch names and answers all 1,000 partitions) and on (the default:
# after the first, each Fetch names only what changed and is answered only
# with partitions that have news). Issue 17 item 4.
#
# For each mode, a fresh one-node release broker on 127.0.0.1; a topic of
# PARTITIONS partitions with one record each; then Kafka's own
# ConsumerPerformance reads them and keeps polling the idle topic until
# IDLE_MS pass without a record. Prints per mode: Fetch requests served,
# broker CPU seconds (utime+stime from /proc/PID/stat), CPU µs and bytes
# received and sent on the Kafka port per Fetch (the consumer's other
# requests, a few heartbeats and commits, are included), and the most
# sessions held at once.
#
#   broker/bench/fetch-session-cpu.sh
#
# Needs: target/release/chronik-server, the kafka-tools jars
# (compat/install-deps.sh puts them in compat/java/target/lib), the .venv
# with confluent-kafka (make python-deps). Env: PARTITIONS (1000), IDLE_MS
# (30000), CHRONIK_SERVER_BIN. Bounded: the consumer exits after IDLE_MS
# idle (and `timeout` kills it after 5 minutes); the broker is stopped by pid
# on exit.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$BENCH_DIR/../.." && pwd)"
# shellcheck source=scripts/lib.sh
source "$REPO_ROOT/scripts/lib.sh"   # cpu_ticks
PARTITIONS="${PARTITIONS:-1000}"
IDLE_MS="${IDLE_MS:-30000}"
BIN="${CHRONIK_SERVER_BIN:-$REPO_ROOT/target/release/chronik-server}"
PY="$REPO_ROOT/.venv/bin/python"
CP="$REPO_ROOT/compat/java/target/lib/*"
CLK_TCK=$(getconf CLK_TCK)

[[ -x "$BIN" ]] || { echo "no $BIN: cargo build --release -p chronik-server" >&2; exit 1; }
compgen -G "$REPO_ROOT/compat/java/target/lib/kafka-tools-*.jar" > /dev/null \
  || { echo "no kafka-tools jar: bash compat/install-deps.sh" >&2; exit 1; }

WORK="$(mktemp -d)"
BROKER_PID=""
stop_broker() {
  if [[ -n "$BROKER_PID" ]] && kill -0 "$BROKER_PID" 2> /dev/null; then
    kill "$BROKER_PID" 2> /dev/null || true
    wait "$BROKER_PID" 2> /dev/null || true
  fi
  BROKER_PID=""
}
trap 'stop_broker; rm -rf "$WORK"' EXIT

fetches() {  # Fetch requests the broker served so far
  curl -fsS "http://$1/metrics" | awk '/^chronik_requests_total\{.*api="Fetch"/ {s += $NF} END {print s + 0}'
}
network_bytes() {  # bytes read and written on the Kafka port so far: "IN OUT"
  curl -fsS "http://$1/metrics" | awk '/^chronik_network_bytes_in_total / {i = $NF} /^chronik_network_bytes_out_total / {o = $NF} END {printf "%d %d", i, o}'
}
sessions_held() {
  curl -fsS "http://$1/metrics" | awk '/^chronik_fetch_sessions / {print int($NF)}'
}

printf '%-9s %9s %12s %14s %15s %16s %13s\n' sessions fetches broker_cpu_s cpu_us_per_fetch bytes_in_per_fetch bytes_out_per_fetch sessions_held
for slots in 0 1000; do
  data="$WORK/data-$slots"
  "$BIN" --data-dir "$data" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
    --max-incremental-fetch-session-cache-slots "$slots" > "$WORK/out.log" 2> "$WORK/err.log" &
  BROKER_PID=$!
  for _ in $(seq 1 200); do grep -q LISTENING "$WORK/out.log" && break; sleep 0.05; done
  addr="$(sed -n 's/^LISTENING kafka=\([^ ]*\) .*/\1/p' "$WORK/out.log")"
  metrics="$(sed -n 's/^LISTENING .* metrics=\([^ ]*\).*/\1/p' "$WORK/out.log")"
  [[ -n "$addr" ]] || { echo "broker did not start" >&2; cat "$WORK/err.log" >&2; exit 1; }
  "$PY" "$REPO_ROOT/scripts/benchctl.py" seed-partitions "$addr" "$PARTITIONS"
  before_cpu=$(cpu_ticks "$BROKER_PID"); before_fetches=$(fetches "$metrics")
  read -r before_in before_out <<< "$(network_bytes "$metrics")"
  timeout 300 java -Xmx512m -cp "$CP" org.apache.kafka.tools.ConsumerPerformance \
    --bootstrap-server "$addr" --topic wide --messages 1000000000 --timeout "$IDLE_MS" \
    --group "bench-$slots" > "$WORK/consumer-$slots.log" 2>&1 &
  consumer=$!
  held=0  # the most sessions seen while the consumer ran (it closes its own at exit)
  while kill -0 "$consumer" 2> /dev/null; do
    now=$(sessions_held "$metrics" || echo 0)
    ((now > held)) && held=$now
    sleep 1
  done
  wait "$consumer" || true
  after_cpu=$(cpu_ticks "$BROKER_PID"); after_fetches=$(fetches "$metrics")
  read -r after_in after_out <<< "$(network_bytes "$metrics")"
  stop_broker
  awk -v s="$slots" -v f=$((after_fetches - before_fetches)) -v t=$((after_cpu - before_cpu)) -v hz="$CLK_TCK" -v h="$held" \
    -v bi=$((after_in - before_in)) -v bo=$((after_out - before_out)) \
    'BEGIN { cpu = t / hz; n = (f > 0 ? f : 1)
             printf "%-9s %9d %12.2f %14.0f %15.0f %16.0f %13s\n", (s > 0 ? "on" : "off"), f, cpu, cpu * 1e6 / n, bi / n, bo / n, h }'
done
