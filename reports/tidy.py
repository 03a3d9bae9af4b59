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

from .load import LoadSummary, Run

LOAD_VALUE_COLUMNS = ["run_id", "generator", "scenario", "metric", "stat", "value"]
LOAD_SAMPLE_COLUMNS = ["run_id", "generator", "scenario", "metric", "time", "value"]
REQUEST_COLUMNS = [
    "run_id", "generator", "scenario", "seq", "step", "route", "scheduled", "time", "latency_ms", "status",
    "messages", "ok", "failed", "bytes_out", "bytes_in", "error", "sent", "request_failed",
]
# the error of a row for a request the generator never sent (load/SPEC.md)
NOT_SENT = "not_sent"
RESOURCE_USAGE_COLUMNS = [
    "run_id", "component", "name", "pid", "time", "elapsed_s", "cpu_seconds", "cpu_cores", "rss_bytes",
]
CONSUMER_COUNT_COLUMNS = ["run_id", "consumer", "kind", "counter", "value"]
LEDGER_COLUMNS = ["run_id", "ingestor", "producer_id_hex", "outcome", "first", "last", "count"]
PROM_COLUMNS = ["run_id", "scope", "source", "metric", "labels", "value"]
SETTINGS_COLUMNS = [
    "run_id", "test", "broker", "broker_version", "broker_flags", "security", "acks", "message_size", "batch_size",
    "ingestors", "consumers", "partitions", "wal_profile", "produce_profile", "planned_duration_s", "scale",
    "started_at", "finished_at", "git_commit", "host_cores", "host_memory_bytes", "hostname", "load_generator",
    "overlay", "racks",
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
    """Timestamps as written by the run script or a load generator: epoch
    seconds (or ms/µs/ns, told apart by magnitude) or ISO-8601 text."""
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
    load's end). Missing keys are None (older runs, Kubernetes runs)."""
    settings = run.meta.get("settings") or {}

    def num(key: str) -> float | None:
        v = settings.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return {k: num(k) for k in ("load_from", "measured_from", "measured_until")}


def measured_window(run: Run) -> tuple[float | None, float | None]:
    """(measured_from, measured_until) of ``load_window``."""
    w = load_window(run)
    return w["measured_from"], w["measured_until"]


def load_generator_version(meta: dict) -> str | None:
    """``versions.loadgen`` of meta.json; a legacy run's ``versions.k6`` as "k6 …"."""
    versions = meta.get("versions") or {}
    if versions.get("loadgen"):
        return str(versions["loadgen"])
    k6 = versions.get("k6")
    return None if not k6 else str(k6) if str(k6).startswith("k6") else f"k6 {k6}"


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
        "load_generator": load_generator_version(meta),
        # k8s-perf/run.sh: k8s-perf/overlays/<overlay>; local runs have none
        "overlay": settings.get("overlay"),
        # run-all.sh --racks a,b,c (KIP-392 follower fetching); "" or absent: none
        "racks": settings.get("racks") or None,
    }
    return pd.DataFrame([row], columns=SETTINGS_COLUMNS).assign(
        started_at=lambda d: pd.to_datetime(d["started_at"], utc=True, format="ISO8601", errors="coerce"),
        finished_at=lambda d: pd.to_datetime(d["finished_at"], utc=True, format="ISO8601", errors="coerce"),
    )


def summary_values(run: Run, summaries: Iterable[LoadSummary]) -> pd.DataFrame:
    """Every value of ``summaries``: ``metric`` (``batch_latency``, or a step's
    ``batch_latency{step:r1_l800}``), ``stat`` (``p(95)``), ``value``. The run
    duration appears as metric ``test_run_duration``, stat ``ms``."""
    summaries = list(summaries)
    rows = [
        (run.run_id, s.generator, s.scenario, metric, stat, value)
        for s in summaries
        for metric, body in s.data["metrics"].items()
        if isinstance(body, dict)
        for stat, value in (body.get("values") or {}).items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    ] + [
        (run.run_id, s.generator, s.scenario, "test_run_duration", "ms", (s.data.get("state") or {}).get("testRunDurationMs"))
        for s in summaries
        if isinstance((s.data.get("state") or {}).get("testRunDurationMs"), (int, float))
    ]
    if not rows:
        return empty(LOAD_VALUE_COLUMNS)
    return pd.DataFrame(rows, columns=LOAD_VALUE_COLUMNS).astype({"value": float})


def load_values(run: Run) -> pd.DataFrame:
    """The summary values of every load generator (a legacy run: every k6 runner)."""
    return summary_values(run, run.load_summaries)


def merged_values(run: Run) -> pd.DataFrame:
    """The values of ``load/merged-<plan>.json`` (generator ``merged``)."""
    return summary_values(run, run.merged_summaries)


