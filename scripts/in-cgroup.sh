#!/usr/bin/env bash
# in-cgroup.sh - run a command inside a cgroup (v2) directory, so that every
# socket it opens carries that cgroup: how ./run-all.sh --faults cuts one
# broker node off from the others (scripts/faults.py: an iptables cgroup
# match on loopback). The command replaces this shell (exec): its pid is the
# one the caller recorded.
#
#   scripts/in-cgroup.sh CGROUP_DIR COMMAND [ARGS...]
#   JAVA=scripts/in-cgroup.sh (with IN_CGROUP_ROOT, for the kafka-anchor):
#     a "kafka.Kafka .../nodeN/server.properties" launch joins
#     $IN_CGROUP_ROOT/nodeN, any other java command runs as it is
#
# Needs: root (to write cgroup.procs), the cgroup2 hierarchy (scripts/faults.py prepare creates the directories).
set -euo pipefail
if [[ -n "${IN_CGROUP_ROOT:-}" ]]; then
  # the anchor's $JAVA: find the node from the broker's properties file
  java_bin="${IN_CGROUP_JAVA:-java}"
  last="${*: -1}"
  if [[ " $* " == *" kafka.Kafka "* && "$last" =~ /node([0-9]+)/server\.properties$ ]]; then
    echo $$ > "$IN_CGROUP_ROOT/node${BASH_REMATCH[1]}/cgroup.procs"
  fi
  exec "$java_bin" "$@"
fi
(($# >= 2)) || { echo "usage: $0 CGROUP_DIR COMMAND [ARGS...]" >&2; exit 2; }
echo $$ > "$1/cgroup.procs"
shift
exec "$@"
