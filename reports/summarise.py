"""Throughput and latency figures per test and per k6 runner, their progression,
the acks=1 vs acks=all and chronik vs Kafka comparisons, and end-to-end latency.

Owns: how runners are combined (messages add up; a scenario's rate is its
messages over its longest runner's duration; error rates are pooled counts,
never averaged rates; batch-latency percentiles come from raw samples pooled
across runners, or from a single runner's summary, and are otherwise left
unmerged), and how end-to-end latency is taken from the consumers' merged
``.hlog`` files. Must not: read files (``load``) or format text (``render``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import latency
from .latency import HlogError
from .load import ConsumerReport, Run
from .tidy import empty, k6_samples, k6_values, measured_window, over_runs, run_settings

MB = 1_000_000  # MB/s in decimal megabytes, as the seeds report them

RUNNER_COLUMNS = [
    "run_id", "scenario", "runner", "messages", "duration_s", "msg_per_s", "requests", "req_per_s",
    "errors", "error_checks", "error_rate", "http_failed_rate", "dropped_iterations", "data_sent_bytes",
    "payload_bytes", "accepted", "vus_max", "batch_avg_ms", "batch_p50_ms", "batch_p90_ms", "batch_p95_ms",
    "batch_p99_ms", "batch_p99.9_ms", "batch_max_ms",
]
BATCH_LATENCY_COLUMNS = [
    "batch_avg_ms", "batch_p50_ms", "batch_p90_ms", "batch_p95_ms", "batch_p99_ms", "batch_p99.9_ms", "batch_max_ms",
]
E2E_COLUMNS = [
    "run_id", "source", "replicas", "count", "e2e_mean_ms", "e2e_p50_ms", "e2e_p90_ms", "e2e_p95_ms",
    "e2e_p99_ms", "e2e_p99.9_ms", "e2e_max_ms", "note",
]
# (label, column) of the figures compared between runs
COMPARED = (
    ("msg/s", "msg_per_s"),
    ("MB/s", "mb_per_s"),
    ("error rate", "error_rate"),
    ("batch p50 (ms)", "batch_p50_ms"),
    ("batch p95 (ms)", "batch_p95_ms"),
    ("batch p99 (ms)", "batch_p99_ms"),
    ("e2e p50 (ms)", "e2e_p50_ms"),
    ("e2e p99 (ms)", "e2e_p99_ms"),
    ("broker CPU µs/msg", "broker_cpu_us_per_msg"),
)
# settings that must be equal for two runs to be compared
COMPARABLE_ON = ["scenario", "message_size", "batch_size", "partitions", "ingestors"]


def settings(runs: list[Run]) -> pd.DataFrame:
    """One row per run: test, broker, acks, sizes, counts, profiles, host."""
    return over_runs(runs, run_settings)


def _stat(wide: pd.DataFrame, metric: str, stat: str) -> pd.Series:
    key = f"{metric}|{stat}"
    return wide[key] if key in wide.columns else pd.Series(np.nan, index=wide.index)


def k6_runners(runs: list[Run]) -> pd.DataFrame:
    """One row per (run, scenario, k6 runner), from the runners' summaries.

    Reads k6's default trend stats (``med``) and k6/lib/summary.js's
    (``p(50)``, ``p(99.9)``); ``payload_bytes`` and ``messages_accepted``
    (fire mode) when the scenario counts them."""
    values = over_runs(runs, k6_values)
    if values.empty:
        return empty(RUNNER_COLUMNS)
    wide = values.assign(key=lambda d: d["metric"] + "|" + d["stat"]).pivot_table(
        index=["run_id", "scenario", "runner"], columns="key", values="value", aggfunc="first"
    )
    # produce_errors is the scenario's own failure Rate; http_req_failed stands in without it
    errors = _stat(wide, "produce_errors", "passes").fillna(_stat(wide, "http_req_failed", "passes"))
    error_checks = (_stat(wide, "produce_errors", "passes") + _stat(wide, "produce_errors", "fails")).fillna(
        _stat(wide, "http_req_failed", "passes") + _stat(wide, "http_req_failed", "fails")
    )
    return (
        pd.DataFrame(
            {
                "messages": _stat(wide, "messages_produced", "count"),
                "duration_s": _stat(wide, "test_run_duration", "ms") / 1000,
                "requests": _stat(wide, "http_reqs", "count"),
                "errors": errors,
                "error_checks": error_checks,
                "http_failed_rate": _stat(wide, "http_req_failed", "rate"),
                "dropped_iterations": _stat(wide, "dropped_iterations", "count"),
                "data_sent_bytes": _stat(wide, "data_sent", "count"),
                "payload_bytes": _stat(wide, "payload_bytes", "count"),
                "accepted": _stat(wide, "messages_accepted", "count"),
                "vus_max": _stat(wide, "vus_max", "max"),
                "batch_avg_ms": _stat(wide, "batch_latency", "avg"),
                "batch_p50_ms": _stat(wide, "batch_latency", "p(50)").fillna(_stat(wide, "batch_latency", "med")),
                "batch_p90_ms": _stat(wide, "batch_latency", "p(90)"),
                "batch_p95_ms": _stat(wide, "batch_latency", "p(95)"),
                "batch_p99_ms": _stat(wide, "batch_latency", "p(99)"),
                "batch_p99.9_ms": _stat(wide, "batch_latency", "p(99.9)"),
                "batch_max_ms": _stat(wide, "batch_latency", "max"),
            }
        )
        .assign(
            msg_per_s=lambda d: d["messages"] / d["duration_s"],
            req_per_s=lambda d: d["requests"] / d["duration_s"],
            error_rate=lambda d: d["errors"] / d["error_checks"],
        )
        .reset_index()
        [RUNNER_COLUMNS]
    )


def batch_latency(runs: list[Run], runners: pd.DataFrame) -> pd.DataFrame:
    """Batch latency per (run, scenario), with where its percentiles came from.

    Several runners' percentiles are only ever computed from their pooled raw
    samples; with summaries alone they are not merged (and never averaged)."""
    samples = over_runs(runs, k6_samples)
    latency_samples = samples[samples["metric"] == "batch_latency"] if not samples.empty else samples
    rows = []
    for (run_id, scenario), group in runners.groupby(["run_id", "scenario"], sort=False):
        names = set(group["runner"])
        raw = latency_samples[(latency_samples["run_id"] == run_id) & (latency_samples["scenario"] == scenario)]
        if len(raw) and names <= set(raw["runner"]):
            p = latency.sample_percentiles(raw["value"])
            source = f"raw samples of {len(names)} runners merged" if len(names) > 1 else "raw samples"
            figures = [p["mean"], p["p50"], p["p90"], p["p95"], p["p99"], p["p99.9"], p["max"]]
        elif len(names) == 1:
            source = "k6 summary"
            figures = group[BATCH_LATENCY_COLUMNS].iloc[0].tolist()
        else:
            source = f"not merged: {len(names)} runners, summaries only (per runner below)"
            figures = [np.nan] * len(BATCH_LATENCY_COLUMNS)
        rows.append((run_id, scenario, *figures, source))
    return pd.DataFrame(rows, columns=["run_id", "scenario", *BATCH_LATENCY_COLUMNS, "latency_source"])


def test_summary(runs: list[Run], runners: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (run, scenario): messages, msg/s, MB/s, error rate, batch latency
    (and, for fire-and-forget scenarios, messages accepted per second).
    A run without k6 summaries keeps one row with the figures missing."""
    runners = k6_runners(runs) if runners is None else runners
    per_scenario = (
        runners.groupby(["run_id", "scenario"], as_index=False, sort=False)
        .agg(
            runners=("runner", "nunique"),
            messages=("messages", lambda s: s.sum(min_count=1)),
            duration_s=("duration_s", "max"),
            requests=("requests", lambda s: s.sum(min_count=1)),
            errors=("errors", lambda s: s.sum(min_count=1)),
            error_checks=("error_checks", lambda s: s.sum(min_count=1)),
            data_sent_bytes=("data_sent_bytes", lambda s: s.sum(min_count=1)),
            payload_bytes=("payload_bytes", lambda s: s.sum(min_count=1)),
            accepted=("accepted", lambda s: s.sum(min_count=1)),
            dropped_iterations=("dropped_iterations", lambda s: s.sum(min_count=1)),
        )
        .merge(batch_latency(runs, runners), on=["run_id", "scenario"], how="left")
    )
    return (
        settings(runs)
        .merge(per_scenario, on="run_id", how="left")
        .assign(
            msg_per_s=lambda d: d["messages"] / d["duration_s"],
            # payload bytes the scenario counted, else messages x the configured size
            mb_per_s=lambda d: (d["payload_bytes"] / d["duration_s"] / MB).fillna(
                d["msg_per_s"] * pd.to_numeric(d["message_size"], errors="coerce") / MB
            ),
            accepted_per_s=lambda d: d["accepted"] / d["duration_s"],
            wire_mb_per_s=lambda d: d["data_sent_bytes"] / d["duration_s"] / MB,
            req_per_s=lambda d: d["requests"] / d["duration_s"],
            error_rate=lambda d: d["errors"] / d["error_checks"],
            latency_source=lambda d: d["latency_source"].fillna("not available"),
        )
        .reset_index(drop=True)
    )


