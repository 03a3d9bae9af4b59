"""Per-tenant figures of runs whose plan has tenants (``run-all.sh --test
noisy-neighbour``): each tenant's results are a results directory of their
own, ``results/<run-id>/tenants/<tenant>/{load,consumers,ingestors}``, under
the run's ``meta.json`` (``settings.tenants``: the names in the plan's
order; ``settings.quota`` and ``settings.quota_entity``: a Kafka client
quota set with kafka-configs before the load).

Owns: reading each tenant as a run of its own (the parent's meta: the same
windows and settings) and computing per tenant what the other modules
compute per run (msg/s, MB/s and batch p99 by ``summarise``, end-to-end p99
from the consumer's ``.hlog``, the verdict by ``verification``); the
throttle time the tenant's ingestor saw (its ``/metrics``:
``ingestor_produce_throttle_time_ms_total`` and
``ingestor_produce_throttled_responses_total``); the flood window
(the sending span of the tenant that offered the most requests in one
second, when it started after another tenant); the batch latency before,
during and after it; and the per-second timeline the chart draws.
Must not: read files except through ``load``, or format text (``render``)
or draw (``charts``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from . import latency, summarise, verification
from .load import Run, load_run
from .tidy import empty, load_requests

TENANTS_DIR = "tenants"
THROTTLE_TIME = "ingestor_produce_throttle_time_ms_total"
THROTTLED_RESPONSES = "ingestor_produce_throttled_responses_total"
PHASES = ("before flood", "flood", "after flood")

TENANT_COLUMNS = [
    "run_id", "broker", "quota", "tenant", "messages", "duration_s", "msg_per_s", "mb_per_s", "failed",
    "batch_p50_ms", "batch_p99_ms", "e2e_p99_ms", "throttle_ms", "throttle_ms_per_s", "throttled_responses",
    "acknowledged", "verified", "lost", "status", "verdict",
]
PHASE_COLUMNS = ["run_id", "broker", "quota", "tenant", "phase", "from_s", "to_s", "requests", "msg_per_s",
                 "batch_p50_ms", "batch_p99_ms"]
TIMELINE_COLUMNS = ["run_id", "tenant", "second", "msg_per_s", "batch_p99_ms"]
FLOOD_COLUMNS = ["run_id", "tenant", "from_s", "to_s"]


def names(run: Run) -> list[str]:
    """The run's tenants: ``settings.tenants`` in order, then any other
    ``tenants/<name>/`` directory; only those with a directory."""
    root = run.path / TENANTS_DIR
    if not root.is_dir():
        return []
    listed = str((run.meta.get("settings") or {}).get("tenants") or "").split()
    on_disk = sorted(p.name for p in root.iterdir() if p.is_dir())
    return [n for n in listed if n in on_disk] + [n for n in on_disk if n not in listed]


def tenant_runs(run: Run) -> list[tuple[str, Run]]:
    """Each tenant's directory read as a run, under the parent's run id and meta."""
    return [(n, replace(load_run(run.path / TENANTS_DIR / n), run_id=run.run_id, meta=run.meta))
            for n in names(run)]


def _labels(run: Run) -> dict:
    s = run.meta.get("settings") or {}
    return {"run_id": run.run_id, "broker": (run.meta.get("broker") or {}).get("kind"),
            "quota": s.get("quota") or "none"}


def _prom_total(run: Run, metric: str) -> float:
    p = run.prom
    rows = p[(p["scope"] == "ingestor") & (p["metric"] == metric)] if not p.empty else p
    return float(rows["value"].sum()) if len(rows) else np.nan


def _requests(tenants: list[tuple[str, Run]]) -> pd.DataFrame:
    """Every tenant's typed request rows, with a ``tenant`` column."""
    frames = [load_requests(t).assign(tenant=name) for name, t in tenants]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else empty(["tenant", "time", "sent"])


def flood_window(tenants: list[tuple[str, Run]]) -> tuple[str, pd.Timestamp, pd.Timestamp] | None:
    """(tenant, first, last request sent) of the flood: the tenant with the
    highest one-second request count, when it began after some other
    tenant's first request (otherwise there is no "before" to compare)."""
    r = _requests(tenants)
    sent = r[r["sent"]] if len(r) else r
    if sent.empty or sent["tenant"].nunique() < 2:
        return None
    peak = sent.groupby(["tenant", sent["time"].dt.floor("s")]).size().groupby(level=0).max()
    flood = str(peak.idxmax())
    mine = sent[sent["tenant"] == flood]["time"]
    others = sent[sent["tenant"] != flood]["time"]
    if mine.min() <= others.min():
        return None
    return flood, mine.min(), mine.max()


def _phase_of(times: pd.Series, window) -> pd.Series:
    _, start, end = window
    return pd.Series(np.where(times < start, PHASES[0], np.where(times <= end, PHASES[1], PHASES[2])),
                     index=times.index)


