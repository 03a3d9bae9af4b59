"""Turns loaded runs into tidy, long-format frames: one observation per row, a ``run_id`` on every row.

Owns: naming (columns, normalised settings such as ``acks``), units at the
boundary (timestamps to UTC datetimes, cumulative CPU seconds to cores per
interval), and one function per source. Must not: aggregate across
observations (``summarise``) or read files (``load``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from .load import Run

K6_VALUE_COLUMNS = ["run_id", "runner", "scenario", "metric", "stat", "value"]
K6_SAMPLE_COLUMNS = ["run_id", "runner", "scenario", "metric", "time", "value"]
RESOURCE_USAGE_COLUMNS = [
    "run_id", "component", "name", "pid", "time", "elapsed_s", "cpu_seconds", "cpu_cores", "rss_bytes",
]
CONSUMER_COUNT_COLUMNS = ["run_id", "consumer", "kind", "counter", "value"]
LEDGER_COLUMNS = ["run_id", "ingestor", "producer_id_hex", "outcome", "first", "last", "count"]
PROM_COLUMNS = ["run_id", "scope", "source", "metric", "labels", "value"]
SETTINGS_COLUMNS = [
    "run_id", "test", "broker", "broker_version", "broker_flags", "security", "acks", "message_size", "batch_size",
    "ingestors", "consumers", "partitions", "wal_profile", "produce_profile", "planned_duration_s", "scale",
    "started_at", "finished_at", "git_commit", "host_cores", "host_memory_bytes", "hostname",
]


def empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


def over_runs(runs: Iterable[Run], tidy: Callable[[Run], pd.DataFrame]) -> pd.DataFrame:
    """``tidy`` applied to every run, stacked (an empty frame of the right columns when nothing)."""
    frames = [tidy(run) for run in runs]
    non_empty = [f for f in frames if not f.empty]
    if not non_empty:
        return frames[0] if frames else pd.DataFrame()
    return pd.concat(non_empty, ignore_index=True)


def acks_label(value) -> str | None:
    """Kafka's spellings of acks, normalised: ``-1`` and ``all`` are "all"."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    text = str(value).strip().lower()
    return "all" if text in {"-1", "all"} else text


def to_utc(values: pd.Series) -> pd.Series:
    """Timestamps as written by the run script or k6: epoch seconds (or ms/µs/ns,
    told apart by magnitude) or ISO-8601 text."""
    numeric = pd.to_numeric(values, errors="coerce")
    if len(values) and numeric.notna().all():
        magnitude = numeric.abs().max()
        unit = "ns" if magnitude > 1e17 else "us" if magnitude > 1e14 else "ms" if magnitude > 1e11 else "s"
        return pd.to_datetime(numeric, unit=unit, utc=True)
    return pd.to_datetime(values, utc=True, format="ISO8601", errors="coerce")


def load_window(run: Run) -> dict[str, float | None]:
    """When the load ran, in seconds since the epoch, as run-all.sh records
    it: ``load_from`` (the warm-up's start), ``measured_from`` (the end of
    ``--warmup``: what the headline covers), ``measured_until`` (the measured
    k6 run's end). Missing keys are None (older runs, Kubernetes runs)."""
    settings = run.meta.get("settings") or {}

    def num(key: str) -> float | None:
        v = settings.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return {k: num(k) for k in ("load_from", "measured_from", "measured_until")}


def measured_window(run: Run) -> tuple[float | None, float | None]:
    """(measured_from, measured_until) of ``load_window``."""
    w = load_window(run)
    return w["measured_from"], w["measured_until"]


def run_settings(run: Run) -> pd.DataFrame:
    """One row: who ran what against which broker with which settings."""
    meta = run.meta
    settings = meta.get("settings") or {}
    broker = meta.get("broker") or {}
    host = meta.get("host") or {}
    row = {
        "run_id": run.run_id,
        "test": settings.get("test"),
        "broker": broker.get("kind"),
        "broker_version": broker.get("version"),
        "broker_flags": " ".join(str(f) for f in broker.get("flags") or []),
        # run-all.sh --secure: "SASL_SSL SCRAM-SHA-512, ACLs, ..."; older runs: None
        "security": settings.get("security"),
        "acks": acks_label(settings.get("acks")),
        "message_size": settings.get("message_size"),
        "batch_size": settings.get("batch_size"),
        "ingestors": settings.get("ingestors"),
        "consumers": settings.get("consumers"),
        "partitions": settings.get("partitions"),
        "wal_profile": settings.get("wal_profile"),
        "produce_profile": settings.get("produce_profile"),
        "planned_duration_s": settings.get("duration_s"),
        "scale": settings.get("scale"),
        "started_at": meta.get("started_at"),
        "finished_at": meta.get("finished_at"),
        "git_commit": meta.get("git_commit"),
        "host_cores": host.get("cores"),
        "host_memory_bytes": host.get("memory_bytes"),
        "hostname": host.get("hostname"),
    }
    return pd.DataFrame([row], columns=SETTINGS_COLUMNS).assign(
        started_at=lambda d: pd.to_datetime(d["started_at"], utc=True, format="ISO8601", errors="coerce"),
        finished_at=lambda d: pd.to_datetime(d["finished_at"], utc=True, format="ISO8601", errors="coerce"),
    )


