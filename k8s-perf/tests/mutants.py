"""k8s-perf/tests/mutants.py - the broken copies test.sh feeds its checks to
prove each check can fail (PyYAML, from the k8s venv).

Owns:
  dashboard SRC OUT     SRC (a dashboard's JSON) with a misspelt panel field
                        (gridPos.hh), written to OUT
  schema STANDALONE DIR one object of the built standalone overlay per file in
                        DIR (made here), each with a misspelt or mistyped field
                        the generated schemas must refuse
  job BUILT DIR         whole built overlays (BUILT/<overlay>.yaml) whose load
                        Job, its env ConfigMap or plans ConfigMap is broken one
                        way each, as check_manifests.py --only loadgen/security
                        must refuse
  secure SECURE DIR     the built secure overlay with the ingestor's password
                        or probe broken one way each
Which check must refuse each mutant, and with what message, test.sh says.
Must not: run a check (test.sh runs kubeconform and check_manifests.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import yaml


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def dashboard(src: Path, out: Path) -> None:
    d = json.loads(src.read_text())
    d["panels"][0]["gridPos"]["hh"] = 8  # a misspelt field
    out.write_text(json.dumps(d))


def schema(standalone: Path, out: Path) -> None:
    docs = _docs(standalone)
    out.mkdir()

    def mutant(name, kind, edit):
        d = copy.deepcopy(next(x for x in docs if x["kind"] == kind))
        edit(d)
        (out / f"{name}.yaml").write_text(yaml.safe_dump(d))

    def mutant_job(name, edit):
        d = copy.deepcopy(next(x for x in docs if x["kind"] == "Job" and x["metadata"]["name"] == "chronik-load"))
        edit(d)
        (out / f"{name}.yaml").write_text(yaml.safe_dump(d))

    mutant_job("job-completionmode", lambda d: d["spec"].update(completionmode=d["spec"].pop("completionMode")))
    mutant_job("job-parallelism-string", lambda d: d["spec"].update(parallelism="8"))
    mutant_job("job-subdomian", lambda d: d["spec"]["template"]["spec"].update(
        subdomian=d["spec"]["template"]["spec"].pop("subdomain")))
    mutant_job("job-completion-mode-value", lambda d: d["spec"].update(completionMode=3))
    mutant("servicemonitor-prot", "ServiceMonitor", lambda d: d["spec"]["endpoints"][0].update(prot="metrics"))
    mutant("podmonitor-endpoints", "PodMonitor",
           lambda d: d["spec"].update(endpoints=d["spec"].pop("podMetricsEndpoints")))
    mutant("statefulset-portz", "StatefulSet",
           lambda d: d["spec"]["template"]["spec"]["containers"][0].update(portz=[]))


def job(built: Path, out: Path) -> None:
    def mutant(name, overlay, edit):
        ds = _docs(built / f"{overlay}.yaml")
        job = next(d for d in ds if d["kind"] == "Job" and d["metadata"]["name"] == "chronik-load")
        env_cm = next(d for d in ds if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("chronik-load-env"))
        plans = next(d for d in ds if d["kind"] == "ConfigMap"
                     and d["metadata"]["name"].startswith("chronik-load-plans"))
        edit(job["spec"], job["spec"]["template"]["spec"], env_cm["data"], plans["data"])
        (out / f"{name}.yaml").write_text(yaml.safe_dump_all(ds))

    def script(pod, old, new):
        c = pod["containers"][0]
        assert old in c["args"][0], old
        c["args"][0] = c["args"][0].replace(old, new)

    def no_nonroot(pod):
        pod["securityContext"].pop("runAsNonRoot")
        pod["securityContext"]["runAsUser"] = 0

    mutant("not-indexed", "small", lambda job, pod, env, plans: job.update(completionMode="NonIndexed"))
    mutant("parallelism-short", "test-6", lambda job, pod, env, plans: job.update(parallelism=4))
    mutant("generators-env-differs", "test-6", lambda job, pod, env, plans: env.update(GENERATORS="6"))
    mutant("peer-not-index-0", "test-6",
           lambda job, pod, env, plans: script(pod, "chronik-load-0.chronik-load", "chronik-load.chronik-load"))
    mutant("index-0-not-listening", "test-6", lambda job, pod, env, plans: script(pod, '= 0 ]', '= 1 ]'))
    mutant("plan-missing", "small", lambda job, pod, env, plans: plans.pop("smoke.json"))
    mutant("no-subdomain", "test-6", lambda job, pod, env, plans: pod.pop("subdomain"))
    mutant("unknown-flag", "small",
           lambda job, pod, env, plans: env.update(LOADGEN_ARGS="--rat 200 --duration 60s"))
    mutant("overrides-refused", "small", lambda job, pod, env, plans: env.update(PLAN="blocking-batch"))
    mutant("runs-as-root", "small", lambda job, pod, env, plans: no_nonroot(pod))


def secure(rendered: Path, out: Path) -> None:
    docs = _docs(rendered)

    def mutant(name, edit):
        ds = copy.deepcopy(docs)
        ing = next(d for d in ds if d["kind"] == "Deployment" and d["metadata"]["name"] == "chronik-ingestor")
        edit(ing["spec"]["template"]["spec"]["containers"][0])
        (out / f"{name}.yaml").write_text(yaml.safe_dump_all(ds))

    def env(c, name):
        return next(e for e in c["env"] if e["name"] == name)

    def literal(c):
        e = env(c, "CHRONIK_INGESTOR_PRODUCER_CONFIG")
        e["value"] = e["value"].replace("$(SASL_PASSWORD)", "hunter2")

    def late(c):
        c["env"].append(c["env"].pop(next(i for i, e in enumerate(c["env"]) if e["name"] == "SASL_PASSWORD")))

    def https_probe(c):
        c["readinessProbe"]["httpGet"]["port"] = "http"

    mutant("literal-password", literal)
    mutant("password-defined-late", late)
    mutant("probe-on-https", https_probe)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="k8s-perf/tests/mutants.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["dashboard", "schema", "job", "secure"])
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    {"dashboard": dashboard, "schema": schema, "job": job, "secure": secure}[args.kind](args.source, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
