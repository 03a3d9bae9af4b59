#!/usr/bin/env bash
# run-all.sh - the product's main job: an end-to-end load test on this machine.
#
#   chronik-loadgen -> N x chronik-ingestor (HTTP) -> broker -> M x chronik-consumer (verifying group)
#
# By default the broker is a local 3-node Chronik cluster (nodes on 127.0.0.1-3,
# same ports on each, as pods) with replication factor 3, min.insync.replicas 2
# and acks=all: seed 000's Test 7. --nodes 1 runs one broker (a quorum of one).
#
# Builds the release binaries, starts the broker (Chronik, or Apache Kafka with
# --broker kafka), the ingestors, the verifying consumers and (if installed)
# Prometheus scraping them all, runs a load plan (load/plans/, open model:
# requests leave on the plan's schedule whatever the system does), then lets
# the consumers drain, reconciles the ingestors' ledgers with what was consumed
# and renders results/<run-id>/report.md. Everything it starts is stopped by pid
# on exit or Ctrl-C; ./cleanup.sh stops leftovers of a killed run.
#
#   ./run-all.sh [options]
#     --test NAME        load plan in load/plans/ (default smoke); a plan with tenants
#                        (noisy-neighbour) gives each tenant its own ingestor
#                        (--ingestor-id TENANT: Kafka client.id chronik-ingestor-TENANT),
#                        topic, verifying consumer and generator run (scripts/tenants.sh);
#                        the report gets a per-tenant table and chart
#     --quota K=V[,K=V]  a Kafka client quota on the tenant QUOTA_TENANT (default noisy),
#                        set after the warm-up, before the measured load, with Kafka 4.3.1's kafka-configs --alter
#                        --add-config K=V --entity-type clients --entity-name
#                        chronik-ingestor-QUOTA_TENANT, e.g. producer_byte_rate=2000000
#                        (plans with tenants only)
#     --find-max         the max sustainable rate: load/plans/find-max.json climbs a
#                        staircase of constant rates (--levels 200,400,...
#                        batches/s, --step 20s each, --repeat 2 climbs) and the
#                        run prints the highest level that held batch p99 <
#                        P99_MS (1000) and the dropped-request gate in every
#                        climb; the report shows it per level and step
#     --duration D       load duration for smoke/rate scenarios, e.g. 60s (default 60s)
#     --warmup D         a warm-up before the measured load (default 10s; 0 = none): the
#                        smoke plan at --rate, its own generator run (results/<id>/warmup/;
#                        with tenants each tenant's at --rate / tenants, warmup/<tenant>/),
#                        so JIT, page cache and connections are warm; the report's
#                        headline throughput and latency cover only the measured load
#                        and show the warm-up's end-to-end latency apart
#     --late-consumer D  start one more verifying consumer D into the measured load (a
#                        rebalance in the window: what the report's Verification names)
#     --kill-consumer-at D  SIGKILL verifying consumer-1 D into the measured load (e.g. 30s;
#                        0 = none; a plan may carry it: share-queue does, 30s; share-group
#                        plans only). Its unacknowledged records are redelivered after
#                        share.record.lock.duration.ms; its last checkpoint report stays in
#                        the merge, and the report names it
#     --rate N           smoke: batches per second (default 200 = 20,000 msg/s)
#     --scale X          multiplies the plan's rates (default 1 for smoke and find-max; 0.01 =
#                        laptop size for the seed plans)
#     --duration-scale X multiplies the plan's stage durations (default 1; 0.05 for the seed plans)
#     --generators N     load generators on this machine (default 1), each offering 1/N of
#                        the plan's rates, all started by one barrier, results pooled
#     --acks 1|all       ingestor acks (default all, as seed 000 Test 7)
#     --nodes N          broker nodes (default 3; 1 = one node). --broker kafka
#                        starts Apache Kafka with the same topology (1 or 3 KRaft
#                        nodes, the same RF and min.insync.replicas) after an
#                        unreported JVM warm-up of KAFKA_WARMUP (200000) records
#     --controllers C    Kafka's split roles (Chronik only): C controller-only nodes (the
#                        metadata quorum's voters, 127.0.0.1..C) serving the --nodes brokers
#                        (broker-only, 127.0.0.C+1..), e.g. --nodes 5 --controllers 3;
#                        default 0: every node is broker and controller
#     --racks a,b,c      racks (Kafka's broker.rack; Chronik, 2+ nodes): broker I gets
#                        racks[(I-1) % len] and the rack-aware replica selector
#                        (KIP-392), verifying consumer I the client.rack racks[I % len],
#                        so consumers fetch from the in-sync follower in their rack;
#                        1-16 names of [A-Za-z0-9._-], 64 chars at most. The report
#                        shows the bytes consumers fetched from leaders and followers
#     --replication-factor R   topic replication factor (default min(3, nodes))
#     --min-insync-replicas M  topic min.insync.replicas (default 2 with 3+ nodes, else 1)
#     --broker chronik|kafka   broker under test (default chronik)
#     --ingestors N      (default 2)   --consumers M (default 2)   --partitions P (default 6)
#                        A plan's "consumers" block (load/SPEC.md) may set the consumers' mode
#                        and count: share-queue runs 3 members of one KIP-932 share group
#                        (chronik-consumer --share-group), verified at least once
#     --batch-size N     messages per POST   --message-size B   (default: the plan's; smoke 100 x 256 B)
#     --keys fixed|fresh prebuilt bodies rotated (default), or new keys every request
#     --wal-profile P    chronik WAL profile (default medium)
#     --secure           the whole pipeline secured (scripts/secure.sh): every Kafka
#                        connection SASL_SSL with SCRAM-SHA-512 (brokers among
#                        themselves too), the StandardAuthorizer with ACLs giving the
#                        ingestor and consumer users only their topic and group, and
#                        the ingestors' HTTP port over TLS with a bearer token (the
#                        generator sends it); Prometheus scrapes the plain metrics ports.
#                        Chronik only
#     --results DIR      results root (default results/)   --run-id ID
#     --faults SPEC      a fault schedule during the measured load (--test faults: the plan's) (scripts/faults.py; root; a
#                        3-node cluster, not with --secure or --controllers), e.g.
#                        'kill:leader@20s,restart@+10s;partition:node2@40s+8s;pause:node3@60s+3s;disk-full:node1@80s+10s'
#                        or 'slow-disk:follower@20s+20s' (FAULT_SLOW_DISK="wbps=1m wiops=50": its
#                        write limit). Each fault is undone on time and on exit;
#                        leaders and ISRs are polled twice a second; the report gets a fault
#                        timeline. scripts/fault-compare.sh runs Chronik and Kafka under one SPEC
#     --keep             keep the broker's data and scratch files (.run/<run-id>/)
#     --no-build         use the existing release binaries
#     --no-report        skip rendering the report
#
# Exit status: 0 when the run completed, the plan's thresholds held and verification
# found no loss, duplication, reordering or corruption; non-zero otherwise.
# Needs: cargo, Go (chronik-loadgen is built into .tools/bin on first use), python3, curl;
# Java 17 + Maven for --broker kafka.
set -euo pipefail
# --k8s: the same job on a Kubernetes cluster (k8s-perf/README.md); every other argument goes to k8s-perf/run.sh.
for arg in "$@"; do
  if [[ "$arg" == --k8s ]]; then
    k8s_args=(); for a in "$@"; do [[ "$a" == --k8s ]] || k8s_args+=("$a"); done
    exec "$(dirname "${BASH_SOURCE[0]}")/k8s-perf/run.sh" "${k8s_args[@]}"
  fi
