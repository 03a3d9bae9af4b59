"""k8s-perf/tests/check_dashboards.py - every Grafana panel query parses,
names only metrics the binaries (chronik-loadgen included) really export, and
returns data from a Prometheus that scraped them.

Owns: reading the dashboards' PromQL (panel targets and template variable
queries), substituting Grafana's variables, and three checks per query:
  parse   promtool check rules (each query as a recording rule)
  names   every metric name in it is in --names (what the live Prometheus
          holds after scrape.sh)
  live    GET /api/v1/query succeeds and returns at least one series
Must not: start anything (scrape.sh runs it while Prometheus is up).

  check_dashboards.py --prom URL --names names.txt DASHBOARD.json...
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

# Grafana's variables as the live check sees them: every namespace / run, and
# a window covering the whole scrape run.
SUBSTITUTE = {"$__rate_interval": "2m", "$__interval": "15s", "$namespace": ".*", "$run": ".*", "$plan": ".*"}
NOT_METRICS = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
               "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right",
               "bool", "and", "or", "unless", "offset", "inf", "nan", "le"}

passed = failed = 0


def check(ok: bool, what: str, detail: str = "") -> bool:
    global passed, failed
    passed, failed = passed + ok, failed + (not ok)
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
    return ok


def substitute(expr: str) -> str:
    for k, v in SUBSTITUTE.items():
        expr = expr.replace(k, v)
    return expr


def metric_names(expr: str) -> set[str]:
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)            # strings
    s = re.sub(r"\{[^}]*\}", " ", s)                          # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)                         # ranges
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s):
        rest = s[m.end():].lstrip()
        if rest.startswith("(") or m.group(0) in NOT_METRICS:
            continue
        names.add(m.group(0))
    return names


def queries(dashboard: dict):
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q)
            yield f"variable ${var['name']}", (m.group(1) if m else q), (m.group(2) if m else None)
    for p in dashboard["panels"]:
        for t in p.get("targets", []):
            yield f"panel '{p['title']}' {t['refId']}", t["expr"], None


def prom_query(base: str, expr: str) -> dict:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return json.load(e)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prom", required=True)
    ap.add_argument("--names", required=True, type=Path)
    ap.add_argument("dashboards", nargs="+", type=Path)
    a = ap.parse_args()
    names = set(a.names.read_text().split())
    all_q = []
    for path in a.dashboards:
        d = json.loads(path.read_text())
        check(bool(d.get("uid")) and bool(d.get("panels")), f"{path.name}: has a uid and panels")
        ids = [p["id"] for p in d["panels"]]
        check(len(ids) == len(set(ids)), f"{path.name}: panel ids unique")
        all_q += [(f"{path.name}: {w}", e, label) for w, e, label in queries(d)]

    # parse: all at once through promtool (one recording rule per query)
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"dashboard_query_{i}", "expr": substitute(e)} for i, (_, e, _) in enumerate(all_q)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        yaml.safe_dump(rules, f)
        f.flush()
        r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    check(r.returncode == 0, f"promtool parses all {len(all_q)} dashboard queries", (r.stdout + r.stderr).strip())

    for where, expr, label in all_q:
        e = substitute(expr)
        missing = sorted(n for n in metric_names(e) if n not in names)
        check(not missing, f"{where}: metrics exported", f"not exported by any binary: {missing}")
        res = prom_query(a.prom, e)
        ok = res.get("status") == "success" and len(res.get("data", {}).get("result", [])) > 0
        check(ok, f"{where}: live query returns data",
              f"{res.get('error') or 'no series'} for {e}")
        if label:
            series = res.get("data", {}).get("result", [])
            check(True, f"{where}: label_values over {len(series)} series")
    print(f"dashboards: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
