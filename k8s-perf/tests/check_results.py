"""k8s-perf/tests/check_results.py - test_results.sh's facts and fixtures
(standard library only).

Owns:
  load-facts LOAD_DIR   print one "NAME VALUE" line per fact of two
                        generators' summaries (gen-0/, gen-1/ summary-smoke.json)
                        and their merge (merged-smoke.json): indexes,
                        merged, scheduled, http_reqs, start_spread_ms, run_id
  pooled A B MERGED     exit 0 when A + B == MERGED > 0 (request counts)
  below VALUE LIMIT     exit 0 when VALUE < LIMIT
  prometheus-fixtures METRICS_DIR
                        write the synthetic Prometheus answers collect.sh
                        would have saved: loadgen latency p0.5/p0.99,
                        messages produced, per-container CPU and RSS ranges
  meta-host META        exit 0 when meta.json's host is the kind-test cluster
                        and its acks setting the text "1"
  meta-load META        exit 0 when meta.json's settings hold batch_size 100,
                        message_size 256 and a positive duration_s
Must not: render or judge the report (test_results.sh counts ok/FAIL).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import subcommand  # k8s-perf/tests/subcommand.py, beside this file


def load_facts(load_dir: str) -> int:
    d = Path(load_dir)
    g = [json.loads((d / f"gen-{i}" / "summary-smoke.json").read_text()) for i in (0, 1)]
    m = json.loads((d / "merged-smoke.json").read_text())

    def count(s, name):
        return s["metrics"][name]["values"]["count"]

    start = [datetime.fromisoformat(s["started_at"].replace("Z", "+00:00")).timestamp() for s in g]
    print("indexes", [s["index"] for s in g], [s["generators"] for s in g])
    print("merged", m["index"], m["generators"])
    print("scheduled", [count(s, "requests_scheduled") for s in g], count(m, "requests_scheduled"))
    print("http_reqs", [count(s, "http_reqs") for s in g], count(m, "http_reqs"))
    print("start_spread_ms", round(abs(start[0] - start[1]) * 1000, 1))
    print("run_id", [s.get("run_id") for s in g])
    return 0


def pooled(a: str, b: str, merged: str) -> int:
    return 0 if int(float(a)) + int(float(b)) == int(float(merged)) > 0 else 1


def below(value: str, limit: str) -> int:
    return 0 if float(value) < float(limit) else 1


def prometheus_fixtures(metrics_dir: str) -> int:
    m = Path(metrics_dir)

    def vector(v):
        return {"status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1769000060, str(v)]}]}}

    for q, v in (("0.5", 0.011), ("0.99", 0.045)):
        (m / f"prometheus-loadgen-request-latency-p{q}.json").write_text(json.dumps(vector(v)))
    (m / "prometheus-loadgen-messages-produced-total.json").write_text(json.dumps(vector(17900)))

    def matrix(per_pod):
        return {"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"pod": pod, "container": c, "namespace": "chronik-perf"},
             "values": [[1769000000 + 5 * i, str(f(i))] for i in range(5)]} for pod, c, f in per_pod]}}

    pods = [("chronik-0", "chronik", lambda i: 2.0 * i), ("chronik-ingestor-7d9f-abc", "ingestor", lambda i: 0.5 * i),
            ("chronik-consumer-5c4-xyz", "consumer", lambda i: 0.1 * i),
            ("chronik-load-1-x2x4q", "loadgen", lambda i: 1.0 * i)]
    (m / "prometheus-range-cpu.json").write_text(json.dumps(matrix(pods)))
    (m / "prometheus-range-rss.json").write_text(json.dumps(matrix([(p, c, lambda i: 64e6) for p, c, _ in pods])))
    return 0


def meta_host(path: str) -> int:
    m = json.loads(Path(path).read_text())
    want = {"kind": "kubernetes", "context": "kind-test", "namespace": "chronik-perf", "nodes": 1}
    return 0 if m["host"] == want and m["settings"]["acks"] == "1" else 1


def meta_load(path: str) -> int:
    s = json.loads(Path(path).read_text())["settings"]
    return 0 if s.get("batch_size") == 100 and s.get("message_size") == 256 and s.get("duration_s", 0) > 0 else 1


COMMANDS = {"load-facts": load_facts, "pooled": pooled, "below": below,
            "prometheus-fixtures": prometheus_fixtures, "meta-host": meta_host, "meta-load": meta_load}


if __name__ == "__main__":
    sys.exit(subcommand.run(__doc__, COMMANDS, sys.argv[1:]))
