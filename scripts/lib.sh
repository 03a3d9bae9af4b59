# shellcheck shell=bash
# scripts/lib.sh - shell helpers shared by run-all.sh, cleanup.sh and
# broker/bench/*.sh. Sourced, not run.
#
# Owns: the process registry .run/pids (one "PID STARTTIME NAME OWNER
# OWNER_STARTTIME" line per process a script started: STARTTIME pins the pid to
# one process so a reused pid is never stopped, OWNER is the script ($$) that
# started it, so cleanup.sh leaves alone what a still-running script owns),
# starting chronik-server on free loopback ports and polling it ready,
# stopping processes by pid, and reading a process's CPU ticks (cpu_ticks).
# Registry updates hold flock on .run/pids.lock, so parallel runners of one
# script (or several scripts) can share it. Must not: hold program logic
# (free_port and port_free call scripts/runctl.py).
#
# Needs: bash 4+, awk, flock (util-linux), curl, python3 (scripts/install-system-deps.sh).
#
# Env knobs (all optional):
#   RUN_DIR              scratch dir for pids, data, logs   (default <repo>/.run)
#   CHRONIK_SERVER_BIN   broker binary                      (default <repo>/target/release/chronik-server)
#   CHRONIK_START_TIMEOUT  seconds to wait for LISTENING + /ready (default 60)
#   STOP_TIMEOUT         seconds between SIGTERM and SIGKILL (default 30)

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUN_DIR="${RUN_DIR:-$REPO_ROOT/.run}"
PIDS_FILE="$RUN_DIR/pids"
CHRONIK_SERVER_BIN="${CHRONIK_SERVER_BIN:-$REPO_ROOT/target/release/chronik-server}"
CHRONIK_START_TIMEOUT="${CHRONIK_START_TIMEOUT:-60}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Kernel start time (clock ticks since boot) of a pid: with the pid it
# identifies one process for good, even after the pid number is reused.
proc_start_time() {
  awk '{sub(/^.*\) /, ""); print $20}' "/proc/$1/stat" 2>/dev/null
}

# pid_record PID NAME - remember a process this run ($$) started.
pid_record() {
  mkdir -p "$RUN_DIR"
  local line
  line="$1 $(proc_start_time "$1") $2 $$ $(proc_start_time $$)"
  ( flock 9; printf '%s\n' "$line" >> "$PIDS_FILE" ) 9> "$PIDS_FILE.lock"
}

# pid_forget PID - drop a process from the registry (it has been stopped).
pid_forget() {
  [[ -f "$PIDS_FILE" ]] || return 0
  (
    flock 9
    tmp=$(mktemp "$PIDS_FILE.XXXXXX")
    awk -v p="$1" '$1 != p' "$PIDS_FILE" > "$tmp" && mv "$tmp" "$PIDS_FILE"
  ) 9> "$PIDS_FILE.lock"
}

# pid_is PID STARTTIME - true while that very process is alive (not a zombie).
pid_is() {
  [[ -n "$2" && "$(proc_start_time "$1")" == "$2" ]] \
    && [[ "$(awk '{sub(/^.*\) /, ""); print $1}' "/proc/$1/stat" 2>/dev/null)" != Z ]]
}

