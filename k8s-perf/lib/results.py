"""k8s-perf/lib/results.py - turns what k8s-perf/run.sh collected from a
cluster into the results layout local runs have (reports/README.md).

Owns (standard library only; run with any python3):
  job-pods JSON          the load Job's pods (`kubectl get pods -o json`, "-" =
                         stdin) as lines "NAME INDEX PHASE EXIT_CODE" (index
                         from the completion-index annotation, exit code "-"
                         while the container has not terminated)
  unpack TGZ DIR INDEX   check that TGZ (one generator's GET /results) holds
                         exactly gen-INDEX/ with a summary, then extract it
                         into DIR (load/gen-INDEX/); exit 1 without a change
                         otherwise
  resources CPU MEM CSV  resources.csv (timestamp,component,name,pid,
                         cpu_seconds,rss_bytes) from Prometheus range queries
                         of cAdvisor's container_cpu_usage_seconds_total and
                         container_memory_rss (one process per container:
                         pid is always 1, restarts are not told apart)
  merged DIR MD          metrics/merged-percentiles.json and a Markdown section
                         from metrics/prometheus-*.json: percentiles across all
                         pods from merged histograms (the generators',
                         ingestors', consumers' and brokers' histograms),
                         never averaged
Must not: talk to the cluster (run.sh does), or write meta.json
(scripts/runctl.py meta does, for local and Kubernetes runs alike).
"""

from __future__ import annotations

import csv
import json
import re
import sys
import tarfile
from pathlib import Path

COMPONENTS = [(re.compile(r"^chronik-\d+$"), "broker"), (re.compile(r"^chronik-ingestor-"), "ingestor"),
              (re.compile(r"^chronik-consumer-"), "consumer"), (re.compile(r"^chronik-load-\d+-"), "loadgen")]
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def job_pods(source: str) -> int:
    data = json.load(sys.stdin if source == "-" else open(source))
    for pod in data.get("items", []):
        meta, status = pod["metadata"], pod.get("status") or {}
        index = (meta.get("annotations") or {}).get(INDEX_ANNOTATION, "-")
        code = "-"
        for cs in status.get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated")
            if term is not None:
                code = str(term.get("exitCode", "-"))
        print(meta["name"], index, status.get("phase", "Unknown"), code)
    return 0


def unpack(tgz: Path, out: Path, index: str) -> int:
    """Extract one generator's results, only when complete and only gen-INDEX/."""
    prefix = f"gen-{index}/"
    try:
        with tarfile.open(tgz, "r:gz") as tar:
            members = tar.getmembers()
            names = [m.name for m in members]
            bad = [n for n in names if not n.startswith(prefix) or ".." in n or n.count("/") != 1]
            if bad or not any(re.fullmatch(rf"{re.escape(prefix)}summary-.+\.json", n) for n in names) \
               or not all(m.isfile() for m in members):
                print(f"{tgz.name}: not gen-{index}/ with a summary: {names[:5]}", file=sys.stderr)
                return 1
            out.mkdir(parents=True, exist_ok=True)
            for m in members:
                dest = out / m.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(m) as src:
                    dest.write_bytes(src.read())
    except (OSError, tarfile.TarError, EOFError) as e:
        print(f"{tgz.name}: {e}", file=sys.stderr)
        return 1
    print(f"gen-{index}: {len(names)} file(s) -> {out / prefix}", file=sys.stderr)
    return 0


def component_of(pod: str) -> str | None:
    return next((c for rx, c in COMPONENTS if rx.search(pod)), None)


def resources(cpu: Path, mem: Path, out: Path) -> int:
    rows: dict[tuple, dict] = {}
    # A container restarted, or a pod deleted and made again under its name (a
    # StatefulSet's), is a new cgroup (label id) whose CPU counter starts at 0:
    # each incarnation is its own "pid" (1, 2, ... in order of its first sample),
    # as a restarted local process is, so no counter reset is read as negative CPU.
    incarnations: dict[str, dict[str, int]] = {}
    loaded = []
    for path, field in ((cpu, "cpu_seconds"), (mem, "rss_bytes")):
        data = json.loads(path.read_text())
        for series in data.get("data", {}).get("result", []):
            m = series["metric"]
            pod, component = m.get("pod", ""), component_of(m.get("pod", ""))
            if component is None or not m.get("container") or m.get("container") == "POD" or not series["values"]:
                continue
            name = pod if m["container"] in ("chronik", "ingestor", "consumer", "loadgen") else f"{pod}/{m['container']}"
            loaded.append((field, component, name, m.get("id", ""), series["values"]))
    # cAdvisor goes on exporting a deleted container's cgroup for a while, its
    # counter frozen: an incarnation that used no CPU over the window is left out
    # (its RSS would otherwise count twice)
    frozen = {(name, cid) for field, _, name, cid, values in loaded
              if field == "cpu_seconds" and float(values[-1][1]) == float(values[0][1])}
    loaded = [x for x in loaded if (x[2], x[3]) not in frozen]
    for _, _, name, cid, values in sorted(loaded, key=lambda x: float(x[4][0][0])):
        seen = incarnations.setdefault(name, {})
        seen.setdefault(cid, len(seen) + 1)
    for field, component, name, cid, values in loaded:
        pid = incarnations[name][cid]
        for ts, value in values:
            key = (float(ts), component, name, pid)
            rows.setdefault(key, {"cpu_seconds": "", "rss_bytes": ""})[field] = value
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "component", "name", "pid", "cpu_seconds", "rss_bytes"])
        for (ts, component, name, pid), r in sorted(rows.items()):
            if r["cpu_seconds"] == "" or r["rss_bytes"] == "":
                continue
            w.writerow([f"{ts:.3f}", component, name, pid, f"{float(r['cpu_seconds']):.3f}",
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
             "Percentiles of histograms summed over every pod for the whole run (the load generators', "
             "ingestors', consumers' and brokers' own histograms); never averages of per-pod percentiles. "
             "The load's exact percentiles are the pooled raw rows' (`load/merged-<plan>.json`). "
             "Values in ms unless noted.", "",
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
    if len(argv) == 2 and argv[0] == "job-pods":
        return job_pods(argv[1])
    if len(argv) == 4 and argv[0] == "unpack":
        return unpack(Path(argv[1]), Path(argv[2]), argv[3])
    if len(argv) == 4 and argv[0] == "resources":
        return resources(Path(argv[1]), Path(argv[2]), Path(argv[3]))
    if len(argv) == 3 and argv[0] == "merged":
        return merged(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
