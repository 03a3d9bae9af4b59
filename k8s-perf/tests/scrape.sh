#!/usr/bin/env bash
# k8s-perf/tests/scrape.sh - the live half of `make k8s-test`: start the real
# binaries on loopback with the env the cluster overlay gives them (three
# brokers on 127.0.0.1-3 in cluster mode, RF 3, min.insync 2),
# provoke every metric the dashboards use, let a local Prometheus scrape them
# (and receive k6's remote write, trends as native histograms), then run
# check_dashboards.py against it.
#
#   k8s-perf/tests/scrape.sh OUT_DIR ENV_DIR
#
# ENV_DIR holds chronik.env, chronik-ingestor.env, chronik-consumer.env
# (check_manifests.py --env-out of the cluster overlay): the manifests' literal
# env, so the real parsers see the manifests' values; addresses, node ids and
# peers are overridden by flags (what entrypoint.sh derives in a pod).
# Writes OUT_DIR/served.json ({binary: {path: HTTP status}} for the probe
# paths), OUT_DIR/names.txt (every metric name seen), logs in OUT_DIR/logs/.
# Provokes: produce + consume through an ingestor and a consumer; a garbage
# frame (connections closed on error); k6 runs of k8s-perf/base/k6/runner.js:
# smoke against the ingestor, an over-rate smoke with one VU (dropped
# iterations), fire-and-forget against a second ingestor whose queue holds one
# message (accepted, rejected queue_full, failed 503); then that ingestor's
# broker is killed and the messages it queues time out (failed by error).
# Every process it starts is stopped by pid on exit. Bounded: ~40 s.
# Needs: target/release binaries, prometheus (Debian), .tools/bin/k6, curl, python3.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT=${1:?usage: scrape.sh OUT_DIR ENV_DIR}
ENV_DIR=${2:?usage: scrape.sh OUT_DIR ENV_DIR}
BIN_DIR="${BIN_DIR:-$REPO/target/release}"
K6_BIN="${K6_BIN:-$REPO/.tools/bin/k6}"
PY="${PY:-$REPO/.tools/k8s-venv/bin/python}"
mkdir -p "$OUT/logs" "$OUT/data" "$OUT/k6"
PIDS=()

log() { printf '[scrape] %s\n' "$*" >&2; }
# Stops in reverse start order, each given 10 s: the consumer writes its
# report at SIGTERM after a final commit and watermark read, which need the
# brokers still up (stopping everything at once left it without them until
# it was killed, and without a report).
cleanup() {
  local i pid
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]}
    kill -TERM "$pid" 2> /dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2> /dev/null || true
  done
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start NAME ENV_FILE CMD... - run CMD with the env file's variables, log to OUT/logs/NAME.*
start() {
  local name=$1 envfile=$2; shift 2
  (
    set -a
    # shellcheck disable=SC1090
    [[ -n "$envfile" ]] && source "$envfile"
    set +a
    exec "$@"
  ) > "$OUT/logs/$name.out" 2> "$OUT/logs/$name.err" < /dev/null &
  PIDS+=("$!")
}

# listening NAME KEY - the address after KEY= in NAME's LISTENING line (waits up to 30 s)
listening() {
  local i addr=""
  for ((i = 0; i < 300; i++)); do
    addr=$(sed -nE "s/^LISTENING .*$2=([^ ]+).*/\1/p" "$OUT/logs/$1.out" 2> /dev/null | head -n1)
    [[ -n "$addr" ]] && { echo "$addr"; return 0; }
    sleep 0.1
  done
  log "$1 printed no LISTENING line; stderr:"; tail -n 20 "$OUT/logs/$1.err" >&2; return 1
}

wait_ok() {  # URL TIMEOUT_S
  local i
  for ((i = 0; i < $2 * 10; i++)); do curl -fsS -o /dev/null --max-time 1 "$1" 2> /dev/null && return 0; sleep 0.1; done
  return 1
}

status_of() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" || echo 0; }