done
cd "$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/pipeline.sh
source scripts/pipeline.sh
# shellcheck source=scripts/secure.sh
source scripts/secure.sh
# shellcheck source=scripts/tenants.sh
source scripts/tenants.sh

TEST="${TEST:-smoke}"
DURATION="${DURATION:-60s}"
WARMUP="${WARMUP:-}"
QUOTA="${QUOTA:-}"
QUOTA_TENANT="${QUOTA_TENANT:-noisy}"
LATE_CONSUMER="${LATE_CONSUMER:-}"
KILL_CONSUMER_AT="${KILL_CONSUMER_AT:-}"
RATE="${RATE:-200}"
SCALE="${SCALE:-}"
DURATION_SCALE="${DURATION_SCALE:-}"
ACKS="${ACKS:-all}"
NODES="${NODES:-3}"
CONTROLLERS="${CONTROLLERS:-0}"
RACKS="${RACKS:-}"
KAFKA_WARMUP="${KAFKA_WARMUP:-200000}"
REPLICATION_FACTOR="${REPLICATION_FACTOR:-}"
MIN_INSYNC="${MIN_INSYNC:-}"
BROKER="${BROKER:-chronik}"
INGESTORS="${INGESTORS:-2}"
CONSUMERS="${CONSUMERS:-2}"
PARTITIONS="${PARTITIONS:-6}"
BATCH_SIZE="${BATCH_SIZE:-}"
MESSAGE_SIZE="${MESSAGE_SIZE:-}"
GENERATORS="${GENERATORS:-1}"
WAL_PROFILE="${WAL_PROFILE:-medium}"
PRODUCE_PROFILE="${PRODUCE_PROFILE:-balanced}"
RESULTS_ROOT="${RESULTS_ROOT:-$REPO_ROOT/results}"
RUN_ID="${RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-$TEST}"
BUILD="${BUILD:-1}"
KEEP="${KEEP:-0}"
REPORT="${REPORT:-1}"
DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-120}"
SETTLE_TIMEOUT="${SETTLE_TIMEOUT:-60}"
KEYS="${KEYS:-fixed}"
LEVELS="${LEVELS:-}"
SECURE="${SECURE:-0}"
STEP="${STEP:-}"
FAULTS="${FAULTS:-}"
REPEAT="${REPEAT:-}"

# duration_seconds 90s|2m|1h|45 - seconds as a number, or null for other forms.
duration_seconds() {
  case $1 in
    *[0-9]s) echo "${1%s}" ;; *[0-9]m) echo "$((${1%m} * 60))" ;; *[0-9]h) echo "$((${1%h} * 3600))" ;;
    *[!0-9]*|"") echo null ;; *) echo "$1" ;;
  esac
}
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --test) TEST=$2; shift 2 ;;
    --find-max) TEST=find-max; shift ;;
    --levels) LEVELS=$2; shift 2 ;;
    --step) STEP=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --quota) QUOTA=$2; shift 2 ;;
    --late-consumer) LATE_CONSUMER=$2; shift 2 ;;
    --kill-consumer-at) KILL_CONSUMER_AT=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    --generators) GENERATORS=$2; shift 2 ;;
    --duration-scale) DURATION_SCALE=$2; shift 2 ;;
    --acks) ACKS=$2; shift 2 ;;
    --broker) BROKER=$2; shift 2 ;;
    --ingestors) INGESTORS=$2; shift 2 ;;
    --consumers) CONSUMERS=$2; CONSUMERS_GIVEN=1; shift 2 ;;
    --partitions) PARTITIONS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --controllers) CONTROLLERS=$2; shift 2 ;;
    --racks) RACKS=$2; shift 2 ;;
    --replication-factor) REPLICATION_FACTOR=$2; shift 2 ;;
    --min-insync-replicas) MIN_INSYNC=$2; shift 2 ;;
    --batch-size) BATCH_SIZE=$2; shift 2 ;;
    --message-size) MESSAGE_SIZE=$2; shift 2 ;;
    --keys) KEYS=$2; shift 2 ;;
    --wal-profile) WAL_PROFILE=$2; shift 2 ;;
    --secure) SECURE=1; shift ;;
    --faults) FAULTS=$2; shift 2 ;;
    --results) RESULTS_ROOT=$2; shift 2 ;;
    --run-id) RUN_ID=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --no-build) BUILD=0; shift ;;
    --no-report) REPORT=0; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option: $1" >&2; usage ;;
  esac
done
[[ -f "load/plans/$TEST.json" ]] || die "no load plan load/plans/$TEST.json"
[[ "$GENERATORS" =~ ^[1-9]$ ]] || die "--generators must be 1..9"
# the plan's "consumers" block (load/SPEC.md): mode (group|share), count,
# share_configs, kill_consumer_at; flags win over it
plan_consumers=$(python3 scripts/runctl.py plan-consumers "load/plans/$TEST.json") \
  || die "load/plans/$TEST.json: a bad consumers block"
read -r CONSUMER_MODE PLAN_CONSUMERS PLAN_KILL_AT PLAN_SHARE_CONFIGS <<< "$plan_consumers"
[[ "$PLAN_CONSUMERS" != - && -z "${CONSUMERS_GIVEN:-}" ]] && CONSUMERS=$PLAN_CONSUMERS
[[ "$PLAN_KILL_AT" != - && -z "$KILL_CONSUMER_AT" ]] && KILL_CONSUMER_AT=$PLAN_KILL_AT
[[ "$PLAN_SHARE_CONFIGS" == - ]] && PLAN_SHARE_CONFIGS=""
[[ "$KILL_CONSUMER_AT" == 0 || "$KILL_CONSUMER_AT" == 0s ]] && KILL_CONSUMER_AT=""
[[ -z "$KILL_CONSUMER_AT" || "$KILL_CONSUMER_AT" =~ ^[0-9]+s?$ ]] || die "--kill-consumer-at takes seconds, e.g. 30s"
[[ -z "$KILL_CONSUMER_AT" || "$CONSUMERS" -ge 2 ]] || die "--kill-consumer-at needs 2 or more consumers (one survives)"
# a consumer-group member killed writes no report: what it verified and
# committed would read as loss. Share-mode members checkpoint theirs.
[[ -z "$KILL_CONSUMER_AT" || "$CONSUMER_MODE" == share ]] \
  || die "--kill-consumer-at runs with a share-group plan (consumers.mode share, e.g. --test share-queue)"
