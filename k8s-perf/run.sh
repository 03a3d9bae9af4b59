#!/usr/bin/env bash
# k8s-perf/run.sh - the main job on a Kubernetes cluster (`./run-all.sh --k8s`):
# chronik-loadgen generators (an Indexed Job) -> chronik-ingestor pods ->
# chronik brokers -> verifying consumer pods, then the same results/<run-id>/
# and report.md as a local run.
#
#   ./run-all.sh --k8s [options]        (or k8s-perf/run.sh [options])
#     --overlay NAME       k8s-perf/overlays/NAME (default small; test-1..test-7,
#                          baremetal-256b, baremetal-1kib, baremetal-1kib-36,
#                          standalone, cluster, secure, scale-out)
#     --context CTX        kubectl context (default: the current one)
#     --namespace NS       namespace of the run (default chronik-perf)
#     --run-id ID          (default <UTC time>-k8s-<overlay>)
#     --results DIR        results root (default results/)
#     --broker-image IMG   image for chronik-server (default chronik-server:dev)
#     --harness-image IMG  image for ingestors, consumers and the load generators
#                          (default chronik-harness:dev)
#     --prometheus NS/SVC:PORT  Prometheus to query at the end
#                          (default monitoring/prometheus-operated:9090; "none" = skip)
#     --timeout S          longest the load Job may run (default 3600)
#     --drain-timeout S    wait for ingestors to flush / consumers to catch up (default 300)
#     --start-wait S       how long the generator pods may take to answer once the
#                          Job exists (default 120); if none ever does, the run stops
#                          there and says so (exit 3): nothing after that point is pretended
#     --keep               leave the finished Job in place (default: deleted once collected)
#     --local-node         the one-machine node of `make k8s-node` (scripts/k8s-node.sh):
#                          context chronik-local-node, components/local-node added to the
#                          overlay, the images imported into the node first, and every CPU
#                          request scaled by one factor when the run asks more than the
#                          node has free (k8s-perf/node/fit_requests.py); implied when
#                          the current context is chronik-local-node
#     --acks 1|all         the ingestors' acks (default: the overlay's)
#     --test NAME          the load plan (load/plans/NAME.json) instead of the overlay's, run
#                          as the plan says (the overlay's LOADGEN_ARGS, e.g. --rate, dropped)
#     --delete-pod POD@S   a fault: delete pod POD (e.g. chronik-0) S seconds after the
#                          load Job starts; its controller brings it back (a StatefulSet's
#                          pod with its volume); the event goes into meta.json and the report.
#                          A run with a fault is judged by verification: the plan's
#                          thresholds (errors, p99) are reported, but expected to fail
#     --no-report          skip rendering report.md
#     --dry-run            render the run's kustomization and print every kubectl
#                          command that changes the cluster, run none
#
# Steps: check the kustomization's copy of load/plans/ (sync_plans.py
# --check); render overlays/NAME plus a per-run kustomization (.run/k8s/<run-id>/:
# namespace, images, the run id and commit for the generators and their pods'
# label, a topic and consumer group of its own); for an overlay with
# components/secure (label chronik.perf/security), make or reuse its
# certificates, SCRAM users and token and create their Secrets
# (secure-secrets.sh); apply everything but the load Job; wait for the
# rollouts (and the ACL Job); delete a previous load Job and its pods; apply
# the Job (completionMode Indexed: N generators, each offering 1/N of the
# plan, started together by index 0's barrier) and follow it (progress every
# 15 s), fetching each generator's results (GET /results through the API
# server's pod proxy) as soon as it has them; then chronik-loadgen merge pools
# every generator's raw rows into load/merged-<plan>.json, and the rest is
# collected: the ingestors' ledgers, every consumer's report, broker /metrics,
# Prometheus queries (percentiles from histograms merged across pods) and
# container CPU/RSS; the consumers' reports are merged with the ledgers
# (chronik-consumer merge) and report.md rendered (python -m reports render).
# The workloads stay up for inspection; ./cleanup.sh --k8s removes everything.
# Env: K8S_RUN_DIR (default .run/k8s) holds each run's generated kustomization.
# LOCAL_NODE_RESERVE_MILLICORES: with --local-node, CPU (millicores) left out of
# the fitting for pods added during the run (default 0).
# SECURE_DIR: where secure-secrets.sh keeps its material (default .run/k8s-secure/<namespace>).
#
# Exit status: 0 when every generator's results came back, the thresholds
# held over all of them pooled (chronik-loadgen merge) and verification found
# no loss, duplication, reordering or corruption; 3 when no generator pod ever
# answered (within --start-wait, or before the Job ended): everything before
# the load ran, the load did not (the simulated nodes of make
# k8s-apiserver-test run nothing); other non-zero otherwise.
# Needs: kubectl with access to a cluster running kube-prometheus-stack
# (ServiceMonitor/PodMonitor CRDs), the images built and pullable
# (k8s-perf/README.md), Go (scripts/install-loadgen.sh builds chronik-loadgen
# here for the merge), python3; the report needs .venv
# (scripts/install-python-deps.sh, scripts/install-report-deps.sh) and
# target/release/chronik-consumer (built when missing); an overlay with
# components/secure also openssl (secure-secrets.sh) and curl (the ledgers).
set -euo pipefail
# shellcheck source=k8s-perf/lib/k8s.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/k8s.sh"
# shellcheck source=k8s-perf/lib/collect.sh
source "$K8S_DIR/lib/collect.sh"

