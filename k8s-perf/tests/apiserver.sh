#!/usr/bin/env bash
# k8s-perf/tests/apiserver.sh - k8s-perf's manifests against a real API server.
#
#   k8s-perf/tests/apiserver.sh        (make k8s-apiserver-test)
#
# Starts a control plane of this machine's own (scripts/install-kube.sh:
# kube-apiserver, kube-controller-manager, kube-scheduler v1.36 built from
# source, Debian's etcd) with kwokctl --runtime binary, and six kwok nodes
# (simulated kubelets: pods get scheduled, "run" and turn Ready, Job pods
# "complete", nothing executes; three nodes for the brokers' anti-affinity,
# six so that the seed overlays' 8 load generators of 4 CPUs fit beside up to
# 36 ingestors). Then:
#   1. CRDs: the ServiceMonitor/PodMonitor CRDs from the prometheus-operator
#      module (the load is a stock batch/v1 Job: no CRD of its own).
#   2. Every overlay applied server-side for real (schema, defaulting,
#      admission with PodSecurity "restricted" in the namespace it makes, no
#      PodSecurity warning): every pod is scheduled on the kwok nodes and
#      turns Ready, every Job completes; every broker pod carries its node's
#      topology.kubernetes.io/zone label (the nodes are given zone-a..c: the
#      API server's PodTopologyLabels admission copies it at binding, on by
#      default since 1.35, and the brokers read it as their rack); the load Job's pods are made by the
#      real Job controller as an Indexed Job: one per index 0..N-1, each with
#      the stable name chronik-load-<index> under the subdomain chronik-load
#      that its barrier wiring relies on; then the overlay is removed. The
#      secure overlay's Secrets are made first by k8s-perf/secure-secrets.sh.
#   3. PodSecurity really enforced: a pod that breaks "restricted" is refused.
#   4. overlays/small applied for real through ./run-all.sh --k8s --overlay
#      small: the StatefulSet's pods bind PersistentVolumes made here,
#      everything is scheduled onto the kwok nodes and rolls out Ready, the
#      load Job is created and its pod made, and the run stops at the
#      boundary it must state: nothing executes in a kwok pod, so no
#      generator ever answers and no load runs (exit 3, "BOUNDARY" in its output).
#   5. the same for overlays/secure in namespace chronik-secure: run.sh makes
#      its Secrets (secure-secrets.sh) and waits for the ACL Job before the load Job.
# Prints "k8s-apiserver: N passed, N failed"; exit 1 if anything failed. The
# cluster is deleted on exit.
#
# Needs: root or a user who may run the binaries; Go (first run builds the
# control plane, ~5 min); kubectl; the Python venv (scripts/install-python-deps.sh).
# Env: APISERVER_OVERLAYS="small secure ..." limits step 2 to those overlays
# (default: every one; step 4 needs small).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S="$(cd "$HERE/.." && pwd)"
REPO="$(cd "$K8S/.." && pwd)"
CLUSTER="${CLUSTER:-chronik-apiserver-test}"
WORK="$(mktemp -d)"
passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }
log() { printf '[%s] apiserver: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

BIN="$("$REPO/scripts/install-kube.sh")"
PY="$REPO/.venv/bin/python"  # PyYAML (scripts/install-python-deps.sh)
export PATH="$BIN:$PATH"
export KUBECONFIG="$WORK/kubeconfig"
kc() { "$BIN/kubectl" "$@"; }

cleanup() {
  "$BIN/kwokctl" delete cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG" > /dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# -- the control plane --------------------------------------------------------------------
"$BIN/kwokctl" delete cluster --name "$CLUSTER" > /dev/null 2>&1 || true
log "kwokctl create cluster --runtime binary (kube-apiserver $("$BIN/kube-apiserver" --version | awk '{print $2}'))"
if "$BIN/kwokctl" create cluster --name "$CLUSTER" --runtime binary --kubeconfig "$KUBECONFIG" \
    --kube-apiserver-binary "$BIN/kube-apiserver" \
    --kube-controller-manager-binary "$BIN/kube-controller-manager" \
    --kube-scheduler-binary "$BIN/kube-scheduler" \
    --etcd-binary "$BIN/etcd" \
    --kwok-controller-binary "$BIN/kwok" \
    --kube-admission --kube-authorization --wait 3m > "$WORK/create.log" 2>&1; then
  ok "control plane up: kube-apiserver, controller-manager, scheduler, etcd, kwok"
else
  fail "kwokctl create cluster: $(tail -n 5 "$WORK/create.log")"
  echo "k8s-apiserver: $passed passed, $failed failed"
  exit 1
fi
if "$BIN/kwokctl" scale node --name "$CLUSTER" --replicas 6 > "$WORK/nodes.log" 2>&1 \
   && kc wait --for condition=Ready --timeout=120s node --all > /dev/null 2>&1; then
  ok "6 kwok nodes Ready: $(kc get nodes --no-headers | awk '{print $1}' | tr '\n' ' ')"
else
  fail "kwok nodes: $(tail -n 3 "$WORK/nodes.log") $(kc get nodes --no-headers 2>&1 | tr '\n' ' ')"
fi

# the nodes' zones: what a cloud's nodes carry, and what the brokers take as their rack
zones=(zone-a zone-b zone-c)
i=0
for node in $(kc get nodes -o name); do
  kc label --overwrite "$node" "topology.kubernetes.io/zone=${zones[$((i % 3))]}" > /dev/null || true
  i=$((i + 1))
done
# zones_copied NS - every broker pod's topology.kubernetes.io/zone label is its node's; prints the mismatches
zones_copied() {
  local pod node zone want count=0 bad=0
  while read -r pod node zone; do
    [[ -n "$pod" ]] || continue
    count=$((count + 1))
    want=$(kc get node "$node" -o jsonpath='{.metadata.labels.topology\.kubernetes\.io/zone}')
    [[ -n "$want" && "$zone" == "$want" ]] || { bad=1; echo "$pod on $node has zone '$zone', its node '$want'"; }
  done < <(kc get pods -n "$1" -l app.kubernetes.io/component=broker \
             -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.metadata.labels.topology\.kubernetes\.io/zone}{"\n"}{end}')
  ((count > 0 && bad == 0)) && echo "$count broker pod(s)"
  ((count > 0 && bad == 0))
}

# -- 1. CRDs ----------------------------------------------------------------------------------------
crd_dir=$(cat "$REPO/.tools/k8s-crd-dir" 2> /dev/null || true)
if [[ -n "$crd_dir" ]] \
   && kc apply --server-side -f "$crd_dir/monitoring.coreos.com_servicemonitors.yaml" \
        -f "$crd_dir/monitoring.coreos.com_podmonitors.yaml" > "$WORK/crd.log" 2>&1 \
   && kc wait --for condition=established --timeout=60s crd/servicemonitors.monitoring.coreos.com \
        crd/podmonitors.monitoring.coreos.com >> "$WORK/crd.log" 2>&1; then
  ok "CRDs established: servicemonitors and podmonitors (prometheus-operator)"
else
  fail "CRDs: $(tail -n 3 "$WORK/crd.log")"
fi

# -- 2. every overlay applied for real: scheduled, Ready, then removed -----------------------------------
# split RENDERED: the Namespace alone, and everything else
split() {
  "$PY" "$HERE/check_apiserver.py" split "$1" "$2" "$3"
}
# pvs PREFIX N - N PersistentVolumes the StatefulSet's claims bind (no provisioner here)
pvs() {
  local i
  for ((i = 0; i < $2; i++)); do
    printf 'apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: %s-%d\nspec:\n  capacity:\n    storage: 100Gi\n' "$1" "$i"
    printf '  accessModes: ["ReadWriteOnce"]\n  storageClassName: ""\n  hostPath:\n    path: /tmp/%s-%d\n---\n' "$1" "$i"
  done
}
# load_job_pods NS RENDERED - the Indexed Job's pods: indexes 0..N-1 (N = its
# completions), hostname chronik-load-<index>, subdomain chronik-load
load_job_pods() {
  kc get pods -n "$1" -l app.kubernetes.io/name=chronik-loadgen -o json > "$WORK/job-pods.json"
  "$PY" "$HERE/check_apiserver.py" job-pods "$WORK/job-pods.json" "$2"
}
for dir in "$K8S"/overlays/*/; do
  name=$(basename "$dir")
  [[ -z "${APISERVER_OVERLAYS:-}" || " $APISERVER_OVERLAYS " == *" $name "* ]] || continue
  started=$SECONDS
  kc kustomize "$dir" > "$WORK/$name.yaml"
  split "$WORK/$name.yaml" "$WORK/$name.ns.yaml" "$WORK/$name.rest.yaml"
  kc apply --server-side -f "$WORK/$name.ns.yaml" > /dev/null
  ns=$(kc get -f "$WORK/$name.ns.yaml" -o jsonpath='{.metadata.name}')
  kc create secret generic chronik-cluster-secret -n "$ns" --from-literal=cluster.secret=test > /dev/null 2>&1 || true
  # components/secure: its Secrets made by the script run.sh uses, for real
  if grep -q '^    chronik.perf/security: sasl-ssl$' "$WORK/$name.yaml"; then
    if bash "$K8S/secure-secrets.sh" --namespace "$ns" --dir "$WORK/secure-$name" > "$WORK/$name.secrets.log" 2>&1; then
      ok "overlays/$name: secure-secrets.sh created $(kc get secrets -n "$ns" -o name | grep -c '^secret/chronik-' || true) Secrets in $ns: $(kc get secrets -n "$ns" -o name | sed 's|secret/||' | tr '\n' ' ')"
    else
      fail "overlays/$name: secure-secrets.sh: $(tail -n 3 "$WORK/$name.secrets.log" | tr '\n' ' ')"
    fi
  fi
  want=$("$PY" "$HERE/check_apiserver.py" replicas "$WORK/$name.yaml" StatefulSet Deployment)
  brokers=$("$PY" "$HERE/check_apiserver.py" replicas "$WORK/$name.yaml" StatefulSet)
  pvs "pv-$name" "$brokers" | kc apply -f - > /dev/null
  # PodSecurity warns (the namespace's warn=restricted) about any workload
  # whose pods it would refuse: a warning is a failure here
  if ! kc apply --server-side -f "$WORK/$name.rest.yaml" > "$WORK/$name.out" 2>&1 \
     || grep -q 'would violate PodSecurity' "$WORK/$name.out"; then
    fail "overlays/$name: applying server-side: $(grep -v '^$' "$WORK/$name.out" | tail -n 3 | tr '\n' ' ')"
    continue
  fi
  rolled=1
  for w in $(kc get statefulset,deployment -n "$ns" -o name); do
    kc rollout status -n "$ns" "$w" --timeout=180s > /dev/null 2>&1 || rolled=0
  done
  # Jobs (the load Job; components/secure's ACL Job) complete; their pods are not counted as Ready ones
  for j in $(kc get jobs -n "$ns" -o name); do
    if kc wait -n "$ns" --for=condition=complete "$j" --timeout=120s > /dev/null 2>&1; then
      ok "overlays/$name: $j completed (scheduled; kwok completes the pods, nothing runs in them)"
    else
      fail "overlays/$name: $j did not complete: $(kc get pods -n "$ns" -l batch.kubernetes.io/job-name --no-headers 2>&1 | head -n 2 | tr '\n' ' ')"
    fi
  done
  # the load Job as the Job controller made it: one pod per completion index, each
  # with the stable name the barrier peers use (chronik-load-<index>.chronik-load)
  if load_job_pods "$ns" "$WORK/$name.yaml" > "$WORK/$name.job.out" 2>&1; then
    ok "overlays/$name: $(cat "$WORK/$name.job.out")"
  else
    fail "overlays/$name: the load Job's pods: $(cat "$WORK/$name.job.out")"
  fi
  if zones_copied "$ns" > "$WORK/$name.zones" 2>&1; then
    ok "overlays/$name: $(cat "$WORK/$name.zones") carry their node's topology.kubernetes.io/zone (the brokers' rack)"
  else
    fail "overlays/$name: zone labels not copied onto the broker pods: $(tr '\n' ' ' < "$WORK/$name.zones")"
  fi
  ready=$(kc get pods -n "$ns" -l '!batch.kubernetes.io/job-name' -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$' || true)
  nodes=$(kc get pods -n "$ns" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | grep -c . || true)
  if [[ "$rolled" == 1 && "$ready" == "$want" ]]; then
    ok "overlays/$name: $(grep -c '^kind:' "$WORK/$name.yaml") objects applied server-side, no PodSecurity warning; $want pods scheduled on $nodes kwok nodes and Ready"
  else
    fail "overlays/$name: $ready of $want pods Ready (rollouts complete: $rolled): $(kc get pods -n "$ns" --no-headers 2>&1 | head -n 5 | tr '\n' ' ')"
  fi
  # remove it at once: nothing runs in a kwok pod, so no grace period is owed
  t0=$SECONDS
  kc delete -f "$WORK/$name.rest.yaml" --wait=false > /dev/null 2>&1 || true
  kc delete pods -n "$ns" --all --grace-period=0 --force > /dev/null 2>&1 || true
  kc delete pvc -n "$ns" --all --wait=false > /dev/null 2>&1 || true
  while [[ -n "$(kc get statefulset,deployment,pods,pvc -n "$ns" -o name 2> /dev/null)" ]] && ((SECONDS - t0 < 120)); do
    kc delete pods -n "$ns" --all --grace-period=0 --force > /dev/null 2>&1 || true
    sleep 1
  done
  for ((i = 0; i < brokers; i++)); do kc delete pv "pv-$name-$i" --wait=false > /dev/null 2>&1 || true; done
  log "overlays/$name: applied, checked and removed in $((SECONDS - started))s"
done

# -- 3. PodSecurity "restricted" is enforced in the namespace -----------------------------------------
cat > "$WORK/bad-pod.yaml" << 'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: not-restricted
  namespace: chronik-perf
spec:
  containers:
    - name: c
      image: chronik-harness:dev
      securityContext:
        privileged: true
EOF
if kc apply --dry-run=server -f "$WORK/bad-pod.yaml" > "$WORK/bad.out" 2>&1; then
  fail "a privileged pod was admitted into chronik-perf (PodSecurity not enforced)"
elif grep -q 'violates PodSecurity "restricted' "$WORK/bad.out"; then
  ok "PodSecurity restricted enforced: a privileged pod is refused ($(grep -o 'violates PodSecurity "restricted[^"]*"' "$WORK/bad.out" | head -n 1))"
else
  fail "the privileged pod was refused for another reason: $(tail -n 2 "$WORK/bad.out")"
fi

# ... and a workload whose pods would break it draws the warning the overlay check above looks for
cat > "$WORK/bad-deploy.yaml" << 'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: no-seccomp
  namespace: chronik-perf
spec:
  selector:
    matchLabels: {app: no-seccomp}
  template:
    metadata:
      labels: {app: no-seccomp}
    spec:
      securityContext:
        runAsNonRoot: true
      containers:
        - name: c
          image: chronik-harness:dev
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
EOF
# (the admission plugin reads the namespace's labels from an informer cache:
# a few attempts, so a cache still catching up is not taken for no warning)
warned=0
for _ in 1 2 3 4 5; do
  kc apply --server-side --dry-run=server -f "$WORK/bad-deploy.yaml" > "$WORK/bad-deploy.out" 2>&1 || true
  if grep -q 'would violate PodSecurity "restricted' "$WORK/bad-deploy.out"; then warned=1; break; fi
  sleep 2
done
if ((warned)); then
  ok "a Deployment without a seccomp profile draws the PodSecurity warning (so the overlay check can fail)"
else
  fail "no PodSecurity warning for a Deployment without a seccomp profile: $(tr '\n' ' ' < "$WORK/bad-deploy.out" | head -c 400)"
fi

# -- 4. ./run-all.sh --k8s --overlay small: up to where the generators would run ---------------------
pvs chronik-test-pv 3 | kc apply -f - > /dev/null
rc=0
KUBECONFIG="$KUBECONFIG" "$REPO/run-all.sh" --k8s --overlay small --prometheus none --start-wait 30 \
  --timeout 60 --results "$WORK/results" > "$WORK/run.log" 2>&1 || rc=$?
if [[ "$rc" == 3 ]] && grep -q "BOUNDARY: the load Job" "$WORK/run.log" \
   && grep -q "NOT done: no load generator ran" "$WORK/run.log"; then
  ok "run-all.sh --k8s --overlay small: rolled out, created the load Job and stopped where its generators would run, saying so (exit 3)"
else
  fail "run-all.sh --k8s --overlay small exited $rc: $(tail -n 6 "$WORK/run.log" | tr '\n' ' ')"
fi
# (the Job's pods are not counted: kwok may still show the generator "running", or done)
ready=$(kc get pods -n chronik-perf -l '!batch.kubernetes.io/job-name' -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
want=$("$PY" "$HERE/check_apiserver.py" replicas "$WORK/small.yaml" StatefulSet Deployment)
got=$(grep -c '=True$' <<< "$ready" || true)
nodes=$(kc get pods -n chronik-perf -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | grep -c . || true)
if [[ "$got" == "$want" ]]; then
  ok "overlays/small: all $want pods scheduled (on $nodes kwok nodes) and Ready"
else
  fail "overlays/small: $got of $want pods Ready: $(tr '\n' ' ' <<< "$ready")"
fi
if [[ "$(kc get job -n chronik-perf chronik-load -o jsonpath='{.spec.completionMode}' 2> /dev/null)" == Indexed ]] \
   && load_job_pods chronik-perf "$WORK/small.yaml" > "$WORK/small-run.job.out" 2>&1; then
  ok "run.sh created the Indexed Job chronik-load: $(cat "$WORK/small-run.job.out")"
else
  fail "the load Job: $(cat "$WORK/small-run.job.out" 2> /dev/null) $(kc get job -n chronik-perf 2>&1 | tr '\n' ' ')"
fi

# -- 5. ./run-all.sh --k8s --overlay secure: run.sh makes its Secrets and waits for the ACL Job ----------
# (a namespace of its own: a StatefulSet's volume claims cannot change in place, so
# switching overlays in one namespace needs ./cleanup.sh --k8s first)
pvs chronik-secure-pv 3 | kc apply -f - > /dev/null
rc=0
KUBECONFIG="$KUBECONFIG" SECURE_DIR="$WORK/secure-run" "$REPO/run-all.sh" --k8s --overlay secure \
  --namespace chronik-secure --prometheus none --start-wait 30 --timeout 60 --results "$WORK/results" \
  > "$WORK/run-secure.log" 2>&1 || rc=$?
secrets=$(kc get secrets -n chronik-secure -o name | grep -c '^secret/chronik-' || true)
if [[ "$rc" == 3 ]] && grep -q "BOUNDARY: the load Job" "$WORK/run-secure.log" && ((secrets == 9)) \
   && grep -q "made a CA" "$WORK/run-secure.log" && grep -q "Secret chronik-secure/chronik-broker-sasl" "$WORK/run-secure.log" \
   && kc wait -n chronik-secure --for=condition=complete job/chronik-acls --timeout=10s > /dev/null 2>&1; then
  ok "run-all.sh --k8s --overlay secure: secure-secrets.sh's Secrets made ($secrets with the cluster secret), 3 brokers rolled out, the ACL Job complete, stopped where the generators would run (exit 3)"
else
  fail "run-all.sh --k8s --overlay secure exited $rc, $secrets chronik-* Secrets: $(tail -n 6 "$WORK/run-secure.log" | tr '\n' ' ')"
fi

echo "k8s-apiserver: $passed passed, $failed failed"
((failed == 0))
