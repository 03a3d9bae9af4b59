"""Key broker-side figures from the Prometheus snapshots in ``metrics/*.prom``.

Owns: which exported metric stands for which figure, for chronik
(``chronik_*``) and for Apache Kafka through the JMX exporter
(``kafka_server_*``, ``kafka_network_*``); counters of several broker
snapshots (one per node) add up. Must not: interpret ingestor metrics
(``verification``) or fail when a broker exports none of these.
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
FIGURES = [figure for figure, _ in KEY_METRICS] + ["mean fsync (ms)"]


def _figure(samples: pd.DataFrame, candidates) -> float:
    for metric, label in candidates:
        hits = samples[(samples["metric"] == metric) & samples["labels"].str.contains(label, regex=False)]
        if len(hits):
            return float(hits["value"].sum())
    return np.nan


def broker_metrics(runs: list[Run]) -> pd.DataFrame:
    """Long: ``run_id``, ``figure``, ``value`` (NaN when the broker exports no such metric)."""
    prom = over_runs(runs, prom_samples)
    rows = []
    for run in runs:
        samples = prom[(prom["run_id"] == run.run_id) & (prom["scope"] == "metrics")] if not prom.empty else prom
        figures = {figure: (_figure(samples, c) if len(samples) else np.nan) for figure, c in KEY_METRICS}
        calls = figures["fsync calls"]
        figures["mean fsync (ms)"] = figures["fsync time (s)"] / calls * 1000 if calls else np.nan
        rows += [(run.run_id, figure, figures[figure]) for figure in FIGURES]
    if not rows:
        return empty(["run_id", "figure", "value"])
    return pd.DataFrame(rows, columns=["run_id", "figure", "value"])
