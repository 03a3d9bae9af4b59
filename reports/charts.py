"""Charts of a report as matplotlib figures, and writing them as PNGs.

Owns: the look of each chart and the file names under ``charts/``. Figures are
built with ``matplotlib.figure.Figure`` (no pyplot, no global backend), so
the same functions draw in a notebook and in a headless CLI. Must not:
compute figures beyond what plotting needs (they come from a ``Report``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .report import Report
from .resources import COMPONENT_ORDER
from .summarise import NOT_POOLED

PERCENTILE_TICKS = [50, 90, 99, 99.9, 99.99, 99.999]


def _empty() -> Figure:
    return Figure(figsize=(9, 4.5), layout="constrained")


def throughput(report: Report) -> Figure | None:
    """msg/s per second of each run with raw request rows."""
    t = report.timeline
    if t.empty:
        return None
    fig = _empty()
    ax = fig.add_subplot()
    for run_id, group in t.groupby("run_id", sort=False):
        ax.plot(group["second"], group["msg_per_s"], label=run_id, linewidth=1.5)
    ax.set(title="Throughput over time (messages produced, per the load generators)", xlabel="seconds since start",
           ylabel="msg/s")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylim(0, t["msg_per_s"].max() * 1.15)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return fig


def batch_latency(report: Report) -> Figure | None:
    """Batch latency p50/p90/p95/p99 per run; runs whose generators' percentiles
    cannot be pooled are drawn per generator, never averaged."""
    stats = [("p50", "batch_p50_ms"), ("p90", "batch_p90_ms"), ("p95", "batch_p95_ms"), ("p99", "batch_p99_ms")]
    merged = report.summary.dropna(subset=["batch_p50_ms"]).assign(label=lambda d: d["run_id"])
    unpooled_runs = report.summary[report.summary["latency_source"].str.startswith(NOT_POOLED)]["run_id"]
    per_generator = (
        report.generators[report.generators["run_id"].isin(unpooled_runs)]
        .assign(label=lambda d: d["run_id"] + "\n(" + d["generator"] + ")")
    )
    bars = pd.concat([merged, per_generator], ignore_index=True)
    if bars.empty:
        return None
    fig = _empty()
    ax = fig.add_subplot()
    x = np.arange(len(bars))
    width = 0.8 / len(stats)
    for i, (name, column) in enumerate(stats):
        ax.bar(x + (i - (len(stats) - 1) / 2) * width, bars[column], width, label=name)
    ax.set_xticks(x, bars["label"], fontsize="x-small")
    ax.set(title="Batch latency (load generator)", ylabel="ms")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def e2e_latency(report: Report) -> Figure | None:
    """Percentile distribution of each run's merged end-to-end histogram."""
    d = report.e2e_distribution
    d = d[d["percentile"] < 100] if not d.empty else d
    if d.empty:
        return None
    fig = _empty()
    ax = fig.add_subplot()
    for run_id, group in d.groupby("run_id", sort=False):
        ax.plot(1 / (1 - group["percentile"] / 100), group["value_ms"], label=run_id, linewidth=1.5)
    ax.set_xscale("log")
    ticks = [1 / (1 - p / 100) for p in PERCENTILE_TICKS]
    ax.set_xticks(ticks, [f"{p:g}%" for p in PERCENTILE_TICKS])
    ax.set(title="End-to-end latency by percentile (merged .hlog)", xlabel="percentile", ylabel="ms")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def cpu(report: Report) -> Figure | None:
    """Cores used per component over each run, one panel per run."""
    t = report.resource_timeline.dropna(subset=["cores"]) if not report.resource_timeline.empty else None
    if t is None or t.empty:
        return None
    runs = list(dict.fromkeys(t["run_id"]))
    fig = Figure(figsize=(9, 2.6 * len(runs) + 0.6), layout="constrained")
    axes = fig.subplots(len(runs), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    components = sorted(t["component"].unique(), key=lambda c: (COMPONENT_ORDER + [c]).index(c))
    for ax, run_id in zip(axes, runs):
        for component in components:
            group = t[(t["run_id"] == run_id) & (t["component"] == component)]
            if len(group):
                ax.plot(group["second"], group["cores"], label=component, linewidth=1.3)
        ax.set_title(run_id, fontsize="small")
        ax.set_ylabel("cores")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="small", ncols=len(components))
    axes[-1].set_xlabel("seconds since first sample")
    fig.suptitle("CPU per component")
    return fig


FAULT_COLOURS = {"kill": "tab:red", "stop": "tab:orange", "pause": "tab:purple", "partition": "tab:blue",
                 "disk-full": "tab:brown", "slow-disk": "tab:olive"}


