"""Events a run's driver caused on purpose (a broker pod deleted by
``k8s-perf/run.sh --delete-pod``), placed on the run's load timeline with what
the pipeline's throughput did around each.

Owns: reading ``meta.json``'s ``events`` list (``at`` ISO time, ``kind``,
``target``, ``detail``) into one table, and per event: its second since the
load's first sample; and for a fault (every kind but ``pod-ready``, which
only marks a fault's end): the messages per second in the 10 s before, the
lowest second in the 30 s after, and how long from the fault until, after
the first second below 90 % of the before rate, a second was back at 90 %
(0 when no second fell below it). A scheduled fault (``run-all.sh --faults``)
has its own timeline (``faults``) and is left out here. Must not: read files (``load``) or format (``render``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .faults import FAULT_KINDS
from .load import Run
from .tidy import empty, load_samples, over_runs

COLUMNS = ["run_id", "at", "second", "kind", "target", "detail", "before_msg_per_s", "lowest_after_msg_per_s",
           "recovered_after_s"]
BEFORE_S = 10
AFTER_S = 30
MARKERS = {"pod-ready"}  # events that mark a fault's end, not a fault


def events(runs: list[Run], timeline: pd.DataFrame) -> pd.DataFrame:
    """One row per event of every run; ``timeline`` is ``summarise.throughput_timeline``'s."""
    rows = [{"run_id": run.run_id, **e} for run in runs for e in (run.meta.get("events") or [])
            if isinstance(e, dict) and e.get("at") and e.get("kind") not in FAULT_KINDS]
    if not rows:
        return empty(COLUMNS)
    table = pd.DataFrame(rows).assign(at=lambda d: pd.to_datetime(d["at"], utc=True, format="ISO8601", errors="coerce"))
    for col in ("kind", "target", "detail"):
        table[col] = table.get(col, pd.Series(dtype=str)).fillna("").astype(str)
    samples = over_runs(runs, load_samples)
    first = samples.groupby("run_id")["time"].min() if not samples.empty else pd.Series(dtype="datetime64[ns, UTC]")
    out = []
    for row in table.itertuples():
        second = np.nan
        if row.run_id in first.index and pd.notna(row.at):
            second = (row.at - first[row.run_id]).total_seconds()
        before = lowest = recovered = np.nan
        if row.kind not in MARKERS:
            before, lowest, recovered = _around(timeline[timeline["run_id"] == row.run_id], second)
        out.append({"run_id": row.run_id, "at": row.at, "second": second, "kind": row.kind, "target": row.target,
                    "detail": row.detail, "before_msg_per_s": before, "lowest_after_msg_per_s": lowest,
                    "recovered_after_s": recovered})
    return pd.DataFrame(out, columns=COLUMNS)


def _around(timeline: pd.DataFrame, second: float) -> tuple[float, float, float]:
    if timeline.empty or np.isnan(second):
        return np.nan, np.nan, np.nan
    rate = timeline.set_index("second")["msg_per_s"]
    rate = rate.reindex(np.arange(0, rate.index.max() + 1), fill_value=0)
    at = int(second)
    before = rate[(rate.index >= at - BEFORE_S) & (rate.index < at)]
    after = rate[(rate.index >= at) & (rate.index < at + AFTER_S)]
    if before.empty or after.empty:
        return (before.mean() if not before.empty else np.nan), np.nan, np.nan
    level = before.mean()
    low = rate[(rate.index >= at) & (rate < 0.9 * level)]
    if low.empty:
        return level, after.min(), 0.0
    back = rate[(rate.index > low.index[0]) & (rate >= 0.9 * level)]
    return level, after.min(), (float(back.index[0] - at) if not back.empty else np.nan)