# -- the binaries, with the manifests' env ----------------------------------------------
# CLI flags win over env in clap: only addresses, ids and the data dir are
# overridden. The brokers: a 3-node cluster on 127.0.0.1-3 (the same ports on
# each address, as in pods), so the chronik_cluster_* metrics are real.
read -r KAFKA_PORT RAFT_PORT METRICS_PORT <<< "$(python3 - << 'PY'
import socket
def free_everywhere():
    while True:
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        try:
            for host in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
                t = socket.socket(); t.bind((host, port)); t.close()
            return port
        except OSError:
            continue
ports = set()
while len(ports) < 3:
    ports.add(free_everywhere())
print(*ports)
PY
)"
PEERS="1@127.0.0.1,2@127.0.0.2,3@127.0.0.3"
for n in 1 2 3; do
  start "broker-$n" "$ENV_DIR/chronik.env" "$BIN_DIR/chronik-server" --node-id "$n" --peers "$PEERS" \
    --listen "127.0.0.$n:$KAFKA_PORT" --raft-listen "127.0.0.$n:$RAFT_PORT" --metrics-listen "127.0.0.$n:$METRICS_PORT" \
    --advertise "127.0.0.$n:$KAFKA_PORT" --data-dir "$OUT/data-$n" --group-initial-rebalance-delay-ms 0
done
KAFKA="127.0.0.1:$KAFKA_PORT,127.0.0.2:$KAFKA_PORT,127.0.0.3:$KAFKA_PORT"
BROKER_METRICS=()
for n in 1 2 3; do
  BROKER_METRICS+=("$(listening "broker-$n" metrics)")
  wait_ok "http://${BROKER_METRICS[-1]}/ready" 60 || { log "broker $n not ready"; tail -n 20 "$OUT/logs/broker-$n.err" >&2; exit 1; }
done
start ingestor "$ENV_DIR/chronik-ingestor.env" "$BIN_DIR/chronik-ingestor" --listen 127.0.0.1:0 --bootstrap-servers "$KAFKA"
INGESTOR=$(listening ingestor http)
start consumer "$ENV_DIR/chronik-consumer.env" "$BIN_DIR/chronik-consumer" --listen 127.0.0.1:0 \
  --bootstrap-servers "$KAFKA" --report "$OUT/consumer-report.json"
CONSUMER=$(listening consumer http)
# the bad ingestor: a queue of one message (fire batches are mostly rejected)
# and its own broker, killed later, so that queued messages time out (100 ms)
start broker-spare "" "$BIN_DIR/chronik-server" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --raft-listen 127.0.0.1:0 --data-dir "$OUT/data-spare"
SPARE_BROKER_PID=${PIDS[-1]}
KAFKA_SPARE=$(listening broker-spare kafka)
start bad-ingestor "$ENV_DIR/chronik-ingestor.env" "$BIN_DIR/chronik-ingestor" --listen 127.0.0.1:0 \
  --bootstrap-servers "$KAFKA_SPARE" --queue-max-messages 1 --message-timeout-ms 100 --ingestor-id bad
BAD_INGESTOR=$(listening bad-ingestor http)
wait_ok "http://$INGESTOR/ready" 30 && wait_ok "http://$BAD_INGESTOR/ready" 30 || { log "ingestors not ready"; exit 1; }
log "brokers kafka=$KAFKA metrics=${BROKER_METRICS[*]} ingestor=$INGESTOR consumer=$CONSUMER bad-ingestor=$BAD_INGESTOR"

PROM_PORT=$(free_port)
cat > "$OUT/prometheus.yml" << YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: chronik
    static_configs:
      - targets: ['${BROKER_METRICS[0]}', '${BROKER_METRICS[1]}', '${BROKER_METRICS[2]}', '$INGESTOR', '$CONSUMER', '$BAD_INGESTOR']
YAML
start prometheus "" prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/prometheus-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --web.enable-remote-write-receiver --enable-feature=native-histograms
PROM="http://127.0.0.1:$PROM_PORT"
wait_ok "$PROM/-/ready" 30 || { log "prometheus not ready"; tail -n 20 "$OUT/logs/prometheus.err" >&2; exit 1; }

