#!/usr/bin/env bash
# k8s-perf/tests/node.sh - the main job on a real node (make k8s-node-test).
#
#   k8s-perf/tests/node.sh
#
# On the one-machine node of scripts/k8s-node.sh (started here if it is not
# up): every process of the node runs and the node is Ready; then
# ./run-all.sh --k8s --overlay small --acks all --delete-pod chronik-0@30 runs
# for real - the broker StatefulSet's pod, ingestor, consumer and the load
# generator's Indexed Job as pods under the kubelet, Prometheus scraping them
# by Kubernetes discovery - with the broker pod deleted mid-load. Checks: the
# run passed (results fetched, verified clean); the report says "Verified: 0
# lost"; the ingestors' ledgers acknowledged messages and every one was
# consumed; meta.json and the report name the delete and the pod's return,
# which kept its volume claim; Prometheus scraped the broker, the ingestor,
# the consumer and the kubelet's cAdvisor (resources.csv has broker CPU).
# Prints "k8s-node: N passed, N failed"; exit 1 if anything failed. The node
# and the run's workloads stay up (make k8s-node-down stops the node).
#
# Needs: root, make images (the images), Go (the first up builds ~12 min).
# Env: NODE_TEST_OVERLAY (default small), NODE_TEST_DELETE (default chronik-0@30).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=k8s-perf/tests/nodecheck.sh
source "$HERE/nodecheck.sh"
OVERLAY="${NODE_TEST_OVERLAY:-small}"
DELETE="${NODE_TEST_DELETE:-chronik-0@30}"
RUN_ID="node-test-$(date -u +%Y%m%dT%H%M%SZ)"
OUT="$REPO/results/$RUN_ID"

# -- the node -------------------------------------------------------------------------------------------------
node_up

# -- the main job, with a broker pod deleted mid-load --------------------------------------------------------------
"$REPO/cleanup.sh" --k8s > /dev/null 2>&1 || true
log "./run-all.sh --k8s --overlay $OVERLAY --acks all --delete-pod $DELETE --run-id $RUN_ID"
t0=$(date +%s)
if "$REPO/run-all.sh" --k8s --overlay "$OVERLAY" --acks all --delete-pod "$DELETE" --run-id "$RUN_ID" \
     > "$REPO/.run/$RUN_ID.log" 2>&1; then
  ok "./run-all.sh --k8s --overlay $OVERLAY on the node passed in $(($(date +%s) - t0)) s (log: .run/$RUN_ID.log)"
else
  fail "./run-all.sh --k8s --overlay $OVERLAY: $(grep -E 'error|FAILED' "$REPO/.run/$RUN_ID.log" | tail -n 3 | tr '\n' ' ')"
fi

# -- what the results say ----------------------------------------------------------------------------------------------
check_verdict "$OUT" "$RUN_ID"
if "$PY" "$HERE/check_node_run.py" "$OUT" "${DELETE%@*}" > "$REPO/.run/$RUN_ID.check" 2>&1; then
  while read -r line; do ok "$line"; done < "$REPO/.run/$RUN_ID.check"
else
  while read -r line; do
    if [[ "$line" == FAIL* ]]; then fail "${line#FAIL }"; else ok "$line"; fi
  done < "$REPO/.run/$RUN_ID.check"
fi
finish
