#!/usr/bin/env bash
# k8s-perf/tests/scrape.sh - the live half of `make k8s-test`: start the real
# binaries on loopback with the env the cluster overlay gives them (three
# brokers on 127.0.0.1-3 in cluster mode, RF 3, min.insync 2),
# provoke every metric the dashboards use, let a local Prometheus scrape them
# (the load generators too, labelled as the PodMonitor labels the Job's
# pods), then run check_dashboards.py against it.
#
#   k8s-perf/tests/scrape.sh OUT_DIR ENV_DIR
#
# ENV_DIR holds chronik.env, chronik-ingestor.env, chronik-consumer.env
# (check_manifests.py --env-out of the cluster overlay): the manifests' literal
# env, so the real parsers see the manifests' values; addresses, node ids and
# peers are overridden by flags (what entrypoint.sh derives in a pod).
# Writes OUT_DIR/served.json ({binary: {path: HTTP status}} for the probe
# paths), OUT_DIR/names.txt (every metric name seen), logs in OUT_DIR/logs/,
# and OUT_DIR/load/ (the distributed smoke run's results as run.sh collects
# them: gen-0/, gen-1/, merged-smoke.json; tests/test_results.sh checks them).
# Provokes: produce + consume through an ingestor and a consumer; a garbage
# frame (connections closed on error); a client over its producer_byte_rate
# (client-quota metrics); chronik-loadgen runs with the flags
# the Job's script gives (load/plans/ as the ConfigMap holds them): the smoke
# plan as a Job of 2 indexes (index 0 holds the start barrier, index 1 joins
# it; each serves its results until lib/collect.sh's loadgen_fetch, through a
# stand-in kubectl whose pod proxy is curl, has them; chronik-loadgen merge
# pools them), an over-rate smoke with one request in flight at most
# (dropped requests), fire-and-forget against a second ingestor whose queue
# holds one message (accepted, rejected queue_full, failed 503); then that
# ingestor's broker is killed and the messages it queues time out (failed by
# error). Every process it starts is stopped by pid on exit. Bounded: ~50 s.
# Needs: target/release binaries, prometheus (Debian), chronik-loadgen
# (LOADGEN_BIN, else scripts/install-loadgen.sh), curl, python3.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT=${1:?usage: scrape.sh OUT_DIR ENV_DIR}
ENV_DIR=${2:?usage: scrape.sh OUT_DIR ENV_DIR}
BIN_DIR="${BIN_DIR:-$REPO/target/release}"
LOADGEN_BIN="${LOADGEN_BIN:-$(bash "$REPO/scripts/install-loadgen.sh")}"
PY="${PY:-$REPO/.tools/k8s-venv/bin/python}"
mkdir -p "$OUT/logs" "$OUT/data" "$OUT/load"
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

# free_port [N] - N distinct ports 127.0.0.1-3 can bind (the one implementation: scripts/runctl.py)
free_port() { python3 "$REPO/scripts/runctl.py" free-port "$@"; }

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
PORTS=$(free_port 3)
read -r KAFKA_PORT RAFT_PORT METRICS_PORT <<< "$PORTS"
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
# the load generators' metrics ports (fixed before they start, so Prometheus
# knows them), labelled as the PodMonitor labels the Job's pods
PORTS=$(free_port 5)
read -r LG0 LG1 LG_DROPPED LG_FIRE BARRIER <<< "$PORTS"
cat > "$OUT/prometheus.yml" << YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: chronik
    static_configs:
      - targets: ['${BROKER_METRICS[0]}', '${BROKER_METRICS[1]}', '${BROKER_METRICS[2]}', '$INGESTOR', '$CONSUMER', '$BAD_INGESTOR']
  - job_name: chronik-perf/chronik-loadgen
    static_configs:
      - targets: ['127.0.0.1:$LG0', '127.0.0.1:$LG1', '127.0.0.1:$LG_DROPPED', '127.0.0.1:$LG_FIRE']
        labels: {namespace: chronik-perf, chronik_perf_run_id: k8s-test}
