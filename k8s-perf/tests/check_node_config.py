#!/usr/bin/env python3
"""k8s-perf/tests/check_node_config.py - the local node's generated
configuration, checked without a node (part of make k8s-test).

    check_node_config.py BUILT_CLUSTER.yaml

Owns: two checks, one line each ("FAIL ..." when one fails; exit 1):
  - node/scrape_config.py on base/monitoring's monitors: one job per monitor
    endpoint plus the kubelet's cAdvisor, each keeping only the selector's
    labels and the endpoint's port, with the Operator's job label;
  - node/fit_requests.py on a built overlay: nothing when the run fits, and
    when it does not, patches whose requests sum within the free CPU and keep
    the requests' ratios (the brokers' to the ingestors').
Must not: talk to a cluster.
"""
import subprocess
import sys
from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parent.parent
NODE = K8S / "node"


def scrape() -> tuple[bool, str]:
    monitors = sorted(str(p) for p in (K8S / "base" / "monitoring").glob("*monitors.yaml"))
    out = subprocess.run([sys.executable, str(NODE / "scrape_config.py"), *monitors], check=True,
                         capture_output=True, text=True).stdout
    jobs = {j["job_name"]: j for j in yaml.safe_load(out)["scrape_configs"]}
    want = {"serviceMonitor/chronik-broker/0", "serviceMonitor/chronik-ingestor/0", "podMonitor/chronik-consumer/0",
            "podMonitor/chronik-loadgen/0", "kubelet/cadvisor"}
    if set(jobs) != want:
        return False, f"scrape_config.py jobs {sorted(jobs)} != {sorted(want)}"
    broker = jobs["serviceMonitor/chronik-broker/0"]["relabel_configs"]
    keeps = {(r["source_labels"][0], r["regex"]) for r in broker if r.get("action") == "keep"}
    if ("__meta_kubernetes_endpoint_port_name", "metrics") not in keeps or \
            ("__meta_kubernetes_service_label_app_kubernetes_io_name", "chronik") not in keeps:
        return False, f"scrape_config.py: the broker job keeps {sorted(keeps)}"
    loadgen = jobs["podMonitor/chronik-loadgen/0"]["relabel_configs"]
    if not any(r.get("target_label") == "chronik_perf_run_id" for r in loadgen):
        return False, "scrape_config.py: the loadgen job lost podTargetLabels chronik.perf/run-id"
    return True, f"scrape_config.py: {len(jobs)} jobs from base/monitoring (the Operator's selection and labels)"


def cpu_of(docs: list, kind: str, name: str) -> float:
    d = next(x for x in docs if x["kind"] == kind and x["metadata"]["name"] == name)
    q = str(d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    return float(q[:-1]) if q.endswith("m") else float(q) * 1000


def fit(built: str) -> tuple[bool, str]:
    run = lambda free: subprocess.run([sys.executable, str(NODE / "fit_requests.py"), built, str(free)],  # noqa: E731
                                      check=True, capture_output=True, text=True)
    if run(10**9).stdout.strip():
        return False, "fit_requests.py patched a run that fits"
    free = 1900
    patches = yaml.safe_load(run(free).stdout)
    docs = [d for d in yaml.safe_load_all(open(built)) if d]
    for p in patches:
        d = next(x for x in docs if x["kind"] == p["target"]["kind"] and x["metadata"]["name"] == p["target"]["name"])
        for op in yaml.safe_load(p["patch"]):
            _, *path = op["path"].split("/")
            node = d
            for key in path[:-1]:
                node = node[int(key)] if isinstance(node, list) else node[key]
            node[path[-1]] = op["value"]
    sys.path.insert(0, str(NODE))
    from fit_requests import total  # noqa: E402
    after = total(docs)
    ratio_before = cpu_of([d for d in yaml.safe_load_all(open(built)) if d], "StatefulSet", "chronik") / \
        cpu_of([d for d in yaml.safe_load_all(open(built)) if d], "Deployment", "chronik-ingestor")
    ratio_after = cpu_of(docs, "StatefulSet", "chronik") / cpu_of(docs, "Deployment", "chronik-ingestor")
    if after > free or abs(ratio_after - ratio_before) > 0.05 * ratio_before:
        return False, f"fit_requests.py: {after}m requested after fitting into {free}m, ratio {ratio_before} -> {ratio_after}"
    return True, f"fit_requests.py: the cluster overlay fitted into {free}m ({after}m after), ratios kept"


def main(built: str) -> int:
    bad = 0
    for check in (scrape, lambda: fit(built)):
        good, line = check()
        print(line if good else f"FAIL {line}")
        bad += not good
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
