#!/usr/bin/env bash
# k8s-perf/tests/grow.sh - growing the brokers under load on a real node
# (make k8s-grow-test).
#
#   k8s-perf/tests/grow.sh
#
# On the one-machine node of scripts/k8s-node.sh (started here if it is not
# up): ./run-all.sh --k8s --overlay scale-out --acks all runs for real (three
# controller-only pods, three broker-only pods, an idempotent acks=all
# ingestor, the verifying consumer, the load Job); once the load generator
# runs, k8s-perf/grow-brokers.sh --to 5 --tools host scales the broker
# StatefulSet to five and moves the run's topic over brokers 1-5 with Kafka's
# own kafka-reassign-partitions.sh (--generate, --execute, --verify) and a
# preferred leader election. Checks: the grow finished (its timings printed);
# the run's results were all collected (the plan's latency thresholds may fail
# during the move: reported, not judged) and its report says "Verified: 0
# lost, 0 duplicated, 0 reordered"; the new brokers 4
# and 5 are Ready and hold replicas, in sync, of the moved topic; every
# partition has a leader; the controllers stayed Ready. Prints
# "k8s-node: N passed, N failed"; exit 1 if anything failed. The node and the
# run's workloads stay up (make k8s-node-down stops the node).
#
# Needs: root, make images, Go (the first node up builds ~12 min), java and
# Kafka's jars (compat/install-deps.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=k8s-perf/tests/nodecheck.sh
source "$HERE/nodecheck.sh"
RUN_ID="grow-test-$(date -u +%Y%m%dT%H%M%SZ)"
OUT="$REPO/results/$RUN_ID"
NS=chronik-perf
mkdir -p "$REPO/.run"

node_up

# -- the main job in the background, the brokers grown while its load runs --------------------------------------
"$REPO/cleanup.sh" --k8s > /dev/null 2>&1 || true
log "./run-all.sh --k8s --overlay scale-out --acks all --run-id $RUN_ID"
# the CPU requests are fitted to the node's free CPU less two brokers' worth
# (250m each before fitting), or the new brokers could never be scheduled
LOCAL_NODE_RESERVE_MILLICORES=600 \
  "$REPO/run-all.sh" --k8s --overlay scale-out --acks all --run-id "$RUN_ID" > "$REPO/.run/$RUN_ID.log" 2>&1 &
run_pid=$!
running=0
for ((i = 0; i < 900; i++)); do
  if [[ "$(kc get pods -n "$NS" -l app.kubernetes.io/name=chronik-loadgen -o jsonpath='{.items[*].status.phase}' 2> /dev/null)" == Running ]]; then
    running=1
    break
  fi
  kill -0 "$run_pid" 2> /dev/null || break
  sleep 1
done
if ((running)); then
  ok "the load generator runs against 3 controllers and 3 brokers"
  sleep 5
  log "k8s-perf/grow-brokers.sh --to 5 --tools host"
  if summary=$(bash "$REPO/k8s-perf/grow-brokers.sh" --to 5 --tools host --namespace "$NS" 2> "$REPO/.run/$RUN_ID.grow.log"); then
    ok "$summary (under load)"
  else
    fail "grow-brokers.sh: $(tail -n 3 "$REPO/.run/$RUN_ID.grow.log" | tr '\n' ' ')"
  fi
else
  fail "the load generator never ran: $(grep -E 'error' "$REPO/.run/$RUN_ID.log" | tail -n 3 | tr '\n' ' ')"
fi
# The move is a disturbance the plan's latency thresholds do not expect (as
# run.sh's --delete-pod): the run is judged by its results being collected
# and by verification; the thresholds' outcome is reported.
if wait "$run_pid"; then
  ok "./run-all.sh --k8s --overlay scale-out passed, thresholds included, while the brokers grew (log: .run/$RUN_ID.log)"
elif grep -q "generators' results fetched: 1 of 1, chronik-loadgen merge exit 99, verification exit 0" "$REPO/.run/$RUN_ID.log"; then
  ok "./run-all.sh --k8s --overlay scale-out: results collected and verified; the plan's thresholds failed during the move: $(grep -h 'thresholds FAILED' "$OUT"/logs/chronik-load-*.log 2> /dev/null | head -n 1 | sed 's/^ *//')"
else
  fail "./run-all.sh --k8s --overlay scale-out: $(grep -E 'error|FAILED' "$REPO/.run/$RUN_ID.log" | tail -n 3 | tr '\n' ' ')"
fi

# -- what the results and the cluster say -------------------------------------------------------------------------
check_verdict "$OUT" "$RUN_ID"
ready=$(kc get statefulset chronik -n "$NS" -o jsonpath='{.status.readyReplicas}/{.spec.replicas}' 2> /dev/null || true)
[[ "$ready" == 5/5 ]] && ok "broker StatefulSet: 5 of 5 Ready" || fail "broker StatefulSet Ready/replicas: $ready"
ready=$(kc get statefulset chronik-controller -n "$NS" -o jsonpath='{.status.readyReplicas}/{.spec.replicas}' 2> /dev/null || true)
[[ "$ready" == 3/3 ]] && ok "controller StatefulSet: 3 of 3 Ready" || fail "controller StatefulSet Ready/replicas: $ready"
# the placement grow-brokers.sh printed last (kafka-topics.sh --describe)
placement=$(grep '^Topic: .*Partition:' "$REPO/.run/$RUN_ID.grow.log" || true)
if [[ -n "$placement" ]]; then
  if grep -q 'Leader: none\|Leader: -1' <<< "$placement"; then
    fail "a partition has no leader: $(grep -m1 'Leader: none\|Leader: -1' <<< "$placement")"
  else
    ok "every one of $(wc -l <<< "$placement") partitions has a leader"
  fi
  for b in 4 5; do
    isr=$(sed -n 's/.*Isr: \([0-9,]*\).*/\1/p' <<< "$placement" | tr ',' '\n' | grep -cx "$b" || true)
    if ((isr > 0)); then
      ok "new broker $b is an in-sync replica of $isr partition(s)"
    else
      fail "new broker $b holds no in-sync replica"
    fi
  done
else
  fail "no placement from kafka-topics.sh --describe (log: .run/$RUN_ID.grow.log)"
fi
finish
