#!/usr/bin/env bash
# compat/share-anchor.sh - the share-group checks (compat/python/share_groups.py)
# against Apache Kafka 4.3.1 itself, from the kafka-anchor (one node on free
# loopback ports, scripts/pipeline.sh start_kafka; or three, each broker and
# controller, internal topics RF 3 / min ISR 2), to prove the checks before
# they judge chronik. Kafka is stopped on exit.
#
#   compat/share-anchor.sh [--nodes 1|3] [--checks LIST] [--clients LIST] [--keep]
#     --nodes N     1 (default): share-verifiable,share-redelivery,share-archive,
#                   share-admin; 3: share-failover (client ports
#                   SHARE_ANCHOR_PORT+0..2, default 29092-29094, controllers
#                   SHARE_ANCHOR_CONTROLLER_PORT+0..2, default 39092-39094: a
#                   copy of the anchor's start-cluster.sh with these ports)
#     --checks LIST the checks to run (comma-separated, share_groups.py's names;
#                   "none": none of them)
#     --clients LIST then the compat drivers' own share check (compat/README.md,
#                   "share") through these clients' share consumers, one after
#                   another: franz-go, java, confluent-kafka (space-separated;
#                   default none; compat/install-deps.sh builds them)
#     --keep        leave the nodes' data and logs in .run/share-anchor/
#   compat/share-anchor.sh node-kill DIR ID      (share-failover's --kill-node-cmd)
#   compat/share-anchor.sh node-restart DIR ID   (its --restart-node-cmd)
#     node-kill saves Kafka node ID's command line (DIR/nodeID/cmdline) and
#     SIGKILLs it; node-restart starts it again from that line on the same
#     data (the anchor's own start scripts would format it anew).
#
# Prints share_groups.py's JSON lines (one per check, also kept in
# .run/share-anchor-N.jsonl, its log in .run/share-anchor-N.log) and each
# check's verdict, then each client's share line (its log in
# .run/share-anchor-CLIENT.log); exit status 1 if any failed. Needs: Java 17+, compat/java/target/lib
# (compat/install-deps.sh: the tools and kafka_2.13 for kafka-configs), the
# kafka-anchor (.tools/kafka-anchor, copied from ../shared/tools on first use).
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../scripts/lib.sh
source "$REPO_ROOT/scripts/lib.sh"
# shellcheck source=../scripts/pipeline.sh
source "$REPO_ROOT/scripts/pipeline.sh"
SELF="$REPO_ROOT/compat/share-anchor.sh"

node_kill() {
  local dir=$1 id=$2 pid i
  pid=$(cat "$dir/node$id/pid")
  tr '\0' '\n' < "/proc/$pid/cmdline" > "$dir/node$id/cmdline"
  readlink "/proc/$pid/cwd" > "$dir/node$id/cwd"
  kill -KILL "$pid"
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2> /dev/null || { log "node $id (pid $pid) SIGKILLed"; return 0; }
    sleep 0.1
  done
  die "node $id (pid $pid) still alive 10 s after SIGKILL"
}

