# shellcheck shell=bash
# k8s-perf/lib/collect.sh - gathering one finished k8s run into
# results/<run-id>/ (the layout of a local run: reports/README.md). Sourced
# by k8s-perf/run.sh after lib/k8s.sh, not run.
#
# Owns: where each pod's output lands: load/gen-<index>/ (each load
# generator's results, fetched from the generator itself: GET /results
# through the API server's pod proxy) and load/merged-<plan>.json
# (chronik-loadgen merge on this machine), ingestors/<pod>-ledger.json and -metrics.prom,
# consumers/<pod>-<start>.json/.hlog (each consumer process's report, written
# on SIGTERM), metrics/broker-<pod>.prom, metrics/prometheus-*.json,
# resources.csv, logs/. Must not: decide pass/fail (run.sh does).
#
# Needs: curl when the ingestors serve HTTPS (components/secure).
# Globals read: NAMESPACE, OUT, RUN_ID, STARTED_EPOCH, DRAIN_TIMEOUT, RENDERED,
# GENERATORS, START_WAIT, TIMEOUT, LOADGEN_BIN (chronik-loadgen on this
# machine), PROM_SERVICE (empty = skip Prometheus queries). Sets (read by
# run.sh): LOAD_FETCHED, LOAD_ENDED, LOAD_PHASES, LOAD_ELAPSED (loadgen_follow),
# LOAD_RC (chronik-loadgen merge's exit status: 0 thresholds held, 99 one
# failed), LEDGERS.
# shellcheck disable=SC2034

RESULTS_PY="$K8S_DIR/lib/results.py"
RUNCTL="$K8S_DIR/../scripts/runctl.py"  # run metadata and consumer summaries, shared with run-all.sh
REPORTS_DIR=/var/lib/chronik/reports

# -- the load generators (the Indexed Job chronik-load) ------------------------------------------
# Each generator serves, on its --prometheus-addr port, /metrics while it runs
# and GET /results (503 until its gen-<index>/ is complete, then a tar.gz of
# it, as often as asked) until the collector confirms with DELETE /results
# (sent once what came was unpacked whole), for at most --serve-results-for;
# then it exits with its own status (0, or 99 when its share failed a
# threshold). A fetch that arrives broken is fetched again.
LOADGEN_SELECTOR=app.kubernetes.io/name=chronik-loadgen
LOADGEN_PORT=9102

# loadgen_pods - "NAME INDEX PHASE EXIT" for each of the Job's pods (EXIT "-" until it ends)
loadgen_pods() {
  kc_read get pods -n "$NAMESPACE" -l "$LOADGEN_SELECTOR" -o json | python3 "$RESULTS_PY" job-pods -
}

# loadgen_answers POD - true when the generator's HTTP server answers (its /metrics)
loadgen_answers() {
  POD_GET_TIMEOUT=10s pod_get "$1" "$LOADGEN_PORT" /metrics > /dev/null 2>&1
}

# loadgen_fetch POD INDEX - the generator's results into $OUT/load/gen-INDEX/,
# then DELETE /results (it may exit); false while it is still running (503)
# or when what came is not complete (it keeps serving them)
loadgen_fetch() {
  local tgz="$OUT/logs/.gen-$2.tar.gz" rc=0
  POD_GET_TIMEOUT=30m pod_get "$1" "$LOADGEN_PORT" /results > "$tgz" 2> /dev/null \
    && python3 "$RESULTS_PY" unpack "$tgz" "$OUT/load" "$2" || rc=1
  rm -f "$tgz"
  if ((rc == 0)); then
    pod_delete "$1" "$LOADGEN_PORT" /results 2> /dev/null \
      || log "load generator $2 ($1): DELETE /results failed; it exits after --serve-results-for"
  fi
  return "$rc"
}

