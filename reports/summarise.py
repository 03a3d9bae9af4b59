"""Throughput and latency figures per test and per load generator, their progression,
the acks=1 vs acks=all and chronik vs Kafka comparisons, and end-to-end latency.

Owns: how load generators are combined (messages add up; a scenario's rate is
its messages over its longest generator's duration; error rates are pooled
counts, never averaged rates; batch-latency percentiles come from raw samples
pooled across generators, else from chronik-loadgen's merged summary (which
pooled them), else from a single generator's summary, and are otherwise left
unpooled; the thresholds that set the exit status come from the merged
summary, else from each generator's), and how end-to-end latency is taken
from the consumers' merged ``.hlog`` files. Must not: read files (``load``)
or format text (``render``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import latency
from .latency import HlogError
from .load import ConsumerReport, LoadSummary, Run
from .tidy import empty, load_samples, load_values, measured_window, merged_values, over_runs, run_settings

MB = 1_000_000  # MB/s in decimal megabytes, as the seeds report them

GENERATOR_COLUMNS = [
    "run_id", "scenario", "generator", "messages", "duration_s", "msg_per_s", "requests", "req_per_s",
    "errors", "error_checks", "error_rate", "http_failed_rate", "dropped", "messages_failed", "data_sent_bytes",
    "payload_bytes", "accepted", "vus_max", "batch_avg_ms", "batch_p50_ms", "batch_p90_ms", "batch_p95_ms",
    "batch_p99_ms", "batch_p99.9_ms", "batch_max_ms",
]
BATCH_LATENCY_COLUMNS = [
    "batch_avg_ms", "batch_p50_ms", "batch_p90_ms", "batch_p95_ms", "batch_p99_ms", "batch_p99.9_ms", "batch_max_ms",
]
THRESHOLD_COLUMNS = ["run_id", "scenario", "thresholds_ok", "failed_thresholds", "thresholds_from"]
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
    # KIP-392 follower fetching (reports/broker.py: consumer_fetch); n/a for Kafka
    ("consumer bytes from leaders", "leader_fetch_bytes"),
    ("consumer bytes from followers", "follower_fetch_bytes"),
    ("follower share of consumer bytes", "follower_fetch_share"),
)
# settings that must be equal for two runs to be compared
COMPARABLE_ON = ["scenario", "message_size", "batch_size", "partitions", "ingestors"]
# the start of latency_source when several generators' percentiles could not be pooled
NOT_POOLED = "not pooled"


def settings(runs: list[Run]) -> pd.DataFrame:
    """One row per run: test, broker, acks, sizes, counts, profiles, host."""
    return over_runs(runs, run_settings)


def _stat(wide: pd.DataFrame, metric: str, stat: str) -> pd.Series:
    key = f"{metric}|{stat}"
    return wide[key] if key in wide.columns else pd.Series(np.nan, index=wide.index)


def _wide(values: pd.DataFrame) -> pd.DataFrame:
    return values.assign(key=lambda d: d["metric"] + "|" + d["stat"]).pivot_table(
        index=["run_id", "scenario", "generator"], columns="key", values="value", aggfunc="first"
    )


def _batch_latency_stats(wide: pd.DataFrame) -> dict[str, pd.Series]:
    """The batch-latency columns of summaries; ``med`` is plain k6's p50."""
    return {
        "batch_avg_ms": _stat(wide, "batch_latency", "avg"),
        "batch_p50_ms": _stat(wide, "batch_latency", "p(50)").fillna(_stat(wide, "batch_latency", "med")),
        "batch_p90_ms": _stat(wide, "batch_latency", "p(90)"),
        "batch_p95_ms": _stat(wide, "batch_latency", "p(95)"),
        "batch_p99_ms": _stat(wide, "batch_latency", "p(99)"),
        "batch_p99.9_ms": _stat(wide, "batch_latency", "p(99.9)"),
        "batch_max_ms": _stat(wide, "batch_latency", "max"),
    }