def tenant_table(runs: list[Run]) -> pd.DataFrame:
    """One row per (run, tenant): achieved msg/s and MB/s (the tenant's load
    generator: acknowledged messages over its run), batch p50/p99 (its raw
    rows), end-to-end p99 (its consumer's ``.hlog``), the throttle time its
    ingestor saw (total ms, ms per second of its load, answers throttled),
    the ledger's acknowledged count and the verdict's lost count."""
    rows = []
    for run in runs:
        for name, t in tenant_runs(run):
            s = summarise.test_summary([t])
            s = s.iloc[0] if len(s) else pd.Series(dtype=object)
            e2e = summarise.end_to_end(t).row
            v = verification.verification([t]).iloc[0]
            throttle = _prom_total(t, THROTTLE_TIME)
            duration = s.get("duration_s", np.nan)
            rows.append({
                **_labels(run), "tenant": name, "messages": s.get("messages", np.nan), "duration_s": duration,
                "msg_per_s": s.get("msg_per_s", np.nan), "mb_per_s": s.get("mb_per_s", np.nan),
                "failed": s.get("messages_failed", np.nan),
                "batch_p50_ms": s.get("batch_p50_ms", np.nan), "batch_p99_ms": s.get("batch_p99_ms", np.nan),
                "e2e_p99_ms": e2e.get("e2e_p99_ms"), "throttle_ms": throttle,
                "throttle_ms_per_s": throttle / duration if duration and duration > 0 else np.nan,
                "throttled_responses": _prom_total(t, THROTTLED_RESPONSES),
                "acknowledged": v["acknowledged"], "verified": v["verified"], "lost": v["lost"],
                "status": v["status"], "verdict": v["verdict"],
            })
    return pd.DataFrame(rows, columns=TENANT_COLUMNS) if rows else empty(TENANT_COLUMNS)


def phase_table(runs: list[Run]) -> pd.DataFrame:
    """One row per (run, tenant, phase) with requests in it: before the
    flood, during it, after it (by the time each request was sent; seconds
    from the run's first request), msg/s acknowledged and batch p50/p99 of
    the requests sent in the phase (raw samples)."""
    rows = []
    for run in runs:
        tenants = tenant_runs(run)
        window = flood_window(tenants)
        r = _requests(tenants)
        if window is None or r.empty:
            continue
        sent = r[r["sent"]]
        origin = sent["time"].min()
        phase = _phase_of(sent["time"], window)
        bounds = {PHASES[0]: (origin, window[1]), PHASES[1]: (window[1], window[2]),
                  PHASES[2]: (window[2], sent["time"].max())}
        for (name, ph), g in sent.assign(phase=phase).groupby(["tenant", "phase"], sort=False):
            lo, hi = bounds[ph]
            span = (hi - lo).total_seconds()
            p = latency.sample_percentiles(g["latency_ms"].dropna())
            rows.append({
                **_labels(run), "tenant": name, "phase": ph, "from_s": (lo - origin).total_seconds(),
                "to_s": (hi - origin).total_seconds(), "requests": len(g),
                "msg_per_s": g["ok"].sum() / span if span > 0 else np.nan,
                "batch_p50_ms": p["p50"], "batch_p99_ms": p["p99"],
            })
    if not rows:
        return empty(PHASE_COLUMNS)
    order = {p: i for i, p in enumerate(PHASES)}
    return (pd.DataFrame(rows, columns=PHASE_COLUMNS)
            .assign(_o=lambda d: d["phase"].map(order))
            .sort_values(["run_id", "tenant", "_o"], kind="stable").drop(columns="_o").reset_index(drop=True))


def timeline(runs: list[Run]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (run, tenant, second since the run's first request): msg/s
    acknowledged and the batch p99 of the requests sent in that second; and
    per run the flood window on the same clock."""
    points, floods = [], []
    for run in runs:
        tenants = tenant_runs(run)
        r = _requests(tenants)
        sent = r[r["sent"]] if len(r) else r
        if sent.empty:
            continue
        origin = sent["time"].min()
        second = ((sent["time"] - origin).dt.total_seconds() // 1).astype(int)
        per = (sent.assign(second=second).groupby(["tenant", "second"], as_index=False)
               .agg(msg_per_s=("ok", "sum"), batch_p99_ms=("latency_ms", lambda x: np.percentile(x.dropna(), 99)
                                                             if x.notna().any() else np.nan)))
        points.append(per.assign(run_id=run.run_id))
        window = flood_window(tenants)
        if window is not None:
            floods.append({"run_id": run.run_id, "tenant": window[0],
                           "from_s": (window[1] - origin).total_seconds(), "to_s": (window[2] - origin).total_seconds()})
    line = pd.concat(points, ignore_index=True)[TIMELINE_COLUMNS] if points else empty(TIMELINE_COLUMNS)
    flood = pd.DataFrame(floods, columns=FLOOD_COLUMNS) if floods else empty(FLOOD_COLUMNS)
    return line, flood


# worst first: the run's verdict is its worst tenant's
_STATUS_ORDER = ("loss", "integrity", "inconclusive", "not available", "verified")


def with_tenant_verdicts(verified: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The per-run verification table with each tenant run's row (it has no
    consumer of its own) replaced by its tenants': the worst status, every
    tenant's verdict line, the counts added up."""
    if table.empty:
        return verified
    rows = []
    for run_id, g in table.groupby("run_id", sort=False):
        status = min(g["status"], key=lambda s: _STATUS_ORDER.index(s) if s in _STATUS_ORDER else 0)
        rows.append({"run_id": run_id, "status": status,
                     "verdict": "; ".join(f"{r.tenant}: {r.verdict}" for r in g.itertuples()),
                     "source": "tenants/*/consumers/merged.json",
                     "lost": g["lost"].sum(min_count=1), "acknowledged": g["acknowledged"].sum(min_count=1),
                     "verified": g["verified"].sum(min_count=1)})
    replaced = pd.DataFrame(rows)
    kept = verified[~verified["run_id"].isin(replaced["run_id"])]
    return pd.concat([kept, replaced.reindex(columns=verified.columns)], ignore_index=True)
