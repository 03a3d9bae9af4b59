#!/bin/sh
# k8s-perf/base/broker/entrypoint.sh - start chronik-server in a pod of the
# `chronik` StatefulSet (mounted from a generated ConfigMap; runs under the
# image's /bin/sh, so POSIX sh only).
#
# Derives from the pod's stable name what differs between pods, then execs
# chronik-server (every other setting comes from CHRONIK_* env vars, which
# the binary reads itself):
#   CHRONIK_NODE_ID    pod ordinal + 1            (chronik-2 -> 3)
#   CHRONIK_ADVERTISE  own stable DNS name : Kafka port of CHRONIK_LISTEN
#   CHRONIK_ADVERTISED_LISTENERS  instead, when CHRONIK_LISTENERS names the
#                      listeners (NAME://host:port,...): each listener's name
#                      and port at the own stable DNS name (what the
#                      certificates' SANs cover in the secure overlay)
#   CHRONIK_PEERS      with BROKER_REPLICAS > 1: every voter, this one included,
#                      "1@chronik-0.<headless>.<ns>.svc.<domain>,2@chronik-1...,..."
#                      (and CHRONIK_CLUSTER_SECRET_FILE must name the mounted Secret)
# Inputs (env): POD_NAME, POD_NAMESPACE (downward API),
# HEADLESS_SERVICE, BROKER_REPLICAS (must equal the StatefulSet's replicas;
# CI checks that), CLUSTER_DOMAIN (default cluster.local), CHRONIK_LISTEN or
# CHRONIK_LISTENERS.
# Must not: choose ports or tuning (those stay in the manifest's env).
set -eu

: "${POD_NAME:?POD_NAME must be set (downward API)}"
: "${POD_NAMESPACE:?POD_NAMESPACE must be set (downward API)}"
: "${HEADLESS_SERVICE:?HEADLESS_SERVICE must name the StatefulSet governing service}"
replicas=${BROKER_REPLICAS:-1}
domain=${CLUSTER_DOMAIN:-cluster.local}
kafka_port=${CHRONIK_LISTEN:-0.0.0.0:9092}
kafka_port=${kafka_port##*:}

ordinal=${POD_NAME##*-}
statefulset=${POD_NAME%-*}
case $ordinal in
  '' | *[!0-9]*)
    echo "entrypoint: cannot read a StatefulSet ordinal from POD_NAME=$POD_NAME" >&2
    exit 1
    ;;
esac
case $replicas in
  '' | *[!0-9]* | 0)
    echo "entrypoint: BROKER_REPLICAS=$replicas is not a positive integer" >&2
    exit 1
    ;;
esac

suffix="$HEADLESS_SERVICE.$POD_NAMESPACE.svc.$domain"
CHRONIK_NODE_ID=$((ordinal + 1))
export CHRONIK_NODE_ID
if [ -n "${CHRONIK_LISTENERS:-}" ]; then
  advertised=""
  old_ifs=$IFS
  IFS=,
  for listener in $CHRONIK_LISTENERS; do
    advertised="${advertised:+$advertised,}${listener%%://*}://$POD_NAME.$suffix:${listener##*:}"
  done
  IFS=$old_ifs
  CHRONIK_ADVERTISED_LISTENERS=$advertised
  export CHRONIK_ADVERTISED_LISTENERS
else
  CHRONIK_ADVERTISE="$POD_NAME.$suffix:$kafka_port"
  export CHRONIK_ADVERTISE
fi

if [ "$replicas" -gt 1 ]; then
  peers=""
  i=0
  while [ "$i" -lt "$replicas" ]; do
    peers="${peers:+$peers,}$((i + 1))@$statefulset-$i.$suffix"
    i=$((i + 1))
  done
  CHRONIK_PEERS=$peers
  export CHRONIK_PEERS
  # Every voter must prove the same secret on the raft port; a pod that
  # generated its own could never join.
  if [ ! -s "${CHRONIK_CLUSTER_SECRET_FILE:-}" ]; then
    echo "entrypoint: ${CHRONIK_CLUSTER_SECRET_FILE:-CHRONIK_CLUSTER_SECRET_FILE} is missing: create the Secret chronik-cluster-secret (k8s-perf/run.sh does)" >&2
    exit 1
  fi
fi

echo "entrypoint: node id $CHRONIK_NODE_ID, advertised as ${CHRONIK_ADVERTISED_LISTENERS:-$CHRONIK_ADVERTISE}, peers ${CHRONIK_PEERS:-none (standalone)}" >&2
exec chronik-server "$@"