def load_requests(run: Run) -> pd.DataFrame:
    """chronik-loadgen's raw rows, one per request, typed: ``scheduled`` and
    ``time`` (when it was sent; NaT when never sent) as UTC datetimes, ``sent``
    (False for the ``not_sent`` rows of dropped requests), ``request_failed``
    (sent, and answered with an error, no answer, a status ≥ 400 or some
    message not acknowledged: a 5xx, ``malformed_answer``, a partial failure)."""
    r = run.load_requests
    if r.empty:
        return empty(REQUEST_COLUMNS)
    num = {c: pd.to_numeric(r[c], errors="coerce")
           for c in ("seq", "scheduled_s", "sent_s", "latency_ms", "status", "messages", "ok", "failed", "bytes_out",
                     "bytes_in")}
    error = r["error"].fillna("").astype(str)
    sent = num["sent_s"].notna() & (error != NOT_SENT)
    status = num["status"].fillna(0)
    return pd.DataFrame({
        "run_id": run.run_id,
        "generator": r["generator"],
        "scenario": r["scenario"],
        "seq": num["seq"],
        "step": r["step"].fillna("").astype(str),
        "route": r["route"].fillna("").astype(str),
        "scheduled": pd.to_datetime(num["scheduled_s"], unit="s", utc=True),
        "time": pd.to_datetime(num["sent_s"].where(sent), unit="s", utc=True),
        "latency_ms": num["latency_ms"].where(sent),
        "status": status,
        "messages": num["messages"].fillna(0),
        "ok": num["ok"].fillna(0),
        "failed": num["failed"].fillna(0),
        "bytes_out": num["bytes_out"],
        "bytes_in": num["bytes_in"],
        "error": error,
        "sent": sent,
        "request_failed": sent & ((error != "") | (status == 0) | (status >= 400) | (num["failed"].fillna(0) > 0)),
    })[REQUEST_COLUMNS]


def request_samples(requests: pd.DataFrame) -> pd.DataFrame:
    """The typed request rows of ``load_requests`` as the long samples the
    library reads (one per request and metric, at the time it was sent):

    - ``batch_latency``: latency of every sent ``batch`` / ``fire`` request;
      ``single_latency``: of every sent ``single`` one;
    - ``messages_produced``: messages acknowledged (``ok``) by a ``batch`` /
      ``single`` request; ``messages_accepted``: accepted by a ``fire`` one;
    - ``messages_failed``: ``failed`` (messages − ok) of every request, a
      request never sent too (at its scheduled time), as chronik-loadgen
      counts them; ``produce_errors``: 1 for a failed request, 0 for a good
      one, over the requests sent;
    - ``requests_dropped``: 1 per request never sent, at its scheduled time
      (no latency: it is not a sample of any latency)."""
    if requests.empty:
        return empty(LOAD_SAMPLE_COLUMNS)
    sent = requests[requests["sent"]]
    unsent = requests[~requests["sent"]]
    parts = [
        sent[sent["route"].isin(["batch", "fire"])].assign(metric="batch_latency", value=lambda d: d["latency_ms"]),
        sent[sent["route"] == "single"].assign(metric="single_latency", value=lambda d: d["latency_ms"]),
        sent[sent["route"].isin(["batch", "single"])].assign(metric="messages_produced", value=lambda d: d["ok"]),
        sent[sent["route"] == "fire"].assign(metric="messages_accepted", value=lambda d: d["ok"]),
        sent.assign(metric="messages_failed", value=lambda d: d["failed"]),
        unsent.assign(metric="messages_failed", value=lambda d: d["failed"], time=lambda d: d["scheduled"]),
        sent.assign(metric="produce_errors", value=lambda d: d["request_failed"].astype(float)),
        unsent.assign(metric="requests_dropped", value=1.0, time=lambda d: d["scheduled"]),
    ]
    return (
        pd.concat([p[LOAD_SAMPLE_COLUMNS] for p in parts if len(p)], ignore_index=True)
        .astype({"value": float})
        .dropna(subset=["time", "value"])
        .reset_index(drop=True)
    )


def k6_samples(run: Run) -> pd.DataFrame:
    """A legacy run's raw k6 samples (``--out csv``), one row per sample."""
    if run.k6_raw.empty:
        return empty(LOAD_SAMPLE_COLUMNS)
    return (
        run.k6_raw.rename(columns={"metric_name": "metric", "metric_value": "value"})
        .assign(
            run_id=run.run_id,
            time=lambda d: to_utc(d["timestamp"]),
            value=lambda d: pd.to_numeric(d["value"], errors="coerce"),
        )
        .dropna(subset=["time", "value"])
        [LOAD_SAMPLE_COLUMNS]
        .reset_index(drop=True)
    )


def load_samples(run: Run) -> pd.DataFrame:
    """Every raw sample of a run: its request rows as samples (``request_samples``)
    and, for a legacy run, its raw k6 samples."""
    frames = [f for f in (request_samples(load_requests(run)), k6_samples(run)) if not f.empty]
    if not frames:
        return empty(LOAD_SAMPLE_COLUMNS)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


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
