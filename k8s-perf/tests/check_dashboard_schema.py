"""k8s-perf/tests/check_dashboard_schema.py - every dashboard JSON is a
Grafana dashboard as Grafana's own schema describes it.

Owns: reading each dashboard through grafana-foundation-sdk (Grafana's
generated dashboard, panel and Prometheus query types, the "cog" models
Grafana publishes from its schema) and writing it back. A field Grafana's
schema does not have (a misspelling, a legacy key) is dropped by that round
trip and a value of the wrong type fails it; so every leaf of the original
must come back unchanged. Prints ok/FAIL per dashboard and panel count;
exit 1 if anything failed. Must not: query Prometheus (check_dashboards.py
does the live checks) or change the dashboards.

  check_dashboard_schema.py DASHBOARD.json...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

MISSING = object()


def leaves(x, path=()):
    """(path, value) of every scalar in a JSON document."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, (*path, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, (*path, i))
    else:
        yield path, x


def at(x, path):
    for p in path:
        if isinstance(p, int) and isinstance(x, list) and p < len(x):
            x = x[p]
        elif isinstance(p, str) and isinstance(x, dict) and p in x:
            x = x[p]
        else:
            return MISSING
    return x


def encode(o):
    return o.to_json() if hasattr(o, "to_json") else str(o)


def round_trip(doc: dict) -> dict:
    return json.loads(json.dumps(Dashboard.from_json(doc).to_json(), default=encode))


def main(paths: list[str]) -> int:
    plugins.register_default_plugins()
    failed = 0
    for p in map(Path, paths):
        doc = json.loads(p.read_text())
        try:
            back = round_trip(doc)
        except Exception as e:  # noqa: BLE001 - the SDK raises plain errors on wrong types
            print(f"FAIL {p.name}: grafana-foundation-sdk cannot read it: {e}")
            failed += 1
            continue
        lost = [(path, v) for path, v in leaves(doc) if at(back, path) != v]
        panels = len(doc.get("panels", []))
        if lost:
            failed += 1
            shown = "; ".join(f"{'.'.join(map(str, path))}={v!r}" for path, v in lost[:5])
            print(f"FAIL {p.name}: {len(lost)} field(s) not in Grafana's dashboard schema: {shown}")
        else:
            print(f"ok   {p.name}: {panels} panels, every field in Grafana's dashboard schema (grafana-foundation-sdk)")
    print(f"dashboards: {len(paths) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
