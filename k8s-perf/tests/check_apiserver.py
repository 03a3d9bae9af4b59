"""k8s-perf/tests/check_apiserver.py - what apiserver.sh reads from a rendered
overlay and from the live API server's answers (PyYAML).

Owns:
  split RENDERED NS_OUT REST_OUT
                 write the Namespace object(s) of RENDERED to NS_OUT and
                 every other object to REST_OUT (applied in that order)
  replicas RENDERED KIND...
                 print the replicas (default 1) summed over RENDERED's
                 workloads of the KINDs (StatefulSet, Deployment)
  job-pods PODS_JSON RENDERED
                 the load Job's pods (kubectl get pods -o json) are exactly
                 indexes 0..completions-1, each with hostname
                 chronik-load-<index> in the Job's subdomain; prints what it
                 found, exits 1 when they are not
Must not: talk to the API server (apiserver.sh runs kubectl).
"""

from __future__ import annotations

import json
import sys

import yaml

import subcommand  # k8s-perf/tests/subcommand.py, beside this file


def _docs(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def split(rendered: str, ns_out: str, rest_out: str) -> int:
    with open(ns_out, "w", encoding="utf-8") as ns, open(rest_out, "w", encoding="utf-8") as rest:
        for d in _docs(rendered):
            (ns if d["kind"] == "Namespace" else rest).write(yaml.safe_dump(d) + "---\n")
    return 0


def replicas(rendered: str, *kinds: str) -> int:
    print(sum(d["spec"].get("replicas", 1) for d in _docs(rendered) if d["kind"] in kinds))
    return 0


def job_pods(pods_json: str, rendered: str) -> int:
    with open(pods_json, encoding="utf-8") as f:
        pods = json.load(f)["items"]
    job = next(d for d in _docs(rendered) if d["kind"] == "Job" and d["metadata"]["name"] == "chronik-load")
    n, sub = job["spec"]["completions"], job["spec"]["template"]["spec"]["subdomain"]
    got = {}
    for p in pods:
        i = p["metadata"].get("annotations", {}).get("batch.kubernetes.io/job-completion-index")
        got[i] = (p["spec"].get("hostname"), p["spec"].get("subdomain"))
    want = {str(i): (f"chronik-load-{i}", sub) for i in range(n)}
    if got != want:
        print(f"pods by index {dict(sorted(got.items()))}, want {want}")
        return 1
    print(f"the load Job's {n} pod(s) made by the Job controller: indexes 0..{n - 1}, named chronik-load-<index> "
          f"in subdomain {sub}")
    return 0


COMMANDS = {"split": split, "replicas": replicas, "job-pods": job_pods}


if __name__ == "__main__":
    sys.exit(subcommand.run(__doc__, COMMANDS, sys.argv[1:]))
