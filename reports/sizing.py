"""Which tier of a run costs the most CPU per message, and what a target rate
would take: the cores each tier needs and its pods at the run's overlay's pod
size. A linear projection from the run's own measured CPU per message.

Owns: the tiers (the load generator chronik-loadgen, the ingestors, the
brokers, the verifying consumers: their components' CPU µs per message
summed over the tier's processes), the costliest tier and the ingestor to
consumer ratio, the pod CPU of each tier in ``k8s-perf/overlays/<overlay>``
(the container's CPU limit, else its request, following the overlay's
``resources``, ``components`` and ``patches`` in kustomize's order), and the
sizing table (cores = µs/msg × rate ÷ 10⁶, pods = cores ÷ pod CPU rounded up).
Must not: measure CPU (``resources``) or format anything (``render``).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path

import pandas as pd

from .tidy import empty

# the seed documents' target: 800,000 msg/s
DEFAULT_TARGET_RATE = 800_000
OVERLAYS = Path(__file__).resolve().parent.parent / "k8s-perf" / "overlays"
# tier -> the resources.csv components it sums (a legacy run's load generator is `k6`)
TIERS = {"loadgen": ["loadgen", "k6"], "ingestor": ["ingestor"], "broker": ["broker"], "consumer": ["consumer"]}
# (kind, metadata.name) of each tier's workload in k8s-perf/base -> (tier, its main container)
WORKLOADS = {
    ("Job", "chronik-load"): ("loadgen", "loadgen"),
    ("Deployment", "chronik-ingestor"): ("ingestor", "ingestor"),
    ("StatefulSet", "chronik"): ("broker", "chronik"),
    ("Deployment", "chronik-consumer"): ("consumer", "consumer"),
}
TIER_COLUMNS = ["run_id", "tier", "processes", "cpu_us_per_msg"]
COST_COLUMNS = ["run_id", "top_tier", "top_us_per_msg", "ingestor_us_per_msg", "consumer_us_per_msg",
                "ingestor_to_consumer"]
SIZING_COLUMNS = ["run_id", "tier", "cpu_us_per_msg", "target_msg_per_s", "cores", "overlay", "pod_cpu",
                  "pod_cpu_from", "pods"]
_OVERLAY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def tiers(components: pd.DataFrame) -> pd.DataFrame:
    """Per run and tier (all four, in the order a message passes them): the
    processes sampled and the CPU µs per message of its components summed
    (NaN when none of its processes was sampled)."""
    if components.empty:
        return empty(TIER_COLUMNS)
    rows = []
    for run_id, g in components.groupby("run_id", sort=False):
        by = g.set_index("component")
        for tier, names in TIERS.items():
            mine = by.reindex([n for n in names if n in by.index])
            rows.append({"run_id": run_id, "tier": tier, "processes": int(mine["processes"].sum()),
                         "cpu_us_per_msg": mine["cpu_us_per_msg"].sum(min_count=1)})
    return pd.DataFrame(rows, columns=TIER_COLUMNS)


def tier_costs(tiers: pd.DataFrame) -> pd.DataFrame:
    """Per run: the tier with the most CPU per message and its µs, and the
    ingestors' µs ÷ the consumers' (NaN when either was not sampled)."""
    rows = []
    for run_id, g in tiers.groupby("run_id", sort=False):
        us = g.set_index("tier")["cpu_us_per_msg"].astype(float).dropna()
        if us.empty:
            continue
        ingestor, consumer = us.get("ingestor", math.nan), us.get("consumer", math.nan)
        rows.append({
            "run_id": run_id, "top_tier": us.idxmax(), "top_us_per_msg": us.max(),
            "ingestor_us_per_msg": ingestor, "consumer_us_per_msg": consumer,
            "ingestor_to_consumer": ingestor / consumer if consumer > 0 else math.nan,
        })
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def sizing(tiers: pd.DataFrame, settings: pd.DataFrame, target_rate: float = DEFAULT_TARGET_RATE,
           overlays: Path | None = None) -> pd.DataFrame:
    """Per run and tier: the cores ``target_rate`` msg/s would take at the
    run's CPU per message, and the pods at the pod CPU of the run's overlay
    (``settings.overlay`` of meta.json) in ``overlays`` (default ``OVERLAYS``);
    NaN pods for a local run or an overlay that is not there."""
    if tiers.empty:
        return empty(SIZING_COLUMNS)
    overlay = settings.set_index("run_id")["overlay"] if "overlay" in settings else pd.Series(dtype=object)
    rows = []
    for t in tiers.itertuples():
        name = overlay.get(t.run_id)
        name = None if name is None or (isinstance(name, float) and math.isnan(name)) or name == "" else str(name)
        cpu, source = pod_cpu(name, overlays).get(t.tier, (math.nan, None)) if name else (math.nan, None)
        cores = t.cpu_us_per_msg * target_rate / 1e6
        rows.append({
            "run_id": t.run_id, "tier": t.tier, "cpu_us_per_msg": t.cpu_us_per_msg, "target_msg_per_s": target_rate,
            "cores": cores, "overlay": name, "pod_cpu": cpu, "pod_cpu_from": source,
            "pods": math.ceil(cores / cpu) if cpu > 0 and pd.notna(cores) else math.nan,
        })
    return pd.DataFrame(rows, columns=SIZING_COLUMNS)


def pod_cpu(overlay: str, overlays: Path | None = None) -> dict[str, tuple[float, str]]:
    """tier -> (cores, "limit" or "request") of its main container in
    ``overlays/<overlay>``; {} when the overlay is not there or unreadable."""
    if not _OVERLAY_NAME.fullmatch(overlay or ""):
        return {}
    return dict(_pod_cpu(str(Path(overlays or OVERLAYS) / overlay)))


@lru_cache(maxsize=64)
def _pod_cpu(directory: str) -> tuple[tuple[str, tuple[float, str]], ...]:
    try:
        import yaml  # PyYAML: papermill's dependency, pinned in requirements.txt
    except ImportError:
        return ()
    try:
        found = _kustomization(Path(directory), frozenset())
    except (yaml.YAMLError, OSError, ValueError, TypeError, AttributeError):
        return ()
    out = []
    for tier, resources in found.items():
        for kind, source in (("limits", "limit"), ("requests", "request")):
            cores = _cores(resources.get(kind))
            if cores is not None:
                out.append((tier, (cores, source)))
                break
    return tuple(out)


def _kustomization(directory: Path, seen: frozenset) -> dict[str, dict[str, object]]:
    """tier -> {"limits": cpu, "requests": cpu} as the kustomization in
    ``directory`` leaves them: its resources, then its components, then its
    own patches (a later value of a key replaces an earlier one, as a strategic
    merge does)."""
    import yaml

    directory = directory.resolve()
    file = next((directory / n for n in ("kustomization.yaml", "kustomization.yml") if (directory / n).is_file()), None)
    if file is None or directory in seen:
        return {}
    seen = seen | {directory}
    k = yaml.safe_load(file.read_text()) or {}
    found: dict[str, dict[str, object]] = {}
    for entry in [*(k.get("resources") or []), *(k.get("components") or [])]:
        path = directory / str(entry)
        if path.is_dir():
            _merge(found, _kustomization(path, seen))
        elif path.is_file():
            _merge(found, _documents(yaml.safe_load_all(path.read_text())))
    for patch in [*(k.get("patches") or []), *(k.get("patchesStrategicMerge") or [])]:
        if isinstance(patch, str):
            patch = {"path": patch} if (directory / patch).is_file() else {"patch": patch}
        text = patch.get("patch") if "patch" in patch else (directory / str(patch.get("path"))).read_text()
        _merge(found, _documents(yaml.safe_load_all(text or ""), patch.get("target") or {}))
    return found


def _documents(docs, target: dict | None = None) -> dict[str, dict[str, object]]:
    """The CPU requests/limits of each tier's main container in ``docs``
    (manifests or strategic-merge patches; JSON 6902 patches are lists: skipped)."""
    target = target or {}
    found: dict[str, dict[str, object]] = {}
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind") or target.get("kind")
        name = (doc.get("metadata") or {}).get("name") or target.get("name")
        tier, container = WORKLOADS.get((kind, name), (None, None))
        if tier is None:
            continue
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            if isinstance(c, dict) and c.get("name") == container:
                resources = c.get("resources") or {}
                for key in ("requests", "limits"):
                    value = (resources.get(key) or {}).get("cpu")
                    if value is not None:
                        found.setdefault(tier, {})[key] = value
    return found


def _merge(into: dict, found: dict) -> None:
    for tier, values in found.items():
        into.setdefault(tier, {}).update(values)


def _cores(quantity) -> float | None:
    """A Kubernetes CPU quantity as cores: "500m" -> 0.5, "16" -> 16.0."""
    if quantity is None:
        return None
    text = str(quantity).strip()
    try:
        cores = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return None
    return cores if cores > 0 else None