def throughput_timeline(runs: list[Run]) -> pd.DataFrame:
    """Messages produced per second of each run (all runners and scenarios), from raw k6 samples."""
    samples = over_runs(runs, k6_samples)
    if samples.empty:
        return empty(["run_id", "second", "msg_per_s"])
    return (
        samples[samples["metric"] == "messages_produced"]
        .assign(second=lambda d: (d["time"] - d.groupby("run_id")["time"].transform("min")).dt.total_seconds() // 1)
        .groupby(["run_id", "second"], as_index=False)["value"]
        .sum()
        .rename(columns={"value": "msg_per_s"})
    )


def progression(summary: pd.DataFrame) -> pd.DataFrame:
    """Tests in the order they ran, each against the first and the previous one."""
    return (
        summary.dropna(subset=["msg_per_s"])
        .sort_values(["started_at", "run_id", "scenario"])
        .assign(
            vs_first=lambda d: d["msg_per_s"] / d["msg_per_s"].iloc[0] if len(d) else np.nan,
            vs_previous_pct=lambda d: d["msg_per_s"].pct_change() * 100,
        )
        [["run_id", "test", "scenario", "broker", "acks", "batch_size", "message_size", "ingestors",
          "msg_per_s", "mb_per_s", "error_rate", "batch_p50_ms", "vs_first", "vs_previous_pct"]]
        .reset_index(drop=True)
    )


def _compare(figures: pd.DataFrame, by: str, baseline: str, other: str, match_on: list[str]) -> pd.DataFrame:
    """Long table: per group of comparable runs and per compared figure, the
    baseline's and the other's value, their change and ratio. The latest run
    stands for each side when a side ran several times."""
    columns = [*match_on, "metric", baseline, other, "change_pct", "ratio", "runs"]
    if figures.empty or by not in figures:
        return empty(columns)
    keyed = (
        figures[figures[by].isin([baseline, other])]
        .assign(**{c: lambda d, c=c: d[c].astype(object).where(d[c].notna(), "n/a").astype(str) for c in match_on})
        .sort_values("started_at")
        .drop_duplicates([*match_on, by], keep="last")
    )
    pairs = keyed.groupby(match_on).filter(lambda g: set(g[by]) == {baseline, other})
    if pairs.empty:
        return empty(columns)
    runs = (
        pairs.sort_values(by, key=lambda s: s.map({baseline: 0, other: 1}))
        .groupby(match_on)["run_id"]
        .agg(" vs ".join)
        .rename("runs")
    )
    labels = dict((column, label) for label, column in COMPARED)
    return (
        pairs.melt(id_vars=[*match_on, by], value_vars=[c for _, c in COMPARED if c in pairs], var_name="column")
        .pivot_table(index=[*match_on, "column"], columns=by, values="value", aggfunc="first", dropna=False)
        .reset_index()
        .dropna(subset=[baseline, other], how="all")
        .assign(
            metric=lambda d: pd.Categorical(d["column"].map(labels), categories=[label for label, _ in COMPARED]),
            change_pct=lambda d: (d[other] - d[baseline]) / d[baseline] * 100,
            ratio=lambda d: d[other] / d[baseline],
        )
        .merge(runs, left_on=match_on, right_index=True)
        .sort_values([*match_on, "metric"])
        [columns]
        .reset_index(drop=True)
    )


def acks_comparison(figures: pd.DataFrame) -> pd.DataFrame:
    """acks=1 against acks=all, per broker, for runs whose other settings match."""
    return _compare(figures, "acks", "1", "all", ["broker", *COMPARABLE_ON])


def broker_comparison(figures: pd.DataFrame) -> pd.DataFrame:
    """Apache Kafka against chronik (ratio = chronik / Kafka), per acks, for runs whose other settings match."""
    return _compare(figures, "broker", "kafka", "chronik", ["acks", *COMPARABLE_ON])


# --- end-to-end latency -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EndToEnd:
    """One run's end-to-end latency: the summary row, and the merged histogram when there is one."""

    row: dict
    histogram: object | None  # hdrh HdrHistogram
    # the warm-up window's figures (``--warmup``), kept out of the headline
    warmup_row: dict | None = None


def hlog_path(report: ConsumerReport) -> Path | None:
    """The report's interval log. The path inside the report is the one the
    consumer was given (often absolute in another container), so the file of
    that name beside the report is tried first, then the path itself."""
    declared = (report.data.get("latency") or {}).get("hlog")
    candidates = []
    if isinstance(declared, str) and declared:
        candidates += [report.path.parent / Path(declared).name, report.path.parent / declared]
    candidates.append(report.path.with_suffix(".hlog"))
    return next((c for c in candidates if c.is_file()), None)


def _e2e_row(run_id: str, source: str, replicas: int, p: dict, note: str = "") -> dict:
    ms = {k: (v / 1000 if k != "count" else v) for k, v in p.items()}
    return {
        "run_id": run_id, "source": source, "replicas": replicas, "count": ms.get("count"),
        "e2e_mean_ms": ms.get("mean"), "e2e_p50_ms": ms.get("p50"), "e2e_p90_ms": ms.get("p90"),
        "e2e_p95_ms": ms.get("p95"), "e2e_p99_ms": ms.get("p99"), "e2e_p99.9_ms": ms.get("p99.9"),
        "e2e_max_ms": ms.get("max"), "note": note,
    }


def _report_percentiles(report: ConsumerReport) -> dict | None:
    e2e = (report.data.get("latency") or {}).get("e2e")
    if not isinstance(e2e, dict) or not e2e.get("count"):
        return None
    return {
        "count": e2e.get("count"), "mean": e2e.get("meanUs", np.nan), "p50": e2e.get("p50Us", np.nan),
        "p90": e2e.get("p90Us", np.nan), "p95": e2e.get("p95Us", np.nan), "p99": e2e.get("p99Us", np.nan),
        "p99.9": e2e.get("p999Us", np.nan), "max": e2e.get("maxUs", np.nan),
    }


def end_to_end(run: Run) -> EndToEnd:
    """End-to-end latency of a run: the replicas' ``.hlog`` files merged.

    The merged report's own ``.hlog`` is never added (it already holds the
    replicas' samples). Falls back to the merged report's percentiles (then a
    lone replica's) when a replica's log is missing or cannot be decoded."""
    replicas = [c for c in run.consumers if c.kind == "replica"]
    merged = next((c for c in run.consumers if c.kind == "merged"), None)
    if not replicas and merged is None:
        return EndToEnd(_e2e_row(run.run_id, "not available", 0, {}, "no consumer report"), None)
    paths = [hlog_path(r) for r in replicas]
    problem = ""
    if replicas and all(paths):
        try:
            measured_from = measured_window(run)[0]
            if measured_from is None:
                h, warm = latency.merge_hlogs(paths), None
            else:
                h, warm = latency.split_hlogs(paths, measured_from)
            if h.get_total_count():
                source = f"{len(paths)} replica .hlog files merged" if len(paths) > 1 else "replica .hlog"
                warmup_row = None
                if warm is not None and warm.get_total_count():
                    warmup_row = _e2e_row(run.run_id, f"warm-up: {source}", len(paths),
                                          latency.histogram_percentiles(warm))
                if measured_from is not None:
                    source += " (measured window)"
                return EndToEnd(_e2e_row(run.run_id, source, len(paths), latency.histogram_percentiles(h)), h,
                                warmup_row)
            problem = "the .hlog files hold no samples"
        except HlogError as e:
            problem = f"the .hlog files could not be decoded ({e})"
    else:
        missing = [r.name for r, p in zip(replicas, paths) if p is None]
        problem = f"no .hlog for {', '.join(missing)}" if missing else "no replica reports"
    fallback = merged if merged is not None else (replicas[0] if len(replicas) == 1 else None)
    p = _report_percentiles(fallback) if fallback is not None else None
    if p is None:
        return EndToEnd(_e2e_row(run.run_id, "not available", len(replicas), {}, problem), None)
    return EndToEnd(
        _e2e_row(run.run_id, f"{fallback.name}.json percentiles", len(replicas), p,
                 f"{problem}; percentiles taken from {fallback.name}.json instead of merging raw histograms"),
        None,
    )


def e2e_table(e2e: list[EndToEnd]) -> pd.DataFrame:
    return pd.DataFrame([e.row for e in e2e], columns=E2E_COLUMNS) if e2e else empty(E2E_COLUMNS)


def e2e_warmup_table(e2e: list[EndToEnd]) -> pd.DataFrame:
    """The warm-up window's end-to-end latency of the runs that had one."""
    rows = [e.warmup_row for e in e2e if e.warmup_row is not None]
    return pd.DataFrame(rows, columns=E2E_COLUMNS) if rows else empty(E2E_COLUMNS)


def e2e_distribution(e2e: list[EndToEnd]) -> pd.DataFrame:
    """Percentile distribution (``percentile``, ``value_ms``) of each run's merged histogram."""
    frames = [
        latency.percentile_distribution(e.histogram).assign(run_id=e.row["run_id"], value_ms=lambda d: d["value"] / 1000)
        for e in e2e
        if e.histogram is not None
    ]
    if not frames:
        return empty(["run_id", "percentile", "value_ms"])
    return pd.concat(frames, ignore_index=True)[["run_id", "percentile", "value_ms"]]
