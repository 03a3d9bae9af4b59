#!/usr/bin/env python3
"""render_panel.py - one dashboard panel drawn as a PNG from a live Prometheus.

No Grafana server can be obtained on this project's machines, so this draws
what a Grafana time-series panel would show, from the panel's own
definition: each target's PromQL (Grafana's variables substituted) is run
as a range query against Prometheus, each series is labelled by the target's
``legendFormat``, and the axis uses the panel's unit (s, ops, bytes, short).
The image says that it was drawn this way, from which Prometheus and when.

  render_panel.py --prometheus http://127.0.0.1:9090 --dashboard chronik-broker.json \\
      --panel "Produce latency (all brokers merged)" --start EPOCH --end EPOCH --out panel.png

Needs: matplotlib (the project's .venv with scripts/install-report-deps.sh).
Must not: change the dashboards.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend

UNIT_SCALE = {"s": (1.0, "seconds"), "ms": (1.0, "milliseconds"), "ops": (1.0, "per second"),
              "bytes": (1.0, "bytes"), "Bps": (1.0, "bytes/s"), "short": (1.0, "")}


def substitute(expr: str, rate_interval: str, step_s: int) -> str:
    values = {"$__rate_interval": rate_interval, "$__interval": f"{step_s}s", "$namespace": ".*", "$testid": ".*"}
    for name, value in values.items():
        expr = expr.replace(name, value)
    return expr


def query_range(prom: str, expr: str, start: float, end: float, step_s: int) -> list[dict]:
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step_s})
    with urllib.request.urlopen(f"{prom.rstrip('/')}/api/v1/query_range?{q}", timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def legend(fmt: str, labels: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), fmt or "") or json.dumps(labels)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--dashboard", required=True, type=Path)
    ap.add_argument("--panel", required=True, help="the panel's title")
    ap.add_argument("--start", type=float, required=True, help="seconds since the epoch")
    ap.add_argument("--end", type=float, required=True)
    ap.add_argument("--step", type=int, default=2, help="seconds between points (default 2)")
    ap.add_argument("--rate-interval", default="10s", help="what $__rate_interval stands for (default 10s)")
    ap.add_argument("--source", default="", help="where the data came from, printed under the chart")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    dash = json.loads(a.dashboard.read_text())
    panel = next((p for p in dash["panels"] if p.get("title") == a.panel), None)
    if panel is None:
        sys.exit(f"no panel titled {a.panel!r} in {a.dashboard.name}")
    unit = ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("unit", "short")
    scale, axis = UNIT_SCALE.get(unit, (1.0, unit))
    fig, ax = plt.subplots(figsize=(9, 4), dpi=110)
    series = 0
    for target in panel.get("targets", []):
        expr = substitute(target["expr"], a.rate_interval, a.step)
        for s in query_range(a.prometheus, expr, a.start, a.end, a.step):
            xs = [float(t) - a.start for t, _ in s["values"]]
            ys = [float(v) * scale for _, v in s["values"]]
            ax.plot(xs, ys, label=legend(target.get("legendFormat", ""), s["metric"]), linewidth=1.4)
            series += 1
    if series == 0:
        sys.exit(f"panel {a.panel!r}: no data in Prometheus for {a.start:.0f}..{a.end:.0f}")
    ax.set_title(f"{dash['title']} — {a.panel}")
    ax.set_xlabel("seconds into the run")
    ax.set_ylabel(axis)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    note = (f"Drawn by render_panel.py from the panel's own queries, not by Grafana; data: "
            f"{a.source or a.prometheus}, {time.strftime('%Y-%m-%d', time.gmtime(a.end))}")
    fig.text(0.01, 0.01, note, fontsize=7, color="grey", wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out)
    print(f"{a.out}: {series} series from {len(panel.get('targets', []))} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
