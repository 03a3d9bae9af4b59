# shellcheck shell=bash
# scripts/tenants.sh - a run whose plan has tenants (`./run-all.sh --test
# noisy-neighbour`): per tenant its own topic, verifying consumer, ingestor
# (--ingestor-id TENANT, so Kafka client.id chronik-ingestor-TENANT) and
# load generator run, all against the one broker; an optional Kafka client
# quota on one tenant's client id (--quota). Sourced by run-all.sh after
# scripts/lib.sh and scripts/pipeline.sh, not run.
#
# Owns: the per-tenant processes and results (results/<run-id>/tenants/
# TENANT/{load,consumers,ingestors}), in the order of the plan's tenants.
# Must not: decide what a run measures or its verdict beyond each tenant's
# exit statuses (run-all.sh does; reports/tenants.py reads the results).
#
# Reads run-all.sh's TEST, OUT, WORK, RUN_ID, TOPIC, GROUP, BOOTSTRAP,
# PARTITIONS, REPLICATION_FACTOR, MIN_INSYNC, INGESTOR_ARGS, ACKS, TOPOLOGY,
# SCALE, DURATION_SCALE, KEYS, BATCH_SIZE, MESSAGE_SIZE, QUOTA, QUOTA_TENANT,
# RATE, WARMUP, DRAIN_TIMEOUT, SETTLE_TIMEOUT; appends to STARTED, CONSUMER_URLS,
# INGESTOR_URL_LIST and SCRAPE.

declare -a TENANTS=() TENANT_PLANS=() TENANT_TOPICS=() TENANT_CONSUMER_URLS=() TENANT_INGESTOR_URLS=()
declare -a TENANT_LOADGEN_METRICS=() TENANT_LEDGERS=()

# tenants_load_plans PLAN_FILE DIR - TENANTS and TENANT_PLANS from the
# plan's tenants (scripts/tenants.py writes one plan per tenant into DIR);
# none for a plan without tenants
tenants_load_plans() {
  local lines name path
  lines=$(python3 scripts/tenants.py plans "$1" "$2") || die "$1: bad tenants (above)"
  while read -r name path; do
    [[ -n "$name" ]] || continue
    TENANTS+=("$name"); TENANT_PLANS+=("$path")
  done <<< "$lines"
}

# tenants_start - every tenant's topic, consumer and ingestor
tenants_start() {
  local i t topic dir
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    t=${TENANTS[$i]} topic="$TOPIC-${TENANTS[$i]}" dir="$OUT/tenants/${TENANTS[$i]}"
    mkdir -p "$dir"/{load,consumers,ingestors}
    TENANT_TOPICS+=("$topic")
    create_topic "$BOOTSTRAP" "$topic" "$PARTITIONS" "$REPLICATION_FACTOR" "$MIN_INSYNC"
  done
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    t=${TENANTS[$i]} dir="$OUT/tenants/${TENANTS[$i]}"
    start_consumer "consumer-$t" "$OUT/logs" "$BOOTSTRAP" "${TENANT_TOPICS[$i]}" "$GROUP-$t" \
      "$dir/consumers/consumer-0.json"
    STARTED+=("consumer-$i=$STARTED_PID"); CONSUMER_URLS+=("$STARTED_URL"); SCRAPE+=("$STARTED_METRICS")
    TENANT_CONSUMER_URLS+=("$STARTED_URL")
    start_ingestor "$t" "$OUT/logs" "$BOOTSTRAP" "${TENANT_TOPICS[$i]}" "${INGESTOR_ARGS[@]}"
    STARTED+=("ingestor-$i=$STARTED_PID"); INGESTOR_URL_LIST+=("$STARTED_URL"); SCRAPE+=("$STARTED_METRICS")
    TENANT_INGESTOR_URLS+=("$STARTED_URL")
  done
  local port
  for port in $(free_port "${#TENANTS[@]}"); do TENANT_LOADGEN_METRICS+=("127.0.0.1:$port"); done
  SCRAPE+=("${TENANT_LOADGEN_METRICS[@]}")
}

# tenants_set_quota - --quota on QUOTA_TENANT's client id with Kafka's own
# tool, after the warm-up and before the measured load
tenants_set_quota() {
  [[ -n "$QUOTA" ]] || return 0
  log "quota: kafka-configs --alter --add-config $QUOTA --entity-type clients --entity-name chronik-ingestor-$QUOTA_TENANT"
  "$VENV_PY" scripts/tenants.py quota "$BOOTSTRAP" --entity-type clients \
    --entity-name "chronik-ingestor-$QUOTA_TENANT" --add-config "$QUOTA" > "$OUT/logs/quota.log" 2>&1 \
    || { cat "$OUT/logs/quota.log" >&2; die "--quota: the broker did not take the quota (logs/quota.log)"; }
}

# tenants_settle - each tenant's consumer holds its topic's partitions, full ISR
tenants_settle() {
  local i
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    "$VENV_PY" scripts/runctl.py settle --partitions "$PARTITIONS" --timeout "$SETTLE_TIMEOUT" \
      --bootstrap "$BOOTSTRAP" --topic "${TENANT_TOPICS[$i]}" --rf "$REPLICATION_FACTOR" \
      "${TENANT_CONSUMER_URLS[$i]}" 2>> "$OUT/logs/settle.log" \
      || die "tenant ${TENANTS[$i]}: the consumer's group or the topic's ISR did not settle (logs/settle.log)"
  done
}

