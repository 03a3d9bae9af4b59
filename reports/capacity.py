"""The max sustainable rate of a find-max run (the staircase plan ``load/plans/find-max.json``).

Owns: reading each staircase step's figures, the rule that says whether a
step held, and the verdict per run: the highest level that held in every
climb, with the spread of the repeated steps. Must not: read files
(``load``) or format text (``render``).

Where a step's figures come from:

- chronik-loadgen: the summary's top-level ``steps`` (``name``, ``repeat``,
  ``rate``, ``start_s``, ``duration_s``), its step-tagged submetrics
  (``batch_latency{step:r1_l800}``, ``produce_errors{step:…}``,
  ``messages_produced{step:…}``, ``requests_scheduled{step:…}``,
  ``requests_started{step:…}``, ``requests_dropped{step:…}``,
  ``requests_interrupted{step:…}``) and its plan's gates
  (``plan.thresholds``: ``p99_ms``, ``error_rate``, ``dropped_ratio``;
  ``plan.batch_size``). With several generators: ``merged-<plan>.json``
  (their raw rows pooled), else the same submetrics computed here from their
  raw request rows pooled; never one generator's share alone.
- a legacy k6 run: ``chronik.find_max.steps`` (``startS``, ``durationS``),
  ``{scenario:r1_l800}`` tags, ``batches_started`` and ``dropped_iterations``
  (interrupted = started − completed), gates in ``chronik.config``.

A step holds when, over its own samples:

- batch p99 < ``p99_ms`` (the plan's latency gate);
- produce errors ≤ ``error_rate``;
- dropped + interrupted requests < the dropped budget: ``dropped_ratio`` of
  the requests the step scheduled (at least 1). Dropped: not sent on
  schedule (late or never); interrupted: still unanswered when the gap after
  the step ended;
- it produced something.

The max sustainable rate is the highest level that held in every climb;
``monotone`` says whether every lower level held too (when not, the rate is
noisy near that level and the table shows where).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import latency
from .load import LoadSummary, Run
from .tidy import empty, load_requests

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
# a request leaving later than this after its scheduled time was dropped (load/SPEC.md)
DEFAULT_SLACK_MS = 50


@dataclass(frozen=True)
class Staircase:
    """One find-max run's steps, step-tagged metrics and gates, whichever engine wrote them."""

    steps: list[dict]  # name, repeat, rate (requests/s offered by all generators), duration_s
    metrics: dict  # name{tag:step} -> {"values": {...}}
    tag: str  # "step" (chronik-loadgen) or "scenario" (k6)
    p99_ms: float
    error_rate: float
    dropped_ratio: float
    batch_size: int


def _value(metrics: dict, name: str, stat: str, default=np.nan) -> float:
    body = metrics.get(name)
    if not isinstance(body, dict):
        return default
    v = (body.get("values") or {}).get(stat)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _loadgen_steps(data: dict) -> list[dict]:
    return [
        {"name": str(s["name"]), "repeat": int(s.get("repeat", 1)), "rate": float(s["rate"]),
         "start_s": float(s.get("start_s", 0)), "duration_s": float(s["duration_s"]),
         "skipped": bool(s.get("skipped", False))}
        for s in data.get("steps") or []
        if isinstance(s, dict) and {"name", "rate", "duration_s"} <= s.keys()
    ]


def _loadgen_staircase(data: dict, steps: list[dict], metrics: dict) -> Staircase:
    plan = data.get("plan") or {}
    gates = plan.get("thresholds") or {}
    return Staircase(
        steps=steps, metrics=metrics, tag="step",
        p99_ms=float(gates.get("p99_ms", 1000)), error_rate=float(gates.get("error_rate", 0)),
        dropped_ratio=float(gates.get("dropped_ratio", 0.01)), batch_size=int(plan.get("batch_size") or 1),
    )