YAML
start prometheus "" prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/prometheus-data" \
  --web.listen-address="127.0.0.1:$PROM_PORT"
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
python3 "$HERE/scrape_probe.py" short-frame "127.0.0.1:$KAFKA_PORT"
# a client over its producer_byte_rate: measured and throttled
python3 "$HERE/scrape_probe.py" client-quota "127.0.0.1:$KAFKA_PORT"

# loadgen NAME INDEX ARGS... - chronik-loadgen run, as the Job's script runs it, in the background
loadgen() {
  local name=$1; shift
  start "loadgen-$name" "" "$LOADGEN_BIN" run "$@" --run-id k8s-test --git-commit test --serve-results-for 20s
}
PLANS="$REPO/k8s-perf/base/loadgen/plans"   # what the plans ConfigMap holds (= load/plans/, sync_plans.py)
# the smoke plan as the Job of 2 indexes runs it: one start barrier, 1/2 of the rate each
for i in 0 1; do
  barrier=(--barrier-listen "127.0.0.1:$BARRIER")
  ((i == 0)) || barrier=(--barrier-peer "http://127.0.0.1:$BARRIER")
  port=$LG0; ((i == 0)) || port=$LG1
  loadgen "gen-$i" "$PLANS/smoke.json" --targets "http://$INGESTOR" --results "$OUT/load-pods/gen-$i" \
    --generators 2 --index "$i" "${barrier[@]}" --scale 1 --duration-scale 1 --acks 1 --topology cluster \
    --prometheus-addr "127.0.0.1:$port" --rate 20 --duration 5s
done

# collect the two smoke generators as run.sh does (lib/collect.sh's loadgen_fetch
# and loadgen_merge), through a stand-in kubectl: the pod list is the two
# generators, the API server's pod proxy is curl to their metrics ports
mkdir -p "$OUT/kubectl"
cat > "$OUT/kubectl/pods.json" << JSON
{"items": [
 {"metadata": {"name": "chronik-load-0-x7k2p", "annotations": {"batch.kubernetes.io/job-completion-index": "0"}},
  "status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}},
 {"metadata": {"name": "chronik-load-1-q9zrt", "annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
  "status": {"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}}]}
JSON
cat > "$OUT/kubectl/kubectl" << EOF
#!/usr/bin/env bash
# stand-in kubectl (scrape.sh): the two generator pods, their proxy = curl
case "\$*" in
  "get pods -n chronik-perf -l app.kubernetes.io/name=chronik-loadgen -o json") cat "\${STANDIN_PODS:-$OUT/kubectl/pods.json}" ;;
  "get pods -n chronik-perf -l app.kubernetes.io/component=consumer -o jsonpath="*) ;;
  "get --raw /api/v1/namespaces/chronik-perf/pods/chronik-load-0-x7k2p:9102/proxy/"*)
    exec curl -fsS --max-time 60 "http://127.0.0.1:$LG0/\${3#*/proxy/}" ;;
  "get --raw /api/v1/namespaces/chronik-perf/pods/chronik-load-1-q9zrt:9102/proxy/"*)
    exec curl -fsS --max-time 60 "http://127.0.0.1:$LG1/\${3#*/proxy/}" ;;
  "logs -n chronik-perf chronik-load-0-x7k2p") cat "$OUT/logs/loadgen-gen-0.err" ;;
  "logs -n chronik-perf chronik-load-1-q9zrt") cat "$OUT/logs/loadgen-gen-1.err" ;;
  *) echo "stand-in kubectl: unexpected \$*" >&2; exit 1 ;;
