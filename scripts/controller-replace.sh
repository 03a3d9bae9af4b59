#!/usr/bin/env bash
# Replaces a controller of a running split cluster with Kafka's own
# kafka-metadata-quorum.sh (MetadataQuorumCommand, kafka-tools 4.3.1), the
# steps docs/cluster.md gives: 3 controllers (127.0.0.1-3) and 3 brokers
# (127.0.0.4-6) are started, a 4th controller (127.0.0.7) joins with no
# --peers entry, `add-controller` adds it, `remove-controller` removes the
# active controller, which is then stopped; `describe --replication` before
# and after.
#
# Prerequisites: `cargo build --release -p chronik-server`, Java, and the
# tool jars (`bash compat/install-deps.sh` -> compat/java/target/lib).
# Safe to re-run: everything lives in a fresh temp dir, and the trap stops
# the nodes it started (by pid).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVER="${SERVER:-$ROOT/target/release/chronik-server}"
LIB="${COMPAT_JAVA_LIB:-$ROOT/compat/java/target/lib}"
KAFKA_PORT="${KAFKA_PORT:-29092}"
RAFT_PORT="${RAFT_PORT:-29093}"
METRICS_PORT="${METRICS_PORT:-29644}"
WORK="$(mktemp -d)"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

tool() {
  java -Xmx512m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$LIB/*" \
    org.apache.kafka.tools.MetadataQuorumCommand --bootstrap-server "127.0.0.4:$KAFKA_PORT" "$@"
}

start() { # id, then the node's role flags
  local id="$1"; shift
  "$SERVER" --node-id "$id" --listen "127.0.0.$id:$KAFKA_PORT" --raft-listen "127.0.0.$id:$RAFT_PORT" \
    --metrics-listen "127.0.0.$id:$METRICS_PORT" --data-dir "$WORK/data-$id" \
    --cluster-secret-file "$WORK/cluster.secret" "$@" >"$WORK/node-$id.log" 2>&1 &
  PIDS[id]=$!
}

QUORUM="127.0.0.1:$RAFT_PORT,127.0.0.2:$RAFT_PORT,127.0.0.3:$RAFT_PORT"
for i in 1 2 3; do
  start "$i" --process-roles controller --peers "1@127.0.0.1,2@127.0.0.2,3@127.0.0.3"
done
for i in 4 5 6; do
  start "$i" --process-roles broker --controller-quorum-bootstrap-servers "$QUORUM"
done
for _ in $(seq 1 120); do
  tool describe --status >/dev/null 2>&1 && break
  sleep 0.5
done
tool describe --replication

# 1. The new controller: no --peers entry, the quorum's bootstrap servers.
start 7 --process-roles controller --controller-quorum-bootstrap-servers "$QUORUM"
until grep -q "directory.id=" "$WORK/data-7/meta.properties" 2>/dev/null; do sleep 0.2; done
cat >"$WORK/controller-7.properties" <<EOF
node.id=7
process.roles=controller
controller.listener.names=CONTROLLER
listeners=CONTROLLER://127.0.0.7:$RAFT_PORT
metadata.log.dir=$WORK/data-7
EOF
# 2. add-controller, retried while the new one catches up (REQUEST_TIMED_OUT).
for attempt in $(seq 1 30); do
  if tool --command-config "$WORK/controller-7.properties" add-controller; then break; fi
  [ "$attempt" -lt 30 ] || exit 1
  sleep 1
done
tool describe --replication

# 3. remove-controller of the active one, then stop it.
LEADER="$(tool describe --status | awk -F'[: \t]+' '/^LeaderId/ {print $2}')"
DIR="$(sed -n 's/^directory.id=//p' "$WORK/data-$LEADER/meta.properties")"
tool remove-controller --controller-id "$LEADER" --controller-directory-id "$DIR"
kill "${PIDS[LEADER]}"
for _ in $(seq 1 100); do
  NOW="$(tool describe --status 2>/dev/null | awk -F'[: \t]+' '/^LeaderId/ {print $2}')" || true
  [ -n "$NOW" ] && [ "$NOW" != "$LEADER" ] && break
  sleep 0.2
done
tool describe --status
tool describe --replication
