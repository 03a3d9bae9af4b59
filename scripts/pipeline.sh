# shellcheck shell=bash
# scripts/pipeline.sh - starting and observing the pieces of a local
# end-to-end run (run-all.sh): ingestors, verifying consumers, Apache Kafka
# from the anchor, Prometheus, and the per-process resource sampler.
# Sourced after scripts/lib.sh, not run.
#
# Owns: how each process is started on 127.0.0.1 (free ports, LISTENING line,
# readiness), registered in .run/pids for cleanup.sh, and where its logs go.
# Must not: decide what a run measures (run-all.sh does).
#
# Needs: curl, python3 (.venv with confluent-kafka), the release binaries.

INGESTOR_BIN="${INGESTOR_BIN:-$REPO_ROOT/target/release/chronik-ingestor}"
CONSUMER_BIN="${CONSUMER_BIN:-$REPO_ROOT/target/release/chronik-consumer}"
VENV_PY="${VENV_PY:-$REPO_ROOT/.venv/bin/python}"

# wait_listening PID LOGFILE NAME - wait for the process's first
# "LISTENING http=ADDR [metrics=ADDR]" line (https=ADDR when it serves TLS)
# and set LISTENING_URL (scheme://ADDR) and LISTENING_METRICS (the plain
# metrics address, else ADDR), or die.
wait_listening() {
  local pid=$1 out=$2 name=$3 i line=""
  for ((i = 0; i < 600; i++)); do
    line=$(grep -m1 '^LISTENING ' "$out" 2>/dev/null || true)
    [[ -n "$line" ]] && break
    kill -0 "$pid" 2>/dev/null || die "$name exited during startup (logs beside $out)"
    sleep 0.1
  done
  [[ -n "$line" ]] || die "$name printed no LISTENING line within 60 s"
  LISTENING_URL=$(sed -nE 's/^LISTENING (https?)=([^ ]+).*/\1:\/\/\2/p' <<<"$line")
  [[ -n "$LISTENING_URL" ]] || die "$name: cannot parse '$line'"
  LISTENING_METRICS=$(sed -nE 's/.* metrics=([^ ]+).*/\1/p' <<<"$line")
  LISTENING_METRICS=${LISTENING_METRICS:-${LISTENING_URL#*://}}
}

# INGESTOR_ENV / CONSUMER_ENV - NAME=VALUE pairs the ingestors / consumers
# are started with (scripts/secure.sh: their Kafka credentials)
INGESTOR_ENV=()
CONSUMER_ENV=()

# start_ingestor NAME DIR BOOTSTRAP TOPIC [ARGS...] - sets STARTED_PID,
# STARTED_URL (http:// or https://) and STARTED_METRICS (host:port of /metrics).
start_ingestor() {
  local name=$1 dir=$2 bootstrap=$3 topic=$4; shift 4
  mkdir -p "$dir"
  env "${INGESTOR_ENV[@]}" "$INGESTOR_BIN" --listen 127.0.0.1:0 --bootstrap-servers "$bootstrap" --topic "$topic" \
    --ingestor-id "$name" "$@" > "$dir/$name.stdout.log" 2> "$dir/$name.stderr.log" < /dev/null &
  STARTED_PID=$!
  pid_record "$STARTED_PID" "$name"
  wait_listening "$STARTED_PID" "$dir/$name.stdout.log" "$name"
  STARTED_URL=$LISTENING_URL
  STARTED_METRICS=$LISTENING_METRICS
  # /ready is open (no token) on the plain metrics address too
  wait_http_ok "http://$STARTED_METRICS/ready" 60 "$STARTED_PID" || die "$name not ready at $STARTED_METRICS/ready"
  log "$name pid $STARTED_PID at $STARTED_URL"
}

# start_consumer NAME DIR BOOTSTRAP TOPIC GROUP REPORT [ARGS...] - sets
# STARTED_PID, STARTED_URL and STARTED_METRICS.
start_consumer() {
  local name=$1 dir=$2 bootstrap=$3 topic=$4 group=$5 report=$6; shift 6
  mkdir -p "$dir"
  env "${CONSUMER_ENV[@]}" "$CONSUMER_BIN" --bootstrap-servers "$bootstrap" --topic "$topic" --group "$group" \
    --listen 127.0.0.1:0 --report "$report" --from-beginning --client-id "$name" "$@" \
    > "$dir/$name.stdout.log" 2> "$dir/$name.stderr.log" < /dev/null &
  STARTED_PID=$!
  pid_record "$STARTED_PID" "$name"
  wait_listening "$STARTED_PID" "$dir/$name.stdout.log" "$name"
  STARTED_URL=$LISTENING_URL
  STARTED_METRICS=$LISTENING_METRICS
  log "$name pid $STARTED_PID at $STARTED_URL"
}

# ingestor_get URL - GET an ingestor URL to stdout; for https:// with
# INGESTOR_CA_FILE as CA and INGESTOR_AUTH_HEADER_FILE's header (secure.sh)
ingestor_get() {
  local opts=()
  if [[ "$1" == https://* ]]; then
    [[ -n "${INGESTOR_CA_FILE:-}" ]] && opts+=(--cacert "$INGESTOR_CA_FILE")
    [[ -n "${INGESTOR_AUTH_HEADER_FILE:-}" ]] && opts+=(-H "@$INGESTOR_AUTH_HEADER_FILE")
  fi
  curl -fsS --max-time 5 "${opts[@]}" "$1"
}

# ingestor_collect URL PREFIX - wait (up to DRAIN_TIMEOUT s) until the
# ingestor at URL has nothing in flight, then save its ledger and metrics as
# PREFIX-ledger.json and PREFIX-metrics.prom
ingestor_collect() {
  local url=$1 prefix=$2 s inflight
  for ((s = 0; s < ${DRAIN_TIMEOUT:-120}; s++)); do
    inflight=$("$VENV_PY" "$REPO_ROOT/scripts/runctl.py" in-flight "$url")
    [[ "$inflight" == 0 ]] && break
    sleep 1
  done
  ingestor_get "$url/ledger" > "$prefix-ledger.json"
  ingestor_get "$url/metrics" > "$prefix-metrics.prom" || true
}

# create_topic BOOTSTRAP TOPIC PARTITIONS [RF [MIN_INSYNC]] - with confluent-kafka's admin client.
create_topic() {
  "$VENV_PY" "$REPO_ROOT/scripts/runctl.py" create-topic "$1" "$2" "$3" "${4:-1}" "${5:-1}"
}

# kafka_anchor - the kafka-anchor's working copy in .tools/ (copied from the
# read-only one beside the repo on first use, Kafka jars fetched from Maven
# Central once). Prints its directory. ANCHOR_SRC / ANCHOR_HOME override.
kafka_anchor() {
  local home="${ANCHOR_HOME:-$REPO_ROOT/.tools/kafka-anchor}"
  local src="${ANCHOR_SRC:-$REPO_ROOT/../shared/tools/kafka-anchor}"
  [[ -d "$src" ]] || src=/work/shared/tools/kafka-anchor
  if [[ ! -x "$home/start-single.sh" ]]; then
    [[ -d "$src" ]] || die "Apache Kafka runs from the kafka-anchor; none at $src"
    mkdir -p "$home"
    tar -C "$src" --exclude=./lib --exclude=./run --exclude=./results --exclude=./.venv -cf - . | tar -C "$home" -xf -
    chmod -R u+w "$home"
  fi
  [[ -d "$home/lib/broker" ]] || (cd "$home" && ./setup.sh) >&2 || die "kafka-anchor setup failed"
  echo "$home"
}

# kafka_anchor_for_log_dirs DIR DATA_ROOT - a copy of the kafka-anchor's
# scripts and config in DIR (its jars linked, not copied) whose nodes keep
# their log.dirs (and so the KRaft metadata log) in DATA_ROOT/nodeN instead
# of under their node directory, which the anchor wipes and recreates on
# every start: run-all.sh --faults mounts a disk-full fault's tmpfs there
# before Kafka formats it, and throttles the disk under it. The anchor itself
# is not changed. Prints DIR (use it as ANCHOR_HOME).
kafka_anchor_for_log_dirs() {
  local dir=$1 data_root=$2 base
  base=$(ANCHOR_HOME="" kafka_anchor)
  mkdir -p "$dir" "$data_root"
  tar -C "$base" --exclude=./lib --exclude=./run --exclude=./results --exclude=./.venv -cf - . | tar -C "$dir" -xf -
  ln -sfn "$base/lib" "$dir/lib"
  local template="$dir/config/server.properties.template"
  grep -q '^log.dirs=@DATA_DIR@$' "$template" \
    || die "the kafka-anchor's $template has no 'log.dirs=@DATA_DIR@' line to redirect"
  sed -i "s#^log.dirs=@DATA_DIR@\$#log.dirs=$data_root/node@NODE_ID@#" "$template"
  echo "$dir"
}

# start_kafka DIR NODES - Apache Kafka 4.3.1 with the topology Chronik gets
# from the same flags: NODES=1 one KRaft node (broker+controller) on free
# ports; NODES=3 three, each broker+controller, one 3-voter quorum, internal
# topics RF 3 / min ISR 2 (the anchor's start-cluster.sh, client ports
# 9092-9094). Sets KAFKA_PIDS, KAFKA_PID (the first) and KAFKA_BOOTSTRAP.
# Stop with stop_kafka DIR.
start_kafka() {
  local dir=$1 nodes=$2 anchor
  anchor=$(kafka_anchor)
  KAFKA_PIDS=()
  case $nodes in
    1)
      local ports port cport
      ports=$(free_port 2); read -r port cport <<< "$ports"
      ANCHOR_RUN_DIR="$dir" BROKER_PORT=$port CONTROLLER_PORT=$cport "$anchor/start-single.sh" >&2 \
        || die "Apache Kafka did not start (logs: $dir/single/logs)"
      KAFKA_PIDS=("$(cat "$dir/single/pid")")
      KAFKA_BOOTSTRAP="127.0.0.1:$port"
      ;;
    3)
      local p
      for p in 9092 9093 9094 19092 19093 19094; do
        port_free "$p" || die "a 3-node Apache Kafka needs 127.0.0.1:$p (client 9092-9094, controller 19092-19094) free"
      done
      ANCHOR_RUN_DIR="$dir" "$anchor/start-cluster.sh" >&2 || die "the Apache Kafka cluster did not start (logs: $dir/node*/logs)"
      mapfile -t KAFKA_PIDS < <(cat "$dir"/node{1,2,3}/pid)
      KAFKA_BOOTSTRAP="127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
      ;;
    *) die "Apache Kafka runs with 1 or 3 nodes here (asked for $nodes)" ;;
  esac
  for p in "${KAFKA_PIDS[@]}"; do pid_record "$p" kafka; done
  # shellcheck disable=SC2034  # read by the scripts that source this one
  KAFKA_PID=${KAFKA_PIDS[0]}
  log "Apache Kafka ($nodes node(s)) pids ${KAFKA_PIDS[*]} at $KAFKA_BOOTSTRAP"
}

# stop_kafka DIR - stops every Kafka node started under DIR (SIGTERM, then
# SIGKILL after 30 s).
stop_kafka() {
  local anchor="${ANCHOR_HOME:-$REPO_ROOT/.tools/kafka-anchor}"
  [[ -x "$anchor/stop.sh" ]] && ANCHOR_RUN_DIR="$1" "$anchor/stop.sh" > /dev/null 2>&1 || true
  local p
  for p in "${KAFKA_PIDS[@]:-}"; do [[ -n "$p" ]] && pid_forget "$p" 2>/dev/null; done
  return 0
}

# warm_up_kafka BOOTSTRAP RF MIN_ISR RECORDS LOG - an unreported JVM warm-up:
# RECORDS 1 KiB records, acks=all, through Kafka's ProducerPerformance on a
# topic of its own, bounded by 300 s. Its figures are not part of any result.
warm_up_kafka() {
  local bootstrap=$1 rf=$2 min_isr=$3 records=$4 logf=$5 anchor
  ((records > 0)) || return 0
  anchor=$(kafka_anchor)
  log "warming up the Kafka JVMs: $records records (not reported)"
  timeout --kill-after=15 300 "$anchor/perf.sh" run --bootstrap "$bootstrap" --rf "$rf" --min-isr "$min_isr" \
    --size 1024 --acks all --profile tuned --records "$records" --tag warmup --out "$logf.tsv" > "$logf" 2>&1 \
    || log "Kafka warm-up failed (continuing): $(tail -3 "$logf")"
}

# start_prometheus DIR TARGET... - Prometheus scraping every TARGET
# (host:port) each second, if the binary is installed (Debian's package).
# Sets PROM_PID and PROM_URL, or leaves them empty.
start_prometheus() {
  local dir=$1; shift
  PROM_PID="" PROM_URL=""
  command -v prometheus > /dev/null || { log "prometheus not installed: skipping (apt-get install prometheus)"; return 0; }
  mkdir -p "$dir/data"
  {
    echo "global: {scrape_interval: 1s, evaluation_interval: 1s}"
    echo "scrape_configs:"
    echo "  - job_name: chronik-run"
    echo "    static_configs:"
    local t targets=""
    for t in "$@"; do targets+="'$t',"; done
    echo "      - targets: [${targets%,}]"
  } > "$dir/prometheus.yml"
  local port
  port=$(free_port)
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" --web.enable-remote-write-receiver \
    > "$dir/prometheus.log" 2>&1 < /dev/null &
  PROM_PID=$!
  pid_record "$PROM_PID" prometheus
  PROM_URL="http://127.0.0.1:$port"
  wait_http_ok "$PROM_URL/-/ready" 30 "$PROM_PID" || { log "prometheus did not become ready; continuing without it"; PROM_URL=""; }
  [[ -n "$PROM_URL" ]] && log "prometheus pid $PROM_PID at $PROM_URL scraping $*"
}

# sample_resources OUT_CSV STOP_FILE NAME=PID... - every second, one row per
# process: timestamp,component,name,pid,cpu_seconds,rss_bytes (cumulative CPU
# from /proc/PID/stat). A spec NAME=~PATTERN follows the newest process whose
# command line matches PATTERN (pgrep -f), for processes started later (the load generators).
# Runs until STOP_FILE exists. Run it in the background.
sample_resources() {
  local out=$1 stop=$2; shift 2
  local hz page
  hz=$(getconf CLK_TCK); page=$(getconf PAGESIZE)
  echo "timestamp,component,name,pid,cpu_seconds,rss_bytes" > "$out"
  while [[ ! -e "$stop" ]]; do
    local now spec name pid component
    now=$(date +%s.%N)
    for spec in "$@"; do
      name=${spec%%=*}; pid=${spec#*=}; component=${name%%-[0-9]*}
      if [[ $pid == "~"* ]]; then
        pid=$(pgrep -n -f -- "${pid#"~"}" 2>/dev/null) || continue
      fi
      [[ -r /proc/$pid/stat ]] || continue
      awk -v ts="$now" -v c="$component" -v n="$name" -v p="$pid" -v hz="$hz" -v pg="$page" \
        '{sub(/^.*\) /, ""); printf "%s,%s,%s,%s,%.2f,%d\n", ts, c, n, p, ($12 + $13) / hz, $22 * pg}' \
        "/proc/$pid/stat" >> "$out" 2>/dev/null || true
    done
    sleep 1
  done
}