def fault_timeline(report: Report) -> Figure | None:
    """Runs with scheduled faults: msg/s, batch p99 and end-to-end p99 per
    second, one column per run, each fault drawn as a shaded span."""
    t = report.fault_timeline
    if t.empty:
        return None
    runs = list(dict.fromkeys(t["run_id"]))
    fig = Figure(figsize=(6.5 * len(runs) + 1, 8), layout="constrained")
    axes = fig.subplots(3, len(runs), sharex="col", squeeze=False)
    panels = [("msg_per_s", "msg/s acknowledged (by answer)", False), ("batch_p99_ms", "batch p99 (ms, by send second)", True),
              ("e2e_p99_ms", "end-to-end p99 (ms)", True)]
    for col, run_id in enumerate(runs):
        group = t[t["run_id"] == run_id]
        faults = report.faults[(report.faults["run_id"] == run_id) & report.faults["ran"]]
        broker = faults["broker"].iloc[0] if len(faults) else ""
        for row, (column, label, log) in enumerate(panels):
            ax = axes[row, col]
            values = group[column].where(group[column] > 0) if log else group[column]
            ax.plot(group["second"], values, linewidth=1.2, color="black")
            if column == "msg_per_s":
                failed = group["failed_msgs"]
                if failed.sum() > 0:
                    ax.bar(group["second"], failed, width=1.0, color="tab:red", alpha=0.5, label="failed msgs")
                    ax.legend(fontsize="x-small", loc="lower right")
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
                ax.set_ylim(0, max(1.0, group[column].max()) * 1.15)
            if log and values.notna().any():
                ax.set_yscale("log")
            for f in faults.itertuples():
                end = f.end_s if pd.notna(f.end_s) else f.at_s + 1
                ax.axvspan(f.at_s, max(end, f.at_s + 0.3), color=FAULT_COLOURS.get(f.kind, "grey"), alpha=0.25)
                if row == 0:
                    ax.annotate(f"{f.kind} {f.target}", (f.at_s, 1.0), xycoords=("data", "axes fraction"),
                                fontsize="x-small", rotation=90, va="top", ha="right")
            ax.set_ylabel(label, fontsize="small")
            ax.grid(alpha=0.3)
        axes[0, col].set_title(f"{run_id} ({broker})", fontsize="small")
        axes[-1, col].set_xlabel("seconds since the load's first request")
    fig.suptitle("Fault timeline: each shaded span is one fault, from injection to undo")
    return fig


def tenants(report: Report) -> Figure | None:
    """Per tenant (a column each): acknowledged msg/s and batch p99 per
    second, one line per run, the run's flood window shaded."""
    t = report.tenant_timeline
    if t.empty:
        return None
    names = list(dict.fromkeys(report.tenants["tenant"])) or sorted(t["tenant"].unique())
    fig = Figure(figsize=(5 * len(names), 7), layout="constrained")
    axes = fig.subplots(2, len(names), squeeze=False, sharex=True)
    floods = report.tenant_floods
    for col, name in enumerate(names):
        rate, p99 = axes[0][col], axes[1][col]
        for i, (run_id, g) in enumerate(t[t["tenant"] == name].groupby("run_id", sort=False)):
            color = f"C{i}"
            rate.plot(g["second"], g["msg_per_s"], color=color, linewidth=1.2, label=run_id)
            p99.plot(g["second"], g["batch_p99_ms"], color=color, linewidth=1.2, label=run_id)
            for f in floods[floods["run_id"] == run_id].itertuples():
                for ax in (rate, p99):
                    ax.axvspan(f.from_s, f.to_s, color=color, alpha=0.08)
        rate.set(title=f"{name}: msg/s acknowledged", ylabel="msg/s")
        rate.set_ylim(bottom=0)
        rate.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        p99.set(title=f"{name}: batch p99 per second (shaded: the flood)", xlabel="seconds since the first request",
                ylabel="ms", yscale="log")
        for ax in (rate, p99):
            ax.grid(alpha=0.3)
        rate.legend(fontsize="x-small", loc="upper left")
    return fig


CHARTS: dict[str, Callable[[Report], Figure | None]] = {
    "throughput": throughput,
    "batch_latency": batch_latency,
    "e2e_latency": e2e_latency,
    "cpu": cpu,
    "fault_timeline": fault_timeline,
    "tenants": tenants,
}


def write_charts(report: Report, directory: Path) -> dict[str, Path]:
    """Every chart there is data for, as ``directory/<name>.png``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, draw in CHARTS.items():
        fig = draw(report)
        if fig is None:
            continue
        path = directory / f"{name}.png"
        # no Software/date metadata: the same data gives the same bytes
        fig.savefig(path, dpi=100, metadata={"Software": None})
        written[name] = path
    return written
