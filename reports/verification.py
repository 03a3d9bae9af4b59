"""What the verifying consumers and the ingestors' ledgers say about delivery:
the verdict line of each run, and per-ingestor acknowledged/failed counts.

Owns: choosing the report that decides (``merged.json``, else a lone
replica), the wording of the verdict (``Verified: ...``, ``LOSS DETECTED
...``, ``INTEGRITY FAILURE ...``, ``INCONCLUSIVE ...``, ``not available``).
Must not: recompute the consumer's set arithmetic; it reports the consumer's
counts as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .load import ConsumerReport, Run
from .tidy import empty, ledger_ranges, load_window, over_runs, prom_samples

VERIFICATION_COLUMNS = [
    "run_id", "status", "verdict", "source", "conclusive", "consumed", "verified", "lost", "duplicates",
    "reordered", "corrupt", "gaps", "unexplained_gaps", "redeliveries", "foreign", "acknowledged", "failed",
]
REBALANCE_COLUMNS = ["run_id", "consumer", "at_s", "window", "kind", "partitions"]
INGESTOR_COLUMNS = [
    "run_id", "ingestor", "acknowledged", "failed", "issued", "in_flight", "accepted", "delivered",
    "failed_metric", "rejected",
]


@dataclass(frozen=True)
class Verdict:
    status: str  # verified | loss | integrity | inconclusive | not available
    line: str
    source: str  # the report that decided, e.g. "merged.json"


def _n(counts: dict, key: str) -> int:
    value = counts.get(key)
    return int(value) if isinstance(value, (int, float)) else 0


def verdict_of(report: ConsumerReport) -> Verdict:
    """The verdict line of one consumer report (normally ``merged.json``)."""
    counts = report.data.get("counts") or {}
    verdict = report.data.get("verdict") or {}
    failures = set(verdict.get("failures") or [])
    conclusive = bool(verdict.get("conclusive", (report.data.get("coverage") or {}).get("complete", False)))
    lost, dup, reord, corrupt = (_n(counts, k) for k in ("lost", "duplicates", "reordered", "corrupt"))
    gaps = _n(counts, "unexplainedGaps") or _n(counts, "gaps")
    verified = _n(counts, "verified")
    tally = f"{dup:,} duplicated, {reord:,} reordered, {corrupt:,} corrupt across {verified:,} messages"
    source = report.path.name
    if lost or "lost" in failures:
        extra = f"; {gaps:,} sequences missing in total" if gaps > lost else ""
        return Verdict("loss", f"LOSS DETECTED: {lost:,} lost (acknowledged, never consumed), {tally}{extra}", source)
    if conclusive and (gaps and "gaps" in failures):
        return Verdict("loss", f"LOSS DETECTED: {gaps:,} sequences missing (no ledger marks them failed), {tally}", source)
    share = report.data.get("share")
    if share:
        # a share group promises no order: reordering is the consumer's note, not a failure
        reord = 0
        tally = f"{dup:,} duplicated, {corrupt:,} corrupt across {verified:,} messages"
        twice, never = _n(share, "acceptedTwice"), _n(share, "notAccepted")
        if twice or "acceptedTwice" in failures or (conclusive and (never or "notAccepted" in failures)):
            return Verdict("integrity", f"INTEGRITY FAILURE (share group): {twice:,} accepted twice, "
                           f"{never:,} never accepted, {tally}", source)
    if dup or reord or corrupt or failures & {"duplicates", "reordered", "corrupt"}:
        return Verdict("integrity", f"INTEGRITY FAILURE: {lost:,} lost, {tally}", source)
    if not conclusive:
        unconsumed = _n(report.data.get("coverage") or {}, "unconsumedOffsets")
        why = f"{unconsumed:,} offsets not consumed" if unconsumed else "the reports do not cover every offset"
        return Verdict("inconclusive", f"INCONCLUSIVE: loss not decided ({why}); {tally}", source)
    if share:
        return Verdict("verified", f"Verified (share group, at least once): 0 lost, 0 duplicated, 0 corrupt across "
                       f"{verified:,} messages, {_n(share, 'recordsAccepted'):,} accepted once, "
                       f"{_n(share, 'redeliveries'):,} redeliveries (max delivery count "
                       f"{_n(share, 'maxDeliveryCount')})", source)
    return Verdict("verified", f"Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt across {verified:,} messages", source)


def verdict(run: Run) -> Verdict:
    """The run's verdict: from ``merged.json``, else from a lone replica's report."""
    merged = next((c for c in run.consumers if c.kind == "merged"), None)
    replicas = [c for c in run.consumers if c.kind == "replica"]
    if merged is not None:
        return verdict_of(merged)
    if len(replicas) == 1:
        return verdict_of(replicas[0])
    if not replicas:
        return Verdict("not available", "Verification not available: no consumer report", "")
    # several replicas and no merge: only the local facts (duplicates,
    # reordering, corruption) can fail the run; loss cannot be decided
    failed = next((v for v in map(verdict_of, replicas) if v.status == "integrity"), None)
    if failed is not None:
        return failed
    return Verdict(
        "inconclusive",
        f"INCONCLUSIVE: {len(replicas)} replica reports and no merged.json; loss not decided",
        ", ".join(r.path.name for r in replicas),
    )


def _ledger_totals(run: Run) -> tuple[float, float]:
    ranges = ledger_ranges(run)
    if ranges.empty:
        return np.nan, np.nan
    by_outcome = ranges.groupby("outcome")["count"].sum()
    return float(by_outcome.get("acknowledged", 0)), float(by_outcome.get("failed", 0))


def verification(runs: list[Run]) -> pd.DataFrame:
    """One row per run: the verdict line and the deciding report's counts, beside the ledgers' totals."""
    rows = []
    for run in runs:
        v = verdict(run)
        deciding = next((c for c in run.consumers if c.path.name == v.source), None)
        counts = (deciding.data.get("counts") or {}) if deciding else {}
        conclusive = (deciding.data.get("verdict") or {}).get("conclusive") if deciding else None
        acknowledged, failed = _ledger_totals(run)
        rows.append({
            "run_id": run.run_id, "status": v.status, "verdict": v.line, "source": v.source or "not available",
            "conclusive": conclusive,
            **{col: counts.get(key, np.nan) for col, key in (
                ("consumed", "consumed"), ("verified", "verified"), ("lost", "lost"), ("duplicates", "duplicates"),
                ("reordered", "reordered"), ("corrupt", "corrupt"), ("gaps", "gaps"),
                ("unexplained_gaps", "unexplainedGaps"), ("redeliveries", "redeliveries"), ("foreign", "foreign"))},
            "acknowledged": acknowledged, "failed": failed,
        })
    return pd.DataFrame(rows, columns=VERIFICATION_COLUMNS) if rows else empty(VERIFICATION_COLUMNS)


def _window_of(at_s: float, w: dict[str, float | None]) -> str:
    load_from = w["load_from"] if w["load_from"] is not None else w["measured_from"]
    if load_from is None:
        return "unknown"
    if at_s < load_from:
        return "before the load"
    if w["measured_from"] is not None and at_s < w["measured_from"]:
        return "warm-up"
    if w["measured_until"] is None or at_s <= w["measured_until"]:
        return "measured"
    return "after the load"


def rebalances(runs: list[Run]) -> pd.DataFrame:
    """Every rebalance callback of every consumer replica, with its time in
    seconds from the start of the measured window (from the load's start
    without one) and the window it fell in: ``before the load`` (the group
    forming), ``warm-up``, ``measured`` (a consumer-group event a reader must
    not mistake for a broker stall) or ``after the load`` (consumers
    stopping)."""
    rows = []
    for run in runs:
        w = load_window(run)
        origin = w["measured_from"] if w["measured_from"] is not None else w["load_from"]
        for c in run.consumers:
            if c.kind != "replica":
                continue
            for e in (c.data.get("run") or {}).get("rebalanceEvents") or []:
                at_us = e.get("atUs")
                if not isinstance(at_us, (int, float)):
                    continue
                at_s = at_us / 1e6
                rows.append({
                    "run_id": run.run_id, "consumer": c.name,
                    "at_s": at_s - origin if origin is not None else np.nan,
                    "window": _window_of(at_s, w), "kind": e.get("kind"), "partitions": e.get("partitions"),
                })
    frame = pd.DataFrame(rows, columns=REBALANCE_COLUMNS) if rows else empty(REBALANCE_COLUMNS)
    return frame.sort_values(["run_id", "at_s"], kind="stable").reset_index(drop=True) if rows else frame


def ingestors(runs: list[Run]) -> pd.DataFrame:
    """Per ingestor: its ledger's acknowledged / failed / issued sequences and its final metrics."""
    ranges = over_runs(runs, ledger_ranges)
    prom = over_runs(runs, prom_samples)
    ledger = (
        ranges.pivot_table(index=["run_id", "ingestor"], columns="outcome", values="count", aggfunc="sum")
        .reindex(columns=["acknowledged", "failed", "issued"])
        # a ledger without failed ranges failed nothing
        .fillna({"acknowledged": 0, "failed": 0})
        .reset_index()
        if not ranges.empty
        else empty(["run_id", "ingestor", "acknowledged", "failed", "issued"])
    )
    metric_names = {
        "ingestor_messages_accepted_total": "accepted",
        "ingestor_messages_delivered_total": "delivered",
        "ingestor_messages_failed_total": "failed_metric",
        "ingestor_messages_rejected_total": "rejected",
    }
    metrics = (
        prom[(prom["scope"] == "ingestor") & prom["metric"].isin(list(metric_names))]
        .assign(column=lambda d: d["metric"].map(metric_names))
        .pivot_table(index=["run_id", "source"], columns="column", values="value", aggfunc="sum")
        .reindex(columns=list(metric_names.values()))
        .reset_index()
        .rename(columns={"source": "ingestor"})
        if not prom.empty
        else empty(["run_id", "ingestor", *metric_names.values()])
    )
    if ledger.empty and metrics.empty:
        return empty(INGESTOR_COLUMNS)
    return (
        ledger.merge(metrics, on=["run_id", "ingestor"], how="outer")
        .assign(in_flight=lambda d: d["issued"] - d["acknowledged"].fillna(0) - d["failed"].fillna(0))
        .reindex(columns=INGESTOR_COLUMNS)
        .sort_values(["run_id", "ingestor"])
        .reset_index(drop=True)
    )