def generators(runs: list[Run]) -> pd.DataFrame:
    """One row per (run, scenario, load generator), from the generators' summaries
    (a legacy run: its k6 runners'; plain k6's trend stats have ``med``, no
    ``p(99.9)``). ``dropped``: requests the generator could not send on
    schedule (``requests_dropped``; k6: ``dropped_iterations``);
    ``accepted``: messages a fire-and-forget plan handed over."""
    values = over_runs(runs, load_values)
    if values.empty:
        return empty(GENERATOR_COLUMNS)
    wide = _wide(values)
    # produce_errors is the plan's own failure Rate; http_req_failed stands in without it
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
                "dropped": _stat(wide, "requests_dropped", "count").fillna(_stat(wide, "dropped_iterations", "count")),
                "messages_failed": _stat(wide, "messages_failed", "count"),
                "data_sent_bytes": _stat(wide, "data_sent", "count"),
                "payload_bytes": _stat(wide, "payload_bytes", "count"),
                "accepted": _stat(wide, "messages_accepted", "count"),
                "vus_max": _stat(wide, "vus_max", "max"),
                **_batch_latency_stats(wide),
            }
        )
        .assign(
            msg_per_s=lambda d: d["messages"] / d["duration_s"],
            req_per_s=lambda d: d["requests"] / d["duration_s"],
            error_rate=lambda d: d["errors"] / d["error_checks"],
        )
        .reset_index()
        [GENERATOR_COLUMNS]
    )


def _pooled_summaries(runs: list[Run]) -> pd.DataFrame:
    """Batch latency of each run's ``merged-<plan>.json``, per (run, scenario)."""
    values = over_runs(runs, merged_values)
    if values.empty:
        return empty(["run_id", "scenario", "generators", *BATCH_LATENCY_COLUMNS])
    wide = _wide(values)
    gens = {(r.run_id, s.scenario): s.data.get("generators") for r in runs for s in r.merged_summaries}
    return (
        pd.DataFrame(_batch_latency_stats(wide))
        .reset_index()
        .assign(generators=lambda d: [gens.get(k) for k in zip(d["run_id"], d["scenario"])])
        .dropna(subset=["batch_p99_ms"])
    )


def batch_latency(runs: list[Run], gens: pd.DataFrame) -> pd.DataFrame:
    """Batch latency per (run, scenario), with where its percentiles came from.

    Several generators' percentiles are only ever computed from their pooled
    raw samples (here, or by chronik-loadgen into the merged summary); with
    per-generator summaries alone they are not pooled (and never averaged)."""
    samples = over_runs(runs, load_samples)
    latency_samples = samples[samples["metric"] == "batch_latency"] if not samples.empty else samples
    pooled = _pooled_summaries(runs).set_index(["run_id", "scenario"])
    engines = {(r.run_id, s.scenario, s.generator): s.engine for r in runs for s in r.load_summaries}
    rows = []
    for (run_id, scenario), group in gens.groupby(["run_id", "scenario"], sort=False):
        names = set(group["generator"])
        raw = latency_samples[(latency_samples["run_id"] == run_id) & (latency_samples["scenario"] == scenario)]
        if len(raw) and names <= set(raw["generator"]):
            p = latency.sample_percentiles(raw["value"])
            source = f"raw samples of {len(names)} generators pooled" if len(names) > 1 else "raw samples"
            figures = [p["mean"], p["p50"], p["p90"], p["p95"], p["p99"], p["p99.9"], p["max"]]
        elif len(names) == 1:
            engine = engines.get((run_id, scenario, next(iter(names))))
            source = "k6 summary (legacy run)" if engine == "k6" else "generator summary"
            figures = group[BATCH_LATENCY_COLUMNS].iloc[0].tolist()
        elif (run_id, scenario) in pooled.index:
            merged = pooled.loc[(run_id, scenario)]
            source = f"merged summary ({len(names)} generators pooled by chronik-loadgen)"
            figures = merged[BATCH_LATENCY_COLUMNS].tolist()
        else:
            source = f"{NOT_POOLED}: {len(names)} generators, summaries only (per generator below)"
            figures = [np.nan] * len(BATCH_LATENCY_COLUMNS)
        rows.append((run_id, scenario, *figures, source))
    return pd.DataFrame(rows, columns=["run_id", "scenario", *BATCH_LATENCY_COLUMNS, "latency_source"])


def failed_thresholds(summary: LoadSummary) -> list[str] | None:
    """The thresholds a summary records as failed ([] when all held), or None
    when it records none: chronik-loadgen's ``thresholds_ok`` and
    ``failed_thresholds``, else k6's per-metric ``thresholds`` (``{"ok": false}``)."""
    data = summary.data
    if isinstance(data.get("thresholds_ok"), bool):
        failed = [str(f) for f in data.get("failed_thresholds") or []]
        if data["thresholds_ok"]:
            return []
        if data.get("steps") and failed:
            # a staircase gates per step and its upper steps are meant to fail
            return [f"{len(failed)} step gates (find-max: see Max sustainable rate)"]
        return failed or ["a threshold (not named)"]
    found, failed = False, []
    for metric, body in data["metrics"].items():
        gates = body.get("thresholds") if isinstance(body, dict) else None
        if isinstance(gates, dict):
            for expression, result in gates.items():
                found = True
                if isinstance(result, dict) and result.get("ok") is False:
                    failed.append(f"{metric}: {expression}")
    return failed if found else None


