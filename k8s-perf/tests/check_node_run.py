#!/usr/bin/env python3
"""k8s-perf/tests/check_node_run.py - what a fault run on the local node
must show in its results directory (k8s-perf/tests/node.sh).

    check_node_run.py RESULTS_DIR POD

Owns: the checks on one run's files: the ledgers acknowledged messages and
the merged verification consumed every one (0 lost, clean); meta.json has the
delete-pod event for POD and its pod-ready event with the same volume claim;
the report's events table names them; resources.csv has the broker's CPU
(cAdvisor scraped by the node's Prometheus); the Prometheus `up` query saw the
broker, ingestor and consumer targets up. One line per check ("FAIL ..." when
it failed); exit 1 if any failed.
Must not: talk to a cluster.
"""
import csv
import json
import sys
from pathlib import Path


def checks(out: Path, pod: str):
    merged = json.loads((out / "consumers" / "merged.json").read_text())
    counts, verdict = merged.get("counts", {}), merged.get("verdict", {})
    acked = sum(json.loads(f.read_text()).get("acknowledged_count", 0) for f in (out / "ingestors").glob("*-ledger.json"))
    yield (verdict.get("clean") is True and counts.get("lost", 1) == 0 and acked > 0
           and counts.get("verified", 0) >= acked,
           f"verification: {acked:,} acknowledged by the ingestors, {counts.get('verified', 0):,} verified, "
           f"{counts.get('lost')} lost, clean={verdict.get('clean')}")
    events = json.loads((out / "meta.json").read_text()).get("events", [])
    deleted = [e for e in events if e.get("kind") == "delete-pod" and e.get("target") == pod]
    back = [e for e in events if e.get("kind") == "pod-ready" and e.get("target") == pod]
    yield bool(deleted), f"meta.json: delete-pod {pod} at {deleted[0]['at'] if deleted else '(none)'}"
    claim = f"data-{pod}="
    yield (bool(back) and claim in back[0].get("detail", ""),
           f"meta.json: pod-ready {pod}: {back[0]['detail'] if back else '(none)'}")
    report = (out / "report.md").read_text()
    yield (f"| delete-pod | `{pod}` |" in report and f"| pod-ready | `{pod}` |" in report,
           "report.md: the events table names the delete and the return")
    with open(out / "resources.csv") as f:
        broker = [r for r in csv.DictReader(f) if r["component"] == "broker"]
    yield bool(broker), f"resources.csv: {len(broker)} broker CPU/RSS samples (cAdvisor via the node's Prometheus)"
    up = json.loads((out / "metrics" / "prometheus-up.json").read_text())["data"]["result"]
    jobs = {r["metric"].get("job", "") for r in up if r["value"][1] == "1"}
    want = {"chronik", "chronik-ingestor"}
    yield (want <= jobs and any(j.endswith("/chronik-consumer") for j in jobs),
           f"Prometheus targets up: {', '.join(sorted(jobs))}")


def main(out: str, pod: str) -> int:
    bad = 0
    try:
        for good, line in checks(Path(out), pod):
            print(line if good else f"FAIL {line}")
            bad += not good
    except (OSError, ValueError, KeyError) as e:
        print(f"FAIL reading {out}: {e!r}")
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
