#!/usr/bin/env python3
"""k8s-perf/node/scrape_config.py - the local node's Prometheus configuration,
made from the project's own ServiceMonitor and PodMonitor objects.

    scrape_config.py MONITORS.yaml... > prometheus.yml

Owns: translating each monitor the way the Prometheus Operator does, so that
the node's plain Prometheus (no operator can be had here) scrapes the same
targets under the same labels: a ServiceMonitor becomes a job on
kubernetes_sd role endpoints (job = the Service's name), a PodMonitor one on
role pod (job = <namespace>/<monitor>), both keeping the objects whose labels
match the selector's matchLabels and the port named by the endpoint, with
namespace/service/pod/container/endpoint labels, podTargetLabels, and pods that
ended dropped; plus the kubelet's cAdvisor (container_cpu_usage_seconds_total,
container_memory_rss) that k8s-perf/lib/collect.sh queries. Monitors match in
every namespace (each run's namespace has its own copies).
Must not: talk to a cluster; know about any one overlay.
"""
import re
import sys

import yaml


def label_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def keep(source: str, value: str) -> dict:
    return {"source_labels": [source], "regex": re.escape(value), "action": "keep"}


def copy(source: str, target: str) -> dict:
    return {"source_labels": [source], "target_label": target}


def selected(labels_meta: str, port_meta: str, spec: dict, ep: dict) -> list:
    """Relabelling that keeps the targets whose labels (`labels_meta` + name)
    match the selector's matchLabels and whose port (`port_meta`) is the
    endpoint's, and gives them their namespace label."""
    return [keep(labels_meta + label_name(k), v)
            for k, v in sorted(spec["selector"].get("matchLabels", {}).items())] + [
        keep(port_meta, ep["port"]),
        copy("__meta_kubernetes_namespace", "namespace"),
    ]


def scrape_job(name: str, ep: dict, role: str, relabel: list) -> dict:
    """The scrape job of one monitor endpoint: its interval and path (the
    operator's defaults), targets discovered by kubernetes_sd `role`."""
    return {
        "job_name": name,
        "scrape_interval": ep.get("interval", "30s"),
        "metrics_path": ep.get("path", "/metrics"),
        "kubernetes_sd_configs": [{"role": role}],
        "relabel_configs": relabel,
    }


def service_monitor(doc: dict) -> list:
    spec = doc["spec"]
    jobs = []
    for i, ep in enumerate(spec.get("endpoints", [])):
        relabel = selected("__meta_kubernetes_service_label_", "__meta_kubernetes_endpoint_port_name", spec, ep)
        relabel += [
            copy("__meta_kubernetes_service_name", "service"),
            copy("__meta_kubernetes_pod_name", "pod"),
            copy("__meta_kubernetes_pod_container_name", "container"),
            copy("__meta_kubernetes_service_name", "job"),
            {"target_label": "endpoint", "replacement": ep["port"]},
        ]
        jobs.append(scrape_job(f"serviceMonitor/{doc['metadata']['name']}/{i}", ep, "endpoints", relabel))
    return jobs


def pod_monitor(doc: dict) -> list:
    spec = doc["spec"]
    name = doc["metadata"]["name"]
    jobs = []
    for i, ep in enumerate(spec.get("podMetricsEndpoints", [])):
        relabel = [{"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)",
                    "action": "drop"}]
        relabel += selected("__meta_kubernetes_pod_label_", "__meta_kubernetes_pod_container_port_name", spec, ep)
        relabel += [
            copy("__meta_kubernetes_pod_name", "pod"),
            copy("__meta_kubernetes_pod_container_name", "container"),
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "job",
             "replacement": f"$1/{name}"},
            {"target_label": "endpoint", "replacement": ep["port"]},
        ]
        relabel += [copy(f"__meta_kubernetes_pod_label_{label_name(k)}", label_name(k))
                    for k in spec.get("podTargetLabels", [])]
        jobs.append(scrape_job(f"podMonitor/{name}/{i}", ep, "pod", relabel))
    return jobs


SA = "/var/run/secrets/kubernetes.io/serviceaccount"
CADVISOR = {
    "job_name": "kubelet/cadvisor",
    "scrape_interval": "5s",
    "scheme": "https",
    "metrics_path": "/metrics/cadvisor",
    # the kubelet's serving certificate is the node's own (scripts/k8s-node.sh)
    "tls_config": {"ca_file": f"{SA}/ca.crt", "insecure_skip_verify": True},
    "authorization": {"credentials_file": f"{SA}/token"},
    "kubernetes_sd_configs": [{"role": "node"}],
    "relabel_configs": [copy("__meta_kubernetes_node_name", "node")],
}


def main(paths: list) -> None:
    jobs = []
    for path in paths:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                kind = doc.get("kind")
                if kind == "ServiceMonitor":
                    jobs += service_monitor(doc)
                elif kind == "PodMonitor":
                    jobs += pod_monitor(doc)
    if not jobs:
        sys.exit("scrape_config.py: no ServiceMonitor or PodMonitor in " + " ".join(paths))
    config = {"global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
              "scrape_configs": jobs + [CADVISOR]}
    sys.stdout.write("# made by k8s-perf/node/scrape_config.py from " + " ".join(paths) + "\n")
    sys.stdout.write(yaml.safe_dump(config, sort_keys=False))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
