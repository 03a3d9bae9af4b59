"""CPU and memory of each process of a run (broker, ingestors, consumers, the load generator),
from the once-a-second ``resources.csv`` samples.

Owns: average cores (CPU seconds over the sampled window), peak cores (the
busiest sampling interval), peak RSS, their sums per component, and the
efficiency figures: msg/s per core and CPU µs per message, each component's
share of the machine (average cores ÷ the host's cores), and which side used
the cores: the load generator (chronik-loadgen, component ``loadgen``; a
legacy run's ``k6``) or the system under test. Must not: decide
what a run's message count is (the caller passes it).
"""

from __future__ import annotations

import pandas as pd

from .load import Run
from .tidy import empty, over_runs, resource_usage

PROCESS_COLUMNS = [
    "run_id", "component", "name", "pid", "samples", "window_s", "cpu_seconds", "avg_cores", "peak_cores",
    "peak_rss_bytes",
]
COMPONENT_COLUMNS = [
    "run_id", "component", "processes", "cpu_seconds", "avg_cores", "peak_cores", "peak_rss_bytes",
    "msg_per_s_per_core", "cpu_us_per_msg", "machine_share",
]
# components in the order a message passes them, then the observers
COMPONENT_ORDER = ["loadgen", "k6", "ingestor", "broker", "consumer", "prometheus"]
# the load generator (run-all.sh labels chronik-loadgen's processes `loadgen`;
# legacy runs `k6`); every other pipeline component is the system under test
LOAD_GENERATORS = ["loadgen", "k6"]
SYSTEM_UNDER_TEST = ["ingestor", "broker", "consumer"]
# above this share of the machine the load generator may be the limit
LOAD_GENERATOR_WARN_SHARE = 0.5


def usage(runs: list[Run]) -> pd.DataFrame:
    """Tidy per-interval usage of every process of every run."""
    return over_runs(runs, resource_usage)


def processes(usage: pd.DataFrame) -> pd.DataFrame:
    """One row per process (a restart, i.e. a new pid, is a new process)."""
    if usage.empty:
        return empty(PROCESS_COLUMNS)
    return (
        usage.groupby(["run_id", "component", "name", "pid"], as_index=False)
        .agg(
            samples=("time", "size"),
            first_time=("time", "min"),
            last_time=("time", "max"),
            first_cpu=("cpu_seconds", "first"),
            last_cpu=("cpu_seconds", "last"),
            peak_cores=("cpu_cores", "max"),
            peak_rss_bytes=("rss_bytes", "max"),
        )
        .assign(
            window_s=lambda d: (d["last_time"] - d["first_time"]).dt.total_seconds(),
            cpu_seconds=lambda d: d["last_cpu"] - d["first_cpu"],
            avg_cores=lambda d: d["cpu_seconds"] / d["window_s"].where(d["window_s"] > 0),
        )
        .pipe(_in_component_order)
        [PROCESS_COLUMNS]
    )


def timeline(usage: pd.DataFrame) -> pd.DataFrame:
    """Cores and RSS per component and second of each run (processes summed)."""
    if usage.empty:
        return empty(["run_id", "component", "second", "cores", "rss_bytes"])
    return (
        usage.assign(second=lambda d: d["elapsed_s"].round())
        .groupby(["run_id", "component", "second"], as_index=False)
        .agg(cores=("cpu_cores", lambda s: s.sum(min_count=1)), rss_bytes=("rss_bytes", "sum"))
    )


def components(usage: pd.DataFrame, throughput: pd.DataFrame, host_cores: pd.Series | None = None) -> pd.DataFrame:
    """Per component of each run: summed processes, and its efficiency against
    ``throughput`` (columns ``run_id``, ``messages``, ``msg_per_s``);
    ``host_cores`` (run_id -> cores) gives the share of the machine."""
    procs = processes(usage)
    if procs.empty:
        return empty(COMPONENT_COLUMNS)
    peaks = (
        timeline(usage)
        .groupby(["run_id", "component"], as_index=False)
        .agg(peak_cores=("cores", "max"), peak_rss_bytes=("rss_bytes", "max"))
    )
    return (
        procs.groupby(["run_id", "component"], as_index=False)
        .agg(processes=("name", "size"), cpu_seconds=("cpu_seconds", "sum"), avg_cores=("avg_cores", "sum"))
        .merge(peaks, on=["run_id", "component"], how="left")
        .merge(throughput[["run_id", "messages", "msg_per_s"]], on="run_id", how="left")
        .assign(
            msg_per_s_per_core=lambda d: d["msg_per_s"] / d["avg_cores"],
            cpu_us_per_msg=lambda d: d["cpu_seconds"] * 1e6 / d["messages"],
            machine_share=lambda d: d["avg_cores"] / pd.to_numeric(
                d["run_id"].map(host_cores if host_cores is not None else {}), errors="coerce"),
        )
        .pipe(_in_component_order)
        [COMPONENT_COLUMNS]
    )


def sides(components: pd.DataFrame) -> pd.DataFrame:
    """Per run: the machine shares of the load generator, the system under
    test and everything sampled, the pipeline's CPU µs per message (load
    generator + system under test), and whether the load generator used more
    than ``LOAD_GENERATOR_WARN_SHARE`` of the machine."""
    columns = ["run_id", "load_generator_share", "system_share", "total_share", "pipeline_cpu_us_per_msg",
               "load_generator_limit"]
    if components.empty:
        return empty(columns)
    rows = []
    for run_id, g in components.groupby("run_id", sort=False):
        share = g.set_index("component")["machine_share"]
        us = g.set_index("component")["cpu_us_per_msg"]
        gen = share.reindex(LOAD_GENERATORS).sum(min_count=1)
        rows.append({
            "run_id": run_id,
            "load_generator_share": gen,
            "system_share": share.reindex(SYSTEM_UNDER_TEST).sum(min_count=1),
            "total_share": share.sum(min_count=1),
            "pipeline_cpu_us_per_msg": us.reindex([*LOAD_GENERATORS, *SYSTEM_UNDER_TEST]).sum(min_count=1),
            "load_generator_limit": bool(pd.notna(gen) and gen > LOAD_GENERATOR_WARN_SHARE),
        })
    return pd.DataFrame(rows, columns=columns)


def _in_component_order(frame: pd.DataFrame) -> pd.DataFrame:
    rank = {c: i for i, c in enumerate(COMPONENT_ORDER)}
    return (
        frame.assign(_rank=lambda d: d["component"].map(rank).fillna(len(rank)))
        .sort_values(["run_id", "_rank", "component", *(["name"] if "name" in frame else [])])
        .drop(columns="_rank")
        .reset_index(drop=True)
    )
