#!/usr/bin/env bash
# compat/run.sh - the real-client compatibility matrix of chronik-server.
#
# For each client (rdkafka, confluent-kafka, kafka-python, aiokafka, franz-go,
# sarama, kafkajs, the Java kafka-clients, a Kafka Streams exactly_once_v2 word
# count, Kafka's perf tools, kcat, Kafka's admin CLI tools) start a FRESH broker
# (temp data dir, 127.0.0.1 port 0) and run the checks of compat/README.md
# through that client's driver: produce, fetch, group (default assignor, range,
# roundrobin, cooperative-sticky), commit-resume (across a broker restart on
# the same data dir), idempotent, transactions and admin (and, for the rows in
# SHARE_CLIENTS, share: share groups (KIP-932) through the client's share
# consumer - franz-go, the Java client, confluent-kafka - or, for kafka-cli,
# Kafka's share tools, python/share_groups.py; the other rows get n/a there,
# with the reason); the clients in
# EOS_848_CLIENTS (default franz-go) also run eos-848 (a KIP-848 group of
# transactional members joining and leaving) on a broker with one fetch-session slot;
# EOS_FAILOVER_CLIENTS also run eos-failover against a fresh 3-node cluster
# (exactly-once consume-transform-produce while the runner SIGKILLs the node the
# driver names: the leader of the output's partition 0); the clients in
# SECURITY_CLIENTS also run security against a fresh broker with a SASL_SSL
# (SCRAM-SHA-512) and an SSL listener (client certificate required) and the
# StandardAuthorizer without allow-everyone (python/security_acls.py grants the
# SCRAM user and the client certificate's subject ALL on the compat-sec- topic
# and group prefixes); the other rows get n/a there. Certificates come from
# scripts/make-certs.sh, once per run. Every broker runs with
# --group-initial-rebalance-delay-ms 0 except confluent-kafka's, which keeps
# Kafka's default 3000 ms to prove it works.
# Prints the matrix, writes results/compat/<run-id>/{matrix.md,matrix.json}
# (plus every driver's and broker's log), exits 1 if any check failed.
#
#   bash compat/run.sh [--clients "kcat franz-go"] [--jobs N] [--no-deps] [--keep]
#
#   --clients LIST  subset, in this order: rdkafka confluent-kafka kafka-python
#                   aiokafka franz-go sarama kafkajs java kafka-streams perf kcat
#                   kafka-cli (default: all)
#   --jobs N        clients run at once, each with its own broker (default 2)
#   --no-deps       skip compat/install-deps.sh (apt, .venv, go/mvn/cargo builds)
#   --keep          keep the brokers' data dirs (.run/compat-<run-id>/)
#
# Needs: Debian 12 (compat/install-deps.sh installs kcat, the Python clients and
# builds the Go, Java and Rust drivers), target/release/chronik-server (built
# here with cargo only if missing), curl, setsid/timeout (util-linux, coreutils).
# Env: RUN_ID (default UTC timestamp), RESULTS_ROOT (default <repo>/results),
#      CHRONIK_SERVER_BIN, VENV (default <repo>/.venv), CHECK_TIMEOUT (s, one
#      driver run, default 300), STAGE_TIMEOUT (s, one wait inside a check,
#      default 60), MESSAGES (default 1000), PERF_RECORDS (default 100000),
#      DEFAULT_DELAY_CLIENTS (default "confluent-kafka"), WAL_PROFILE (default medium),
#      EOS_848_CLIENTS (default "franz-go"), EOS_848_MESSAGES (default 3000),
#      EOS_FAILOVER_CLIENTS (default "java"), EOS_MESSAGES (default 3000),
#      SECURITY_CLIENTS (default "rdkafka confluent-kafka java kcat franz-go"),
#      SHARE_CLIENTS (default "confluent-kafka franz-go java kafka-cli", the drivers with
#      share; "" for none), SHARE_STAGE_TIMEOUT (s, the client rows' share waits, default 30).
# Processes it starts are in .run/pids (./cleanup.sh stops leftovers); the trap
# stops every broker and driver process group it started, by pid.
set -euo pipefail
COMPAT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../scripts/lib.sh
source "$COMPAT_DIR/../scripts/lib.sh"   # REPO_ROOT, RUN_DIR, start_chronik, stop_chronik, log

