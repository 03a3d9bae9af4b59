"""k8s-perf/tests/checklib.py - what the manifest checks share.

Owns: the ok/FAIL lines and their counts (check, counts), reading built
manifests (docs_of, by_kind, env_of, broker_and_controllers: the StatefulSets
by their component label). Must not: check anything itself.
"""

from __future__ import annotations

from pathlib import Path

import yaml

passed = failed = 0


def check(ok: bool, what: str, detail: str = "") -> bool:
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}{': ' + detail if detail else ''}")
    return ok


def docs_of(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def env_of(wl) -> dict:
    return {e["name"]: e.get("value") for e in wl["spec"]["template"]["spec"]["containers"][0].get("env", [])}


def counts() -> tuple[int, int]:
    """(passed, failed) so far."""
    return passed, failed


def broker_and_controllers(docs):
    """(broker StatefulSets, controller StatefulSets), told apart by their pods'
    app.kubernetes.io/component label (components/controllers adds the latter)."""
    sts = by_kind(docs, "StatefulSet")
    role = {s["metadata"]["name"]: s["spec"]["template"]["metadata"].get("labels", {}).get("app.kubernetes.io/component")
            for s in sts}
    brokers = [s for s in sts if role[s["metadata"]["name"]] == "broker"]
    controllers = [s for s in sts if role[s["metadata"]["name"]] == "controller"]
    return brokers, controllers
