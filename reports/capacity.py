"""The max sustainable rate of a find-max run (``k6/scenarios/find-max.js``).

Owns: reading each staircase step's figures from the k6 summary (the
step-tagged submetrics ``batch_latency{scenario:r1_l800}`` and so on), the
rule that says whether a step held, and the verdict per run: the highest
level that held in every climb, with the spread of the repeated steps.
Must not: read files (``load``) or format text (``render``).

A step holds when, over its own samples:

- batch p99 < ``P99_MS`` (the scenario's latency gate);
- produce errors ≤ ``ERROR_RATE``;
- dropped + interrupted iterations < the dropped budget, ``DROPPED_RATIO`` of
  the iterations the step should start (at least 1). Interrupted: started but
  still running when the gap after the step ended (longer than ``P99_MS``);
- it produced something.

The max sustainable rate is the highest level that held in every climb;
``monotone`` says whether every lower level held too (when not, the rate is
noisy near that level and the table shows where).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .load import Run
from .tidy import empty

STEP_COLUMNS = [
    "run_id", "broker", "step", "repeat", "level", "offered_msg_per_s", "msg_per_s", "batch_p50_ms", "batch_p99_ms",
    "error_rate", "dropped", "interrupted", "budget", "held", "why",
]
LEVEL_COLUMNS = [
    "run_id", "broker", "level", "offered_msg_per_s", "climbs", "held_in", "msg_per_s_min", "msg_per_s_max",
    "batch_p99_min_ms", "batch_p99_max_ms", "held",
]
VERDICT_COLUMNS = [
    "run_id", "broker", "max_level", "max_offered_msg_per_s", "msg_per_s_min", "msg_per_s_max",
    "batch_p99_min_ms", "batch_p99_max_ms", "first_failed_level", "monotone", "climbs",
]


def _value(metrics: dict, name: str, stat: str, default=np.nan) -> float:
    body = metrics.get(name)
    if not isinstance(body, dict):
        return default
    v = (body.get("values") or {}).get(stat)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _find_max_summaries(run: Run):
    for s in run.k6_summaries:
        chronik = s.data.get("chronik") or {}
        if isinstance(chronik.get("find_max"), dict):
            yield s.data, chronik


def steps(runs: list[Run]) -> pd.DataFrame:
    """One row per staircase step of every find-max run (single k6 runner)."""
    rows = []
    for run in runs:
        broker = (run.meta.get("broker") or {}).get("kind")
        for data, chronik in _find_max_summaries(run):
            config = chronik.get("config") or {}
            p99_gate = float(config.get("p99_ms", 1000))
            error_gate = float(config.get("error_rate", 0))
            dropped_ratio = float(config.get("dropped_ratio", 0.01))
            batch = int(config.get("batch_size") or 1)
            metrics = data.get("metrics") or {}
            for step in chronik["find_max"].get("steps") or []:
                rows.append(_step_row(run.run_id, broker, step, metrics, batch, p99_gate, error_gate, dropped_ratio))
    if not rows:
        return empty(STEP_COLUMNS)
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def _step_row(run_id, broker, step, metrics, batch, p99_gate, error_gate, dropped_ratio) -> dict:
    tag = f"{{scenario:{step['name']}}}"
    duration = float(step["durationS"])
    expected = float(step["rate"]) * duration
    budget = max(1, math.ceil(expected * dropped_ratio))
    started = _value(metrics, f"batches_started{tag}", "count", 0.0)
    passes = _value(metrics, f"produce_errors{tag}", "passes", 0.0)
    fails = _value(metrics, f"produce_errors{tag}", "fails", 0.0)
    completed = passes + fails
    error_rate = passes / completed if completed else np.nan
    dropped = _value(metrics, f"dropped_iterations{tag}", "count", 0.0)
    interrupted = max(0.0, started - completed)
    messages = _value(metrics, f"messages_produced{tag}", "count", 0.0)
    p99 = _value(metrics, f"batch_latency{tag}", "p(99)")
    why = []
    if messages <= 0:
        why.append("nothing produced")
    if not (p99 < p99_gate):
        why.append(f"p99 {p99:.0f} ms ≥ {p99_gate:.0f}" if not np.isnan(p99) else "no latency samples")
    if not np.isnan(error_rate) and error_rate > error_gate:
        why.append(f"errors {error_rate:.2%}")
    if dropped + interrupted >= budget:
        why.append(f"{dropped + interrupted:.0f} dropped/interrupted ≥ {budget}")
    return {
        "run_id": run_id,
        "broker": broker,
        "step": step["name"],
        "repeat": int(step["repeat"]),
        "level": float(step["rate"]),
        "offered_msg_per_s": float(step["rate"]) * batch,
        "msg_per_s": messages / duration,
        "batch_p50_ms": _value(metrics, f"batch_latency{tag}", "p(50)"),
        "batch_p99_ms": p99,
        "error_rate": error_rate,
        "dropped": dropped,
        "interrupted": interrupted,
        "budget": budget,
        "held": not why,
        "why": "; ".join(why),
    }


def levels(step_rows: pd.DataFrame) -> pd.DataFrame:
    """Per run and level: in how many climbs it held, and the spread across climbs."""
    if step_rows.empty:
        return empty(LEVEL_COLUMNS)
    return (
        step_rows.groupby(["run_id", "level"], sort=False)
        .agg(
            broker=("broker", "first"),
            offered_msg_per_s=("offered_msg_per_s", "first"),
            climbs=("repeat", "nunique"),
            held_in=("held", "sum"),
            msg_per_s_min=("msg_per_s", "min"),
            msg_per_s_max=("msg_per_s", "max"),
            batch_p99_min_ms=("batch_p99_ms", "min"),
            batch_p99_max_ms=("batch_p99_ms", "max"),
        )
        .reset_index()
        .assign(held=lambda d: d["held_in"] == d["climbs"])
        [LEVEL_COLUMNS]
    )


def verdicts(level_rows: pd.DataFrame) -> pd.DataFrame:
    """Per run: the highest level that held in every climb (NaN when none did)."""
    if level_rows.empty:
        return empty(VERDICT_COLUMNS)
    out = []
    for run_id, g in level_rows.groupby("run_id", sort=False):
        g = g.sort_values("level")
        held = g[g["held"]]
        failed = g[~g["held"]]
        best = held.iloc[-1] if len(held) else None
        below = g[g["level"] <= best["level"]] if best is not None else g.iloc[0:0]
        out.append({
            "run_id": run_id,
            "broker": g["broker"].iloc[0],
            "max_level": best["level"] if best is not None else np.nan,
            "max_offered_msg_per_s": best["offered_msg_per_s"] if best is not None else np.nan,
            "msg_per_s_min": best["msg_per_s_min"] if best is not None else np.nan,
            "msg_per_s_max": best["msg_per_s_max"] if best is not None else np.nan,
            "batch_p99_min_ms": best["batch_p99_min_ms"] if best is not None else np.nan,
            "batch_p99_max_ms": best["batch_p99_max_ms"] if best is not None else np.nan,
            "first_failed_level": failed["level"].iloc[0] if len(failed) else np.nan,
            "monotone": bool(best is not None and below["held"].all()),
            "climbs": int(g["climbs"].max()),
        })
    return pd.DataFrame(out, columns=VERDICT_COLUMNS)


def verdict_lines(verdict_rows: pd.DataFrame) -> list[str]:
    """One sentence per run, as run-all.sh prints it and the conclusions state it."""
    lines = []
    for v in verdict_rows.itertuples():
        who = f"`{v.run_id}`" + (f" ({v.broker})" if isinstance(v.broker, str) else "")
        if np.isnan(v.max_level):
            lines.append(f"**Max sustainable rate** {who}: no level held its gates in every climb.")
            continue
        spread = f"{v.msg_per_s_min:,.0f}–{v.msg_per_s_max:,.0f}" if v.msg_per_s_min != v.msg_per_s_max \
            else f"{v.msg_per_s_min:,.0f}"
        nxt = "" if np.isnan(v.first_failed_level) else f"; first failing level {v.first_failed_level:,.0f} batches/s"
        noisy = "" if v.monotone else " (a lower level failed in some climb: the rate is noisy there)"
        lines.append(
            f"**Max sustainable rate** {who}: {v.max_level:,.0f} batches/s = {v.max_offered_msg_per_s:,.0f} msg/s "
            f"offered, held in all {v.climbs} climbs (achieved {spread} msg/s, batch p99 "
            f"{v.batch_p99_min_ms:,.0f}–{v.batch_p99_max_ms:,.0f} ms){nxt}{noisy}."
        )
    return lines


def comparison_lines(verdict_rows: pd.DataFrame) -> list[str]:
    """Chronik's max sustainable rate as a ratio of Kafka's, for each pair of
    find-max runs of the two brokers in the report (the latest of each)."""
    held = verdict_rows.dropna(subset=["max_offered_msg_per_s"])
    chronik = held[held["broker"] == "chronik"]
    kafka = held[held["broker"] == "kafka"]
    if chronik.empty or kafka.empty:
        return []
    c, k = chronik.iloc[-1], kafka.iloc[-1]
    return [
        f"**Max sustainable rate, chronik vs Kafka**: {c.max_offered_msg_per_s:,.0f} vs "
        f"{k.max_offered_msg_per_s:,.0f} msg/s ({c.max_offered_msg_per_s / k.max_offered_msg_per_s:.2f}×; "
        f"`{c.run_id}` vs `{k.run_id}`)."
    ]