# loadgen_follow - follow the load Job until every index's results are
# fetched (loadgen_fetch as soon as a generator has them: it then exits) or
# every pod has ended, or --timeout; progress every 15 s. Returns 0 then
# (LOAD_FETCHED = indexes fetched); 2 when generators ended with a failure
# before any answered (their logs say why); 3 at the boundary: no generator
# pod ever answered - within START_WAIT, or before all of them ended
# without a failure of their own (the simulated nodes of make
# k8s-apiserver-test: nothing runs in their pods). Sets LOAD_PHASES
# (" index:phase ..."), LOAD_ENDED (pods ended), LOAD_ELAPSED (s).
# Globals read: GENERATORS, START_WAIT, TIMEOUT.
loadgen_follow() {
  local -A fetched=() ended=()
  local answered=0 last_progress=-15 started=$SECONDS elapsed running phases name index phase code
  local failed_early pod v verified
  LOAD_FETCHED=0 LOAD_ENDED=0 LOAD_PHASES="" LOAD_ELAPSED=0
  while :; do
    elapsed=$((SECONDS - started))
    running=0 phases=""
    while read -r name index phase code; do
      [[ "$index" =~ ^[0-9]+$ ]] || continue
      phases+=" $index:$phase"
      [[ -n "${fetched[$index]:-}" ]] && continue
      if [[ "$phase" == Running ]]; then
        running=$((running + 1))
        if ((answered == 0)) && loadgen_answers "$name"; then
          answered=1
          log "load generator $index ($name) answers: the load runs"
        fi
        if ((answered)) && loadgen_fetch "$name" "$index"; then
          fetched[$index]=$name
          log "load generator $index ($name): results fetched (${#fetched[@]} of $GENERATORS)"
        fi
      elif [[ "$phase" == Succeeded || "$phase" == Failed ]]; then
        ended[$index]="$name $phase $code"
      fi
    done < <(loadgen_pods 2> /dev/null)
    LOAD_FETCHED=${#fetched[@]} LOAD_ENDED=${#ended[@]} LOAD_PHASES=$phases LOAD_ELAPSED=$elapsed
    ((${#fetched[@]} >= GENERATORS)) && return 0
    if ((answered == 0)); then
      failed_early=""
      for index in "${!ended[@]}"; do
        read -r name phase code <<< "${ended[$index]}"
        if [[ "$phase" == Failed ]] || [[ "$code" =~ ^[0-9]+$ && "$code" != 0 ]]; then
          failed_early+=" $index:$name:$phase:exit-$code"
        fi
      done
      if [[ -n "$failed_early" ]]; then
        log "load generators ended before serving anything:$failed_early"
        return 2
      fi
      ((${#ended[@]} >= GENERATORS || elapsed >= START_WAIT)) && return 3
    fi
    # every pod left has ended: what was not fetched is lost
    ((answered && running == 0 && ${#ended[@]} + ${#fetched[@]} >= GENERATORS)) && return 0
    if ((elapsed >= TIMEOUT)); then
      log "the load Job ran out of --timeout ${TIMEOUT}s with ${#fetched[@]} of $GENERATORS results fetched"
      return 0
    fi
    if ((elapsed - last_progress >= 15)); then
      last_progress=$elapsed
      verified=0
      for pod in $(pods app.kubernetes.io/component=consumer 2> /dev/null); do
        v=$(pod_get "$pod" 9645 /summary 2> /dev/null | python3 "$RUNCTL" verified - 2> /dev/null) || v=0
        [[ "$v" =~ ^[0-9]+$ ]] || v=0
        verified=$((verified + v))
      done
      log "progress: ${elapsed}s, generators (index:phase):${phases:- none yet}, results fetched ${#fetched[@]} of $GENERATORS, $verified messages verified"
    fi
    sleep "${LOADGEN_POLL:-5}"
  done
}

# loadgen_logs - each generator pod's log into logs/, and its exit status
loadgen_logs() {
  local name index phase code
  while read -r name index phase code; do
    kc_read logs -n "$NAMESPACE" "$name" > "$OUT/logs/$name.log" 2>&1 || true
    log "load generator $index ($name): $phase, exit ${code} (0 = its share held the thresholds, 99 = failed one)"
  done < <(loadgen_pods 2> /dev/null)
}

# loadgen_merge - chronik-loadgen merge: the pooled figures of every generator's
# raw rows (load/merged-<plan>.json); LOAD_RC = its exit status
loadgen_merge() {
  LOAD_RC=0
  "$LOADGEN_BIN" merge --results "$OUT/load" > "$OUT/logs/loadgen-merge.txt" 2>&1 || LOAD_RC=$?
  sed 's/^/  /' "$OUT/logs/loadgen-merge.txt" >&2
  log "chronik-loadgen merge exited $LOAD_RC (0 = the thresholds held over every generator's rows, 99 = one failed)"
}

# -- reaching an ingestor's routes (one code path, plain or secured) ------------------------------
# Plain HTTP: through the API server's pod proxy. With components/secure the
# ingestor's --listen port is HTTPS and wants the bearer token, and the API
# server's proxy drops the Authorization header: then a `kubectl
# port-forward` to the pod and curl, verifying the ingestor's certificate
# against the CA from the Secret chronik-tls-ca under the Service's name
# (--resolve), the token (Secret chronik-ingestor-token) sent from a 0600
# header file, never on a command line. /metrics is read from the plain
# --metrics-listen port when there is one.
INGESTOR_PORT=8080
INGESTOR_PF_PID=""

ingestor_env() {  # NAME - a literal env value of the ingestor Deployment in the rendered manifests
  python3 "$RUNCTL" manifest-env "$RENDERED" chronik-ingestor "$1" 2> /dev/null || true
}

# ingestor_open POD - make POD's routes reachable for ingestor_get (a port-forward when secured)
ingestor_open() {
  INGESTOR_TLS_DIR=${INGESTOR_TLS_DIR:-}
  [[ -n "$(ingestor_env CHRONIK_SSL_KEYSTORE_LOCATION)" ]] || return 0
  if [[ -z "$INGESTOR_TLS_DIR" ]]; then
    INGESTOR_TLS_DIR=$(mktemp -d)
    kc_read get secret -n "$NAMESPACE" chronik-tls-ca -o jsonpath='{.data.ca\.pem}' | base64 -d > "$INGESTOR_TLS_DIR/ca.pem"
    (umask 077 && printf 'Authorization: Bearer %s\n' \
      "$(kc_read get secret -n "$NAMESPACE" chronik-ingestor-token -o jsonpath='{.data.token}' | base64 -d)" \
      > "$INGESTOR_TLS_DIR/auth-header")
  fi
  local cmd t
  mapfile -t cmd < <(kubectl_cmd)
  "${cmd[@]}" port-forward -n "$NAMESPACE" "pod/$1" ":$INGESTOR_PORT" > "$INGESTOR_TLS_DIR/pf.out" 2>&1 &
  INGESTOR_PF_PID=$!
  INGESTOR_PF_LOCAL=""
  for ((t = 0; t < 100; t++)); do
    INGESTOR_PF_LOCAL=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$INGESTOR_TLS_DIR/pf.out" | head -n 1)
    [[ -n "$INGESTOR_PF_LOCAL" ]] && return 0
    kill -0 "$INGESTOR_PF_PID" 2> /dev/null || break
    sleep 0.1
  done
  log "$1: kubectl port-forward did not start: $(tr '\n' ' ' < "$INGESTOR_TLS_DIR/pf.out")"
  ingestor_close
  return 1
}

# ingestor_close - end the port-forward ingestor_open started, if any
ingestor_close() {
  if [[ -n "$INGESTOR_PF_PID" ]]; then
    kill "$INGESTOR_PF_PID" 2> /dev/null || true
    wait "$INGESTOR_PF_PID" 2> /dev/null || true
    INGESTOR_PF_PID=""
  fi
}

# ingestor_get POD PATH - GET an ingestor route (after ingestor_open POD)
ingestor_get() {
  local metrics
  if [[ "$2" == /metrics ]] && metrics=$(ingestor_env CHRONIK_INGESTOR_METRICS_LISTEN) && [[ -n "$metrics" ]]; then
    pod_get "$1" "${metrics##*:}" /metrics
  elif [[ -z "$INGESTOR_PF_PID" ]]; then
    pod_get "$1" "$INGESTOR_PORT" "$2"
  else
    curl -sS --fail --max-time 30 --cacert "$INGESTOR_TLS_DIR/ca.pem" -H "@$INGESTOR_TLS_DIR/auth-header" \
      --resolve "chronik-ingestor:$INGESTOR_PF_LOCAL:127.0.0.1" "https://chronik-ingestor:$INGESTOR_PF_LOCAL$2"
  fi
}

# ingestors: wait until nothing is in flight, then keep each ledger and /metrics
collect_ingestors() {
  local pod t inflight
  LEDGERS=()
  for pod in $(pods app.kubernetes.io/component=ingestor); do
    ingestor_open "$pod" || continue
    for ((t = 0; t < DRAIN_TIMEOUT; t += 2)); do
      inflight=$(ingestor_get "$pod" /ledger 2> /dev/null | python3 "$RUNCTL" in-flight - 2> /dev/null || echo 1)
      [[ "$inflight" == 0 ]] && break
      sleep 2
    done
    ingestor_get "$pod" /ledger > "$OUT/ingestors/$pod-ledger.json" || log "$pod: no ledger"
    ingestor_get "$pod" /metrics > "$OUT/ingestors/$pod-metrics.prom" || true
    ingestor_close
    kc_read logs -n "$NAMESPACE" "$pod" > "$OUT/logs/$pod.log" 2>&1 || true
    LEDGERS+=("$OUT/ingestors/$pod-ledger.json")
  done
  [[ -z "${INGESTOR_TLS_DIR:-}" ]] || rm -rf "$INGESTOR_TLS_DIR"
}

# drained: every partition of the topic is assigned with zero lag and the
# consumers together verified at least what the ingestors acknowledged (the
# same check as run-all.sh: runctl drained, here on the /summary answers
# fetched through kubectl; the merge decides exactly)
consumers_drained() {
  local acked=$1 partitions=$2 pod
  local -a summaries=()
  for pod in $(pods app.kubernetes.io/component=consumer); do
    pod_get "$pod" 9645 /summary > "$OUT/logs/.$pod-summary.json" 2> /dev/null || return 1
    summaries+=("$OUT/logs/.$pod-summary.json")
  done
  ((${#summaries[@]} > 0)) || return 1
  python3 "$RUNCTL" drained --acked "$acked" --partitions "$partitions" "${summaries[@]}" 2>&1 \
    | while read -r line; do log "consumers: $line"; done
  return "${PIPESTATUS[0]}"
}

# consumers: drain, then SIGTERM each consumer process (it writes its report
# into the pod's reports volume) and copy every report through the `reports`
# container, which keeps running while the consumer restarts
collect_consumers() {
  local acked partitions t pod before f
  acked=$(python3 "$RUNCTL" ledger-total "${LEDGERS[@]}")
  partitions=$(python3 "$RUNCTL" manifest-env "$RENDERED" chronik CHRONIK_DEFAULT_PARTITIONS)
  for ((t = 0; t < DRAIN_TIMEOUT; t += 5)); do
    consumers_drained "$acked" "${partitions:-1}" && break
    sleep 5
  done
  rm -f "$OUT"/logs/.*-summary.json
  for pod in $(pods app.kubernetes.io/component=consumer); do
    before=$(kc_read exec -n "$NAMESPACE" -c reports "$pod" -- ls "$REPORTS_DIR" | grep -c '\.json$' || true)
    kc exec -n "$NAMESPACE" -c consumer "$pod" -- sh -c 'kill -TERM 1' || log "$pod: could not signal the consumer"
    for ((t = 0; t < 60; t++)); do
      (($(kc_read exec -n "$NAMESPACE" -c reports "$pod" -- ls "$REPORTS_DIR" | grep -c '\.json$' || true) > before)) && break
      sleep 1
    done
    sleep 1   # the .hlog is written beside the report
    for f in $(kc_read exec -n "$NAMESPACE" -c reports "$pod" -- ls "$REPORTS_DIR"); do
      kc_read exec -n "$NAMESPACE" -c reports "$pod" -- cat "$REPORTS_DIR/$f" > "$OUT/consumers/$f"
    done
    kc_read logs -n "$NAMESPACE" -c consumer "$pod" --previous > "$OUT/logs/$pod.log" 2>&1 || true
  done
}

collect_brokers() {
  local pod
  for pod in $(pods app.kubernetes.io/component=broker); do
    pod_get "$pod" 9644 /metrics > "$OUT/metrics/broker-$pod.prom" || true
    kc_read logs -n "$NAMESPACE" "$pod" > "$OUT/logs/$pod.log" 2>&1 || true
  done
}

# prom_save NAME PROMQL - one instant query at the end of the run, kept as JSON
prom_save() {
  prom_get "api/v1/query?query=$(urlencode "$2")" > "$OUT/metrics/prometheus-$1.json" 2> /dev/null \
    || log "prometheus query $1 failed"
}

# Percentiles over the whole run from histograms summed across every pod.
collect_prometheus() {
  [[ -n "$PROM_SERVICE" ]] || return 0
  local window q
  window=$(($(date +%s) - STARTED_EPOCH))s
  local ns="namespace=\"$NAMESPACE\""
  for q in 0.5 0.9 0.95 0.99 0.999; do
    prom_save "loadgen-request-latency-p$q" \
      "histogram_quantile($q, sum by (le) (increase(chronik_loadgen_request_duration_seconds_bucket{$ns, route=~\"batch|fire\"}[$window])))"
    prom_save "ingestor-http-latency-p$q" \
      "histogram_quantile($q, sum by (le) (increase(ingestor_http_request_duration_seconds_bucket{$ns, route=~\"/produce.*\"}[$window])))"
    prom_save "consumer-e2e-latency-p$q" \
      "histogram_quantile($q, sum by (le) (increase(chronik_consumer_e2e_latency_seconds_bucket{$ns}[$window])))"
    prom_save "broker-produce-latency-p$q" \
      "histogram_quantile($q, sum by (le) (increase(chronik_request_duration_seconds_bucket{$ns, api=\"Produce\"}[$window])))"
  done
  prom_save "loadgen-messages-produced-total" "sum(increase(chronik_loadgen_messages_total{$ns, outcome=~\"produced|accepted\"}[$window]))"
  prom_save "loadgen-messages-failed-total" "sum(increase(chronik_loadgen_messages_total{$ns, outcome=\"failed\"}[$window]))"
  prom_save "ingestor-messages-delivered-total" "sum(increase(ingestor_messages_delivered_total{$ns}[$window]))"
  prom_save "consumer-verified-total" "sum(increase(chronik_consumer_verified_total{$ns}[$window]))"
  prom_save up "up{$ns}"
  # per-container CPU (cumulative seconds) and RSS every 5 s -> resources.csv
  local range
  range="start=$STARTED_EPOCH&end=$(date +%s)&step=5"
  prom_get "api/v1/query_range?query=$(urlencode "container_cpu_usage_seconds_total{$ns, container!=\"\"}")&$range" \
    > "$OUT/metrics/prometheus-range-cpu.json" 2> /dev/null || true
  prom_get "api/v1/query_range?query=$(urlencode "container_memory_rss{$ns, container!=\"\"}")&$range" \
    > "$OUT/metrics/prometheus-range-rss.json" 2> /dev/null || true
  python3 "$RESULTS_PY" resources "$OUT/metrics/prometheus-range-cpu.json" "$OUT/metrics/prometheus-range-rss.json" \
    "$OUT/resources.csv" || log "no resources.csv (is cAdvisor scraped?)"
  python3 "$RESULTS_PY" merged "$OUT/metrics" "$OUT/merged-percentiles.md" || true
}
