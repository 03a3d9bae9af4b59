#!/usr/bin/env python3
"""k8s-perf/node/fit_requests.py - scale a run's CPU requests down so that
every pod of it can be scheduled on the one-machine node (scripts/k8s-node.sh).

    fit_requests.py RENDERED.yaml FREE_MILLICORES  > patches.yaml

Owns: summing the CPU requests of every pod the rendered run makes (each
workload's replicas, or a Job's parallelism, times its containers' requests,
init containers' largest counted once), and, when that sum exceeds
FREE_MILLICORES, printing kustomize `patches:` entries (JSON 6902 replace)
that multiply every container's CPU request by one factor, so the run's pods
keep their relative weights (CPU shares) and all fit. Prints nothing when the
run fits. The factor and the totals go to stderr for run.sh's log.
Requests only decide scheduling and the shares under contention: limits,
memory and everything else are left as the overlay has them.
Must not: talk to a cluster.
"""
import math
import sys

import yaml

WORKLOADS = {"StatefulSet": "replicas", "Deployment": "replicas", "Job": "parallelism"}


def millicores(q) -> int:
    q = str(q)
    return int(q[:-1]) if q.endswith("m") else int(math.ceil(float(q) * 1000))


def workloads(docs: list):
    for d in docs:
        field = WORKLOADS.get(d.get("kind"))
        if field:
            yield d, int(d["spec"].get(field, 1) or 1)


def cpu(container: dict):
    req = (container.get("resources") or {}).get("requests") or {}
    return millicores(req["cpu"]) if "cpu" in req else None


def total(docs: list) -> int:
    out = 0
    for d, n in workloads(docs):
        spec = d["spec"]["template"]["spec"]
        per_pod = sum(cpu(c) or 0 for c in spec.get("containers", []))
        per_pod = max([per_pod] + [cpu(c) or 0 for c in spec.get("initContainers", [])])
        out += n * per_pod
    return out


def patches(docs: list, factor: float) -> list:
    out = []
    for d, _ in workloads(docs):
        spec = d["spec"]["template"]["spec"]
        ops = []
        for kind in ("containers", "initContainers"):
            for i, c in enumerate(spec.get(kind, [])):
                m = cpu(c)
                if m is not None:
                    ops.append({"op": "replace", "path": f"/spec/template/spec/{kind}/{i}/resources/requests/cpu",
                                "value": f"{max(1, int(m * factor))}m"})
        if ops:
            out.append({"target": {"kind": d["kind"], "name": d["metadata"]["name"]}, "patch": yaml.safe_dump(ops)})
    return out


def main(rendered: str, free: int) -> int:
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    need = total(docs)
    if need <= free:
        print(f"CPU requests {need}m fit the node's {free}m free", file=sys.stderr)
        return 0
    factor = free / need
    print(f"CPU requests {need}m > the node's {free}m free: every CPU request scaled by {factor:.3f}",
          file=sys.stderr)
    sys.stdout.write(yaml.safe_dump(patches(docs, factor), sort_keys=False))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
