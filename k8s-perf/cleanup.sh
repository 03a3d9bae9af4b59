#!/usr/bin/env bash
# k8s-perf/cleanup.sh - remove everything k8s-perf/run.sh created in a
# cluster (`./cleanup.sh --k8s`), in an order that leaves nothing running:
#   1. the load Job chronik-load and its generator pods (first: nothing may
#      keep sending to the ingestors while they go)
#   2. the workloads, Services, PodDisruptionBudget, monitors and ConfigMaps
#      (label app.kubernetes.io/part-of=chronik-perf)
#   3. the brokers' PersistentVolumeClaims (the data)
#   4. the namespace
# and the local scratch of runs (.run/k8s/). results/ is kept.
# Safe to run twice: every delete ignores what is already gone, and a missing
# namespace or a cluster without the monitoring CRDs is not an error.
#
#   ./cleanup.sh --k8s [--context CTX] [--namespace NS] [--keep-namespace] [--dry-run]
#
# Needs: kubectl. Env: CONTEXT, NAMESPACE (default chronik-perf), DRY_RUN=1.
set -euo pipefail
# shellcheck source=k8s-perf/lib/k8s.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s.sh"

CONTEXT="${CONTEXT:-}"
NAMESPACE="${NAMESPACE:-chronik-perf}"
DRY_RUN="${DRY_RUN:-0}"
KEEP_NAMESPACE=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while (($#)); do
  case $1 in
    --context) [[ $# -ge 2 ]] || usage; CONTEXT=$2; shift 2 ;;
    --namespace) [[ $# -ge 2 ]] || usage; NAMESPACE=$2; shift 2 ;;
    --keep-namespace) KEEP_NAMESPACE=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option: $1" >&2; usage ;;
  esac
done
[[ "$NAMESPACE" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "--namespace $NAMESPACE is not a valid namespace name"

if [[ "$DRY_RUN" != 1 ]] && ! kc_read get namespace "$NAMESPACE" > /dev/null 2>&1; then
  log "namespace $NAMESPACE does not exist: nothing to remove in the cluster"
else
  kc delete -n "$NAMESPACE" jobs -l app.kubernetes.io/name=chronik-loadgen --ignore-not-found \
    --cascade=foreground --wait=true --timeout=300s
  kc wait -n "$NAMESPACE" --for=delete pod -l app.kubernetes.io/name=chronik-loadgen --timeout=120s || true
  kinds=statefulsets,deployments,jobs,services,poddisruptionbudgets,configmaps
  if [[ "$DRY_RUN" == 1 ]] || [[ -n "$(kc_read api-resources --api-group=monitoring.coreos.com -o name 2> /dev/null)" ]]; then
    kinds+=,servicemonitors.monitoring.coreos.com,podmonitors.monitoring.coreos.com
  fi
  kc delete -n "$NAMESPACE" "$kinds" -l app.kubernetes.io/part-of=chronik-perf \
    --ignore-not-found --wait=true --timeout=300s
  kc delete -n "$NAMESPACE" pvc -l 'app.kubernetes.io/name=chronik,app.kubernetes.io/component in (broker,controller)' \
    --ignore-not-found --wait=true --timeout=300s
  if [[ "$KEEP_NAMESPACE" == 1 ]]; then
    log "kept namespace $NAMESPACE"
  else
    kc delete namespace "$NAMESPACE" --ignore-not-found --wait=true --timeout=300s
  fi
fi
if [[ "$DRY_RUN" == 1 ]]; then
  printf '+ rm -rf %s\n' "$REPO_ROOT/.run/k8s"
else
  rm -rf "$REPO_ROOT/.run/k8s"
fi
log "cleanup --k8s: done (namespace $NAMESPACE${CONTEXT:+, context $CONTEXT})"