ALL_CLIENTS=(rdkafka confluent-kafka kafka-python aiokafka franz-go sarama kafkajs java kafka-streams perf kcat kafka-cli)
CLIENTS="${CLIENTS:-${ALL_CLIENTS[*]}}"
JOBS="${JOBS:-2}"
DEPS="${DEPS:-1}"
KEEP="${KEEP:-0}"
VENV="${VENV:-$REPO_ROOT/.venv}"
CHECK_TIMEOUT="${CHECK_TIMEOUT:-300}"
STAGE_TIMEOUT="${STAGE_TIMEOUT:-60}"
MESSAGES="${MESSAGES:-1000}"
PERF_RECORDS="${PERF_RECORDS:-100000}"
DEFAULT_DELAY_CLIENTS="${DEFAULT_DELAY_CLIENTS:-confluent-kafka}"
WAL_PROFILE="${WAL_PROFILE:-medium}"
EOS_FAILOVER_CLIENTS="${EOS_FAILOVER_CLIENTS:-java}"
EOS_848_CLIENTS="${EOS_848_CLIENTS:-franz-go}"
EOS_848_MESSAGES="${EOS_848_MESSAGES:-3000}"
EOS_MESSAGES="${EOS_MESSAGES:-3000}"
SECURITY_CLIENTS="${SECURITY_CLIENTS:-rdkafka confluent-kafka java kcat franz-go}"
# rows that run the share check (the drivers that have it); set empty for none
SHARE_CLIENTS="${SHARE_CLIENTS-confluent-kafka franz-go java kafka-cli}"
SHARE_STAGE_TIMEOUT="${SHARE_STAGE_TIMEOUT:-30}"
# the security check's users and names (its certificates: $WORK/security)
SECURITY_ADMIN="admin"
SECURITY_USER="alice"
SECURITY_PASSWORD="alice-secret"
SECURITY_PREFIX="compat-sec-"
SECURITY_DENIED_TOPIC="compat-denied"
# the cluster eos-failover runs on: fast failure detection, RF 3, min.insync 2
EOS_CLUSTER_ARGS=(--wal-profile low --broker-session-timeout-ms 3000 --replica-lag-time-max-ms 3000
  --min-insync-replicas 2 --default-replication-factor 3 --group-initial-rebalance-delay-ms 0)
RUN_ID="${RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)}"
RESULTS_ROOT="${RESULTS_ROOT:-$REPO_ROOT/results}"
ASSIGNORS=(default range roundrobin cooperative-sticky)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --clients) CLIENTS=$2; shift;;
    --jobs) JOBS=$2; shift;;
    --no-deps) DEPS=0;;
    --keep) KEEP=1;;
    -h|--help) usage 0;;
    *) echo "unknown option: $1" >&2; usage;;
  esac
  shift
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer"
for c in $CLIENTS; do
  [[ " ${ALL_CLIENTS[*]} " == *" $c "* ]] || die "unknown client '$c' (known: ${ALL_CLIENTS[*]})"
done

WORK="$RUN_DIR/compat-$RUN_ID"
OUT="$RESULTS_ROOT/compat/$RUN_ID"
[[ -e "$WORK" || -e "$OUT" ]] && die "run id $RUN_ID already used ($WORK or $OUT exists)"
mkdir -p "$WORK" "$OUT/logs"
CLIENT_PIDS=()

# -- the whole run's cleanup: every client runner (each stops its own broker
# and driver process group on TERM), then the scratch dirs -------------------
on_exit() {
  local rc=$? pid
  trap - EXIT INT TERM
  for pid in "${CLIENT_PIDS[@]}"; do
    kill -TERM "$pid" 2> /dev/null || true
  done
  for pid in "${CLIENT_PIDS[@]}"; do
    wait "$pid" 2> /dev/null || true
  done
  if ((KEEP)); then log "kept broker data in $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ((DEPS)); then
  bash "$COMPAT_DIR/install-deps.sh"
fi
if [[ ! -x "$CHRONIK_SERVER_BIN" ]]; then
  log "no $CHRONIK_SERVER_BIN: building it"
  bash "$REPO_ROOT/scripts/build-release.sh" >&2
fi

# label: the client name the driver prints (matrix rows, owed-check bookkeeping)
client_label() {
  case $1 in
    rdkafka) echo "rdkafka (Rust)";;
    java) echo "kafka-clients (Java)";;
    kafka-streams) echo "kafka-streams (exactly_once_v2)";;
    perf) echo "kafka-tools (perf)";;
    *) echo "$1";;
  esac
}