def _pooled_metrics(requests: pd.DataFrame, steps: list[dict], slack_ms: float) -> dict:
    """The step-tagged submetrics of a merged summary, computed from the
    generators' raw request rows pooled."""
    metrics: dict = {}
    by_step = dict(tuple(requests.groupby("step", sort=False)))
    firsts = [by_step[s["name"]]["scheduled"].min() - pd.Timedelta(seconds=s["start_s"])
              for s in steps if s["name"] in by_step]
    if not firsts:
        return metrics
    # the load's start: each step's first scheduled request less the step's offset
    t0 = min(firsts)
    for i, s in enumerate(steps):
        rows = by_step.get(s["name"])
        if rows is None:
            continue
        tag = f"{{step:{s['name']}}}"
        sent = rows[rows["sent"]]
        end = s["start_s"] + s["duration_s"]
        gap = (steps[i + 1]["start_s"] - end) if i + 1 < len(steps) else \
            (s["start_s"] - steps[i - 1]["start_s"] - steps[i - 1]["duration_s"] if i else 0.0)
        deadline = t0 + pd.Timedelta(seconds=end + max(gap, 0.0))
        answered = sent["time"] + pd.to_timedelta(sent["latency_ms"], unit="ms")
        late = (sent["time"] - sent["scheduled"]).dt.total_seconds() * 1000 > slack_ms
        failed = int(sent["request_failed"].sum())
        blocking = sent["route"].isin(["batch", "single"])
        latencies = sent.loc[sent["route"].isin(["batch", "fire"]), "latency_ms"].dropna()
        p = latency.sample_percentiles(latencies) if len(latencies) else {"p50": np.nan, "p99": np.nan}
        metrics.update({
            f"batch_latency{tag}": {"values": {"p(50)": p["p50"], "p(99)": p["p99"], "count": len(latencies)}},
            f"produce_errors{tag}": {"values": {"passes": failed, "fails": len(sent) - failed}},
            f"messages_produced{tag}": {"values": {"count": float(sent.loc[blocking, "ok"].sum())}},
            f"requests_scheduled{tag}": {"values": {"count": len(rows)}},
            f"requests_started{tag}": {"values": {"count": len(sent)}},
            f"requests_dropped{tag}": {"values": {"count": int((~rows["sent"]).sum() + late.sum())}},
            f"requests_interrupted{tag}": {"values": {"count": int(((answered > deadline) | answered.isna()).sum())}},
        })
    return metrics


def _pooled_staircase(run: Run, scenario: str, summaries: list[LoadSummary]) -> Staircase | None:
    """Several generators without a merged summary: their raw rows pooled."""
    requests = load_requests(run)
    requests = requests[requests["scenario"] == scenario]
    names = {s.generator for s in summaries}
    if requests.empty or not names <= set(requests["generator"]):
        return None
    data = summaries[0].data
    steps = _loadgen_steps(data)
    # a generator's summary may list its own share (1/N) of each rate or the
    # plan's whole rate: the one the requests scheduled in the step match is taken
    scheduled = requests.groupby("step").size()
    n = len(names)
    for s in steps:
        count, whole = scheduled.get(s["name"], 0), s["rate"] * s["duration_s"]
        if count and abs(count - whole * n) < abs(count - whole):
            s["rate"] *= n
    slack = float((data.get("plan") or {}).get("schedule_slack_ms", DEFAULT_SLACK_MS))
    return _loadgen_staircase(data, steps, _pooled_metrics(requests, steps, slack))


