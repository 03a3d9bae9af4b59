"""k8s-perf/lib/results.py - turns what k8s-perf/run.sh collected from a
cluster into the results layout local runs have (reports/README.md).

Owns (standard library only; run with any python3):
  k6-files LOG DIR       cut the files runner.js printed between its
                         CHRONIK-K6-FILE-BEGIN/END markers out of one runner's
                         log into DIR (k6/<pod>/k6-<scenario>-summary.json)
  resources CPU MEM CSV  resources.csv (timestamp,component,name,pid,
                         cpu_seconds,rss_bytes) from Prometheus range queries
                         of cAdvisor's container_cpu_usage_seconds_total and
                         container_memory_rss (one process per container:
                         pid is always 1, restarts are not told apart)
  merged DIR MD          metrics/merged-percentiles.json and a Markdown section
                         from metrics/prometheus-*.json: percentiles across all
                         pods from merged histograms (k6 native histograms,
                         ingestor and consumer histograms), never averaged
Must not: talk to the cluster (run.sh does), or write meta.json
(scripts/runctl.py meta does, for local and Kubernetes runs alike).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

BEGIN, END = "CHRONIK-K6-FILE-BEGIN ", "CHRONIK-K6-FILE-END "
COMPONENTS = [(re.compile(r"^chronik-\d+$"), "broker"), (re.compile(r"^chronik-ingestor-"), "ingestor"),
              (re.compile(r"^chronik-consumer-"), "consumer"), (re.compile(r"^chronik-load-\d+-"), "k6")]


def k6_files(log: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    current, lines, written = None, [], 0
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(BEGIN):
            current, lines = line[len(BEGIN):].strip(), []
        elif line.startswith(END) and current is not None:
            (out / Path(current).name).write_text("\n".join(lines) + "\n")
            written, current = written + 1, None
        elif current is not None:
            lines.append(line)
    print(f"{log.name}: {written} file(s) -> {out}", file=sys.stderr)
    return 0 if written else 1


def component_of(pod: str) -> str | None:
    return next((c for rx, c in COMPONENTS if rx.search(pod)), None)


def resources(cpu: Path, mem: Path, out: Path) -> int:
    rows: dict[tuple, dict] = {}
    for path, field in ((cpu, "cpu_seconds"), (mem, "rss_bytes")):
        data = json.loads(path.read_text())
        for series in data.get("data", {}).get("result", []):
            m = series["metric"]
            pod, component = m.get("pod", ""), component_of(m.get("pod", ""))
            if component is None or not m.get("container") or m.get("container") == "POD":
                continue
            name = pod if m["container"] in ("chronik", "ingestor", "consumer", "k6") else f"{pod}/{m['container']}"
            for ts, value in series["values"]:
                key = (float(ts), component, name)
                rows.setdefault(key, {"pid": 1, "cpu_seconds": "", "rss_bytes": ""})[field] = value
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "component", "name", "pid", "cpu_seconds", "rss_bytes"])
        for (ts, component, name), r in sorted(rows.items()):
            if r["cpu_seconds"] == "" or r["rss_bytes"] == "":
                continue
            w.writerow([f"{ts:.3f}", component, name, r["pid"], f"{float(r['cpu_seconds']):.3f}",
                        int(float(r["rss_bytes"]))])
    print(f"resources.csv: {len(rows)} samples", file=sys.stderr)
    return 0


def _scalar(path: Path):
    try:
        result = json.loads(path.read_text())["data"]["result"]
        return float(result[0]["value"][1]) if result else None
    except (OSError, ValueError, KeyError, IndexError):
        return None


def merged(metrics: Path, md_out: Path) -> int:
    """prometheus-<what>-p<quantile>.json / prometheus-<what>-total.json -> one table."""
    figures: dict[str, dict[str, float | None]] = {}
    for f in sorted(metrics.glob("prometheus-*.json")):
        m = re.fullmatch(r"prometheus-(.+)-(p[0-9.]+|total|rate)\.json", f.name)
        if m:
            key = m.group(2)   # p0.99 (a quantile) -> p99 (a percentile)
            key = f"p{float(key[1:]) * 100:g}" if key.startswith("p") else key
            figures.setdefault(m.group(1), {})[key] = _scalar(f)
    (metrics / "merged-percentiles.json").write_text(json.dumps(figures, indent=2) + "\n")
    lines = ["", "## Kubernetes: across all pods (Prometheus, merged histograms)", "",
             "Percentiles of histograms summed over every pod for the whole run (k6 runners by remote "
             "write as native histograms; ingestors, consumers and brokers from their own histograms); "
             "never averages of per-pod percentiles. Values in ms unless noted.", "",
             "| figure | p50 | p90 | p95 | p99 | p99.9 | total |", "|---|---|---|---|---|---|---|"]
    for what, v in figures.items():
        def fmt(k):
            x = v.get(k)
            if x is None:
                return "-"
            return f"{x:,.0f}" if k == "total" else f"{x * 1000:,.1f}"
        lines.append(f"| {what} | {fmt('p50')} | {fmt('p90')} | {fmt('p95')} | {fmt('p99')} | {fmt('p99.9')} | {fmt('total')} |")
    md_out.write_text("\n".join(lines) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "k6-files":
        return k6_files(Path(argv[1]), Path(argv[2]))
    if len(argv) == 4 and argv[0] == "resources":
        return resources(Path(argv[1]), Path(argv[2]), Path(argv[3]))
    if len(argv) == 3 and argv[0] == "merged":
        return merged(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