def k6_values(run: Run) -> pd.DataFrame:
    """Every summary value: ``metric`` (``batch_latency``), ``stat`` (``p(95)``), ``value``.
    The run duration appears as metric ``test_run_duration``, stat ``ms``."""
    rows = [
        (run.run_id, s.runner, s.scenario, metric, stat, value)
        for s in run.k6_summaries
        for metric, body in s.data["metrics"].items()
        if isinstance(body, dict)
        for stat, value in (body.get("values") or {}).items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ] + [
        (run.run_id, s.runner, s.scenario, "test_run_duration", "ms", (s.data.get("state") or {}).get("testRunDurationMs"))
        for s in run.k6_summaries
        if isinstance((s.data.get("state") or {}).get("testRunDurationMs"), (int, float))
    ]
    if not rows:
        return empty(K6_VALUE_COLUMNS)
    return pd.DataFrame(rows, columns=K6_VALUE_COLUMNS).astype({"value": float})


def k6_samples(run: Run) -> pd.DataFrame:
    """Raw k6 samples (``--out csv``), one row per sample."""
    if run.k6_raw.empty:
        return empty(K6_SAMPLE_COLUMNS)
    return (
        run.k6_raw.rename(columns={"metric_name": "metric", "metric_value": "value"})
        .assign(
            run_id=run.run_id,
            time=lambda d: to_utc(d["timestamp"]),
            value=lambda d: pd.to_numeric(d["value"], errors="coerce"),
        )
        .dropna(subset=["time", "value"])
        [K6_SAMPLE_COLUMNS]
        .reset_index(drop=True)
    )


def resource_usage(run: Run) -> pd.DataFrame:
    """Per process and sampling interval: CPU cores used (Δcpu_seconds / Δt) and RSS.

    Each (component, name, pid) is one process: a restarted process starts a
    new series, so cumulative CPU never runs backwards within one. The first
    sample of a process has no interval before it and ``cpu_cores`` NaN."""
    if run.resources.empty:
        return empty(RESOURCE_USAGE_COLUMNS)
    keys = ["component", "name", "pid"]
    return (
        run.resources.assign(
            run_id=run.run_id,
            time=lambda d: to_utc(d["timestamp"]),
            cpu_seconds=lambda d: pd.to_numeric(d["cpu_seconds"], errors="coerce"),
            rss_bytes=lambda d: pd.to_numeric(d["rss_bytes"], errors="coerce"),
        )
        .dropna(subset=["time"])
        .sort_values([*keys, "time"])
        .assign(
            elapsed_s=lambda d: (d["time"] - d["time"].min()).dt.total_seconds(),
            cpu_cores=lambda d: (
                d.groupby(keys)["cpu_seconds"].diff().clip(lower=0)
                / d.groupby(keys)["time"].diff().dt.total_seconds()
            ),
        )
        [RESOURCE_USAGE_COLUMNS]
        .reset_index(drop=True)
    )


COUNTERS = (
    "consumed", "verified", "duplicates", "reordered", "corrupt", "redeliveries", "foreign", "envelopeErrors",
    "producers", "distinctSequences", "gaps", "unexplainedGaps", "lost", "failedNotConsumed",
    "deliveredDespiteFailure", "unknownNotConsumed",
)


def consumer_counts(run: Run) -> pd.DataFrame:
    """Every count of every consumer report (replicas and ``merged``)."""
    rows = [
        (run.run_id, report.name, report.kind, counter, (report.data.get("counts") or {}).get(counter))
        for report in run.consumers
        for counter in COUNTERS
        if isinstance((report.data.get("counts") or {}).get(counter), (int, float))
    ]
    if not rows:
        return empty(CONSUMER_COUNT_COLUMNS)
    return pd.DataFrame(rows, columns=CONSUMER_COUNT_COLUMNS).astype({"value": "int64"})


def ledger_ranges(run: Run) -> pd.DataFrame:
    """Each inclusive sequence range of each ingestor ledger, by outcome."""
    rows = []
    for ledger in run.ledgers:
        d = ledger.data
        hex_id = d.get("producer_id_hex") or d.get("producerIdHex")
        if hex_id is None and isinstance(d.get("producer_id"), int):
            hex_id = f"{d['producer_id']:016x}"
        for outcome in ("acknowledged", "failed"):
            for pair in d.get(outcome) or []:
                if isinstance(pair, (list, tuple)) and len(pair) == 2:
                    first, last = int(pair[0]), int(pair[1])
                    rows.append((run.run_id, ledger.ingestor, hex_id, outcome, first, last, last - first + 1))
        next_sequence = d.get("next_sequence", d.get("nextSequence"))
        if isinstance(next_sequence, int):
            # "next_sequence" row: sequences 0..next-1 were handed to the client
            rows.append((run.run_id, ledger.ingestor, hex_id, "issued", 0, next_sequence - 1, next_sequence))
    if not rows:
        return empty(LEDGER_COLUMNS)
    return pd.DataFrame(rows, columns=LEDGER_COLUMNS)


def prom_samples(run: Run) -> pd.DataFrame:
    if run.prom.empty:
        return empty(PROM_COLUMNS)
    return run.prom.assign(run_id=run.run_id)[PROM_COLUMNS]