OVERLAY="${OVERLAY:-small}"
CONTEXT="${CONTEXT:-}"
NAMESPACE="${NAMESPACE:-chronik-perf}"
RUN_ID="${RUN_ID:-}"
RESULTS_ROOT="${RESULTS_ROOT:-$REPO_ROOT/results}"
BROKER_IMAGE="${BROKER_IMAGE:-}"
HARNESS_IMAGE="${HARNESS_IMAGE:-}"
PROM_SERVICE="${PROM_SERVICE:-monitoring/prometheus-operated:9090}"
TIMEOUT="${TIMEOUT:-3600}"
DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-300}"
START_WAIT="${START_WAIT:-120}"
KEEP="${KEEP:-0}"
LOCAL_NODE="${LOCAL_NODE:-0}"
DELETE_POD="${DELETE_POD:-}"
ACKS="${ACKS:-}"
PLAN_NAME="${PLAN_NAME:-}"
REPORT="${REPORT:-1}"
DRY_RUN="${DRY_RUN:-0}"
LOAD_JOB=chronik-load

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
need() { [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || { echo "option $1 needs a value" >&2; usage; }; }
while (($#)); do
  case $1 in
    --overlay) need "$@"; OVERLAY=$2; shift 2 ;;
    --context) need "$@"; CONTEXT=$2; shift 2 ;;
    --namespace) need "$@"; NAMESPACE=$2; shift 2 ;;
    --run-id) need "$@"; RUN_ID=$2; shift 2 ;;
    --results) need "$@"; RESULTS_ROOT=$2; shift 2 ;;
    --broker-image) need "$@"; BROKER_IMAGE=$2; shift 2 ;;
    --harness-image) need "$@"; HARNESS_IMAGE=$2; shift 2 ;;
    --prometheus) need "$@"; PROM_SERVICE=$2; shift 2 ;;
    --timeout) need "$@"; TIMEOUT=$2; shift 2 ;;
    --drain-timeout) need "$@"; DRAIN_TIMEOUT=$2; shift 2 ;;
    --start-wait) need "$@"; START_WAIT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --local-node) LOCAL_NODE=1; shift ;;
    --delete-pod) need "$@"; DELETE_POD=$2; shift 2 ;;
    --acks) need "$@"; ACKS=$2; shift 2 ;;
    --test) need "$@"; PLAN_NAME=$2; shift 2 ;;
    --no-report) REPORT=0; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown option: $1" >&2; usage ;;
  esac
done
[[ -f "$K8S_DIR/overlays/$OVERLAY/kustomization.yaml" ]] \
  || die "no overlay k8s-perf/overlays/$OVERLAY (have: $(ls "$K8S_DIR/overlays" | tr '\n' ' '))"