# -- what the probes and monitors ask for -------------------------------------------------
{
  printf '{"chronik-server": {"/metrics": %s, "/health": %s, "/ready": %s},\n' \
    "$(status_of "http://${BROKER_METRICS[0]}/metrics")" "$(status_of "http://${BROKER_METRICS[0]}/health")" "$(status_of "http://${BROKER_METRICS[0]}/ready")"
  printf ' "chronik-ingestor": {"/metrics": %s, "/health": %s, "/ready": %s},\n' \
    "$(status_of "http://$INGESTOR/metrics")" "$(status_of "http://$INGESTOR/health")" "$(status_of "http://$INGESTOR/ready")"
  printf ' "chronik-consumer": {"/metrics": %s, "/health": %s, "/summary": %s}}\n' \
    "$(status_of "http://$CONSUMER/metrics")" "$(status_of "http://$CONSUMER/health")" "$(status_of "http://$CONSUMER/summary")"
} > "$OUT/served.json"

# -- provoke ----------------------------------------------------------------------------------
batch='[{"key":"a","value":"hello"},{"key":"b","value":"world"},{"key":"c","value":"again"}]'
for _ in 1 2 3; do curl -fsS -o /dev/null -XPOST -H 'content-type: application/json' "http://$INGESTOR/produce/batch" -d "$batch"; done
# a frame shorter than a request header: the broker closes the connection on error
python3 - "127.0.0.1:$KAFKA_PORT" << 'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=2)
s.sendall(b"\x00\x00\x00\x02\x00\x00")
try:
    s.recv(16)
except OSError:
    pass
s.close()
PY

k6_run() {  # NAME SCENARIO INGESTOR_URL [ENV=VALUE...]
  local name=$1 scenario=$2 url=$3; shift 3
  env "$@" CHRONIK_SCENARIO="$scenario" INGESTOR_URLS="http://$url" RESULTS_DIR="$OUT/k6" \
    K6_PROMETHEUS_RW_SERVER_URL="$PROM/api/v1/write" K6_PROMETHEUS_RW_TREND_AS_NATIVE_HISTOGRAM=true \
    K6_PROMETHEUS_RW_PUSH_INTERVAL=1s \
    timeout 60 "$K6_BIN" run --quiet --no-usage-report -o experimental-prometheus-rw --tag testid=k8s-test \
    "$OUT/k6-tree/runner.js" > "$OUT/logs/k6-$name.out" 2> "$OUT/logs/k6-$name.err" || true
}
# runner.js imports ./scenarios/ and ./lib/: the same tree the TestRun's volume items build
rm -rf "$OUT/k6-tree"
mkdir -p "$OUT/k6-tree"
cp -r "$REPO/k6/scenarios" "$REPO/k6/lib" "$REPO/k8s-perf/base/k6/runner.js" "$OUT/k6-tree/"
k6_run smoke smoke "$INGESTOR" RATE=10 DURATION=4s
k6_run dropped smoke "$INGESTOR" RATE=300 DURATION=2s PRE_VUS=1 MAX_VUS=1
k6_run fire fire-and-forget "$BAD_INGESTOR" VU_SCALE=0.0002 DURATION_SCALE=0.003
kill -KILL "$SPARE_BROKER_PID"
for _ in 1 2 3; do
  curl -s -o /dev/null -XPOST -H 'content-type: application/json' "http://$BAD_INGESTOR/produce/fire/batch" -d "$batch" || true
  sleep 0.3
done
grep -q "CHRONIK-K6-FILE-BEGIN .*k6-smoke-summary.json" "$OUT/logs/k6-smoke.out" \
  || { log "runner.js did not print the summary file to stdout"; exit 1; }
sleep 4   # a few more scrapes, so rates over the run have samples

# -- every metric name seen, then the dashboards against the live data -------------------------
curl -fsS "$PROM/api/v1/label/__name__/values" | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)["data"]))' > "$OUT/names.txt"
log "$(wc -l < "$OUT/names.txt") metric names scraped"
"$PY" "$HERE/check_dashboards.py" --prom "$PROM" --names "$OUT/names.txt" \
  "$REPO"/k8s-perf/base/monitoring/dashboards/*.json
