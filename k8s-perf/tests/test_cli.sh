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
  if "$PY" - "$K8S_RUN_DIR/$id/rendered.yaml" "$WORK/dry.out" "$id" << 'PY'
import re, sys, yaml
rendered, out, run_id = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
errors = []
def need(cond, msg):
    if not cond:
        errors.append(msg)
cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
job = next(d for d in docs if d["kind"] == "Job" and d["metadata"]["name"] == "chronik-load")
pod = job["spec"]["template"]
gen = pod["spec"]["containers"][0]
env_cm = cms.get(gen["envFrom"][0]["configMapRef"]["name"])
need(env_cm is not None and env_cm["data"].get("RUN_ID") == run_id,
     "chronik-load-env lacks RUN_ID (or the Job names a missing ConfigMap)")
need(env_cm is not None and re.fullmatch(r"[0-9a-f]{7,40}|unknown", env_cm["data"].get("GIT_COMMIT", "")) is not None,
     "chronik-load-env lacks the commit (GIT_COMMIT)")
need(pod["metadata"]["labels"].get("chronik.perf/run-id") == run_id, "the generators' pods lack the run-id label")
need(gen["image"] == "reg.local:5000/chronik-harness:v1", f"the generators' image not swapped: {gen['image']}")
need(all(d["metadata"].get("namespace", "ns-test") == "ns-test" for d in docs if d["kind"] != "Namespace"), "namespace not applied")
need(any(d["kind"] == "Namespace" and d["metadata"]["name"] == "ns-test" for d in docs), "Namespace object not renamed")
def env(name):
    d = next(x for x in docs if x["metadata"]["name"] == name and x["kind"] == "Deployment")
    c = d["spec"]["template"]["spec"]["containers"][0]
    names = [e["name"] for e in c["env"]]
    need(len(names) == len(set(names)), f"{name}: duplicate env names")
    return {e["name"]: e.get("value") for e in c["env"]}, c["image"]
ing, ing_image = env("chronik-ingestor")
con, _ = env("chronik-consumer")
need(ing["CHRONIK_INGESTOR_TOPIC"] == con["CHRONIK_CONSUMER_TOPIC"] == f"chronik-perf-{run_id}", "topic not per run")
need(con["CHRONIK_CONSUMER_GROUP"] == f"verify-{run_id}", "group not per run")
need(ing_image == "reg.local:5000/chronik-harness:v1", f"harness image not swapped: {ing_image}")
cmds = [l for l in out.splitlines() if l.startswith("+ kubectl")]
need(all("--context ctx-test" in c for c in cmds), "a kubectl command without --context")
order = ["component!=loadgen", "rollout status -n ns-test statefulset/chronik",
         "rollout status -n ns-test deployment/chronik-ingestor",
         "delete -n ns-test job/chronik-load --ignore-not-found --cascade=foreground", "component=loadgen"]
secure = any(d["metadata"].get("labels", {}).get("chronik.perf/security") for d in docs)
made = [c for c in cmds if "create secret generic chronik-" in c and "cluster-secret" not in c]
if secure:
    # components/secure: secure-secrets.sh's Secrets before the workloads, the ACL Job before the load
    need(len(made) == 8 and all("-n ns-test" in c and "--dry-run=client" in c for c in made),
         f"secure overlay: the dry run does not show secure-secrets.sh's 8 Secrets in ns-test: {made}")
    order = ["create secret generic chronik-tls-ca"] + order
    order.insert(order.index("delete -n ns-test job/chronik-load --ignore-not-found --cascade=foreground"),
                 "wait -n ns-test --for=condition=complete job/chronik-acls")
else:
    need(not made and "job/chronik-acls" not in out, "an overlay without components/secure makes its Secrets")
pos = [next((i for i, c in enumerate(cmds) if o in c), -1) for o in order]
need(-1 not in pos and pos == sorted(pos), f"kubectl commands out of order: {cmds}")
if errors:
    print("; ".join(errors))
    sys.exit(1)
PY
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