node_restart() {
  local dir=$1 id=$2 cmd
  mapfile -t cmd < "$dir/node$id/cmdline"
  ((${#cmd[@]})) || die "no saved command line for node $id"
  cd "$(cat "$dir/node$id/cwd")"
  nohup "${cmd[@]}" >> "$dir/node$id/logs/stdout.log" 2>&1 < /dev/null &
  echo $! > "$dir/node$id/pid"
  pid_record "$!" kafka
  log "node $id restarted (pid $(cat "$dir/node$id/pid"))"
}

# start_cluster - three Kafka nodes as the anchor's start-cluster.sh starts
# them, on the ports SHARE_ANCHOR_PORT / SHARE_ANCHOR_CONTROLLER_PORT (+0..2)
# instead of its fixed 9092-9094 / 19092-19094: a copy of its scripts, its jars
# linked. Sets KAFKA_PIDS and KAFKA_BOOTSTRAP.
start_cluster() {
  local anchor copy=$WORK/anchor kb=${SHARE_ANCHOR_PORT:-29092} cb=${SHARE_ANCHOR_CONTROLLER_PORT:-39092} i p
  anchor=$(kafka_anchor)
  mkdir -p "$copy"
  tar -C "$anchor" --exclude=./lib --exclude=./run --exclude=./results --exclude=./.venv -cf - . | tar -C "$copy" -xf -
  ln -sfn "$anchor/lib" "$copy/lib"
  grep -q '((19091 + i))' "$copy/start-cluster.sh" && grep -q '((9091 + i))' "$copy/start-cluster.sh" \
    && grep -q '^VOTERS=' "$copy/start-cluster.sh" || die "the anchor's start-cluster.sh no longer has the ports this script moves"
  sed -i -e "s/((19091 + i))/(($((cb - 1)) + i))/g" -e "s/((9091 + i))/(($((kb - 1)) + i))/g" \
    -e "s/^VOTERS=.*/VOTERS=\"1@127.0.0.1:$cb,2@127.0.0.1:$((cb + 1)),3@127.0.0.1:$((cb + 2))\"/" "$copy/start-cluster.sh"
  for p in "$kb" "$((kb + 1))" "$((kb + 2))" "$cb" "$((cb + 1))" "$((cb + 2))"; do
    port_free "$p" || die "127.0.0.1:$p is taken (SHARE_ANCHOR_PORT, SHARE_ANCHOR_CONTROLLER_PORT)"
  done
  ANCHOR_RUN_DIR="$WORK" "$copy/start-cluster.sh" >&2 || die "the Apache Kafka cluster did not start (logs: $WORK/node*/logs)"
  KAFKA_PIDS=()
  for i in 1 2 3; do
    KAFKA_PIDS+=("$(cat "$WORK/node$i/pid")")
    pid_record "${KAFKA_PIDS[-1]}" kafka
  done
  KAFKA_BOOTSTRAP="127.0.0.1:$kb,127.0.0.1:$((kb + 1)),127.0.0.1:$((kb + 2))"
  log "Apache Kafka (3 nodes) pids ${KAFKA_PIDS[*]} at $KAFKA_BOOTSTRAP"
}

case "${1:-}" in
  node-kill) node_kill "$2" "$3"; exit 0;;
  node-restart) node_restart "$2" "$3"; exit 0;;
esac

NODES=1
CHECKS=""
CLIENTS=""
KEEP=0
while (($#)); do
  case "$1" in
    --nodes) NODES=$2; shift 2;;
    --checks) CHECKS=$2; shift 2;;
    --clients) CLIENTS=$2; shift 2;;
    --keep) KEEP=1; shift;;
    *) die "unknown option $1 (see the header)";;
  esac
done
[[ "$NODES" == 1 || "$NODES" == 3 ]] || die "--nodes is 1 or 3"
if [[ -z "$CHECKS" ]]; then
  if ((NODES == 1)); then CHECKS=share-verifiable,share-redelivery,share-archive,share-admin
  else CHECKS=share-failover; fi
fi
WORK="$RUN_DIR/share-anchor"
rm -rf "$WORK"
mkdir -p "$WORK"
finish() {
  stop_kafka "$WORK"
  ((KEEP)) || rm -rf "$WORK"
}
trap finish EXIT
trap 'exit 143' TERM INT
if ((NODES == 1)); then start_kafka "$WORK" 1; else start_cluster; fi
args=(--bootstrap "$KAFKA_BOOTSTRAP" --checks "$CHECKS")
((NODES == 3)) && args+=(--kill-node-cmd "bash $SELF node-kill $WORK {id}"
  --restart-node-cmd "bash $SELF node-restart $WORK {id}")
rc=0
if [[ $CHECKS != none ]]; then
  out="$RUN_DIR/share-anchor-$NODES"
  timeout -k 10 900 python3 "$REPO_ROOT/compat/python/share_groups.py" "${args[@]}" \
    > "$out.jsonl" 2> "$out.log" < /dev/null || rc=$?
  cat "$out.jsonl"
  grep -E '^\[[0-9:]+\] share-[a-z]+: (pass|fail)' "$out.log" >&2 || true
  log "share_groups.py exit status $rc (log: ${out#"$REPO_ROOT"/}.log)"
fi
# the compat drivers' share check (the matrix's share column of their rows)
java_cp="$REPO_ROOT/compat/java/target/classes:$REPO_ROOT/compat/java/target/lib/*"
for client in $CLIENTS; do
  case $client in
    franz-go) cmd=("$REPO_ROOT/target/compat/franz-go-driver");;
    java) cmd=(java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$java_cp" chronik.compat.Driver);;
    confluent-kafka) cmd=("${VENV:-$REPO_ROOT/.venv}/bin/python" "$REPO_ROOT/compat/python/confluent_driver.py");;
    *) die "--clients: no share check in '$client' (franz-go, java, confluent-kafka)";;
  esac
  started=$(date +%s)
  line=$(timeout -k 10 300 "${cmd[@]}" --bootstrap "${KAFKA_BOOTSTRAP%%,*}" --check share --stage-timeout 30 \
    2> "$RUN_DIR/share-anchor-$client.log" < /dev/null) || true
  printf '%s\n' "$line"
  if [[ $line == *'"result": "pass"'* || $line == *'"result":"pass"'* ]]; then
    log "$client share: pass in $(($(date +%s) - started)) s"
  else
    log "$client share: FAIL in $(($(date +%s) - started)) s (log: .run/share-anchor-$client.log)"
    rc=1
  fi
done
exit "$rc"