# the share-group client (chronik-consumer --share-group) speaks PLAINTEXT only
[[ "$CONSUMER_MODE" != share || "$SECURE" == 0 ]] || die "--test $TEST (a share group): not with --secure"
tenants_load_plans "load/plans/$TEST.json" "$RUN_DIR/$RUN_ID/plans"
if ((${#TENANTS[@]})); then
  # one generator, ingestor and consumer per tenant
  [[ "$GENERATORS" == 1 && -z "$FAULTS$LATE_CONSUMER" && "$SECURE" == 0 ]] \
    || die "--test $TEST (tenants): not with --generators, --faults, --late-consumer or --secure"
  [[ " ${TENANTS[*]} " == *" $QUOTA_TENANT "* || -z "$QUOTA" ]] || die "--quota: no tenant $QUOTA_TENANT in $TEST"
  INGESTORS=${#TENANTS[@]} CONSUMERS=${#TENANTS[@]}
else
  [[ -z "$QUOTA" ]] || die "--quota needs a plan with tenants (--test noisy-neighbour)"
fi
WARMUP=${WARMUP:-10s}
[[ -z "$QUOTA" || "$QUOTA" =~ ^[a-z_]+=[0-9.]+(,[a-z_]+=[0-9.]+)*$ ]] || die "--quota takes K=V[,K=V], e.g. producer_byte_rate=2000000"
# a plan may carry its own fault schedule ("faults"); --faults replaces it
PLAN_FAULTS=$(python3 scripts/faults.py plan "load/plans/$TEST.json")
FAULTS=${FAULTS:-$PLAN_FAULTS}
# smoke is sized by --rate and --duration; the seed plans by their own
# stages, scaled down to fit one machine unless told otherwise (plans with
# a fault schedule, tenants or a share group are sized for this machine already).
if [[ "$TEST" == smoke || "$TEST" == find-max || -n "$PLAN_FAULTS" || ${#TENANTS[@]} -gt 0 \
  || "$CONSUMER_MODE" == share ]]; then
  SCALE=${SCALE:-1}; DURATION_SCALE=${DURATION_SCALE:-1}
else
  SCALE=${SCALE:-0.01}; DURATION_SCALE=${DURATION_SCALE:-0.05}
fi
[[ "$BROKER" == chronik || "$BROKER" == kafka ]] || die "--broker must be chronik or kafka"
[[ "$SECURE" == 0 || "$BROKER" == chronik ]] || die "--secure runs Chronik only (the kafka-anchor starts PLAINTEXT brokers)"
[[ "$ACKS" == 1 || "$ACKS" == all || "$ACKS" == -1 || "$ACKS" == 0 ]] || die "--acks must be 0, 1 or all"
[[ "$NODES" =~ ^[1-9]$ ]] || die "--nodes must be 1..9"
[[ "$BROKER" == chronik || "$NODES" == 1 || "$NODES" == 3 ]] || die "--broker kafka runs 1 or 3 nodes (the anchor's topologies)"
[[ "$CONTROLLERS" =~ ^[0-9]$ ]] || die "--controllers must be 0..9"
[[ "$CONTROLLERS" == 0 || ("$BROKER" == chronik && "$NODES" -ge 2) ]] \
  || die "--controllers runs Chronik with 2 or more --nodes (brokers)"
((CONTROLLERS + NODES <= 16)) || die "--controllers plus --nodes at most 16 (127.0.0.1..16)"
[[ "$KEYS" == fixed || "$KEYS" == fresh ]] || die "--keys must be fixed or fresh"
if [[ -n "$RACKS" ]]; then
  racks_valid "$RACKS" || die "--racks: $RACKS_INVALID"
  # the kafka-anchor's nodes share one server.properties template: no per-node broker.rack
  [[ "$BROKER" == chronik ]] \
    || die "--racks runs Chronik only: the kafka-anchor that starts Apache Kafka cannot give its nodes a broker.rack each"
  [[ "$NODES" -ge 2 ]] || die "--racks needs a cluster (--nodes 2 or more): one node has no follower to fetch from"
  IFS=, read -ra RACK_LIST <<< "$RACKS"
fi
[[ "$WARMUP" =~ ^[0-9]+[smh]?$ ]] || die "--warmup takes a duration like 10s, 1m or 0"
[[ -z "$LATE_CONSUMER" || "$LATE_CONSUMER" =~ ^[0-9]+s?$ ]] || die "--late-consumer takes seconds, e.g. 20s"
TOPOLOGY=$([[ "$NODES" == 1 ]] && echo standalone || echo cluster)
if [[ -z "$REPLICATION_FACTOR" ]]; then REPLICATION_FACTOR=$((NODES < 3 ? NODES : 3)); fi
if [[ -z "$MIN_INSYNC" ]]; then MIN_INSYNC=$((NODES >= 3 ? 2 : 1)); fi
((REPLICATION_FACTOR >= 1 && REPLICATION_FACTOR <= NODES)) || die "--replication-factor must be 1..$NODES"
((MIN_INSYNC >= 1 && MIN_INSYNC <= REPLICATION_FACTOR)) || die "--min-insync-replicas must be 1..$REPLICATION_FACTOR"

if [[ -n "$FAULTS" ]]; then
  ((EUID == 0)) || die "--faults needs root (signals, iptables, cgroups, tmpfs)"
  [[ "$NODES" -ge 2 && "$CONTROLLERS" == 0 && "$SECURE" == 0 ]] \
    || die "--faults runs a cluster of combined nodes (--nodes 2..9, no --controllers), not --secure"
  fault_parse=(--broker "$BROKER" --nodes "$NODES")
  # smoke's load lasts --duration: every fault must end inside it
  [[ "$TEST" == smoke ]] && fault_parse+=(--duration-s "$(duration_seconds "$DURATION")")
  python3 scripts/faults.py parse "$FAULTS" "${fault_parse[@]}" >&2 || die "--faults: the schedule cannot run (above)"
fi
OUT="$RESULTS_ROOT/$RUN_ID"
WORK="$RUN_DIR/$RUN_ID"
mkdir -p "$OUT"/{load,consumers,ingestors,metrics,logs,warmup} "$WORK"
TOPIC="chronik-run-$RUN_ID"
TOPIC=${TOPIC//[^a-zA-Z0-9._-]/-}
GROUP="verify-$RUN_ID"
STARTED_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
declare -a STARTED=()     # "name=pid" of everything this run started
SAMPLER_STOP="$WORK/sampler.stop"

cleanup() {
  local rc=$?
  touch "$SAMPLER_STOP" 2>/dev/null || true
  local spec pid
  # the fault scheduler first: on SIGTERM it undoes what is in force
  [[ -n "${FAULTS_PID:-}" ]] && { stop_pid "$FAULTS_PID" 60 > /dev/null 2>&1 || true; pid_forget "$FAULTS_PID"; }
  for spec in "${STARTED[@]}"; do
    stop_pid "${spec#*=}" 20 > /dev/null 2>&1 || true
    pid_forget "${spec#*=}" 2>/dev/null || true
  done
  if [[ -n "${FAULT_STATE:-}" ]]; then
    # nodes the scheduler restarted are not in STARTED
    for pid in $("$VENV_PY" scripts/faults.py pids --state "$FAULT_STATE" 2>/dev/null); do
      stop_pid "$pid" 20 > /dev/null 2>&1 || true
      pid_forget "$pid" 2>/dev/null || true
    done
  fi
  [[ -n "${KAFKA_PID:-}" ]] && stop_kafka "$WORK/kafka"
  # then every cut, filler, tmpfs and cgroup the schedule left (idempotent)
  [[ -n "${FAULT_STATE:-}" ]] && { "$VENV_PY" scripts/faults.py undo --state "$FAULT_STATE" --final || true; }
  # Broker data is scratch (GBs on long runs); the results stay in $OUT.
  if [[ "$KEEP" == 1 ]]; then log "kept scratch data in $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

log "run $RUN_ID: test=$TEST broker=$BROKER${RACKS:+ racks=$RACKS}$( ((SECURE)) && echo " (secure: $SECURE_PROTOCOL $SECURE_MECHANISM, ACLs, HTTPS)") nodes=$NODES controllers=$CONTROLLERS rf=$REPLICATION_FACTOR min.insync=$MIN_INSYNC acks=$ACKS ingestors=$INGESTORS consumers=$CONSUMERS partitions=$PARTITIONS -> $OUT"

# -- build and install ---------------------------------------------------------
# apt's output goes to a log (a fresh machine's first run would flood the terminal).
if bash scripts/install-system-deps.sh --run > "$OUT/logs/install-system-deps.log" 2>&1; then
  log "system packages present ($(tail -n 1 "$OUT/logs/install-system-deps.log"))"
else
  log "some system packages could not be installed; continuing (Prometheus is optional; see $OUT/logs/install-system-deps.log)"
fi
# chronik-loadgen (a Go build on first use) and the Python packages install
# while cargo builds: on a fresh machine that saves minutes of the first run.
scripts/install-loadgen.sh > "$WORK/loadgen-path" 2> "$WORK/install-loadgen.log" &
LOADGEN_INSTALL_PID=$!
{ bash scripts/install-python-deps.sh && if [[ "$REPORT" == 1 ]]; then bash scripts/install-report-deps.sh; fi; } \
  > "$WORK/install-python.log" 2>&1 &
PY_INSTALL_PID=$!
if [[ "$BUILD" == 1 ]]; then
  log "building release binaries"
  bash scripts/build-release.sh >&2
fi
wait "$PY_INSTALL_PID" || { cat "$WORK/install-python.log" >&2; die "installing the Python packages failed"; }
wait "$LOADGEN_INSTALL_PID" || { cat "$WORK/install-loadgen.log" >&2; die "building chronik-loadgen failed"; }
LOADGEN_BIN=$(cat "$WORK/loadgen-path")
[[ -x "$LOADGEN_BIN" ]] || die "chronik-loadgen not found after install (see $WORK/install-loadgen.log)"
export LOADGEN_BIN
# the plan as this run offers it: its batch and message size unless given
plan_field() { "$LOADGEN_BIN" describe "load/plans/$TEST.json" | "$VENV_PY" scripts/runctl.py json-field plan "$1"; }
BATCH_SIZE=${BATCH_SIZE:-$(plan_field batch_size)}
MESSAGE_SIZE=${MESSAGE_SIZE:-$(plan_field message_size)}

# -- faults: what the schedule needs before the brokers start ----------------------
# a tmpfs under each data directory a disk-full fault fills, and with a
# partition or a slow-disk in the schedule cgroups per node (the cut's
# iptables match; the disk throttle). Kafka's nodes keep their log.dirs in
# $WORK/kafka-data/nodeN (a per-run copy of the anchor says so: the anchor
# itself wipes and recreates its node directories on start), where the
# tmpfs can be mounted first.
FAULT_STATE="" FAULT_CGROUPS=""
if [[ -n "$FAULTS" ]]; then
  FAULT_STATE="$WORK/faults"
  mkdir -p "$OUT/faults"
  fault_prep=(--state "$FAULT_STATE" --broker "$BROKER" --nodes "$NODES")
  for ((i = 1; i <= NODES; i++)); do
    if [[ "$BROKER" == chronik ]]; then fault_prep+=(--data-dir "$i=$WORK/broker/node-$i/data")
    else fault_prep+=(--data-dir "$i=$WORK/kafka-data/node$i"); fi
  done
  if ! "$VENV_PY" scripts/faults.py prepare "$FAULTS" "${fault_prep[@]}" > "$OUT/logs/faults-prepare.log" 2>&1; then
    cat "$OUT/logs/faults-prepare.log" >&2
    die "--faults: preparing the nodes failed (above; logs/faults-prepare.log)"
  fi
  FAULT_CGROUPS=$(awk '$1 == "cgroup-root" {print $2}' "$OUT/logs/faults-prepare.log")
  if [[ "$BROKER" == kafka ]]; then
    ANCHOR_HOME=$(kafka_anchor_for_log_dirs "$WORK/kafka-anchor" "$WORK/kafka-data")
  fi
fi

# -- broker ----------------------------------------------------------------------
if [[ "$BROKER" == chronik ]]; then
  CHRONIK_ARGS=(--wal-profile "$WAL_PROFILE" --produce-profile "$PRODUCE_PROFILE"
    --default-partitions "$PARTITIONS" --group-initial-rebalance-delay-ms 0
    --default-replication-factor "$REPLICATION_FACTOR" --min-insync-replicas "$MIN_INSYNC")
  if ((SECURE)); then
    secure_setup "$WORK/secure"
    CHRONIK_ARGS+=("${SECURE_BROKER_ARGS[@]}")
    ((NODES == 1)) && CHRONIK_ARGS+=(--listeners "$SECURE_PROTOCOL://127.0.0.1:0")
    # start_chronik_cluster: every node's one listener, also inter-broker
    CHRONIK_CLUSTER_PROTOCOL=$SECURE_PROTOCOL
  fi
  if ((NODES == 1)); then
    start_chronik "$WORK/broker" "${CHRONIK_ARGS[@]}"
    STARTED+=("broker=$CHRONIK_PID")
    BROKER_METRICS_LIST=("$CHRONIK_METRICS")
    BROKER_IDS=(1)
  else
    CHRONIK_CGROUP_ROOT=$FAULT_CGROUPS CHRONIK_CONTROLLERS=$CONTROLLERS CHRONIK_RACKS=$RACKS \
      start_chronik_cluster "$WORK/broker" "$NODES" "${CHRONIK_ARGS[@]}"
    for ((i = 0; i < CONTROLLERS; i++)); do STARTED+=("controller-$((i + 1))=${CHRONIK_CONTROLLER_PIDS[$i]}"); done
    for ((i = 0; i < NODES; i++)); do STARTED+=("broker-$((CONTROLLERS + i + 1))=${CHRONIK_PIDS[$i]}"); done
    BROKER_METRICS_LIST=("${CHRONIK_METRICS_LIST[@]}")
    BROKER_IDS=("${CHRONIK_BROKER_IDS[@]}")
  fi
  BOOTSTRAP=$CHRONIK_KAFKA
  BROKER_VERSION=$("$CHRONIK_SERVER_BIN" --version | awk '{print $2}')
else
  # The same topology as Chronik with the same flags (nodes, RF, min ISR),
  # and an unreported warm-up so the JVMs are not measured cold.
  if [[ -n "$FAULT_CGROUPS" ]]; then
    # each JVM in its node's cgroups (scripts/in-cgroup.sh as the anchor's $JAVA)
    real_java=${JAVA:-java}
    IN_CGROUP_ROOT=$FAULT_CGROUPS IN_CGROUP_JAVA=$real_java JAVA=$REPO_ROOT/scripts/in-cgroup.sh \
      start_kafka "$WORK/kafka" "$NODES"
  else
    start_kafka "$WORK/kafka" "$NODES"
  fi
  if ((NODES == 1)); then
    STARTED+=("broker=$KAFKA_PID")
  else
    for ((i = 0; i < NODES; i++)); do STARTED+=("broker-$((i + 1))=${KAFKA_PIDS[$i]}"); done
  fi
  BOOTSTRAP=$KAFKA_BOOTSTRAP
  warm_up_kafka "$BOOTSTRAP" "$REPLICATION_FACTOR" "$MIN_INSYNC" "$KAFKA_WARMUP" "$WORK/kafka-warmup.log"
  BROKER_METRICS_LIST=() BROKER_IDS=()
  BROKER_VERSION="4.3.1"
fi
((${#TENANTS[@]})) || create_topic "$BOOTSTRAP" "$TOPIC" "$PARTITIONS" "$REPLICATION_FACTOR" "$MIN_INSYNC"
((SECURE)) && secure_grant "$BOOTSTRAP" "$TOPIC" "$GROUP"
INGESTOR_ARGS=(--acks)
case $ACKS in all) INGESTOR_ARGS+=(-1) ;; *) INGESTOR_ARGS+=("$ACKS") ;; esac
((SECURE)) && INGESTOR_ARGS+=("${SECURE_INGESTOR_ARGS[@]}")

# -- consumers, ingestors, prometheus -----------------------------------------------------
declare -a CONSUMER_URLS=() INGESTOR_URL_LIST=() SCRAPE=()
SCRAPE+=("${BROKER_METRICS_LIST[@]}")
# consumer_rack_args I - --client-rack for verifying consumer I (racks[I % len]) under --racks
consumer_rack_args() {
  CONSUMER_RACK_ARGS=()
  [[ -n "$RACKS" ]] && CONSUMER_RACK_ARGS=(--client-rack "${RACK_LIST[$(($1 % ${#RACK_LIST[@]}))]}")
  return 0
}
((${#TENANTS[@]})) && tenants_start
# share mode: every consumer one member of the share group $GROUP; the group's
# configs (share.auto.offset.reset=earliest via --from-beginning, the plan's
# share_configs) set by each member before it joins
CONSUMER_MODE_ARGS=()
if [[ "$CONSUMER_MODE" == share ]]; then
  CONSUMER_MODE_ARGS=(--share-group "$GROUP")
  IFS=, read -ra share_configs <<< "$PLAN_SHARE_CONFIGS"
  for c in "${share_configs[@]}"; do CONSUMER_MODE_ARGS+=(--share-config "$c"); done
fi
declare -a CONSUMER_PIDS=()
for ((i = 0; i < CONSUMERS && ${#TENANTS[@]} == 0; i++)); do
  consumer_rack_args "$i"
  start_consumer "consumer-$i" "$OUT/logs" "$BOOTSTRAP" "$TOPIC" "$GROUP" "$OUT/consumers/consumer-$i.json" \
    "${CONSUMER_RACK_ARGS[@]}" "${CONSUMER_MODE_ARGS[@]}"
  STARTED+=("consumer-$i=$STARTED_PID"); CONSUMER_URLS+=("$STARTED_URL"); SCRAPE+=("$STARTED_METRICS")
  CONSUMER_PIDS+=("$STARTED_PID")
done
for ((i = 0; i < INGESTORS && ${#TENANTS[@]} == 0; i++)); do
  start_ingestor "ingestor-$i" "$OUT/logs" "$BOOTSTRAP" "$TOPIC" "${INGESTOR_ARGS[@]}"
  STARTED+=("ingestor-$i=$STARTED_PID"); INGESTOR_URL_LIST+=("$STARTED_URL"); SCRAPE+=("$STARTED_METRICS")
done
# the load generators' live /metrics (request rate, latency, errors, dropped)
LOADGEN_METRICS=()
LOADGEN_PORTS=$( ((${#TENANTS[@]})) || free_port "$GENERATORS")
for port in $LOADGEN_PORTS; do LOADGEN_METRICS+=("127.0.0.1:$port"); done
SCRAPE+=("${LOADGEN_METRICS[@]}")
start_prometheus "$WORK/prometheus" "${SCRAPE[@]}"
[[ -n "${PROM_PID:-}" ]] && STARTED+=("prometheus=$PROM_PID")

# snapshot_broker_metrics DIR - each broker's /metrics into DIR/broker-<node id>.prom
# (the report adds the brokers' counters up); none for Apache Kafka (no exporter here)
snapshot_broker_metrics() {
  local i
  mkdir -p "$1"
  for ((i = 0; i < ${#BROKER_METRICS_LIST[@]}; i++)); do
    curl -fsS --max-time 5 "http://${BROKER_METRICS_LIST[$i]}/metrics" > "$1/broker-${BROKER_IDS[$i]}.prom" \
      || { rm -f "$1/broker-${BROKER_IDS[$i]}.prom"; log "broker ${BROKER_IDS[$i]}: no /metrics snapshot"; }
  done
}

# -- meta.json --------------------------------------------------------------------
write_meta() {  # [FINISHED_AT]
  local flags=()
  [[ "$BROKER" == chronik ]] && flags=(--broker-flag=--wal-profile --broker-flag="$WAL_PROFILE"
    --broker-flag=--produce-profile --broker-flag="$PRODUCE_PROFILE")
  "$VENV_PY" scripts/runctl.py meta "$OUT/meta.json" --run-id "$RUN_ID" --started-at "$STARTED_AT" \
    --finished-at "${1:-}" --git-commit "$(git_describe)" --broker "$BROKER" --broker-version "$BROKER_VERSION" \
    --bootstrap "$BOOTSTRAP" "${flags[@]}" \
    --setting "test=$TEST" --setting "duration=\"$DURATION\"" --setting "duration_s=$(duration_seconds "$DURATION")" \
    --setting "rate=$RATE" --setting "scale=$SCALE" --setting "duration_scale=$DURATION_SCALE" \
    --setting "acks=\"$ACKS\"" --setting "batch_size=$BATCH_SIZE" --setting "message_size=$MESSAGE_SIZE" \
    --setting "ingestors=$INGESTORS" --setting "consumers=$CONSUMERS" --setting "partitions=$PARTITIONS" \
    --setting "wal_profile=$WAL_PROFILE" --setting "produce_profile=$PRODUCE_PROFILE" \
    --setting "nodes=$NODES" --setting "controllers=$CONTROLLERS" --setting "replication_factor=$REPLICATION_FACTOR" \
    --setting "min_insync_replicas=$MIN_INSYNC" --setting "topic=$TOPIC" --setting "group=$GROUP" \
    --setting "prometheus=${PROM_URL:-}" --setting "keys=$KEYS" \
    --setting "levels=$LEVELS" --setting "step=$STEP" --setting "repeat=$REPEAT" \
    --setting "warmup_s=$(duration_seconds "$WARMUP")" --setting "late_consumer=\"$LATE_CONSUMER\"" \
    --setting "load_from=${LOAD_FROM:-null}" --setting "measured_from=${MEASURED_FROM:-null}" \
    --setting "measured_until=${MEASURED_UNTIL:-null}" \
    --setting "security=\"$( ((SECURE)) && echo "$SECURE_PROTOCOL $SECURE_MECHANISM, ACLs, ingestor HTTPS + bearer token" || echo PLAINTEXT)\"" \
    --setting "generators=$GENERATORS" --setting "faults=\"$FAULTS\"" \
    --setting "consumer_mode=$CONSUMER_MODE" --setting "kill_consumer_at=\"$KILL_CONSUMER_AT\"" \
    --setting "killed_consumer=\"${KILLED_NAME:-}\"" --setting "killed_at=${KILLED_AT:-null}" \
    --setting "share_configs=\"$PLAN_SHARE_CONFIGS\"" \
    --setting "racks=\"$RACKS\"" --setting "rack_map=\"${CHRONIK_RACK_MAP:-}\"" \
    --setting "tenants=\"${TENANTS[*]}\"" --setting "quota=\"$QUOTA\"" \
    --setting "quota_entity=\"$([[ -n "$QUOTA" ]] && echo "clients=chronik-ingestor-$QUOTA_TENANT")\"" \
    ${FAULTS:+--events "$OUT/faults/events.jsonl"} --version "loadgen=$("$LOADGEN_BIN" version 2>/dev/null | head -1)"
}
write_meta ""

# -- settle: load starts on a stable group and a full ISR ---------------------------
# Otherwise the first seconds' records are read by a consumer that then loses
# the partition in the group's first rebalance and are read again: extra
# consumer work and a redelivery tail in the latency that is not the broker's.
if ((${#TENANTS[@]})); then
  tenants_settle
elif [[ "$CONSUMER_MODE" == share ]]; then
  # share groups hand partitions to several members: no exclusive assignment to
  # wait for; every member joined and all partitions held (runctl share-settle)
  for ((t = 0; t < SETTLE_TIMEOUT; t++)); do
    "$VENV_PY" scripts/runctl.py share-settle --partitions "$PARTITIONS" "${CONSUMER_URLS[@]}" \
      2> "$WORK/settle.txt" && break
    sleep 1
  done
  log "share group: $(cat "$WORK/settle.txt")"
  "$VENV_PY" scripts/runctl.py share-settle --partitions "$PARTITIONS" "${CONSUMER_URLS[@]}" 2> /dev/null \
    || die "the share group did not settle within ${SETTLE_TIMEOUT}s: $(cat "$WORK/settle.txt")"
else
  "$VENV_PY" scripts/runctl.py settle --partitions "$PARTITIONS" --timeout "$SETTLE_TIMEOUT" \
    --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --rf "$REPLICATION_FACTOR" "${CONSUMER_URLS[@]}" \
    2> >(tee "$OUT/logs/settle.log" >&2) \
    || die "the verifying consumers' group or the topic's ISR did not settle within ${SETTLE_TIMEOUT}s (logs/settle.log)"
fi

# -- warm-up: its own generator run, kept out of the headline ----------------------------
# --secure: the generator sends the ingestors' token and trusts the run's CA
LOAD_SECURE=()
((SECURE)) && LOAD_SECURE=(--token-file "$INGESTOR_AUTH_TOKEN_FILE" --ca-file "$INGESTOR_CA_FILE")
INGESTOR_URLS=$(IFS=,; echo "${INGESTOR_URL_LIST[*]}")
# every plan override this run sets (the plan file holds the rest)
LOAD_ARGS=(--targets "$INGESTOR_URLS" --generators "$GENERATORS" --topic "$TOPIC" --acks "$ACKS"
  --prometheus-addrs "$(IFS=,; echo "${LOADGEN_METRICS[*]}")"
  --topology "$TOPOLOGY" --batch-size "$BATCH_SIZE" --message-size "$MESSAGE_SIZE" --keys "$KEYS" "${LOAD_SECURE[@]}")
LOAD_FROM=$(date +%s.%N)
if [[ "$(duration_seconds "$WARMUP")" != 0 && ${#TENANTS[@]} -gt 0 ]]; then
  tenants_warm_up
elif [[ "$(duration_seconds "$WARMUP")" != 0 ]]; then
  log "warm-up: smoke at $RATE requests/s for $WARMUP (results in $OUT/warmup, not in the headline)"
  RUN_ID="$RUN_ID-warmup" load/run.sh smoke --results "$OUT/warmup" "${LOAD_ARGS[@]}" \
    --rate "$RATE" --duration "$WARMUP" > "$OUT/logs/loadgen-warmup.log" 2>&1 \
    || log "warm-up generator exited $? (its thresholds do not decide the run; logs/loadgen-warmup.log)"
fi

# -- load ---------------------------------------------------------------------------
((${#TENANTS[@]})) && tenants_set_quota
sample_specs=()
for spec in "${STARTED[@]}"; do
  # under --faults a broker node may be restarted: follow its newest process
  if [[ -n "$FAULTS" && "$spec" == broker-* ]]; then
    n=${spec%%=*}; n=${n#broker-}
    if [[ "$BROKER" == chronik ]]; then spec="broker-$n=~$CHRONIK_SERVER_BIN --node-id $n "
    else spec="broker-$n=~kafka\.Kafka .*/node$n/server\.properties"; fi
  fi
  sample_specs+=("$spec")
done
if ((${#TENANTS[@]})); then
  mapfile -t -O "${#sample_specs[@]}" sample_specs < <(tenants_sample_specs)
else
  for ((i = 0; i < GENERATORS; i++)); do sample_specs+=("loadgen-$i=~$LOADGEN_BIN run .* --index $i( |$)"); done
fi
sample_resources "$OUT/resources.csv" "$SAMPLER_STOP" "${sample_specs[@]}" &
SAMPLER_PID=$!

progress() {
  local start=$SECONDS
  while [[ ! -e "$SAMPLER_STOP" ]]; do
    sleep 5
    local verified
    verified=$("$VENV_PY" scripts/runctl.py verified "${CONSUMER_URLS[@]}" 2>/dev/null || echo 0)
    log "progress: $((SECONDS - start))s into the load, $verified messages verified by the consumers"
  done
}
progress &
PROGRESS_PID=$!

if [[ -n "$LATE_CONSUMER" ]]; then
  # a member joining mid-load: the group rebalances inside the measured window
  consumer_rack_args "$CONSUMERS"
  ( sleep "${LATE_CONSUMER%s}"; [[ -e "$SAMPLER_STOP" ]] && exit 0
    start_consumer "consumer-late" "$OUT/logs" "$BOOTSTRAP" "$TOPIC" "$GROUP" "$OUT/consumers/consumer-late.json" \
      "${CONSUMER_RACK_ARGS[@]}"
    echo "$STARTED_PID $STARTED_URL" > "$WORK/late-consumer" ) &
  LATE_PID=$!
fi

KILLED_AT="" KILLED_NAME="" KILL_PID=""
if [[ -n "$KILL_CONSUMER_AT" ]]; then
  # consumer-1 SIGKILLed into the measured load: no final report, its last checkpoint stays
  KILLED_NAME=consumer-1
  ( sleep "${KILL_CONSUMER_AT%s}"; [[ -e "$SAMPLER_STOP" ]] && exit 0
    kill -KILL "${CONSUMER_PIDS[1]}" 2>/dev/null || exit 0
    date +%s.%N > "$WORK/killed-at"
    log "SIGKILLed $KILLED_NAME (pid ${CONSUMER_PIDS[1]}) ${KILL_CONSUMER_AT%s}s into the load" ) &
  KILL_PID=$!
fi
log "running load plan '$TEST' against ${INGESTOR_URL_LIST[*]} ($GENERATORS generator(s))"
LOAD_RC=0
PLAN_ARGS=(--scale "$SCALE" --duration-scale "$DURATION_SCALE")
case $TEST in
  smoke) PLAN_ARGS+=(--rate "$RATE" --duration "$DURATION") ;;
  find-max)
    [[ -n "$LEVELS" ]] && PLAN_ARGS+=(--levels "$LEVELS")
    [[ -n "$STEP" ]] && PLAN_ARGS+=(--step "$STEP")
    [[ -n "$REPEAT" ]] && PLAN_ARGS+=(--repeat "$REPEAT") ;;
esac
# every broker's counters as the measured load starts: the report takes what
# the run added (end snapshot - this one), e.g. the bytes consumers fetched
# from leaders and from followers
snapshot_broker_metrics "$OUT/metrics/start"
MEASURED_FROM=$(date +%s.%N)
if [[ -n "$FAULTS" ]]; then
  # the schedule counts from the measured load's start; it also polls every
  # partition's leader and ISR until it is stopped after the drain
  fault_run=(--state "$FAULT_STATE" --events "$OUT/faults/events.jsonl" --partitions-csv "$OUT/faults/partitions.csv"
    --start "$MEASURED_FROM" --bootstrap "$BOOTSTRAP" --topic "$TOPIC" --broker "$BROKER")
  for ((i = 1; i <= NODES; i++)); do
    if [[ "$BROKER" == chronik ]]; then
      kport=${CHRONIK_KAFKA%%,*}; kport=${kport##*:}
      fault_run+=(--node "$i=${CHRONIK_PIDS[$((i - 1))]}" --endpoint "$i=127.0.0.$i:$kport,$CHRONIK_RAFT_PORT")
    else
      fault_run+=(--node "$i=${KAFKA_PIDS[$((i - 1))]}" --endpoint "$i=127.0.0.1:$((9091 + i)),$((19091 + i))"
        --pid-file "$i=$WORK/kafka/node$i/pid")
    fi
  done
  PIDS_FILE=$PIDS_FILE FAULT_OWNER_PID=$$ "$VENV_PY" scripts/faults.py run "$FAULTS" "${fault_run[@]}" \
    2> >(tee "$OUT/logs/faults.log" >&2) &
  FAULTS_PID=$!
  pid_record "$FAULTS_PID" fault-schedule
  log "fault schedule pid $FAULTS_PID: $FAULTS"
fi
if ((${#TENANTS[@]})); then
  tenants_run_load
else
  RUN_ID="$RUN_ID" load/run.sh "$TEST" --results "$OUT/load" "${LOAD_ARGS[@]}" "${PLAN_ARGS[@]}" \
    > "$OUT/logs/loadgen.log" 2>&1 || LOAD_RC=$?
fi
MEASURED_UNTIL=$(date +%s.%N)
log "load generator finished with exit status $LOAD_RC (99 = a threshold failed)"
if [[ -n "$KILL_PID" ]]; then
  wait "$KILL_PID" 2>/dev/null || true
  if [[ -s "$WORK/killed-at" ]]; then
    KILLED_AT=$(cat "$WORK/killed-at")
    # the dead member answers no /summary: drain and progress ask the others
    CONSUMER_URLS=("${CONSUMER_URLS[0]}" "${CONSUMER_URLS[@]:2}")
  else
    log "$KILLED_NAME was not killed (the load ended first?)"; KILLED_NAME=""
  fi
fi
if [[ -n "$LATE_CONSUMER" ]]; then
  wait "$LATE_PID" 2>/dev/null || true
  if [[ -s "$WORK/late-consumer" ]]; then
    read -r late_pid late_url < "$WORK/late-consumer"
    STARTED+=("consumer-late=$late_pid"); CONSUMER_URLS+=("$late_url")
    log "late consumer joined the group during the load ($late_url)"
  else
    log "the late consumer did not start (the load ended first?)"
  fi
fi
((${#TENANTS[@]})) || tail -n 25 "$OUT/logs/loadgen.log" >&2 || true
if [[ "$TEST" == find-max && "$LOAD_RC" == 99 ]]; then
  # The upper steps failing their gates is how the staircase finds the max;
  # the verdict below (reports capacity) decides the run.
  LOAD_RC=0
fi
if [[ ${#TENANTS[@]} -gt 0 && "$LOAD_RC" == 99 ]]; then
  # a flood is meant to hurt: each tenant's verification decides the run,
  # the report's tenant table shows what the flood cost
  log "a tenant's plan thresholds failed (the report shows which; the verification decides the run)"
  LOAD_RC=0
fi
if [[ -n "$FAULTS" && "$LOAD_RC" == 99 ]]; then
  # Faults are meant to break the plan's latency and error gates; what a
  # fault run must hold is the verification (0 acknowledged lost) below, and
  # the report's fault timeline shows what the faults cost.
  log "plan thresholds failed under --faults (expected; the verification decides the run)"
  LOAD_RC=0
fi

if [[ -n "$FAULTS" ]]; then
  # every fault undone (killed nodes back) before the drain; bounded
  touch "$FAULT_STATE/heal"
  for ((t = 0; t < 120; t++)); do [[ -e "$FAULT_STATE/healed" ]] && break; sleep 0.5; done
  [[ -e "$FAULT_STATE/healed" ]] || log "the fault schedule did not report healed within 60 s"
fi

# -- drain: ingestors flush, consumers catch up, ledgers reconcile ----------------------
LEDGERS=()
((${#TENANTS[@]})) && tenants_drain
for ((i = 0; i < INGESTORS && ${#TENANTS[@]} == 0; i++)); do
  ingestor_collect "${INGESTOR_URL_LIST[$i]}" "$OUT/ingestors/ingestor-$i"
  LEDGERS+=("$OUT/ingestors/ingestor-$i-ledger.json")
done
if ((${#TENANTS[@]})); then
  ACKED=$("$VENV_PY" scripts/runctl.py ledger-total "${TENANT_LEDGERS[@]}")
else
  ACKED=$("$VENV_PY" scripts/runctl.py ledger-total "${LEDGERS[@]}")
  log "ingestors acknowledged $ACKED messages; waiting for the consumers to drain"
  if [[ "$CONSUMER_MODE" == share ]]; then
    # Drained (runctl share-drained): the members' accepted records, plus what a
    # killed member accepted or was accepting in its last checkpoint, reach
    # what was acknowledged; nobody got a delivery for 3 s; and the killed
    # member's session timeout and a lock have passed, so what it held is
    # delivered again by now
    lock_s=$(printf '%s\n' "$PLAN_SHARE_CONFIGS" | tr , '\n' | awk -F= '$1 == "share.record.lock.duration.ms" {print $2 / 1000}')
    share_timeout=$DRAIN_TIMEOUT
    [[ -n "$KILLED_AT" ]] && share_timeout=$((DRAIN_TIMEOUT + 60))
    # the killed member's last checkpoint and its time, when one was killed
    killed_args=()
    [[ -n "$KILLED_NAME" ]] && killed_args=(--killed-report "$OUT/consumers/$KILLED_NAME.json" --killed-at "$KILLED_AT")
    for ((t = 0; t < share_timeout; t++)); do
      "$VENV_PY" scripts/runctl.py share-drained --acked "$ACKED" --lock-s "${lock_s:-30}" "${killed_args[@]}" \
        "${CONSUMER_URLS[@]}" 2> "$WORK/drain.txt" && break
      sleep 1
    done
  fi
  # Drained: every partition is assigned to some consumer with zero lag, and the
  # consumers together verified at least what was acknowledged (replica counts
  # can overlap after a rebalance; the merge below gives the exact verdict).
  for ((t = 0; t < DRAIN_TIMEOUT; t++)); do
    [[ "$CONSUMER_MODE" == share ]] && break
    "$VENV_PY" scripts/runctl.py drained --acked "$ACKED" --partitions "$PARTITIONS" "${CONSUMER_URLS[@]}" \
      2> "$WORK/drain.txt" && break
    sleep 1
  done
  log "consumers: $(cat "$WORK/drain.txt" 2>/dev/null)"
fi
snapshot_broker_metrics "$OUT/metrics"
if [[ -n "${PROM_URL:-}" ]]; then
  curl -fsS --max-time 5 "$PROM_URL/api/v1/query?query=up" > "$OUT/metrics/prometheus-up.json" || true
  curl -fsS --max-time 5 --data-urlencode 'query=sum(rate(chronik_records_in_total[30s]))' \
    "$PROM_URL/api/v1/query" > "$OUT/metrics/prometheus-records-in-rate.json" || true
fi
touch "$SAMPLER_STOP"
wait "$SAMPLER_PID" "$PROGRESS_PID" 2>/dev/null || true
if [[ -n "${FAULTS_PID:-}" ]]; then
  # the leader/ISR poll covered the drain too (ISRs growing back)
  stop_pid "$FAULTS_PID" 60 || true
  wait "$FAULTS_PID" 2>/dev/null || true
  pid_forget "$FAULTS_PID"
  FAULTS_PID=""
fi

# Consumers write their reports on SIGTERM; stop them before the broker.
for spec in "${STARTED[@]}"; do
  case $spec in consumer-*|ingestor-*) stop_pid "${spec#*=}" 30 || true; pid_forget "${spec#*=}" ;; esac
done
VERIFY_RC=0
if ((${#TENANTS[@]})); then
  tenants_verify
else
  CONSUMER_REPORTS=("$OUT"/consumers/consumer-*.json)
  LEDGER_ARGS=()
  for l in "${LEDGERS[@]}"; do LEDGER_ARGS+=(--ledger "$l"); done
  "$CONSUMER_BIN" merge "${LEDGER_ARGS[@]}" --report "$OUT/consumers/merged.json" "${CONSUMER_REPORTS[@]}" \
    > "$OUT/logs/merge.log" 2>&1 || VERIFY_RC=$?
  log "verification (chronik-consumer merge): exit status $VERIFY_RC (0 = clean and conclusive)"
fi
write_meta "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# -- report -------------------------------------------------------------------------
if [[ "$REPORT" == 1 ]]; then
  "$VENV_PY" -m reports render "$OUT" -o "$OUT/report.md" >&2 || { log "report rendering failed"; VERIFY_RC=${VERIFY_RC:-1}; }
  log "report: $OUT/report.md"
  sed -n '1,40p' "$OUT/report.md" >&2 || true
fi

if [[ "$TEST" == find-max ]]; then
  "$VENV_PY" -m reports capacity "$OUT" | tee "$OUT/capacity.txt" >&2 || LOAD_RC=$?
fi
if ((LOAD_RC != 0 || VERIFY_RC != 0)); then
  log "run $RUN_ID FAILED (load generator exit $LOAD_RC, verification exit $VERIFY_RC)"
  exit 1
fi
log "run $RUN_ID passed: $ACKED messages acknowledged and verified; results in $OUT"