esac
EOF
chmod +x "$OUT/kubectl/kubectl"
(
  export PATH="$OUT/kubectl:$PATH"
  # shellcheck source=k8s-perf/lib/k8s.sh
  source "$REPO/k8s-perf/lib/k8s.sh"
  # shellcheck source=k8s-perf/lib/collect.sh
  source "$REPO/k8s-perf/lib/collect.sh"
  NAMESPACE=chronik-perf OUT="$OUT/collected" DRY_RUN=0 CONTEXT=""
  mkdir -p "$OUT"/{load,logs}
  # run.sh's own follow loop: both generators fetched as soon as they have their results
  GENERATORS=2 START_WAIT=60 TIMEOUT=120 LOADGEN_POLL=1
  rc=0
  loadgen_follow || rc=$?
  echo "$rc $LOAD_FETCHED" > "$OUT/follow-running"
  log "loadgen_follow returned $rc: fetched $LOAD_FETCHED of 2 generators' results through the stand-in pod proxy"
  loadgen_merge
  echo "$LOAD_RC" > "$OUT/merge-exit"
  # the boundary: pods that "complete" (as kwok's do) without ever answering
  sed 's/"Running", "containerStatuses": \[{"state": {"running": {}}}\]/"Succeeded", "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]/' \
    "$OUT/../kubectl/pods.json" > "$OUT/../kubectl/pods-completed.json"
  rc=0
  STANDIN_PODS="$OUT/../kubectl/pods-completed.json" loadgen_follow || rc=$?
  echo "$rc $LOAD_FETCHED $LOAD_ENDED" > "$OUT/follow-completed"
  # a generator that failed (exit 2: a bad flag) before it answered
  sed '0,/"Succeeded", "containerStatuses": \[{"state": {"terminated": {"exitCode": 0}}}\]/s//"Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 2}}}]/' \
    "$OUT/../kubectl/pods-completed.json" > "$OUT/../kubectl/pods-failed.json"
  rc=0
  STANDIN_PODS="$OUT/../kubectl/pods-failed.json" loadgen_follow || rc=$?
  echo "$rc $LOAD_FETCHED $LOAD_ENDED" > "$OUT/follow-failed"
) > "$OUT/logs/collect.out" 2>&1 || true
rm -rf "$OUT/load" && mv "$OUT/collected/load" "$OUT/load"
# then (not beside the smoke pair, whose figures they would disturb on a small machine):
# over-rate: one request in flight at most, so most leave late (dropped)
loadgen dropped "$PLANS/smoke.json" --targets "http://$INGESTOR" --results "$OUT/load-dropped" \
  --prometheus-addr "127.0.0.1:$LG_DROPPED" --rate 300 --duration 2s --max-in-flight 1
# fire-and-forget against the queue-of-one ingestor: accepted, rejected queue_full (503)
loadgen fire "$PLANS/fire-and-forget.json" --targets "http://$BAD_INGESTOR" --results "$OUT/load-fire" \
  --prometheus-addr "127.0.0.1:$LG_FIRE" --scale 0.002 --duration-scale 0.004
for f in merge-exit follow-running follow-completed follow-failed; do
  cp "$OUT/collected/$f" "$OUT/load-$f" 2> /dev/null || true
done
# the fire run's load over (it then serves its results, unfetched, and stays scraped), then its broker dies
for _ in $(seq 300); do grep -q 'serving gen-0 results' "$OUT/logs/loadgen-fire.err" 2> /dev/null && break; sleep 0.1; done
kill -KILL "$SPARE_BROKER_PID"
for _ in 1 2 3; do
  curl -s -o /dev/null -XPOST -H 'content-type: application/json' "http://$BAD_INGESTOR/produce/fire/batch" -d "$batch" || true
  sleep 0.3
done
sleep 4   # a few more scrapes, so rates over the run have samples

# -- every metric name seen, then the dashboards against the live data -------------------------
curl -fsS "$PROM/api/v1/label/__name__/values" | python3 "$HERE/scrape_probe.py" metric-names > "$OUT/names.txt"
log "$(wc -l < "$OUT/names.txt") metric names scraped"
"$PY" "$HERE/check_dashboards.py" --prom "$PROM" --names "$OUT/names.txt" \
  "$REPO"/k8s-perf/base/monitoring/dashboards/*.json
