#!/usr/bin/env bash
# in-cgroup.sh - run a command inside one or more cgroup directories, so that
# every socket it opens and every write it issues carries those cgroups: how
# ./run-all.sh --faults cuts one broker node off from the others (a cgroup v2
# directory: scripts/faults.py's iptables cgroup match on loopback) and slows
# its disk (the io controller's directory: io.max in v2, or the v1 blkio
# hierarchy's blkio.throttle.* where blkio is bound to v1). The command
# replaces this shell (exec): its pid is the one the caller recorded.
#
#   scripts/in-cgroup.sh CGROUP_DIR[:CGROUP_DIR...] COMMAND [ARGS...]
#   JAVA=scripts/in-cgroup.sh (with IN_CGROUP_ROOT=ROOT[:ROOT...], for the
#     kafka-anchor): a "kafka.Kafka .../nodeN/server.properties" launch joins
#     ROOT/nodeN of every ROOT, any other java command runs as it is
#
# Needs: root (to write cgroup.procs), the cgroup directories (scripts/faults.py prepare creates them).
set -euo pipefail
join() {  # join DIR[:DIR...]: this shell (and so what it execs) into each
  local dirs dir
  IFS=: read -ra dirs <<< "$1"
  for dir in "${dirs[@]}"; do echo $$ > "$dir/cgroup.procs"; done
}
if [[ -n "${IN_CGROUP_ROOT:-}" ]]; then
  # the anchor's $JAVA: find the node from the broker's properties file
  java_bin="${IN_CGROUP_JAVA:-java}"
  last="${*: -1}"
  if [[ " $* " == *" kafka.Kafka "* && "$last" =~ /node([0-9]+)/server\.properties$ ]]; then
    IFS=: read -ra roots <<< "$IN_CGROUP_ROOT"
    node_dirs=""
    for root in "${roots[@]}"; do node_dirs+="${node_dirs:+:}$root/node${BASH_REMATCH[1]}"; done
    join "$node_dirs"
  fi
  exec "$java_bin" "$@"
fi
(($# >= 2)) || { echo "usage: $0 CGROUP_DIR[:CGROUP_DIR...] COMMAND [ARGS...]" >&2; exit 2; }
join "$1"
shift
exec "$@"