# stop_pid PID [TIMEOUT] - SIGTERM, poll until gone, SIGKILL after TIMEOUT s.
# Returns 0 if it exited within the timeout, 1 if it had to be killed.
stop_pid() {
  local pid=$1 t=${2:-$STOP_TIMEOUT} i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < t * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    # a child of this shell stays a zombie (kill -0 succeeds) until reaped
    [[ "$(awk '{sub(/^.*\) /, ""); print $1}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] && return 0
    sleep 0.1
  done
  log "pid $pid ignored SIGTERM for ${t}s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  return 1
}

# wait_http_ok URL TIMEOUT_S [PID] - poll until URL answers 2xx; give up early
# if PID (the server) exits.
wait_http_ok() {
  local url=$1 t=$2 pid=${3:-} i
  for ((i = 0; i < t * 10; i++)); do
    curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
    [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null && return 1
    sleep 0.1
  done
  return 1
}

# port_free PORT - true when 127.0.0.1:PORT can be bound.
port_free() { python3 "$REPO_ROOT/scripts/runctl.py" port-free "$1"; }

# free_port [N] - N (default 1) distinct TCP ports, space-separated, that
# 127.0.0.1-3 can all bind right now, below the ephemeral range (so no
# outgoing connection takes one before its listener binds). The one
# implementation: scripts/runctl.py free-port.
free_port() { python3 "$REPO_ROOT/scripts/runctl.py" free-port "$@"; }

# cpu_ticks PID... - user + system CPU the processes have used so far, summed,
# in clock ticks (getconf CLK_TCK a second); fails when one has gone.
# (/proc/PID/stat fields 14 and 15, counted after the ") " that ends the
# command name, which may itself hold spaces.)
cpu_ticks() {
  local total=0 pid ticks
  for pid in "$@"; do
    ticks=$(awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$pid/stat" 2>/dev/null) && [[ -n "$ticks" ]] || return 1
    total=$((total + ticks))
  done
  echo "$total"
}

# start_chronik DIR [ARGS...] - start chronik-server with its data in DIR/data
# and logs in DIR/{stdout,stderr}.log, on 127.0.0.1 port 0 (Kafka and metrics;
# ARGS with --listeners replace the one PLAINTEXT listener), extra ARGS
# appended. Waits for the LISTENING line and for /ready.
# Sets CHRONIK_PID, CHRONIK_KAFKA (host:port, the first listener),
# CHRONIK_METRICS (host:port), CHRONIK_LISTENING_LINE (with listener.NAME=ADDR).
start_chronik() {
  local dir=$1; shift
  [[ -x "$CHRONIK_SERVER_BIN" ]] \
    || die "$CHRONIK_SERVER_BIN not found: run 'make build' (scripts/build-release.sh)"
  mkdir -p "$dir/data"
  : > "$dir/stdout.log"
  # one PLAINTEXT listener on a free port unless the caller names its own (--listeners)
  local listen=(--listen 127.0.0.1:0)
  [[ " $* " == *" --listeners "* ]] && listen=()
  "$CHRONIK_SERVER_BIN" "${listen[@]}" --metrics-listen 127.0.0.1:0 \
    --data-dir "$dir/data" "$@" > "$dir/stdout.log" 2> "$dir/stderr.log" < /dev/null &
  CHRONIK_PID=$!
  pid_record "$CHRONIK_PID" chronik-server
  local i line=""
  for ((i = 0; i < CHRONIK_START_TIMEOUT * 10; i++)); do
    line=$(grep -m1 '^LISTENING ' "$dir/stdout.log" 2>/dev/null || true)
    [[ -n "$line" ]] && break
    if ! kill -0 "$CHRONIK_PID" 2>/dev/null; then
      tail -n 30 "$dir/stderr.log" >&2 || true
      die "chronik-server exited during startup (logs: $dir)"
    fi
    sleep 0.1
  done
  [[ -n "$line" ]] || die "chronik-server printed no LISTENING line within ${CHRONIK_START_TIMEOUT}s (logs: $dir)"
  # LISTENING kafka=127.0.0.1:PORT metrics=127.0.0.1:PORT [listener.NAME=ADDR ...]
  # shellcheck disable=SC2034  # read by callers (cpu-per-message.sh --tls)
  CHRONIK_LISTENING_LINE=$line
  CHRONIK_KAFKA=$(sed -nE 's/.*kafka=([^ ]+).*/\1/p' <<<"$line")
  CHRONIK_METRICS=$(sed -nE 's/.*metrics=([^ ]+).*/\1/p' <<<"$line")
  [[ -n "$CHRONIK_KAFKA" && -n "$CHRONIK_METRICS" ]] || die "cannot parse '$line'"
  wait_http_ok "http://$CHRONIK_METRICS/ready" "$CHRONIK_START_TIMEOUT" "$CHRONIK_PID" \
    || { tail -n 30 "$dir/stderr.log" >&2 || true; die "chronik-server not ready on http://$CHRONIK_METRICS/ready"; }
  log "chronik-server pid $CHRONIK_PID kafka=$CHRONIK_KAFKA metrics=$CHRONIK_METRICS data=$dir/data"
}

# Kafka's replica.selector.class that serves a consumer from the in-sync
# replica in its client.rack (KIP-392)
RACK_AWARE_REPLICA_SELECTOR=org.apache.kafka.common.replica.RackAwareReplicaSelector

# racks_valid LIST - true when LIST is 1 to 16 comma-separated rack names of
# [A-Za-z0-9._-], each 1 to 64 characters; else false with the reason in
# RACKS_INVALID.
racks_valid() {
  local list=$1 rack racks=()
  RACKS_INVALID=""
  IFS=, read -ra racks <<< "$list"
  if [[ -z "$list" || "$list" == *, || ${#racks[@]} -gt 16 ]]; then
    RACKS_INVALID="give 1 to 16 comma-separated rack names"
    return 1
  fi
  for rack in "${racks[@]}"; do
    if [[ ! "$rack" =~ ^[A-Za-z0-9._-]{1,64}$ ]]; then
      RACKS_INVALID="rack name '$rack' must be 1 to 64 characters of A-Z a-z 0-9 . _ -"
      return 1
    fi
  done
}

# start_chronik_cluster DIR N [ARGS...] - start an N-node chronik cluster:
# node I on 127.0.0.I with the same Kafka, raft and metrics ports on every node
# (as pods have), data in DIR/node-I/data, peers 1@127.0.0.1,...; extra ARGS go
# to every node; CHRONIK_CLUSTER_PROTOCOL (default PLAINTEXT) names the one
# listener's protocol (e.g. SASL_SSL: --listeners SASL_SSL://127.0.0.I:PORT,
# also the inter-broker listener). Nodes wait for each other before listening, so all are
# started first and then awaited.
# CHRONIK_CGROUP_ROOT=DIR[:DIR...] starts node I in the cgroup DIR/nodeI of
# every DIR (scripts/in-cgroup.sh), so a fault can cut it off or slow its
# disk (scripts/faults.py).
# CHRONIK_CONTROLLERS=C (> 0) splits the roles: C controller-only nodes first
# (127.0.0.1..C, the voters), then the N brokers (broker-only, observers of
# the quorum) on 127.0.0.C+1..C+N.
# CHRONIK_RACKS=a,b,c (racks_valid) gives the I-th broker (I = 1..N, counted
# over brokers only) the rack racks[(I-1) % len] (--broker-rack, Kafka's
# broker.rack) and the rack-aware replica selector (KIP-392: consumers that
# send client.rack fetch from the in-sync follower in their rack);
# controller-only nodes get neither.
# Sets CHRONIK_RAFT_PORT (every node's raft port), CHRONIK_PIDS (array, brokers), CHRONIK_KAFKA (bootstrap list of every
# broker), CHRONIK_METRICS_LIST (array of host:port, brokers), CHRONIK_PID
# (the first broker), CHRONIK_CONTROLLER_PIDS and
# CHRONIK_CONTROLLER_METRICS_LIST (controller-only nodes; empty when combined),
# CHRONIK_BROKER_IDS (array, each broker's node id) and, with CHRONIK_RACKS,
# CHRONIK_BROKER_RACKS (array, each broker's rack; all three arrays in the
# order of CHRONIK_PIDS) and CHRONIK_RACK_MAP ("NODE_ID=RACK,...", exported).
start_chronik_cluster() {
  local dir=$1 n=$2; shift 2
  [[ -x "$CHRONIK_SERVER_BIN" ]] \
    || die "$CHRONIK_SERVER_BIN not found: run 'make build' (scripts/build-release.sh)"
  local ports kport rport mport peers="" i proto=${CHRONIK_CLUSTER_PROTOCOL:-PLAINTEXT}
  # CHRONIK_CONTROLLERS=C > 0: Kafka's split roles. Nodes 1..C on 127.0.0.1..C
  # are controllers only (the voters); the n brokers are nodes C+1..C+n,
  # observers of the quorum. 0 (the default): n combined nodes.
  local controllers=${CHRONIK_CONTROLLERS:-0} voters total
  voters=$((controllers > 0 ? controllers : n)); total=$((controllers + n))
  ports=$(free_port 3); read -r kport rport mport <<< "$ports"
  # shellcheck disable=SC2034  # read by run-all.sh (scripts/faults.py cuts this port too)
  CHRONIK_RAFT_PORT=$rport
  for ((i = 1; i <= voters; i++)); do peers+="${peers:+,}$i@127.0.0.$i"; done
  # One raft secret for every node (they share this host).
  mkdir -p "$dir"
  [[ -s "$dir/cluster.secret" ]] || (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > "$dir/cluster.secret")
  CHRONIK_PIDS=(); CHRONIK_METRICS_LIST=(); CHRONIK_KAFKA=""
  CHRONIK_CONTROLLER_PIDS=(); CHRONIK_CONTROLLER_METRICS_LIST=()
  CHRONIK_BROKER_IDS=(); CHRONIK_BROKER_RACKS=(); CHRONIK_RACK_MAP=""
  local racks=()
  if [[ -n "${CHRONIK_RACKS:-}" ]]; then
    racks_valid "$CHRONIK_RACKS" || die "CHRONIK_RACKS=$CHRONIK_RACKS: $RACKS_INVALID"
    IFS=, read -ra racks <<< "$CHRONIK_RACKS"
  fi
  local pids=() node_metrics=()
  for ((i = 1; i <= total; i++)); do
    mkdir -p "$dir/node-$i/data"
    local listen=(--listen "127.0.0.$i:$kport") roles=()
    [[ "$proto" == PLAINTEXT ]] \
      || listen=(--listeners "$proto://127.0.0.$i:$kport" --inter-broker-listener-name "$proto")
    if ((controllers > 0)); then
      if ((i <= controllers)); then roles=(--process-roles controller); else roles=(--process-roles broker); fi
    fi
    local rack="" rack_args=()
    if ((${#racks[@]} && i > controllers)); then
      rack=${racks[$(((i - controllers - 1) % ${#racks[@]}))]}
      rack_args=(--broker-rack "$rack" --replica-selector-class "$RACK_AWARE_REPLICA_SELECTOR")
    fi
    local launch=()  # CHRONIK_CGROUP_ROOT: each node in its own cgroups (run-all.sh --faults: partition, slow-disk)
    if [[ -n "${CHRONIK_CGROUP_ROOT:-}" ]]; then
      local roots root node_dirs=""
      IFS=: read -ra roots <<< "$CHRONIK_CGROUP_ROOT"
      for root in "${roots[@]}"; do node_dirs+="${node_dirs:+:}$root/node$i"; done
      launch=("$REPO_ROOT/scripts/in-cgroup.sh" "$node_dirs")
    fi
    "${launch[@]}" "$CHRONIK_SERVER_BIN" --node-id "$i" --peers "$peers" "${roles[@]}" "${rack_args[@]}" \
      "${listen[@]}" --raft-listen "127.0.0.$i:$rport" --metrics-listen "127.0.0.$i:$mport" \
      --data-dir "$dir/node-$i/data" --cluster-secret-file "$dir/cluster.secret" "$@" > "$dir/node-$i/stdout.log" 2> "$dir/node-$i/stderr.log" < /dev/null &
    pids+=("$!"); node_metrics+=("127.0.0.$i:$mport")
    if ((controllers > 0 && i <= controllers)); then
      pid_record "$!" "chronik-controller-$i"
      CHRONIK_CONTROLLER_PIDS+=("$!")
      CHRONIK_CONTROLLER_METRICS_LIST+=("127.0.0.$i:$mport")
    else
      pid_record "$!" "chronik-server-$i"
      CHRONIK_PIDS+=("$!")
      CHRONIK_BROKER_IDS+=("$i")
      if [[ -n "$rack" ]]; then
        CHRONIK_BROKER_RACKS+=("$rack")
        CHRONIK_RACK_MAP+="${CHRONIK_RACK_MAP:+,}$i=$rack"
      fi
      CHRONIK_KAFKA+="${CHRONIK_KAFKA:+,}127.0.0.$i:$kport"
      CHRONIK_METRICS_LIST+=("127.0.0.$i:$mport")
    fi
  done
  CHRONIK_PID=${CHRONIK_PIDS[0]}
  export CHRONIK_RACK_MAP
  for ((i = 1; i <= total; i++)); do
    local pid=${pids[$((i - 1))]} waited
    for ((waited = 0; waited < CHRONIK_START_TIMEOUT * 10; waited++)); do
      grep -q '^LISTENING ' "$dir/node-$i/stdout.log" 2>/dev/null && break
      if ! kill -0 "$pid" 2>/dev/null; then
        tail -n 30 "$dir/node-$i/stderr.log" >&2 || true
        die "chronik-server node $i exited during startup (logs: $dir/node-$i)"
      fi
      sleep 0.1
    done
    wait_http_ok "http://127.0.0.$i:$mport/ready" "$CHRONIK_START_TIMEOUT" "$pid" \
      || { tail -n 30 "$dir/node-$i/stderr.log" >&2 || true; die "chronik-server node $i not ready (logs: $dir/node-$i)"; }
  done
  [[ -n "$CHRONIK_RACK_MAP" ]] && log "racks (node=rack): $CHRONIK_RACK_MAP, replica selector $RACK_AWARE_REPLICA_SELECTOR"
  if ((controllers > 0)); then
    log "chronik cluster of $controllers controllers (pids ${CHRONIK_CONTROLLER_PIDS[*]}) and $n brokers: pids ${CHRONIK_PIDS[*]} bootstrap=$CHRONIK_KAFKA"
  else
    log "chronik cluster of $n nodes: pids ${CHRONIK_PIDS[*]} bootstrap=$CHRONIK_KAFKA"
  fi
}

# stop_chronik - SIGTERM the broker started by start_chronik, wait, forget it.
# Returns the broker's exit status (non-zero also if it had to be killed).
stop_chronik() {
  [[ -n "${CHRONIK_PID:-}" ]] || return 0
  local pid=$CHRONIK_PID rc=0
  CHRONIK_PID=""
  stop_pid "$pid" || rc=137
  wait "$pid" 2>/dev/null || rc=$?
  pid_forget "$pid"
  log "chronik-server pid $pid stopped (exit status $rc)"
  return "$rc"
}

# git_describe - commit of the work tree, "+dirty" if it has local changes.
git_describe() {
  local c
  c=$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD 2>/dev/null) || { echo unknown; return; }
  git -C "$REPO_ROOT" diff --quiet HEAD 2>/dev/null || c+="+dirty"
  echo "$c"
}
