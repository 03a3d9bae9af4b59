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
#   CHRONIK_BROKER_RACK  dropped when empty (the node has no
#                      topology.kubernetes.io/zone label: the downward API gives
#                      "", which chronik-server refuses as a rack) and on
#                      controller-only pods, with CHRONIK_REPLICA_SELECTOR_CLASS
#                      (racks and replica selection are a broker's)
#   CHRONIK_PEERS      the metadata quorum's voters ("ID@stable DNS name,..."):
#                      with CONTROLLER_STATEFULSET set, that StatefulSet's
#                      CONTROLLER_REPLICAS pods (ids CONTROLLER_ID_BASE + ordinal:
#                      controllers apart from brokers, components/controllers);
#                      else, with BROKER_REPLICAS > 1, every pod of this one
#                      (combined broker,controller nodes)
#                      (and CHRONIK_CLUSTER_SECRET_FILE must name the mounted Secret)
# A pod whose CHRONIK_PROCESS_ROLES is `controller` (the chronik-controller
# StatefulSet) gets node id CONTROLLER_ID_BASE + ordinal and no advertised
# Kafka address; a `broker` pod follows the quorum as an observer, so its
# StatefulSet grows and shrinks without any change here (BROKER_REPLICAS is
# not read).
# Inputs (env): POD_NAME, POD_NAMESPACE, CHRONIK_BROKER_RACK (downward API),
# HEADLESS_SERVICE, BROKER_REPLICAS (combined nodes: must equal the
# StatefulSet's replicas; CI checks that), CHRONIK_PROCESS_ROLES (default
# broker,controller), CONTROLLER_STATEFULSET, CONTROLLER_SERVICE,
# CONTROLLER_REPLICAS, CONTROLLER_ID_BASE (default 1001),
# CLUSTER_DOMAIN (default cluster.local), CHRONIK_LISTEN or CHRONIK_LISTENERS.
# Must not: choose ports or tuning (those stay in the manifest's env).
set -eu

: "${POD_NAME:?POD_NAME must be set (downward API)}"
: "${POD_NAMESPACE:?POD_NAMESPACE must be set (downward API)}"
: "${HEADLESS_SERVICE:?HEADLESS_SERVICE must name the StatefulSet governing service}"
replicas=${BROKER_REPLICAS:-1}
roles=${CHRONIK_PROCESS_ROLES:-broker,controller}
controller_base=${CONTROLLER_ID_BASE:-1001}
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
positive() { # NAME VALUE: exit unless VALUE is a positive integer
  case $2 in
    '' | *[!0-9]* | 0)
      echo "entrypoint: $1=$2 is not a positive integer" >&2
      exit 1
      ;;
  esac
}
positive BROKER_REPLICAS "$replicas"
positive CONTROLLER_ID_BASE "$controller_base"
case $roles in
  broker | controller | broker,controller | controller,broker) ;;
  *)
    echo "entrypoint: CHRONIK_PROCESS_ROLES=$roles is not broker, controller or broker,controller" >&2
    exit 1
    ;;
esac

if [ -z "${CHRONIK_BROKER_RACK:-}" ] || [ "$roles" = controller ]; then
  unset CHRONIK_BROKER_RACK
fi
if [ "$roles" = controller ]; then
  unset CHRONIK_REPLICA_SELECTOR_CLASS
fi

suffix="$HEADLESS_SERVICE.$POD_NAMESPACE.svc.$domain"
if [ "$roles" = controller ]; then
  CHRONIK_NODE_ID=$((ordinal + controller_base))
else
  CHRONIK_NODE_ID=$((ordinal + 1))
fi
export CHRONIK_NODE_ID
if [ "$roles" = controller ]; then
  : # no Kafka listener: nothing to advertise
elif [ -n "${CHRONIK_LISTENERS:-}" ]; then
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

# voters SET SERVICE COUNT BASE: "BASE@SET-0.SERVICE...,BASE+1@SET-1...,..."
voters() {
  out=""
  i=0
  while [ "$i" -lt "$3" ]; do
    out="${out:+$out,}$((i + $4))@$1-$i.$2.$POD_NAMESPACE.svc.$domain"
    i=$((i + 1))
  done
  echo "$out"
}
peers=""
if [ -n "${CONTROLLER_STATEFULSET:-}" ]; then
  : "${CONTROLLER_SERVICE:?CONTROLLER_SERVICE must name the headless Service of the controllers}"
  positive CONTROLLER_REPLICAS "${CONTROLLER_REPLICAS:-}"
  peers=$(voters "$CONTROLLER_STATEFULSET" "$CONTROLLER_SERVICE" "$CONTROLLER_REPLICAS" "$controller_base")
elif [ "$roles" != broker,controller ] && [ "$roles" != controller,broker ]; then
  echo "entrypoint: CHRONIK_PROCESS_ROLES=$roles needs CONTROLLER_STATEFULSET (the voters)" >&2
  exit 1
elif [ "$replicas" -gt 1 ]; then
  peers=$(voters "$statefulset" "$HEADLESS_SERVICE" "$replicas" 1)
fi
if [ -n "$peers" ]; then
  CHRONIK_PEERS=$peers
  export CHRONIK_PEERS
  # Every voter must prove the same secret on the raft port; a pod that
  # generated its own could never join.
  if [ ! -s "${CHRONIK_CLUSTER_SECRET_FILE:-}" ]; then
    echo "entrypoint: ${CHRONIK_CLUSTER_SECRET_FILE:-CHRONIK_CLUSTER_SECRET_FILE} is missing: create the Secret chronik-cluster-secret (k8s-perf/run.sh does)" >&2
    exit 1
  fi
fi

echo "entrypoint: node id $CHRONIK_NODE_ID ($roles), rack ${CHRONIK_BROKER_RACK:-none}, advertised as ${CHRONIK_ADVERTISED_LISTENERS:-${CHRONIK_ADVERTISE:-nothing}}, peers ${CHRONIK_PEERS:-none (standalone)}" >&2
exec chronik-server "$@"