# tenants_sample_specs - the resource sampler's specs for the tenants' generators
tenants_sample_specs() {
  local i
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    echo "loadgen-$i=~$LOADGEN_BIN run ${TENANT_PLANS[$i]} "
  done
}

# tenants_warm_up - the smoke plan through every tenant's ingestor to its
# topic at once, --rate shared among them, for --warmup (results in
# warmup/TENANT/, not in the headline): the brokers, ingestors and consumers
# warm before the calm tenant's first measured requests
tenants_warm_up() {
  local i pids=() rc rate
  rate=$(awk -v r="$RATE" -v n="${#TENANTS[@]}" 'BEGIN { printf "%g", r / n }')
  log "warm-up: smoke at $rate requests/s per tenant for $WARMUP (results in $OUT/warmup/TENANT, not in the headline)"
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    RUN_ID="$RUN_ID-warmup-${TENANTS[$i]}" load/run.sh smoke --results "$OUT/warmup/${TENANTS[$i]}" \
      --targets "${TENANT_INGESTOR_URLS[$i]}" --generators 1 --topic "${TENANT_TOPICS[$i]}" --acks "$ACKS" \
      --topology "$TOPOLOGY" --batch-size "$BATCH_SIZE" --message-size "$MESSAGE_SIZE" --keys "$KEYS" \
      --rate "$rate" --duration "$WARMUP" > "$OUT/logs/loadgen-warmup-${TENANTS[$i]}.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < ${#pids[@]}; i++)); do
    rc=0; wait "${pids[$i]}" || rc=$?
    ((rc == 0)) || log "tenant ${TENANTS[$i]}: warm-up generator exited $rc (it does not decide the run)"
  done
}

# tenants_run_load - every tenant's generator at once (each its own plan,
# ingestor and topic); LOAD_RC = the first exit status other than 0
tenants_run_load() {
  local i pids=() rc
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    RUN_ID="$RUN_ID-${TENANTS[$i]}" load/run.sh "${TENANT_PLANS[$i]}" \
      --results "$OUT/tenants/${TENANTS[$i]}/load" --targets "${TENANT_INGESTOR_URLS[$i]}" --generators 1 \
      --topic "${TENANT_TOPICS[$i]}" --acks "$ACKS" --topology "$TOPOLOGY" --prometheus-addrs "${TENANT_LOADGEN_METRICS[$i]}" \
      --batch-size "$BATCH_SIZE" --message-size "$MESSAGE_SIZE" --keys "$KEYS" \
      --scale "$SCALE" --duration-scale "$DURATION_SCALE" \
      > "$OUT/logs/loadgen-${TENANTS[$i]}.log" 2>&1 &
    pids+=($!)
  done
  LOAD_RC=0
  for ((i = 0; i < ${#pids[@]}; i++)); do
    rc=0; wait "${pids[$i]}" || rc=$?
    log "tenant ${TENANTS[$i]}: load generator exit status $rc"
    tail -n 12 "$OUT/logs/loadgen-${TENANTS[$i]}.log" >&2 || true
    ((LOAD_RC == 0)) && LOAD_RC=$rc
  done
}

# tenants_drain - per tenant: its ingestor's in-flight to 0, its ledger and
# /metrics kept, then its consumer drained to what the ingestor acknowledged
tenants_drain() {
  local i s t acked dir
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    t=${TENANTS[$i]} dir="$OUT/tenants/${TENANTS[$i]}"
    ingestor_collect "${TENANT_INGESTOR_URLS[$i]}" "$dir/ingestors/ingestor-0"
    TENANT_LEDGERS+=("$dir/ingestors/ingestor-0-ledger.json")
    acked=$("$VENV_PY" scripts/runctl.py ledger-total "$dir/ingestors/ingestor-0-ledger.json")
    for ((s = 0; s < DRAIN_TIMEOUT; s++)); do
      "$VENV_PY" scripts/runctl.py drained --acked "$acked" --partitions "$PARTITIONS" \
        "${TENANT_CONSUMER_URLS[$i]}" 2> "$WORK/drain-$t.txt" && break
      sleep 1
    done
    log "tenant $t: $acked acknowledged; consumer: $(cat "$WORK/drain-$t.txt" 2>/dev/null)"
  done
}

# tenants_verify - each tenant's ledger against its consumer's report
# (chronik-consumer merge); VERIFY_RC = the first failure's status
tenants_verify() {
  local i t dir rc
  VERIFY_RC=0
  for ((i = 0; i < ${#TENANTS[@]}; i++)); do
    t=${TENANTS[$i]} dir="$OUT/tenants/${TENANTS[$i]}"
    rc=0
    "$CONSUMER_BIN" merge --ledger "${TENANT_LEDGERS[$i]}" --report "$dir/consumers/merged.json" \
      "$dir/consumers/consumer-0.json" > "$OUT/logs/merge-$t.log" 2>&1 || rc=$?
    log "tenant $t: verification exit status $rc (0 = clean and conclusive)"
    ((VERIFY_RC == 0)) && VERIFY_RC=$rc
  done
}
