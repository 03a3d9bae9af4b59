#!/usr/bin/env bash
# k8s-perf/tests/apiserver.sh - k8s-perf's manifests against a real API server.
#
#   k8s-perf/tests/apiserver.sh        (make k8s-apiserver-test)
#
# Starts a control plane of this machine's own (scripts/install-kube.sh:
# kube-apiserver, kube-controller-manager, kube-scheduler v1.36 built from
# source, Debian's etcd) with kwokctl --runtime binary, and three kwok nodes
# (simulated kubelets: pods get scheduled, "run" and turn Ready, nothing
# executes). Then:
#   1. CRDs: the project's own TestRun CRD (k8s-perf/crds/) and the
#      ServiceMonitor/PodMonitor CRDs from the prometheus-operator module.
#   2. Every overlay applied server-side as a dry run (schema, defaulting,
#      admission: PodSecurity "restricted" in the namespace each overlay makes).
#   3. PodSecurity really enforced: a pod that breaks "restricted" is refused.
#   4. overlays/small applied for real through ./run-all.sh --k8s --overlay
#      small: the StatefulSet's pods bind PersistentVolumes made here,
#      everything is scheduled onto the kwok nodes and rolls out Ready, the
#      TestRun is created, and the run stops at the boundary it must state:
#      no k6-operator runs here, so no load (exit 3, "BOUNDARY" in its output).
# Prints "k8s-apiserver: N passed, N failed"; exit 1 if anything failed. The
# cluster is deleted on exit.
#
# Needs: root or a user who may run the binaries; Go (first run builds the
# control plane, ~5 min); kubectl; the Python venv (scripts/install-python-deps.sh).
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
if "$BIN/kwokctl" scale node --name "$CLUSTER" --replicas 3 > "$WORK/nodes.log" 2>&1 \
   && kc wait --for condition=Ready --timeout=120s node --all > /dev/null 2>&1; then
  ok "3 kwok nodes Ready: $(kc get nodes --no-headers | awk '{print $1}' | tr '\n' ' ')"
else
  fail "kwok nodes: $(tail -n 3 "$WORK/nodes.log") $(kc get nodes --no-headers 2>&1 | tr '\n' ' ')"
fi

# -- 1. CRDs ----------------------------------------------------------------------------------------
crd_dir=$(cat "$REPO/.tools/k8s-crd-dir" 2> /dev/null || true)
if kc apply --server-side -f "$K8S/crds/testruns.k6.io.yaml" > "$WORK/crd.log" 2>&1 \
   && [[ -n "$crd_dir" ]] \
   && kc apply --server-side -f "$crd_dir/monitoring.coreos.com_servicemonitors.yaml" \
        -f "$crd_dir/monitoring.coreos.com_podmonitors.yaml" >> "$WORK/crd.log" 2>&1 \
   && kc wait --for condition=established --timeout=60s crd/testruns.k6.io crd/servicemonitors.monitoring.coreos.com \
        crd/podmonitors.monitoring.coreos.com >> "$WORK/crd.log" 2>&1; then
  ok "CRDs established: testruns.k6.io (k8s-perf/crds), servicemonitors and podmonitors (prometheus-operator)"
else
  fail "CRDs: $(tail -n 3 "$WORK/crd.log")"
fi

# -- 2. every overlay, server-side dry run --------------------------------------------------------------
for dir in "$K8S"/overlays/*/; do
  name=$(basename "$dir")
  kc kustomize "$dir" > "$WORK/$name.yaml"
  ns=$("$PY" -c 'import sys, yaml; print(next(d["metadata"]["name"] for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Namespace"))' "$WORK/$name.yaml")
  # namespaced objects need their namespace to exist for a server-side dry run
  "$PY" -c 'import sys, yaml; sys.stdout.write("".join(yaml.safe_dump(d) + "---\n" for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Namespace"))' \
    "$WORK/$name.yaml" | kc apply --server-side -f - > /dev/null
  # PodSecurity warns (namespace label warn=restricted) about workloads whose
  # pods it would refuse: a warning is a failure here
  if kc apply --server-side --dry-run=server -f "$WORK/$name.yaml" > "$WORK/$name.out" 2>&1 \
     && ! grep -q 'would violate PodSecurity' "$WORK/$name.out"; then
    ok "overlays/$name: $(grep -c '^kind:' "$WORK/$name.yaml") objects accepted server-side (dry run) in namespace $ns, no PodSecurity warning"
  else
    fail "overlays/$name server-side: $(grep -v '^$' "$WORK/$name.out" | tail -n 3 | tr '\n' ' ')"
  fi
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
if kc apply --server-side --dry-run=server -f "$WORK/bad-deploy.yaml" 2>&1 | grep -q 'would violate PodSecurity "restricted'; then
  ok "a Deployment without a seccomp profile draws the PodSecurity warning (so the overlay check can fail)"
else
  fail "no PodSecurity warning for a Deployment without a seccomp profile"
fi

# -- 4. ./run-all.sh --k8s --overlay small: up to the k6-operator ---------------------------------------
# The StatefulSet's claims bind these (no storage provisioner here).
for i in 0 1 2; do
  cat << EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: chronik-test-pv-$i
spec:
  capacity:
    storage: 100Gi
  accessModes: ["ReadWriteOnce"]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: ""
  hostPath:
    path: /tmp/chronik-test-pv-$i
---
EOF
done | kc apply -f - > /dev/null
rc=0
KUBECONFIG="$KUBECONFIG" "$REPO/run-all.sh" --k8s --overlay small --prometheus none --operator-wait 30 \
  --timeout 60 --results "$WORK/results" > "$WORK/run.log" 2>&1 || rc=$?
if [[ "$rc" == 3 ]] && grep -q "BOUNDARY: the TestRun" "$WORK/run.log" && grep -q "NOT done: no k6 runner started" "$WORK/run.log"; then
  ok "run-all.sh --k8s --overlay small: rolled out and stopped at the k6-operator boundary, saying so (exit 3)"
else
  fail "run-all.sh --k8s --overlay small exited $rc: $(tail -n 6 "$WORK/run.log" | tr '\n' ' ')"
fi
ready=$(kc get pods -n chronik-perf -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
want=$("$PY" -c 'import sys, yaml
n = 0
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] in ("StatefulSet", "Deployment"):
        n += d["spec"].get("replicas", 1)
print(n)' "$WORK/small.yaml")
got=$(grep -c '=True$' <<< "$ready" || true)
nodes=$(kc get pods -n chronik-perf -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | grep -c . || true)
if [[ "$got" == "$want" ]]; then
  ok "overlays/small: all $want pods scheduled (on $nodes kwok nodes) and Ready"
else
  fail "overlays/small: $got of $want pods Ready: $(tr '\n' ' ' <<< "$ready")"
fi
if kc get testruns.k6.io -n chronik-perf chronik-load > /dev/null 2>&1; then
  ok "the TestRun chronik-load exists (what a k6-operator would act on)"
else
  fail "the TestRun was not created"
fi

echo "k8s-apiserver: $passed passed, $failed failed"
((failed == 0))