def staircases(run: Run) -> list[Staircase]:
    """Every find-max staircase of a run, in one shape for both engines."""
    out = []
    merged = {s.scenario: s for s in run.merged_summaries if _loadgen_steps(s.data)}
    by_scenario: dict[str, list[LoadSummary]] = {}
    for s in run.load_summaries:
        if s.engine == "loadgen" and _loadgen_steps(s.data):
            by_scenario.setdefault(s.scenario, []).append(s)
    for scenario in dict.fromkeys([*merged, *by_scenario]):
        gens = by_scenario.get(scenario, [])
        if scenario in merged:
            m = merged[scenario].data
            out.append(_loadgen_staircase(m, _loadgen_steps(m), m["metrics"]))
        elif len(gens) == 1:
            out.append(_loadgen_staircase(gens[0].data, _loadgen_steps(gens[0].data), gens[0].data["metrics"]))
        elif (pooled := _pooled_staircase(run, scenario, gens)) is not None:
            out.append(pooled)
    for s in run.load_summaries:
        chronik = s.data.get("chronik") or {}
        if s.engine == "k6" and isinstance(chronik.get("find_max"), dict):
            config = chronik.get("config") or {}
            steps = [{"name": st["name"], "repeat": int(st["repeat"]), "rate": float(st["rate"]),
                      "start_s": float(st.get("startS", 0)), "duration_s": float(st["durationS"])}
                     for st in chronik["find_max"].get("steps") or []]
            out.append(Staircase(
                steps=steps, metrics=s.data.get("metrics") or {}, tag="scenario",
                p99_ms=float(config.get("p99_ms", 1000)), error_rate=float(config.get("error_rate", 0)),
                dropped_ratio=float(config.get("dropped_ratio", 0.01)), batch_size=int(config.get("batch_size") or 1),
            ))
    return out


def steps(runs: list[Run]) -> pd.DataFrame:
    """One row per staircase step of every find-max run."""
    rows = []
    for run in runs:
        broker = (run.meta.get("broker") or {}).get("kind")
        for staircase in staircases(run):
            rows.extend(_step_row(run.run_id, broker, step, staircase) for step in staircase.steps)
    if not rows:
        return empty(STEP_COLUMNS)
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def _step_row(run_id, broker, step: dict, sc: Staircase) -> dict:
    tag = f"{{{sc.tag}:{step['name']}}}"

    def value(name: str, stat: str, default=np.nan) -> float:
        return _value(sc.metrics, name + tag, stat, default)

    duration, rate = step["duration_s"], step["rate"]
    passes = value("produce_errors", "passes", 0.0)
    fails = value("produce_errors", "fails", 0.0)
    completed = passes + fails
    error_rate = passes / completed if completed else np.nan
    if sc.tag == "step":
        scheduled = value("requests_scheduled", "count", rate * duration)
        dropped = value("requests_dropped", "count", 0.0)
        started = value("requests_started", "count")
        interrupted = value("requests_interrupted", "count",
                            0.0 if np.isnan(started) else max(0.0, started - completed))
    else:
        scheduled = rate * duration
        dropped = value("dropped_iterations", "count", 0.0)
        interrupted = max(0.0, value("batches_started", "count", 0.0) - completed)
    budget = max(1, math.ceil(scheduled * sc.dropped_ratio))
    # a fire-and-forget staircase counts the messages the ingestor accepted
    messages = max(value("messages_produced", "count", 0.0), value("messages_accepted", "count", 0.0))
    p99 = value("batch_latency", "p(99)")
    why = []
    if step.get("skipped"):
        # one generator ends a climb at its first failing step: the levels
        # above it were never offered, and never count as held
        why.append("not offered: a lower level of this climb failed")
    elif messages <= 0:
        why.append("nothing produced")
    if not (p99 < sc.p99_ms):
        why.append(f"p99 {p99:.0f} ms ≥ {sc.p99_ms:.0f}" if not np.isnan(p99) else "no latency samples")
    if not np.isnan(error_rate) and error_rate > sc.error_rate:
        why.append(f"errors {error_rate:.2%}")
    if dropped + interrupted >= budget:
        why.append(f"{dropped + interrupted:.0f} dropped/interrupted ≥ {budget}")
    return {
        "run_id": run_id,
        "broker": broker,
        "step": step["name"],
        "repeat": int(step["repeat"]),
        "level": rate,
        "offered_msg_per_s": rate * sc.batch_size,
        "msg_per_s": messages / duration if duration else np.nan,
        "batch_p50_ms": value("batch_latency", "p(50)"),
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
        nxt = "" if np.isnan(v.first_failed_level) else f"; first failing level {v.first_failed_level:,.0f} requests/s"
        noisy = "" if v.monotone else " (a lower level failed in some climb: the rate is noisy there)"
        lines.append(
            f"**Max sustainable rate** {who}: {v.max_level:,.0f} requests/s = {v.max_offered_msg_per_s:,.0f} msg/s "
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