def thresholds(runs: list[Run]) -> pd.DataFrame:
    """Per (run, scenario): whether the thresholds that set the load
    generator's exit status held, and which failed. From the merged summary
    (the pooled figures the exit status is decided on), else from each
    generator's own summary (a failure named with its generator when there
    are several)."""
    rows = []
    for run in runs:
        merged = {s.scenario: s for s in run.merged_summaries}
        by_scenario: dict[str, list[LoadSummary]] = {}
        for s in run.load_summaries:
            by_scenario.setdefault(s.scenario, []).append(s)
        for scenario in dict.fromkeys([*by_scenario, *merged]):
            if scenario in merged and failed_thresholds(merged[scenario]) is not None:
                failed, source = failed_thresholds(merged[scenario]), "merged summary"
            else:
                each = [(s.generator, failed_thresholds(s)) for s in by_scenario.get(scenario, [])]
                each = [(g, f) for g, f in each if f is not None]
                if not each:
                    continue
                several = len(each) > 1
                failed = [f"{g}: {f}" if several else f for g, fs in each for f in fs]
                source = "each generator's summary" if several else "generator summary"
            rows.append((run.run_id, scenario, not failed, "; ".join(failed), source))
    if not rows:
        return empty(THRESHOLD_COLUMNS)
    return pd.DataFrame(rows, columns=THRESHOLD_COLUMNS)


def test_summary(runs: list[Run], gens: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (run, scenario): messages, msg/s, MB/s, error rate, failed
    messages, dropped requests, batch latency, thresholds (and, for
    fire-and-forget plans, messages accepted per second). A run without load
    generator summaries keeps one row with the figures missing."""
    gens = generators(runs) if gens is None else gens

    def total(s: pd.Series) -> float:
        return s.sum(min_count=1)

    per_scenario = (
        gens.groupby(["run_id", "scenario"], as_index=False, sort=False)
        .agg(
            generators=("generator", "nunique"),
            messages=("messages", total),
            duration_s=("duration_s", "max"),
            requests=("requests", total),
            errors=("errors", total),
            error_checks=("error_checks", total),
            messages_failed=("messages_failed", total),
            data_sent_bytes=("data_sent_bytes", total),
            payload_bytes=("payload_bytes", total),
            accepted=("accepted", total),
            dropped=("dropped", total),
        )
        .merge(batch_latency(runs, gens), on=["run_id", "scenario"], how="left")
        .merge(thresholds(runs), on=["run_id", "scenario"], how="left")
    )
    return (
        settings(runs)
        .merge(per_scenario, on="run_id", how="left")
        .assign(
            msg_per_s=lambda d: d["messages"] / d["duration_s"],
            # payload bytes the plan counted, else messages x the configured size
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
    """Messages per second of each run (all generators and scenarios), from
    raw samples: messages produced (acknowledged), or for a run that produced
    none through a blocking route, messages accepted (fire-and-forget)."""
    samples = over_runs(runs, load_samples)
    if samples.empty:
        return empty(["run_id", "second", "msg_per_s"])
    counted = samples[samples["metric"].isin(["messages_produced", "messages_accepted"])]
    if counted.empty:
        return empty(["run_id", "second", "msg_per_s"])
    blocking = counted.groupby("run_id")["metric"].transform(lambda m: (m == "messages_produced").any())
    counted = counted[(counted["metric"] == "messages_produced") | ~blocking]
    return (
        counted.assign(second=lambda d: (d["time"] - d.groupby("run_id")["time"].transform("min")).dt.total_seconds() // 1)
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
    compared = (
        pairs.melt(id_vars=[*match_on, by], value_vars=[c for _, c in COMPARED if c in pairs], var_name="column")
        .pivot_table(index=[*match_on, "column"], columns=by, values="value", aggfunc="first", dropna=False)
        .reset_index()
        .dropna(subset=[baseline, other], how="all")
    )
    if compared.empty:
        # comparable runs without a figure of their own (runs with tenants: reports/tenants.py)
        return empty(columns)
    return (
        compared
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
