"""Key broker-side figures from the Prometheus snapshots in ``metrics/*.prom``.

Owns: which exported metric stands for which figure, for chronik
(``chronik_*``) and for Apache Kafka through the JMX exporter
(``kafka_server_*``, ``kafka_network_*``); counters of several broker
snapshots (one per node) add up; the bytes consumers fetched from leaders and
from followers (``consumer_fetch``: KIP-392 follower fetching, ``run-all.sh
--racks``), each broker's end snapshot minus its ``metrics/start/`` one.
Must not: interpret ingestor metrics (``verification``) or fail when a
broker exports none of these.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .load import Run
from .tidy import empty, over_runs, prom_samples

# figure -> candidate (metric, required label text); the first the run has is used
KEY_METRICS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("records in", (("chronik_records_in_total", ""), ("kafka_server_brokertopicmetrics_messagesin_total", ""))),
    ("bytes in", (("chronik_network_bytes_in_total", ""), ("kafka_server_brokertopicmetrics_bytesin_total", ""))),
    ("produce requests", (
        ("chronik_requests_total", 'api="Produce"'),
        ("kafka_network_requestmetrics_requests_total", 'request="Produce"'),
    )),
    ("produce request errors", (
        ("chronik_request_errors_total", 'api="Produce"'),
        ("kafka_server_brokertopicmetrics_failedproducerequests_total", ""),
    )),
    ("fsync calls", (("chronik_fsync_total", ""),)),
    ("fsync time (s)", (("chronik_fsync_duration_seconds_sum", ""),)),
    ("produce backpressure", (("chronik_produce_backpressure_total", ""),)),
    ("connections closed on error", (("chronik_connections_closed_on_error_total", ""),)),
)
# record bytes a broker returned to consumers, by whether it led or followed the partition
CONSUMER_FETCH_BYTES = "chronik_consumer_fetch_bytes_total"
FETCH_FIGURES = {
    "leader_fetch_bytes": "consumer bytes from leaders",
    "follower_fetch_bytes": "consumer bytes from followers",
    "follower_fetch_share": "follower share of consumer bytes",
}
FETCH_COLUMNS = ["run_id", *FETCH_FIGURES]
FIGURES = [figure for figure, _ in KEY_METRICS] + ["mean fsync (ms)", *FETCH_FIGURES.values()]


def _figure(samples: pd.DataFrame, candidates) -> float:
    for metric, label in candidates:
        hits = samples[(samples["metric"] == metric) & samples["labels"].str.contains(label, regex=False)]
        if len(hits):
            return float(hits["value"].sum())
    return np.nan


def _fetch_bytes(run_id: str, samples: pd.DataFrame) -> dict:
    """One run's consumer fetch bytes by replica role: per broker snapshot
    (source) and label set, the end value minus the start snapshot's (a
    counter that went down restarted with its broker: its end value is what
    the new process counted), summed over brokers. NaN when no broker
    exports the counter (Apache Kafka, chronik before it)."""
    hits = samples[samples["metric"] == CONSUMER_FETCH_BYTES]
    end = hits[hits["scope"] == "metrics"].set_index(["source", "labels"])["value"]
    if end.empty:
        return {"run_id": run_id, **{column: np.nan for column in FETCH_FIGURES}}
    start = hits[hits["scope"] == "metrics-start"].set_index(["source", "labels"])["value"]
    before = start.reindex(end.index).fillna(0.0)
    delta = end.where(end < before, end - before).reset_index()
    by_role = delta.assign(role=delta["labels"].str.extract(r'replica="([^"]*)"', expand=False)).groupby("role")["value"].sum()
    leader, follower = float(by_role.get("leader", 0.0)), float(by_role.get("follower", 0.0))
    total = leader + follower
    return {"run_id": run_id, "leader_fetch_bytes": leader, "follower_fetch_bytes": follower,
            "follower_fetch_share": follower / total if total else np.nan}


def consumer_fetch(runs: list[Run]) -> pd.DataFrame:
    """Per run: bytes of records the brokers returned to consumers as the
    partition's leader and as a follower (KIP-392) over the run, and the
    followers' share; NaN where the brokers export no such counter."""
    prom = over_runs(runs, prom_samples)
    rows = [
        _fetch_bytes(run.run_id, prom[prom["run_id"] == run.run_id] if not prom.empty else prom)
        for run in runs
    ]
    return pd.DataFrame(rows, columns=FETCH_COLUMNS) if rows else empty(FETCH_COLUMNS)


def broker_metrics(runs: list[Run]) -> pd.DataFrame:
    """Long: ``run_id``, ``figure``, ``value`` (NaN when the broker exports no such metric)."""
    prom = over_runs(runs, prom_samples)
    fetch = consumer_fetch(runs).set_index("run_id")
    rows = []
    for run in runs:
        samples = prom[(prom["run_id"] == run.run_id) & (prom["scope"] == "metrics")] if not prom.empty else prom
        figures = {figure: (_figure(samples, c) if len(samples) else np.nan) for figure, c in KEY_METRICS}
        calls = figures["fsync calls"]
        figures["mean fsync (ms)"] = figures["fsync time (s)"] / calls * 1000 if calls else np.nan
        figures.update({label: fetch.at[run.run_id, column] for column, label in FETCH_FIGURES.items()})
        rows += [(run.run_id, figure, figures[figure]) for figure in FIGURES]
    if not rows:
        return empty(["run_id", "figure", "value"])
    return pd.DataFrame(rows, columns=["run_id", "figure", "value"])
