"""k8s-perf/tests/check_dry_run.py - what `run.sh --dry-run` must have rendered
and printed for one overlay (test_cli.sh runs it once per overlay; PyYAML).

Usage: check_dry_run.py RENDERED DRY_OUT RUN_ID
  RENDERED  the run's rendered.yaml; DRY_OUT  run.sh's output (the "+ kubectl"
  lines); RUN_ID  the --run-id given (namespace ns-test, context ctx-test,
  harness image reg.local:5000/chronik-harness:v1).
Checks: the run id reaches the generators' env and labels with the commit;
images swapped; namespace applied and renamed; topic and group per run; no
duplicate env names; every kubectl command has --context and they come in
order (with components/secure: its eight Secrets first, the ACL Job before
the load). Prints the problems joined by "; " and exits 1, or exits 0.
Must not: run run.sh (test_cli.sh does).
"""

from __future__ import annotations

import re
import sys

import yaml


def problems(rendered: str, out: str, run_id: str) -> list[str]:
    with open(rendered, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
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
    return errors


def main(argv: list[str]) -> int:
    rendered, out_path, run_id = argv
    with open(out_path, encoding="utf-8") as f:
        out = f.read()
    errors = problems(rendered, out, run_id)
    if errors:
        print("; ".join(errors))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