[[ "$NAMESPACE" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "--namespace $NAMESPACE is not a valid namespace name"
[[ "$TIMEOUT" =~ ^[0-9]+$ && "$DRAIN_TIMEOUT" =~ ^[0-9]+$ && "$START_WAIT" =~ ^[0-9]+$ ]] \
  || die "--timeout, --drain-timeout and --start-wait take seconds"
[[ "$PROM_SERVICE" == none ]] && PROM_SERVICE=""
[[ -z "$PROM_SERVICE" || "$PROM_SERVICE" =~ ^[a-z0-9-]+/[a-z0-9-]+:[0-9]+$ ]] \
  || die "--prometheus takes NAMESPACE/SERVICE:PORT (or none)"
[[ -z "$ACKS" || "$ACKS" == 1 || "$ACKS" == all ]] || die "--acks takes 1 or all"
[[ -z "$PLAN_NAME" || -f "$K8S_DIR/base/loadgen/plans/$PLAN_NAME.json" ]] \
  || die "--test $PLAN_NAME: no plan k8s-perf/base/loadgen/plans/$PLAN_NAME.json (have: $(cd "$K8S_DIR/base/loadgen/plans" && ls -- *.json | sed 's/\.json$//' | tr '\n' ' '))"
[[ -z "$DELETE_POD" || "$DELETE_POD" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?@[0-9]+$ ]] \
  || die "--delete-pod takes POD@SECONDS (e.g. chronik-0@30)"
# the node of `make k8s-node`: asked for, or the current context (its kubectl
# serves when the machine has none)
LOCAL_NODE_CONTEXT=chronik-local-node
if ! command -v kubectl > /dev/null 2>&1 && [[ -x "$REPO_ROOT/.tools/k8s-node/bin/kubectl" ]]; then
  PATH="$REPO_ROOT/.tools/k8s-node/bin:$PATH"
fi
if [[ "$LOCAL_NODE" != 1 && "${CONTEXT:-$(kubectl config current-context 2> /dev/null || true)}" == "$LOCAL_NODE_CONTEXT" ]]; then
  LOCAL_NODE=1
fi
if [[ "$LOCAL_NODE" == 1 ]]; then
  CONTEXT=${CONTEXT:-$LOCAL_NODE_CONTEXT}
fi
RUN_ID=${RUN_ID:-$(date -u +%Y%m%dT%H%M%SZ)-k8s-$OVERLAY}
# node_free_millicores - the local node's allocatable CPU less what pods of other
# namespaces request (the node's own Prometheus)
node_free_millicores() {
  local alloc used
  alloc=$(kc_read get node chronik-node -o jsonpath='{.status.allocatable.cpu}') || return 1
  used=$(kc_read get pods -A --field-selector=status.phase!=Succeeded,status.phase!=Failed \
    -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{range .spec.containers[*]}{.resources.requests.cpu}{" "}{end}{"\n"}{end}' \
    | awk -v ns="$NAMESPACE" '$1 != ns { for (i = 2; i <= NF; i++) s += ($i ~ /m$/) ? substr($i, 1, length($i) - 1) : $i * 1000 } END { print s + 0 }')
  echo $(( $(awk -v a="$alloc" 'BEGIN { print (a ~ /m$/) ? substr(a, 1, length(a) - 1) : a * 1000 }') - used ))
}
[[ "$RUN_ID" =~ ^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$ ]] \
  || die "--run-id must be a valid label value (letters, digits, - _ ., at most 63)"
TOPIC="chronik-perf-$RUN_ID"
GROUP="verify-$RUN_ID"
GIT_COMMIT=$(git -C "$REPO_ROOT" rev-parse --short=12 HEAD 2> /dev/null || echo unknown)

# -- the run's kustomization --------------------------------------------------------------
# image_entry NAME IMAGE[:TAG] - one `images:` entry of a kustomization
image_entry() {
  local repo=$2 tag=""
  if [[ "${2##*/}" == *:* ]]; then repo=${2%:*}; tag=${2##*:}; fi
  printf '  - name: %s\n    newName: %s\n' "$1" "$repo"
  [[ -z "$tag" ]] || printf '    newTag: "%s"\n' "$tag"
}
RUN_KUSTOMIZATION="${K8S_RUN_DIR:-$REPO_ROOT/.run/k8s}/$RUN_ID"
mkdir -p "$RUN_KUSTOMIZATION"
overlay_rel=$(realpath --relative-to="$RUN_KUSTOMIZATION" "$K8S_DIR/overlays/$OVERLAY")
{
  echo "# generated by k8s-perf/run.sh for run $RUN_ID (overlay $OVERLAY)"
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "namespace: $NAMESPACE"
  echo "resources:"
  echo "  - $overlay_rel"
  if [[ "$LOCAL_NODE" == 1 ]]; then
    echo "components:"
    echo "  - $(realpath --relative-to="$RUN_KUSTOMIZATION" "$K8S_DIR/components/local-node")"
  fi
  echo "labels:"
  echo "  - pairs:"
  echo "      chronik.perf/run-id: $RUN_ID"
  echo "    includeSelectors: false"
  if [[ -n "$BROKER_IMAGE$HARNESS_IMAGE" ]]; then
    echo "images:"
    [[ -n "$BROKER_IMAGE" ]] && image_entry chronik-server "$BROKER_IMAGE"
    [[ -n "$HARNESS_IMAGE" ]] && image_entry chronik-harness "$HARNESS_IMAGE"
  fi
  echo "configMapGenerator:"
  echo "  - name: chronik-load-env"
  echo "    behavior: merge"
  echo "    literals:"
  echo "      - RUN_ID=$RUN_ID"
  echo "      - GIT_COMMIT=$GIT_COMMIT"
  # the generators' acks tag says what --acks gave the ingestors
  [[ -n "$ACKS" ]] && echo "      - ACKS=$ACKS"
  if [[ -n "$PLAN_NAME" ]]; then
    echo "      - PLAN=$PLAN_NAME"
    echo "      - LOADGEN_ARGS="
  fi
  # the run id on the generators' pods too: Prometheus' PodMonitor keeps it
  # (label chronik_perf_run_id), the loadgen dashboard selects runs by it
  cat << YAML
patches:
  - target:
      kind: Job
      name: $LOAD_JOB
    patch: |-
      apiVersion: batch/v1
      kind: Job
      metadata:
        name: $LOAD_JOB
      spec:
        template:
          metadata:
            labels:
              chronik.perf/run-id: "$RUN_ID"
YAML
  cat << YAML
  - target:
      kind: Deployment
      name: chronik-ingestor
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: chronik-ingestor
      spec:
        template:
          spec:
            containers:
              - name: ingestor
                env:
                  - name: CHRONIK_INGESTOR_TOPIC
                    value: "$TOPIC"
YAML
  if [[ -n "$ACKS" ]]; then
    cat << YAML
                  - name: CHRONIK_INGESTOR_ACKS
                    value: "$ACKS"
YAML
  fi
  cat << YAML
  - target:
      kind: Deployment
      name: chronik-consumer
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: chronik-consumer
      spec:
        template:
          spec:
            containers:
              - name: consumer
                env:
                  - name: CHRONIK_CONSUMER_TOPIC
                    value: "$TOPIC"
                  - name: CHRONIK_CONSUMER_GROUP
                    value: "$GROUP"
YAML
} > "$RUN_KUSTOMIZATION/kustomization.yaml"
RENDERED="$RUN_KUSTOMIZATION/rendered.yaml"
# The Job runs the kustomization's copy of load/plans/: it must be today's plans.
python3 "$K8S_DIR/sync_plans.py" --check \
  || die "k8s-perf/base/loadgen/plans differs from load/plans/: run k8s-perf/sync_plans.py (and commit the copy)"
render "$RUN_KUSTOMIZATION" > "$RENDERED" || die "kustomize could not build $RUN_KUSTOMIZATION"
# the local node has this machine's cores only: a run asking more CPU than is
# free there gets every CPU request scaled by one factor (node/fit_requests.py)
if [[ "$LOCAL_NODE" == 1 && "$DRY_RUN" != 1 ]]; then
  node_status=$(bash "$REPO_ROOT/scripts/k8s-node.sh" status) \
    || die "the local node is not fully up (scripts/k8s-node.sh up starts what is missing): $(grep stopped <<< "$node_status" | tr -s ' \n' ' ')"
  free=$(node_free_millicores) || die "could not read the local node's allocatable CPU"
  # CPU kept free for pods the run adds later (k8s-perf/tests/grow.sh: two more brokers)
  free=$((free - ${LOCAL_NODE_RESERVE_MILLICORES:-0}))
  ((free > 0)) || die "LOCAL_NODE_RESERVE_MILLICORES=${LOCAL_NODE_RESERVE_MILLICORES} leaves no CPU on the local node"
  bash "$REPO_ROOT/scripts/install-python-deps.sh" > /dev/null || die "scripts/install-python-deps.sh failed"
  "$REPO_ROOT/.venv/bin/python" "$K8S_DIR/node/fit_requests.py" "$RENDERED" "$free" > "$RUN_KUSTOMIZATION/fit.yaml" \
    || die "fit_requests.py failed"
  if [[ -s "$RUN_KUSTOMIZATION/fit.yaml" ]]; then
    sed 's/^/  /' "$RUN_KUSTOMIZATION/fit.yaml" >> "$RUN_KUSTOMIZATION/kustomization.yaml"
    render "$RUN_KUSTOMIZATION" > "$RENDERED" || die "kustomize could not build $RUN_KUSTOMIZATION (CPU requests fitted)"
  fi
fi
log "run $RUN_ID: overlay $OVERLAY, namespace $NAMESPACE, context ${CONTEXT:-(current)}, topic $TOPIC"
log "rendered $(grep -c '^kind:' "$RENDERED") objects into $RENDERED"

# -- preflight: the CRDs the manifests use ----------------------------------------------------
if [[ "$DRY_RUN" != 1 ]]; then
  [[ -n "$(kc_read api-resources --api-group=monitoring.coreos.com -o name 2> /dev/null)" ]] \
    || die "the cluster has no monitoring.coreos.com resources: install kube-prometheus-stack first (k8s-perf/README.md)"
  # chronik-loadgen on this machine: it merges the generators' results
  LOADGEN_BIN=$(bash "$REPO_ROOT/scripts/install-loadgen.sh") || die "scripts/install-loadgen.sh failed"
fi

# -- the raft port's shared secret: one random Secret per namespace, kept across runs ----------
if [[ "$DRY_RUN" == 1 ]] || ! kc_read get secret -n "$NAMESPACE" chronik-cluster-secret > /dev/null 2>&1; then
  kc create namespace "$NAMESPACE" --dry-run=client -o yaml | kc apply -f -
  # (from a pipe: the value is never on a command line, nor printed by --dry-run)
  kc create secret generic chronik-cluster-secret -n "$NAMESPACE" \
    --from-file=cluster.secret=<(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
fi
# -- components/secure: its certificates, SCRAM users and token as Secrets -------------------------
SECURE=0
if grep -q '^    chronik.perf/security: sasl-ssl$' "$RENDERED"; then
  SECURE=1
  secure_args=(--namespace "$NAMESPACE")
  [[ -n "$CONTEXT" ]] && secure_args+=(--context "$CONTEXT")
  [[ "$DRY_RUN" == 1 ]] && secure_args+=(--dry-run)
  bash "$K8S_DIR/secure-secrets.sh" "${secure_args[@]}" || die "secure-secrets.sh failed"
fi

# -- the local node: its containerd holds the images under the names the manifests use -------------
if [[ "$LOCAL_NODE" == 1 && "$DRY_RUN" != 1 ]]; then
  node_images=()
  for img in $(sed -n 's/^ *image: *//p' "$RENDERED" | tr -d '"' | sort -u); do
    case $img in
      chronik-*|*/chronik-*) src=${BROKER_IMAGE:-}; [[ $img == *harness* ]] && src=${HARNESS_IMAGE:-}
        node_images+=("${src:-localhost/${img##*/}}=$img") ;;
    esac
  done
  bash "$REPO_ROOT/scripts/k8s-node.sh" images "${node_images[@]}" || die "importing the images into the local node failed"
  bash "$REPO_ROOT/scripts/k8s-node.sh" volumes || die "making the local node's volumes failed"
fi

# -- deploy: everything but the load Job, rollouts, then the Job ------------------------------
GENERATORS=$(sed -n 's/^  GENERATORS: "\{0,1\}\([0-9]*\)"\{0,1\}$/\1/p' "$RENDERED" | head -n 1)
[[ "$GENERATORS" =~ ^[1-9][0-9]*$ ]] || die "no GENERATORS in the rendered chronik-load-env ConfigMap"
kc apply -f "$RENDERED" -l 'app.kubernetes.io/component!=loadgen'
kc rollout status -n "$NAMESPACE" statefulset/chronik --timeout=900s
# components/controllers: the metadata quorum's own StatefulSet
if grep -q '^  name: chronik-controller$' "$RENDERED"; then
  kc rollout status -n "$NAMESPACE" statefulset/chronik-controller --timeout=900s
fi
kc rollout status -n "$NAMESPACE" deployment/chronik-ingestor --timeout=600s
kc rollout status -n "$NAMESPACE" deployment/chronik-consumer --timeout=600s
# the harness users' ACLs (components/secure): none of their requests is allowed before
if [[ "$SECURE" == 1 ]]; then
  kc wait -n "$NAMESPACE" --for=condition=complete job/chronik-acls --timeout=600s
fi
# a Job's pod template cannot change, and a previous run's generators must be
# gone before new ones take their names: delete it with its pods first
kc delete -n "$NAMESPACE" "job/$LOAD_JOB" --ignore-not-found --cascade=foreground --wait=true --timeout=300s
kc apply -f "$RENDERED" -l 'app.kubernetes.io/component=loadgen'
if [[ "$DRY_RUN" == 1 ]]; then
  log "dry run: stopping before following the load Job (nothing was changed)"
  exit 0
fi

OUT="$RESULTS_ROOT/$RUN_ID"
mkdir -p "$OUT"/{load,consumers,ingestors,metrics,logs}
cp "$RUN_KUSTOMIZATION/kustomization.yaml" "$OUT/logs/run-kustomization.yaml"
STARTED_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
STARTED_EPOCH=$(date +%s)

# -- follow the Job: fetch each generator's results as soon as it has them ---------------------------
# A generator answers on :9102 from its start (/metrics) and serves its
# results once complete (GET /results, 503 before), exiting once they are
# fetched (lib/collect.sh: loadgen_follow). The boundary: if no generator pod
# ever answers - within --start-wait, or before all of them ended without a
# failure of their own (what the simulated nodes of make k8s-apiserver-test
# report: nothing runs in their pods) - nothing ran the load: say so and
# stop, rather than wait out --timeout and collect empty results.
# -- the fault (--delete-pod): a pod deleted mid-run, and when its controller has it back -----------
EVENTS="$OUT/logs/events.jsonl"
FAULT_PID=""
event() {  # AT KIND TARGET DETAIL - one line of events.jsonl (names are validated, details ours)
  printf '{"at": "%s", "kind": "%s", "target": "%s", "detail": "%s"}\n' "$@" >> "$EVENTS"
}
now_iso() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
if [[ -n "$DELETE_POD" ]]; then
  (
    pod=${DELETE_POD%@*}
    sleep "${DELETE_POD#*@}"
    uid=$(kc_read get pod -n "$NAMESPACE" "$pod" -o jsonpath='{.metadata.uid}' 2> /dev/null || true)
    claims=$(kc_read get pod -n "$NAMESPACE" "$pod" -o jsonpath='{range .spec.volumes[*]}{.persistentVolumeClaim.claimName} {end}' 2> /dev/null || true)
    read -ra claims_list <<< "$claims"; claims="${claims_list[*]}"  # (volumes without a claim leave blanks)
    at=$(now_iso); t0=$(date +%s)
    if ! kc delete pod -n "$NAMESPACE" "$pod" --wait=false > /dev/null 2>&1; then
      event "$at" delete-pod "$pod" "kubectl delete pod failed"; exit 0
    fi
    event "$at" delete-pod "$pod" "deleted (uid $uid)"
    log "FAULT: deleted pod $pod (claims: ${claims:-none})"
    for ((t = 0; t < 900; t++)); do
      state=$(kc_read get pod -n "$NAMESPACE" "$pod" -o jsonpath='{.metadata.uid} {.status.conditions[?(@.type=="Ready")].status}' 2> /dev/null || true)
      if [[ -n "$state" && "${state% *}" != "$uid" && "${state#* }" == True ]]; then
        volumes=""
        for c in $claims; do volumes+=" $c=$(kc_read get pvc -n "$NAMESPACE" "$c" -o jsonpath='{.spec.volumeName}' 2> /dev/null)"; done
        event "$(now_iso)" pod-ready "$pod" "a new pod of that name Ready $(($(date +%s) - t0)) s after the delete; claims:${volumes:- none}"
        log "FAULT: $pod is back Ready after $(($(date +%s) - t0)) s"
        exit 0
      fi
      sleep 1
    done
    event "$(now_iso)" pod-ready "$pod" "not Ready again within 900 s"
  ) &
  FAULT_PID=$!
fi

rc=0
loadgen_follow || rc=$?
if ((rc == 2)); then
  loadgen_logs
  kc_read get -n "$NAMESPACE" "job/$LOAD_JOB" -o yaml > "$OUT/logs/load-job.yaml" 2>&1 || true
  die "the load Job failed before its generators answered (their logs: $OUT/logs/)"
elif ((rc == 3)); then
  kc_read get -n "$NAMESPACE" "job/$LOAD_JOB" -o yaml > "$OUT/logs/load-job.yaml" 2>&1 || true
  log "BOUNDARY: the load Job $NAMESPACE/$LOAD_JOB exists and its pods were made (indexes and phases:${LOAD_PHASES:- none}),"
  log "  but no load generator ever answered on :$LOADGEN_PORT through the API server within ${LOAD_ELAPSED}s"
  log "  ($LOAD_ENDED of $GENERATORS pods ended, none with a failure of its own: nothing executed in them)."
  log "  Done against the cluster: rendered and applied $(grep -c '^kind:' "$RENDERED") objects, the broker StatefulSet"
  log "  and the ingestor and consumer Deployments rolled out, the Indexed Job of $GENERATORS generator(s) was created."
  log "  NOT done: no load generator ran, so no load ran, nothing was produced or verified, and no report is written."
  exit 3
elif ((rc != 0)); then
  die "following the load Job failed (status $rc)"
fi
# the generators exit once fetched: give them a moment to, so that each
# index's exit status is recorded
for ((t = 0; t < 60; t++)); do
  loadgen_pods 2> /dev/null | awk '$3 == "Running" || $3 == "Pending" {busy = 1} END {exit busy}' && break
  sleep 2
done
((LOAD_FETCHED == GENERATORS)) || log "only $LOAD_FETCHED of $GENERATORS generators' results were fetched"

if [[ -n "$FAULT_PID" ]]; then
  # the fault's follower ends once the pod is back; a run that ended first stops it
  for ((t = 0; t < 120; t++)); do kill -0 "$FAULT_PID" 2> /dev/null || break; sleep 1; done
  kill "$FAULT_PID" 2> /dev/null || true
  wait "$FAULT_PID" 2> /dev/null || true
fi

# -- collect ------------------------------------------------------------------------------------------
loadgen_logs
kc_read get -n "$NAMESPACE" "job/$LOAD_JOB" -o yaml > "$OUT/logs/load-job.yaml" 2>&1 || true
loadgen_merge
collect_ingestors
collect_consumers
collect_brokers
collect_prometheus

CONSUMER_BIN="$REPO_ROOT/target/release/chronik-consumer"
[[ -x "$CONSUMER_BIN" ]] || bash "$REPO_ROOT/scripts/build-release.sh" >&2
LEDGER_ARGS=()
for l in "${LEDGERS[@]}"; do LEDGER_ARGS+=(--ledger "$l"); done
VERIFY_RC=0
shopt -s nullglob
reports=("$OUT"/consumers/*.json)
shopt -u nullglob
if ((${#reports[@]} == 0)); then
  log "no consumer reports collected"; VERIFY_RC=2
else
  "$CONSUMER_BIN" merge "${LEDGER_ARGS[@]}" --report "$OUT/consumers/merged.json" "${reports[@]}" \
    > "$OUT/logs/merge.log" 2>&1 || VERIFY_RC=$?
fi
log "verification (chronik-consumer merge): exit status $VERIFY_RC (0 = clean and conclusive)"

# -- meta.json and the report ------------------------------------------------------------------------
env_of() {  # WORKLOAD NAME - a literal env value of a workload in the rendered manifests
  python3 "$RUNCTL" manifest-env "$RENDERED" "$1" "$2"
}
load_env_of() {  # NAME - a value of the chronik-load-env ConfigMap in the rendered manifests
  sed -n "s/^  $1: \(.*\)\$/\1/p" "$RENDERED" | tr -d '"' | head -n 1
}
# Every value is an argument: nothing of a flag or manifest is spliced into code.
wal_profile=$(env_of chronik CHRONIK_WAL_PROFILE)
produce_profile=$(env_of chronik CHRONIK_PRODUCE_PROFILE)
python3 "$RUNCTL" meta "$OUT/meta.json" --run-id "$RUN_ID" --started-at "$STARTED_AT" \
  --finished-at "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --git-commit "$GIT_COMMIT" \
  --broker chronik --bootstrap chronik:9092 \
  --broker-flag=--wal-profile --broker-flag="$wal_profile" \
  --broker-flag=--produce-profile --broker-flag="$produce_profile" \
  --host kind=kubernetes --host "context=${CONTEXT:-current}" --host "namespace=$NAMESPACE" \
  --host "nodes=$(kc_read get nodes -o name 2> /dev/null | wc -l)" \
  --setting "test=$(load_env_of PLAN)" --setting "overlay=$OVERLAY" \
  --setting "scale=$(load_env_of SCALE)" --setting "duration_scale=$(load_env_of DURATION_SCALE)" \
  --setting "generators=$GENERATORS" \
  --setting "acks=\"$(env_of chronik-ingestor CHRONIK_INGESTOR_ACKS)\"" \
  --setting "ingestors=${#LEDGERS[@]}" --setting "consumers=$(pods app.kubernetes.io/component=consumer | wc -l)" \
  --setting "partitions=$(env_of chronik CHRONIK_DEFAULT_PARTITIONS)" \
  --setting "replication_factor=$(env_of chronik CHRONIK_DEFAULT_REPLICATION_FACTOR)" \
  --setting "wal_profile=$wal_profile" --setting "produce_profile=$produce_profile" \
  --setting "topic=$TOPIC" --setting "group=$GROUP" --setting "prometheus=$PROM_SERVICE" \
  --load-dir "$OUT/load" \
  ${DELETE_POD:+--events "$EVENTS"} \
  --version "loadgen=$("$LOADGEN_BIN" version 2> /dev/null | head -n1)" \
  --version "kubectl=$(kubectl version --client 2> /dev/null | head -n1)"

if [[ "$REPORT" == 1 ]]; then
  bash "$REPO_ROOT/scripts/install-python-deps.sh" > /dev/null && bash "$REPO_ROOT/scripts/install-report-deps.sh" > /dev/null
  if (cd "$REPO_ROOT" && .venv/bin/python -m reports render "$OUT" -o "$OUT/report.md" >&2); then
    [[ -f "$OUT/merged-percentiles.md" ]] && cat "$OUT/merged-percentiles.md" >> "$OUT/report.md"
    log "report: $OUT/report.md"
  else
    log "report rendering failed"
    [[ "$VERIFY_RC" != 0 ]] || VERIFY_RC=1
  fi
fi

[[ "$KEEP" == 1 ]] || kc delete -n "$NAMESPACE" "job/$LOAD_JOB" --ignore-not-found --wait=false
log "the workloads stay up; ./cleanup.sh --k8s${CONTEXT:+ --context $CONTEXT} --namespace $NAMESPACE removes them"
# a fault makes the plan's thresholds fail by design (merge exit 99): verification decides
if [[ -n "$DELETE_POD" && "$LOAD_RC" == 99 ]]; then
  log "the plan's thresholds failed under the fault (--delete-pod $DELETE_POD): expected; verification decides"
  LOAD_RC=0
fi
if ((LOAD_FETCHED != GENERATORS || LOAD_RC != 0 || VERIFY_RC != 0)); then
  log "run $RUN_ID FAILED (generators' results fetched: $LOAD_FETCHED of $GENERATORS, chronik-loadgen merge exit $LOAD_RC, verification exit $VERIFY_RC)"
  exit 1
fi
log "run $RUN_ID passed; results in $OUT"
