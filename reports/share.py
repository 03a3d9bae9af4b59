"""Share-group (queue) runs (``run-all.sh --test share-queue``, KIP-932): what
the merged consumer report's ``share`` section says, per run, and its
deliveries by delivery count.

Owns: ``share_table`` (one row per run with a ``share`` section: records/s,
records accepted, accepted twice, not accepted, outcome unknown, deliveries,
redeliveries, max delivery count, loss, end-to-end percentiles of every
record and of first deliveries, the killed consumer and when) and
``delivery_counts`` (per run and delivery count). Must not: recompute the
consumer's set arithmetic (the counts are the report's as written) or
render.
"""

from __future__ import annotations

import pandas as pd

from .load import Run
from .tidy import empty

SHARE_COLUMNS = [
    "run_id", "broker", "group", "members", "members_died", "killed_consumer", "killed_at_s",
    "msg_per_s", "records_accepted", "accepted_twice", "not_accepted", "accept_outcome_unknown",
    "ack_failed", "deliveries", "redeliveries", "max_delivery_count", "lost", "acknowledged",
    "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms", "e2e_max_ms", "e2e_source",
    "first_p50_ms", "first_p99_ms", "first_max_ms", "verdict", "explanation",
]
DELIVERY_COLUMNS = ["run_id", "delivery_count", "deliveries"]


def _merged(run: Run):
    merged = next((c for c in run.consumers if c.kind == "merged"), None)
    if merged is not None and merged.data.get("share"):
        return merged.data
    return None


def _ms(percentiles: dict | None, key: str):
    if not percentiles or percentiles.get("count", 0) == 0:
        return None
    value = percentiles.get(key)
    return None if value is None else value / 1000.0


def _killed_at_s(run: Run, settings: dict):
    killed, start = settings.get("killed_at"), settings.get("measured_from")
    try:
        return round(float(killed) - float(start), 1)
    except (TypeError, ValueError):
        return None


def _row(run: Run, msg_per_s) -> dict | None:
    data = _merged(run)
    if data is None:
        return None
    share, counts = data["share"], data.get("counts") or {}
    settings = run.meta.get("settings") or {}
    e2e = (data.get("latency") or {}).get("e2e")
    first = share.get("firstDeliveryLatency")
    verdict = data.get("verdict") or {}
    failures = verdict.get("failures") or []
    if failures:
        text = "FAILED: " + ", ".join(failures)
    elif verdict.get("conclusive"):
        text = "at least once, each record accepted once"
    else:
        text = "inconclusive"
    return {
        "run_id": run.run_id,
        "broker": (run.meta.get("broker") or {}).get("kind"),
        "group": share.get("group"),
        "members": len(share.get("members") or []),
        "members_died": share.get("membersDied", 0),
        "killed_consumer": settings.get("killed_consumer") or None,
        "killed_at_s": _killed_at_s(run, settings),
        "msg_per_s": msg_per_s,
        "records_accepted": share.get("recordsAccepted"),
        "accepted_twice": share.get("acceptedTwice"),
        "not_accepted": share.get("notAccepted"),
        "accept_outcome_unknown": share.get("acceptOutcomeUnknown"),
        "ack_failed": share.get("ackFailed"),
        "deliveries": share.get("deliveries"),
        "redeliveries": share.get("redeliveries"),
        "max_delivery_count": share.get("maxDeliveryCount"),
        "lost": counts.get("lost"),
        "acknowledged": (data.get("reconciliation") or {}).get("acknowledged"),
        "e2e_p50_ms": _ms(e2e, "p50Us"),
        "e2e_p99_ms": _ms(e2e, "p99Us"),
        "e2e_p999_ms": _ms(e2e, "p999Us"),
        "e2e_max_ms": _ms(e2e, "maxUs"),
        "e2e_source": "merged.json (warm-up included)",
        "first_p50_ms": _ms(first, "p50Us"),
        "first_p99_ms": _ms(first, "p99Us"),
        "first_max_ms": _ms(first, "maxUs"),
        "verdict": text,
        "explanation": list(share.get("explanation") or []),
    }


def share_table(runs: list[Run], throughput: pd.DataFrame | None = None,
                e2e: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run whose merged consumer report has a ``share`` section;
    ``throughput`` (run_id, msg_per_s) gives the records/s the load offered
    and the ingestors acknowledged; ``e2e`` (the report's end-to-end table),
    when its percentiles come from the members' ``.hlog`` files over the
    measured window, replaces the merged report's (which include the
    warm-up)."""
    rates = {}
    if throughput is not None and len(throughput):
        rates = dict(zip(throughput["run_id"], throughput["msg_per_s"]))
    measured = {}
    if e2e is not None and len(e2e):
        for r in e2e.to_dict("records"):
            if "measured window" in str(r.get("source")):
                measured[r["run_id"]] = r
    rows = []
    for run in runs:
        row = _row(run, rates.get(run.run_id))
        if row is None:
            continue
        m = measured.get(run.run_id)
        if m is not None:
            row.update(e2e_p50_ms=m.get("e2e_p50_ms"), e2e_p99_ms=m.get("e2e_p99_ms"),
                       e2e_p999_ms=m.get("e2e_p99.9_ms"), e2e_max_ms=m.get("e2e_max_ms"),
                       e2e_source=str(m["source"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=SHARE_COLUMNS) if rows else empty(SHARE_COLUMNS)


def delivery_counts(runs: list[Run]) -> pd.DataFrame:
    """Deliveries per (run, delivery count): 1 = first deliveries."""
    rows = []
    for run in runs:
        data = _merged(run)
        if data is None:
            continue
        for count, n in sorted((data["share"].get("byDeliveryCount") or {}).items(), key=lambda kv: int(kv[0])):
            rows.append({"run_id": run.run_id, "delivery_count": int(count), "deliveries": int(n)})
    return pd.DataFrame(rows, columns=DELIVERY_COLUMNS) if rows else empty(DELIVERY_COLUMNS)
