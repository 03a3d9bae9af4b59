"""The fault timeline of a run whose driver injected faults on a schedule
(``./run-all.sh --faults``, ``scripts/faults.py``): what each broker failure
cost the pipeline, second by second and per fault.

Owns: the per-second timeline of such a run (messages acknowledged and
failed by the second their answer came, batch latency p99 by the second a
request was sent, end-to-end p99 from the consumers' 1-second ``.hlog``
intervals), and per fault: when it began and ended on that timeline; how
long until acknowledgements resumed (the longest stretch without any
acknowledged request completing, from the fault on); how long until the
batch p99 was back within 2x its value before the run's first fault and
stayed there 3 s, and the p99 of the requests sent while it was in force; the messages the load generator counted failed, split
into those it stopped waiting for (no answer within the plan's timeout) and
those the ingestors answered failed; when an ISR first shrank and when
every ISR was full again (from ``faults/partitions.csv``, the Metadata
poll); leader changes. Every time is in seconds since the load's first
request, as the throughput timeline counts. Must not: read files (``load``)
or format (``render``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import latency
from .load import Run
from .summarise import hlog_path
from .tidy import empty, load_requests

# scripts/faults.py's kinds; other events (k8s --delete-pod) stay in events.py's table
FAULT_KINDS = ("kill", "stop", "pause", "partition", "disk-full", "slow-disk")
BEFORE_S = 10  # the pre-fault window of the p99
AFTER_S = 30  # how long after a fault's end its effects are looked for (or up to the next fault)
ACK_GAP_S = 1.0  # a shorter pause in acknowledgements is not a stall
P99_FACTOR = 2.0
STAY_S = 3  # seconds the p99 must stay within P99_FACTOR to count as back

TIMELINE_COLUMNS = ["run_id", "second", "msg_per_s", "failed_msgs", "batch_p99_ms", "e2e_p99_ms"]
FAULT_COLUMNS = [
    "run_id", "broker", "kind", "target", "detail", "end_detail", "ran", "at_s", "end_s", "lasted_s",
    "ack_gap_s", "acks_resumed_after_s", "p99_before_ms", "p99_during_ms", "p99_peak_ms", "p99_back_after_s",
    "messages_failed",
    "requests_failed", "messages_unanswered", "messages_refused", "isr_shrank_after_s", "isr_full_after_s", "isr_note", "leader_changes", "leader_moves",
]


def fault_events(run: Run) -> pd.DataFrame:
    """The run's scheduled faults from meta.json's ``events``, times as UTC."""
    rows = [e for e in (run.meta.get("events") or []) if isinstance(e, dict) and e.get("kind") in FAULT_KINDS]
    if not rows:
        return empty(["at", "end", "kind", "target", "detail", "end_detail"])
    frame = pd.DataFrame(rows)
    for col in ("detail", "end_detail", "target"):
        frame[col] = frame.get(col, pd.Series(dtype=str)).fillna("").astype(str)
    return frame.assign(
        at=lambda d: pd.to_datetime(d["at"], utc=True, format="ISO8601", errors="coerce"),
        end=lambda d: pd.to_datetime(d.get("end"), utc=True, format="ISO8601", errors="coerce"),
    ).sort_values("at").reset_index(drop=True)


def _origin(requests: pd.DataFrame) -> pd.Timestamp | None:
    sent = requests["time"].dropna()
    return sent.min() if len(sent) else None


def second_timeline(run: Run) -> pd.DataFrame:
    """Per second since the load's first request: messages acknowledged and
    failed, the batch latency p99 of the requests sent in that second, and
    the end-to-end p99 of the consumers' intervals centred in it."""
    requests = load_requests(run)
    origin = _origin(requests)
    if origin is None:
        return empty(TIMELINE_COLUMNS)
    sent = requests[requests["sent"]].assign(
        second=lambda d: (d["time"] - origin).dt.total_seconds() // 1,
        answered=lambda d: ((d["time"] - origin).dt.total_seconds() + d["latency_ms"].fillna(0) / 1000) // 1)
    # acknowledged and failed by the second the answer came (an open-model
    # load sends on schedule, so counted by send second the line would not move)
    answers = sent.groupby("answered").agg(msg_per_s=("ok", "sum"), failed_msgs=("failed", "sum"))
    p99 = sent.groupby("second")["latency_ms"].quantile(0.99).rename("batch_p99_ms")
    last = int(max(answers.index.max(), p99.index.max()))
    per_second = (answers.reindex(np.arange(0, last + 1)).fillna(0)
                  .join(p99.reindex(np.arange(0, last + 1))))
    per_second["e2e_p99_ms"] = _e2e_per_second(run, origin).reindex(per_second.index)
    return per_second.rename_axis("second").reset_index().assign(run_id=run.run_id)[TIMELINE_COLUMNS]


def _e2e_per_second(run: Run, origin: pd.Timestamp) -> pd.Series:
    paths = [p for p in (hlog_path(c) for c in run.consumers if c.kind == "replica") if p is not None]
    by_second: dict[int, list] = {}
    for path in paths:
        try:
            intervals = latency.read_hlog(path)
        except latency.HlogError:
            continue
        for interval in intervals:
            mid = interval.epoch_mid_s
            if mid is None or not interval.histogram.get_total_count():
                continue
            by_second.setdefault(int((mid - origin.timestamp()) // 1), []).append(interval.histogram)
    return pd.Series({s: latency.merge(h).get_value_at_percentile(99) / 1000 for s, h in by_second.items()},
                     dtype=float)


def faults(runs: list[Run]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-second timeline of every run with faults, one row per fault)."""
    timelines, rows = [], []
    for run in runs:
        events = fault_events(run)
        if events.empty:
            continue
        requests = load_requests(run)
        origin = _origin(requests)
        timeline = second_timeline(run)
        timelines.append(timeline)
        broker = (run.meta.get("broker") or {}).get("kind", "")
        rf = (run.meta.get("settings") or {}).get("replication_factor")
        states = _states(run, origin)
        starts = [((e.at - origin).total_seconds() if origin is not None and pd.notna(e.at) else np.nan)
                  for e in events.itertuples()]
        for i, e in enumerate(events.itertuples()):
            at = starts[i]
            end = (e.end - origin).total_seconds() if origin is not None and pd.notna(e.end) else np.nan
            ran = not e.detail.startswith(("not run", "failed"))
            later = [s for s in starts[i + 1:] if s > at]
            horizon = min([*(later[:1]), (end if not np.isnan(end) else at) + AFTER_S])
            row = {"run_id": run.run_id, "broker": broker, "kind": e.kind, "target": e.target, "detail": e.detail,
                   "end_detail": e.end_detail, "ran": ran, "at_s": at, "end_s": end, "lasted_s": end - at}
            if ran and not np.isnan(at):
                row.update(_acks(requests, origin, at, horizon))
                row.update(_p99(timeline, at, horizon, steady_from=starts[0]))
                row["p99_during_ms"] = _p99_during(requests, origin, at, end)
                row.update(_failed(requests, origin, at, horizon))
                row.update(_isr(states, at, horizon, rf))
            rows.append(row)
    timeline = pd.concat(timelines, ignore_index=True) if timelines else empty(TIMELINE_COLUMNS)
    return timeline, (pd.DataFrame(rows).reindex(columns=FAULT_COLUMNS) if rows else empty(FAULT_COLUMNS))


def _acks(requests: pd.DataFrame, origin: pd.Timestamp, at: float, horizon: float) -> dict:
    """The longest stretch without an acknowledged request completing that
    ends after the fault and before the horizon; acknowledgements resumed at
    its end (0 when no stretch was longer than ACK_GAP_S)."""
    acked = requests[requests["sent"] & (requests["ok"] > 0)]
    done = np.sort(((acked["time"] - origin).dt.total_seconds() + acked["latency_ms"] / 1000).to_numpy())
    before = done[done <= at]
    after = done[(done > at) & (done <= horizon)]
    if not len(after):
        return {"ack_gap_s": np.nan, "acks_resumed_after_s": np.nan}
    points = np.concatenate([[before[-1] if len(before) else at], after])
    gaps = np.diff(points)
    k = int(np.argmax(gaps))
    if gaps[k] <= ACK_GAP_S:
        return {"ack_gap_s": float(gaps[k]), "acks_resumed_after_s": 0.0}
    return {"ack_gap_s": float(gaps[k]), "acks_resumed_after_s": float(points[k + 1] - at)}


def _p99(timeline: pd.DataFrame, at: float, horizon: float, steady_from: float) -> dict:
    """The pre-fault p99 (median of the per-second p99 in the BEFORE_S
    seconds before the run's first fault, ``steady_from``: a later fault's
    own "before" may still hold an earlier one's tail), its peak from the
    fault to the horizon, and how long until the per-second p99 was back
    within P99_FACTOR x the pre-fault value for STAY_S seconds in a row."""
    t = timeline.set_index("second")["batch_p99_ms"]
    first = int(at // 1)
    steady = int(steady_from // 1)
    before = t[(t.index >= steady - BEFORE_S) & (t.index < steady)].dropna()
    window = t[(t.index >= first) & (t.index < max(horizon, at + 1))]
    if before.empty or window.dropna().empty:
        return {"p99_before_ms": before.median() if len(before) else np.nan,
                "p99_peak_ms": window.max() if len(window) else np.nan, "p99_back_after_s": np.nan}
    level = before.median()
    limit = P99_FACTOR * level
    within = (t <= limit)  # a second without requests (NaN) is not within
    over = window[window > limit]
    if over.empty:
        back = 0.0
    else:
        back = np.nan
        for s in t.index[t.index > over.index[0]]:
            if all(within.get(s + k, False) for k in range(STAY_S)):
                back = float(s - at)
                break
    return {"p99_before_ms": level, "p99_peak_ms": window.max(), "p99_back_after_s": back}


def _p99_during(requests: pd.DataFrame, origin: pd.Timestamp, at: float, end: float) -> float:
    """The batch latency p99 of the requests sent while the fault was in
    force (from its injection to its undo; a lasting fault such as a slow
    disk is judged by it, a short one by the peak)."""
    sent = requests[requests["sent"]]
    second = (sent["time"] - origin).dt.total_seconds()
    inside = sent.loc[(second >= at) & (second < (end if not np.isnan(end) else at + 1)), "latency_ms"].dropna()
    return float(inside.quantile(0.99)) if len(inside) else np.nan


def _failed(requests: pd.DataFrame, origin: pd.Timestamp, at: float, horizon: float) -> dict:
    """Messages of the requests sent from the fault to the horizon that the
    load generator counted failed, split into those it gave up on (no answer
    within the plan's timeout: the ingestor kept them and went on retrying)
    and those the ingestor answered failed (not acknowledged)."""
    sent = requests[requests["sent"]]
    second = (sent["time"] - origin).dt.total_seconds()
    inside = sent[(second >= at) & (second < horizon)]
    unanswered = inside["status"] == 0
    return {"messages_failed": float(inside["failed"].sum()), "requests_failed": float(inside["request_failed"].sum()),
            "messages_unanswered": float(inside.loc[unanswered, "failed"].sum()),
            "messages_refused": float(inside.loc[~unanswered, "failed"].sum())}


def _states(run: Run, origin: pd.Timestamp | None) -> pd.DataFrame:
    s = run.partition_states
    if s.empty or origin is None:
        return empty(["second", "partition", "leader", "replicas", "isr"])
    return s.assign(
        second=lambda d: pd.to_numeric(d["time"], errors="coerce") - origin.timestamp(),
        replicas=lambda d: d["replicas"].astype(str).str.split().map(len),
        isr=lambda d: d["isr"].astype(str).str.split().map(len),
    ).dropna(subset=["second"]).sort_values("second")


def _isr(states: pd.DataFrame, at: float, horizon: float, rf) -> dict:
    """After the fault: when some partition's ISR first went from full to
    short of its replicas, when every ISR was full again after that, and the
    leaders that moved before the horizon. An ISR already short when the
    fault began (an earlier fault's, still recovering) is said so
    (``isr_note``) and its return to full is still timed."""
    out = {"isr_shrank_after_s": np.nan, "isr_full_after_s": np.nan, "leader_changes": np.nan, "leader_moves": "",
           "isr_note": ""}
    if states.empty:
        return out
    full_size = states["replicas"]
    if pd.api.types.is_number(rf) and not pd.isna(rf):
        full_size = full_size.clip(upper=int(rf))
    rows = states.assign(short=states["isr"] < full_size)
    short: dict[int, bool] = {}
    leaders: dict[int, int] = {}
    for row in rows[rows["second"] < at].itertuples():
        short[row.partition], leaders[row.partition] = bool(row.short), int(row.leader)
    if any(short.values()):
        out["isr_note"] = "an ISR was already short when the fault began"
    shrank = full = np.nan
    changes, moves = 0, []
    for row in rows[rows["second"] >= at].itertuples():
        waiting = np.isnan(full) and (not np.isnan(shrank) or bool(out["isr_note"]))
        if row.second >= horizon and not waiting:
            break  # past the horizon only to time a return to full
        was_short, was_leader = short.get(row.partition, False), leaders.get(row.partition)
        short[row.partition], leaders[row.partition] = bool(row.short), int(row.leader)
        if row.second < horizon and was_leader is not None and was_leader != int(row.leader):
            changes += 1
            if len(moves) < 4:
                moves.append(f"p{row.partition} {was_leader}→{int(row.leader)} at +{row.second - at:.1f} s")
        if row.short and not was_short and np.isnan(shrank) and row.second < horizon:
            shrank, full = row.second - at, np.nan
        if np.isnan(full) and (not np.isnan(shrank) or out["isr_note"]) and not any(short.values()):
            full = row.second - at
    out.update({"isr_shrank_after_s": shrank, "isr_full_after_s": full, "leader_changes": float(changes),
                "leader_moves": "; ".join(moves) + ("; …" if changes > len(moves) else "")})
    return out