# client_cmd CLIENT - the driver command line, in the array CMD
client_cmd() {
  local py="$VENV/bin/python" pydir="$COMPAT_DIR/python"
  case $1 in
    rdkafka) CMD=("$REPO_ROOT/target/release/chronik-compat-rdkafka");;
    confluent-kafka) CMD=("$py" "$pydir/confluent_driver.py");;
    kafka-python) CMD=("$py" "$pydir/kafka_python_driver.py");;
    aiokafka) CMD=("$py" "$pydir/aiokafka_driver.py");;
    franz-go) CMD=("$REPO_ROOT/target/compat/franz-go-driver");;
    sarama) CMD=("$REPO_ROOT/target/compat/sarama-driver");;
    kafkajs) CMD=(node "$COMPAT_DIR/kafkajs/driver.js");;
    java) CMD=(java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
               -cp "$COMPAT_DIR/java/target/classes:$COMPAT_DIR/java/target/lib/*" chronik.compat.Driver);;
    kafka-streams) CMD=(java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
               -cp "$COMPAT_DIR/java/target/classes:$COMPAT_DIR/java/target/lib/*" chronik.compat.StreamsDriver);;
    perf) CMD=("$py" "$pydir/perf_driver.py");;
    kcat) CMD=("$py" "$pydir/kcat_driver.py");;
    kafka-cli) CMD=("$py" "$pydir/cli_driver.py");;
  esac
}

