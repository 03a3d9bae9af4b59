#!/usr/bin/env bash
# k8s-perf/tests/test_cli.sh - k8s-perf/run.sh and k8s-perf/cleanup.sh without
# a cluster: --help, argument errors, and --dry-run of every overlay (the
# per-run kustomization must build, carry the run id and commit into the
# load generators' env and the run id onto their pods' label, give ingestors
# and consumers one topic of their own, move everything into --namespace,
# swap images (the generators' too), and the kubectl commands must come in
# the right order - the load Job deleted with its pods, then applied, last;
# an overlay with components/secure shows
# secure-secrets.sh's Secrets first and waits for the ACL Job). Also the --k8s dispatch of ./run-all.sh and
# ./cleanup.sh. Prints "cli: N passed, N failed".
# Needs: kubectl or .tools/bin/kustomize, .tools/k8s-venv (install-k8s-tools.sh).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S="$(cd "$HERE/.." && pwd)"
REPO="$(cd "$K8S/.." && pwd)"
PY="${PY:-$REPO/.tools/k8s-venv/bin/python}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export K8S_RUN_DIR="$WORK/runs"

passed=0
failed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }
expect() {  # WANT_RC DESCRIPTION CMD... - the command exits WANT_RC ("nonzero" = any failure)
  local want=$1 what=$2 rc=0; shift 2
  "$@" > "$WORK/out" 2>&1 || rc=$?
  if [[ "$want" == nonzero && $rc -ne 0 ]] || [[ "$want" == "$rc" ]]; then ok "$what"; else
    fail "$what (exit $rc, wanted $want): $(tail -n 3 "$WORK/out")"; fi
}

expect 0 "run.sh --help" "$K8S/run.sh" --help
grep -q -- '--overlay NAME' "$WORK/out" && ok "run.sh --help lists --overlay" || fail "run.sh --help lists --overlay"
expect 2 "run.sh rejects an unknown option" "$K8S/run.sh" --bogus
expect 2 "run.sh: --overlay needs a value" "$K8S/run.sh" --overlay
expect nonzero "run.sh rejects an overlay that does not exist" "$K8S/run.sh" --dry-run --overlay no-such
grep -q 'no overlay' "$WORK/out" && ok "run.sh names the missing overlay" || fail "run.sh names the missing overlay"
expect nonzero "run.sh rejects a run id that is no label value" "$K8S/run.sh" --dry-run --run-id 'bad id!'
expect nonzero "run.sh rejects a malformed --prometheus" "$K8S/run.sh" --dry-run --prometheus prometheus:9090
expect nonzero "run.sh rejects a bad namespace" "$K8S/run.sh" --dry-run --namespace Bad_NS
expect 0 "cleanup.sh --help" "$K8S/cleanup.sh" --help
expect 2 "cleanup.sh rejects an unknown option" "$K8S/cleanup.sh" --bogus

for dir in "$K8S"/overlays/*/; do
  o=$(basename "$dir")
  id="t-$o"
  if ! "$K8S/run.sh" --dry-run --overlay "$o" --run-id "$id" --namespace ns-test --context ctx-test \
      --harness-image reg.local:5000/chronik-harness:v1 > "$WORK/dry.out" 2>&1; then
    fail "run.sh --dry-run --overlay $o: $(tail -n 3 "$WORK/dry.out")"; continue
  fi
  if "$PY" "$HERE/check_dry_run.py" "$K8S_RUN_DIR/$id/rendered.yaml" "$WORK/dry.out" "$id"
  then ok "run.sh --dry-run --overlay $o: run id, namespace, topic, images, command order"
  else fail "run.sh --dry-run --overlay $o"; fi
done

"$K8S/cleanup.sh" --dry-run --namespace ns-test --context ctx-test > "$WORK/clean.out" 2>&1
if awk '/delete -n ns-test jobs -l app.kubernetes.io\/name=chronik-loadgen/{a=NR} /statefulsets,deployments/{b=NR}
        /delete -n ns-test pvc/{c=NR} /delete namespace ns-test/{d=NR}
        END {exit !(a && b && c && d && a < b && b < c && c < d)}' "$WORK/clean.out"; then
  ok "cleanup.sh --dry-run: the load Job and its pods, then workloads, then PVCs, then the namespace"
else
  fail "cleanup.sh --dry-run order: $(cat "$WORK/clean.out")"
fi
expect 0 "./run-all.sh --k8s --help reaches k8s-perf/run.sh" "$REPO/run-all.sh" --k8s --help
grep -q 'k8s-perf/run.sh' "$WORK/out" && ok "run-all.sh --k8s shows the k8s usage" || fail "run-all.sh --k8s shows the k8s usage"
expect 0 "./cleanup.sh --k8s --dry-run reaches k8s-perf/cleanup.sh" "$REPO/cleanup.sh" --k8s --dry-run --namespace ns-test
grep -q 'delete namespace ns-test' "$WORK/out" && ok "cleanup.sh --k8s passes its arguments on" || fail "cleanup.sh --k8s passes its arguments on"

echo "cli: $passed passed, $failed failed"
((failed == 0))