# run_client CLIENT - one row of the matrix. Run it in the background only
# (`run_client c &`): that subshell is the process whose traps stop this
# client's broker and driver, and whose pid the main trap signals.
# shellcheck disable=SC2317  # the nested functions run via traps and die()
run_client() {
  local client=$1 label work logs seq=0 rc lines
  label=$(client_label "$client")
  work="$WORK/$client"
  logs="$OUT/logs/$client"
  mkdir -p "$work" "$logs"
  client_cmd "$client"
  local base_args=(--wal-profile "$WAL_PROFILE")
  [[ " $DEFAULT_DELAY_CLIENTS " == *" $client "* ]] || base_args+=(--group-initial-rebalance-delay-ms 0)
  local broker_args=("${base_args[@]}")
  # kafka-acls.sh needs an authorizer; open where no ACL applies, so the other tools pass
  [[ $client == kafka-cli ]] && broker_args+=(--authorizer-class-name
    org.apache.kafka.metadata.authorizer.StandardAuthorizer --allow-everyone-if-no-acl-found)
  BROKER_DIR="$work"
  DRIVER_PID=""
  CHRONIK_PID=""
  CHRONIK_PIDS=()
  KILLER_PID=""

  all_checks() {
    echo produce fetch
    local a
    for a in "${ASSIGNORS[@]}"; do group_name "$a"; done
    echo commit-resume idempotent transactions admin
    eos_client && echo eos-failover
    eos_848_client && echo eos-848
    security_client && echo security
    [[ $client == kafka-cli ]] && echo cluster-ops
    share_client && echo share
  }
  share_client() { [[ " $SHARE_CLIENTS " == *" $client "* ]]; }
  # share_not_checked - why this row has no share check (its n/a line's detail)
  share_not_checked() {
    case $client in
      rdkafka) echo "no share consumer in the rdkafka crate 0.39 nor in the librdkafka 2.12.1 it vendors (rdkafka-sys 4.10: no share API in rdkafka.h)";;
      kafka-python) echo "no share consumer in kafka-python 3.0.12 (it only names the KIP-932 API keys)";;
      aiokafka) echo "no KIP-932 support in aiokafka 0.12";;
      sarama) echo "no KIP-932 support in sarama 1.61";;
      kafkajs) echo "no KIP-932 support in kafkajs 2.2.4";;
      kafka-streams) echo "Kafka Streams 4.x does not consume through share groups";;
      perf) echo "this row runs Kafka's ProducerPerformance / ConsumerPerformance only (kafka-tools 4.3.1 also has ShareConsumerPerformance, a throughput tool; share groups are judged in the rows with a share consumer and kafka-cli)";;
      kcat) echo "kcat 1.7.1 has no share-consumer mode (and its librdkafka 2.0.2 predates KIP-932)";;
      *) echo "not in SHARE_CLIENTS ($SHARE_CLIENTS)";;
    esac
  }
  eos_client() { [[ " $EOS_FAILOVER_CLIENTS " == *" $client "* ]]; }
  eos_848_client() { [[ " $EOS_848_CLIENTS " == *" $client "* ]]; }
  security_client() { [[ " $SECURITY_CLIENTS " == *" $client "* ]]; }
  group_name() { if [[ $1 == default ]]; then echo group; else echo "group:$1"; fi; }
  # owe STATUS LOG CHECK... - matrix.py fails any owed check that has no result line
  owe() {
    local status=$1 logf=$2; shift 2
    {
      printf '%s\t%s\t%s' "$label" "$status" "$logf"
      (($#)) && printf '\t%s' "$@"
      printf '\n'
    } >> "$OUT/invocations.$client.tsv"
  }
  # not_checked CHECK DETAIL - the runner's own n/a line for a check this row does not run
  not_checked() {
    local line
    line=$("$VENV/bin/python" "$COMPAT_DIR/python/run_lines.py" not-checked "$label" "$1" "$2" "$OUT/results.$client.jsonl") \
      && printf '%s\n' "$line" >> "$OUT/results.$client.jsonl"
  }
  broker_start() {
    BROKER_DIR="$work"
    start_chronik "$work" "${broker_args[@]}"
    echo "$CHRONIK_KAFKA" > "$work/bootstrap"
  }
  broker_stop() {
    [[ -n "$CHRONIK_PID" ]] || return 0
    stop_chronik || log "$client: broker did not stop cleanly (exit status $?)"
    cp "$BROKER_DIR/stderr.log" "$logs/broker.$((++seq)).stderr.log" 2> /dev/null || true
  }
  # cluster_stop - stops the nodes of the cluster in $CLUSTER_DIR (controllers too)
  cluster_stop() {
    local pid i=0
    for pid in "${CHRONIK_CONTROLLER_PIDS[@]}" "${CHRONIK_PIDS[@]}"; do
      i=$((i + 1))
      stop_pid "$pid" || true
      wait "$pid" 2> /dev/null || true
      pid_forget "$pid"
      cp "$CLUSTER_DIR/node-$i/stderr.log" "$logs/$(basename "$CLUSTER_DIR")-node-$i.stderr.log" 2> /dev/null || true
    done
    CHRONIK_PIDS=()
    CHRONIK_CONTROLLER_PIDS=()
    CHRONIK_PID=""
  }
  cleanup() {
    trap - EXIT TERM INT
    [[ -n "$DRIVER_PID" ]] && kill -TERM -- "-$DRIVER_PID" 2> /dev/null
    [[ -n "$KILLER_PID" ]] && kill -TERM "$KILLER_PID" 2> /dev/null
    if ((${#CHRONIK_PIDS[@]})); then cluster_stop; else broker_stop; fi
  }
  trap cleanup EXIT
  trap 'exit 143' TERM INT
  # a broker that cannot start fails every check of this client (lib.sh's die exits)
  die() {
    log "$client: error: $*"
    # shellcheck disable=SC2046
    owe broker-start-failed "$logs" $(all_checks)
    exit 1
  }

  # invoke NAME OWED... -- DRIVER-ARGS... : one driver run in its own process group
  invoke() {
    local name=$1; shift
    local owed=()
    while [[ $1 != -- ]]; do owed+=("$1"); shift; done
    shift
    local logf="$logs/$((++seq))-$name.log" outf="$work/out.$seq"
    rc=0
    setsid timeout -k 10 "$CHECK_TIMEOUT" "${CMD[@]}" --bootstrap "$CHRONIK_KAFKA" \
      --stage-timeout "$STAGE_TIMEOUT" "$@" > "$outf" 2> "$logf" < /dev/null &
    DRIVER_PID=$!
    wait "$DRIVER_PID" || rc=$?
    DRIVER_PID=""
    cat "$outf" >> "$OUT/results.$client.jsonl"
    lines=$(grep -c . "$outf" || true)
    owe "$rc" "${logf#"$REPO_ROOT"/}" "${owed[@]}"
    local line
    while IFS= read -r line; do
      log "$client: $(sed -nE 's/.*"check": ?"([^"]*)".*"result": ?"([^"]*)".*/\1 \2/p' <<< "$line")"
    done < "$outf"
  }

  log "$client: starting a fresh broker (${broker_args[*]})"
  broker_start
  local n=$MESSAGES
  [[ $client == perf ]] && n=$PERF_RECORDS
  invoke produce-fetch produce fetch -- --check produce-fetch --messages "$n"
  local a
  for a in "${ASSIGNORS[@]}"; do
    invoke "group-$a" "$(group_name "$a")" -- --check group --assignor "$a"
  done
  # commit-resume: phase a prints a line only when it already has a verdict
  # (a failure, or n/a); otherwise the broker restarts and phase b decides
  invoke resume-a -- --check commit-resume --phase a --state "$work/resume.state" --messages "$MESSAGES"
  if ((lines == 0)); then
    if ((rc != 0)); then
      owe "$rc" "${logs#"$REPO_ROOT"/}" commit-resume
    else
      log "$client: restarting the broker on the same data dir"
      broker_stop
      broker_start
      invoke resume-b commit-resume -- --check commit-resume --phase b --state "$work/resume.state" \
        --messages "$MESSAGES"
    fi
  fi
  invoke idempotent idempotent -- --check idempotent --messages "$MESSAGES"
  invoke transactions transactions -- --check transactions --messages "$MESSAGES"
  invoke admin admin -- --check admin
  # share groups (KIP-932): kafka-cli through Kafka's share tools
  # (python/share_groups.py: four checks of ~40 s each on Kafka 4.3.1, so twice
  # CHECK_TIMEOUT); a client row through its share consumer (a few seconds;
  # its waits bounded by SHARE_STAGE_TIMEOUT)
  if ! share_client; then
    not_checked share "$(share_not_checked)"
  elif [[ $client == kafka-cli ]]; then
    CHECK_TIMEOUT=$((CHECK_TIMEOUT * 2)) invoke share share -- --check share --messages "$MESSAGES"
  else
    STAGE_TIMEOUT=$SHARE_STAGE_TIMEOUT invoke share share -- --check share --messages "$MESSAGES"
  fi
  broker_stop
  eos_848_client && eos_848
  eos_client && eos_failover
  [[ $client == kafka-cli ]] && cluster_ops
  if security_client; then
    security_check
  else
    not_checked security "no security step in this client's driver (compat/run.sh SECURITY_CLIENTS: $SECURITY_CLIENTS)"
  fi
  return 0
}

# eos_848 - (inside run_client) the eos-848 check on a fresh broker with one
# fetch-session slot (members' sessions evict each other throughout) and a
# 500 ms KIP-848 heartbeat (members joining and leaving are assigned quickly).
# shellcheck disable=SC2317  # called from run_client only
eos_848() {
  broker_args=("${base_args[@]}" --max-incremental-fetch-session-cache-slots 1
    --group-consumer-heartbeat-interval-ms 500)
  log "$client: starting a fresh broker for eos-848 (${broker_args[*]})"
  broker_start
  invoke eos-848 eos-848 -- --check eos-848 --messages "$EOS_848_MESSAGES"
  broker_stop
}

# eos_failover - (inside run_client) the eos-failover check on a fresh 3-node
# cluster: the driver writes a node id to kill-request when it wants the kill;
# a watcher SIGKILLs that node and creates kill-done.
# shellcheck disable=SC2317  # called from run_client only
eos_failover() {
  local req="$work/kill-request" ack="$work/kill-done"
  rm -f "$req" "$ack"
  log "$client: starting a 3-node cluster for eos-failover"
  CLUSTER_DIR="$work/cluster"
  start_chronik_cluster "$CLUSTER_DIR" 3 "${EOS_CLUSTER_ARGS[@]}"
  (
    local i id
    for ((i = 0; i < CHECK_TIMEOUT * 10; i++)); do
      if [[ -s "$req" ]]; then
        id=$(< "$req")
        if [[ "$id" =~ ^[1-3]$ ]]; then
          kill -KILL "${CHRONIK_PIDS[$((id - 1))]}" 2> /dev/null || true
          log "$client: SIGKILLed node $id (pid ${CHRONIK_PIDS[$((id - 1))]})"
          : > "$ack"
        else
          log "$client: ignoring kill request for '$id'"
        fi
        exit 0
      fi
      sleep 0.1
    done
  ) &
  KILLER_PID=$!
  invoke eos-failover eos-failover -- --check eos-failover --messages "$EOS_MESSAGES" \
    --kill-request "$req" --kill-done "$ack"
  kill -TERM "$KILLER_PID" 2> /dev/null || true
  wait "$KILLER_PID" 2> /dev/null || true
  KILLER_PID=""
  cluster_stop
}

# cluster_ops - (inside run_client, the kafka-cli row) the cluster-ops check on
# a fresh split cluster as docs/cluster.md runs it: 3 controllers and 5
# brokers in racks a, b, c (consumers may fetch from followers, KIP-392);
# twice CHECK_TIMEOUT, as it runs some forty tool invocations.
# shellcheck disable=SC2317  # called from run_client only
cluster_ops() {
  log "$client: starting 3 controllers and 5 brokers in racks a,b,c for cluster-ops"
  CLUSTER_DIR="$work/ops"
  CHRONIK_CONTROLLERS=3 CHRONIK_RACKS=a,b,c start_chronik_cluster "$CLUSTER_DIR" 5 "${EOS_CLUSTER_ARGS[@]}"
  COMPAT_BROKER_METRICS=$(IFS=,; echo "${CHRONIK_METRICS_LIST[*]}") COMPAT_CLUSTER_DIR=$CLUSTER_DIR \
    COMPAT_RAFT_PORT=$CHRONIK_RAFT_PORT COMPAT_CONTROLLERS=3 CHRONIK_SERVER_BIN=$CHRONIK_SERVER_BIN \
    CHECK_TIMEOUT=$((CHECK_TIMEOUT * 2)) invoke cluster-ops cluster-ops -- --check cluster-ops
  cluster_stop
}

# security_check - (inside run_client) the security check on a fresh broker:
# SASL_SSL (SCRAM-SHA-512 users from $WORK/security/scram.txt) and SSL
# listeners, a client certificate required on both, the StandardAuthorizer
# with the admin as super user and no allow-everyone; security_acls.py grants
# the SCRAM user and the client certificate's subject ALL on the topic and
# group prefix SECURITY_PREFIX and creates SECURITY_DENIED_TOPIC with no ACL.
# shellcheck disable=SC2317  # called from run_client only
security_check() {
  local certs="$WORK/security" sasl ssl acl_log
  log "$client: starting a secured broker for security"
  BROKER_DIR="$work/secure"
  start_chronik "$BROKER_DIR" "${base_args[@]}" --listeners SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0 \
    --ssl-keystore-location "$certs/broker.keystore.pem" --ssl-truststore-location "$certs/ca.pem" \
    --ssl-client-auth required --sasl-enabled-mechanisms SCRAM-SHA-512 \
    --sasl-scram-credentials-file "$certs/scram.txt" \
    --authorizer-class-name org.apache.kafka.metadata.authorizer.StandardAuthorizer \
    --super-users "User:$SECURITY_ADMIN"
  sasl=$(sed -nE 's/.* listener\.SASL_SSL=([^ ]+).*/\1/p' <<< "$CHRONIK_LISTENING_LINE")
  ssl=$(sed -nE 's/.* listener\.SSL=([^ ]+).*/\1/p' <<< "$CHRONIK_LISTENING_LINE")
  local tls=(--ssl-ca "$certs/ca.pem" --ssl-cert "$certs/client.pem" --ssl-key "$certs/client.key")
  acl_log="$logs/$((++seq))-security-acls.log"
  rc=0
  timeout -k 10 "$CHECK_TIMEOUT" "$VENV/bin/python" "$COMPAT_DIR/python/security_acls.py" --bootstrap "$sasl" \
    "${tls[@]}" --admin-username "$SECURITY_ADMIN" --admin-password "$SECURITY_ADMIN-secret" \
    --principal "User:$SECURITY_USER" --cert-principal "$certs/client.pem" --topic-prefix "$SECURITY_PREFIX" \
    --group-prefix "$SECURITY_PREFIX" --denied-topic "$SECURITY_DENIED_TOPIC" --timeout "$STAGE_TIMEOUT" \
    > /dev/null 2> "$acl_log" < /dev/null || rc=$?
  if ((rc != 0)); then
    log "$client: security: the ACL setup failed (exit status $rc, ${acl_log#"$REPO_ROOT"/})"
    owe "$rc" "${acl_log#"$REPO_ROOT"/}" security
  else
    invoke security security -- --check security --messages "$MESSAGES" --sasl-bootstrap "$sasl" \
      --ssl-bootstrap "$ssl" "${tls[@]}" --sasl-username "$SECURITY_USER" --sasl-password "$SECURITY_PASSWORD" \
      --topic-prefix "$SECURITY_PREFIX" --group-prefix "$SECURITY_PREFIX" --denied-topic "$SECURITY_DENIED_TOPIC"
  fi
  broker_stop
}

# every client runs against the same broker build, even if target/ is rebuilt meanwhile
BROKER_BUILT=$(date -u -r "$CHRONIK_SERVER_BIN" +%FT%TZ)
BROKER_SOURCE=$CHRONIK_SERVER_BIN
GIT_COMMIT=$(git_describe)
cp "$CHRONIK_SERVER_BIN" "$WORK/chronik-server"
CHRONIK_SERVER_BIN="$WORK/chronik-server"

# the security check's certificates and SCRAM users, once per run
for c in $CLIENTS; do
  if [[ " $SECURITY_CLIENTS " == *" $c "* ]]; then
    bash "$REPO_ROOT/scripts/make-certs.sh" "$WORK/security" > /dev/null
    printf 'SCRAM-SHA-512=[name=%s,password=%s]\n' "$SECURITY_ADMIN" "$SECURITY_ADMIN-secret" \
      "$SECURITY_USER" "$SECURITY_PASSWORD" > "$WORK/security/scram.txt"
    break
  fi
done

started=$(date +%s)
log "compat run $RUN_ID: clients [$CLIENTS], $JOBS at a time; results in $OUT"
running=0
for c in $CLIENTS; do
  if ((running >= JOBS)); then
    wait -n || true
    running=$((running - 1))
  fi
  run_client "$c" &
  CLIENT_PIDS+=("$!")
  running=$((running + 1))
done
for pid in "${CLIENT_PIDS[@]}"; do
  wait "$pid" || log "client runner pid $pid exited with status $?"
done
CLIENT_PIDS=()

# merge per-client files in the order the clients were named
: > "$OUT/results.jsonl"
: > "$OUT/invocations.tsv"
for c in $CLIENTS; do
  cat "$OUT/results.$c.jsonl" >> "$OUT/results.jsonl" 2> /dev/null || true
  cat "$OUT/invocations.$c.tsv" >> "$OUT/invocations.tsv" 2> /dev/null || true
  rm -f "$OUT/results.$c.jsonl" "$OUT/invocations.$c.tsv"
done
meta=$("$VENV/bin/python" "$COMPAT_DIR/python/run_lines.py" meta "$RUN_ID" "$GIT_COMMIT" "$BROKER_SOURCE" "$BROKER_BUILT" \
  "$DEFAULT_DELAY_CLIENTS" "$WAL_PROFILE" "$MESSAGES" "$PERF_RECORDS" "$(($(date +%s) - started))")
"$VENV/bin/python" "$COMPAT_DIR/python/matrix.py" --out "$OUT" --meta "$meta"
