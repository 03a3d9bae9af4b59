"""The whole report as data: every table the Markdown and the notebook show,
the notes on what was missing, and the conclusions drawn from the figures.

Owns: ``build_report`` (the one place that chains load -> tidy -> summarise
for a set of runs) and the wording of the conclusions. Must not: format
tables or draw charts (``render``, ``charts``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from . import broker, capacity, events, faults, resources, sizing, summarise, verification
from . import share as share_queue
from . import tenants as per_tenant
from .load import Run, load_runs


@dataclass(frozen=True, eq=False)
class Report:
    runs: list[Run]
    settings: pd.DataFrame  # one row per run
    generators: pd.DataFrame  # per (run, scenario, load generator)
    summary: pd.DataFrame  # per (run, scenario): msg/s, MB/s, errors, batch latency, thresholds
    throughput: pd.DataFrame  # per run: messages, msg/s (scenarios added)
    timeline: pd.DataFrame  # msg/s per second of each run
    progression: pd.DataFrame
    figures: pd.DataFrame  # summary + e2e + broker CPU + consumer fetch bytes: what comparisons compare
    acks: pd.DataFrame
    brokers: pd.DataFrame
    e2e: pd.DataFrame
    e2e_warmup: pd.DataFrame  # the --warmup window, kept out of the headline e2e
    e2e_distribution: pd.DataFrame
    verification: pd.DataFrame
    rebalances: pd.DataFrame  # the consumers' rebalance callbacks, placed in the run's windows
    ingestors: pd.DataFrame
    broker_metrics: pd.DataFrame
    consumer_fetch: pd.DataFrame  # per run: consumer bytes from leaders and followers, the followers' share
    processes: pd.DataFrame
    components: pd.DataFrame
    sides: pd.DataFrame
    tiers: pd.DataFrame  # per (run, tier): CPU µs/msg of the load generator, ingestors, brokers, consumers
    tier_costs: pd.DataFrame  # per run: the costliest tier, the ingestor-to-consumer ratio
    sizing: pd.DataFrame  # per (run, tier): cores and pods for target_rate, a linear projection
    target_rate: float  # msg/s the sizing table projects to
    resource_timeline: pd.DataFrame
    capacity_steps: pd.DataFrame  # find-max runs: one row per staircase step
    capacity_levels: pd.DataFrame  # ... per level, across climbs
    capacity: pd.DataFrame  # ... per run: the max sustainable rate
    events: pd.DataFrame  # faults the run's driver caused (meta.json events), on the load timeline
    fault_timeline: pd.DataFrame  # runs with --faults: msg/s, failed, batch and e2e p99 per second
    faults: pd.DataFrame  # ... one row per scheduled fault with its recovery figures
    # runs with tenants (--test noisy-neighbour): per (run, tenant), per phase
    # of the flood, per second, and each run's flood window
    tenants: pd.DataFrame = field(default_factory=lambda: per_tenant.empty(per_tenant.TENANT_COLUMNS))
    tenant_phases: pd.DataFrame = field(default_factory=lambda: per_tenant.empty(per_tenant.PHASE_COLUMNS))
    tenant_timeline: pd.DataFrame = field(default_factory=lambda: per_tenant.empty(per_tenant.TIMELINE_COLUMNS))
    tenant_floods: pd.DataFrame = field(default_factory=lambda: per_tenant.empty(per_tenant.FLOOD_COLUMNS))
    # runs whose consumers were one share group (--test share-queue): per run,
    # and deliveries per (run, delivery count)
    share: pd.DataFrame = field(default_factory=lambda: share_queue.empty(share_queue.SHARE_COLUMNS))
    share_deliveries: pd.DataFrame = field(
        default_factory=lambda: share_queue.empty(share_queue.DELIVERY_COLUMNS))
    notes: list[str] = field(default_factory=list)
    conclusions: list[str] = field(default_factory=list)


def build_report(runs_or_paths, target_rate: float = sizing.DEFAULT_TARGET_RATE) -> Report:
    """The report of ``runs_or_paths``: loaded runs, or results directories to
    load; ``target_rate`` (msg/s) is the rate the sizing table projects to."""
    runs = list(runs_or_paths)
    if runs and not all(isinstance(r, Run) for r in runs):
        runs = load_runs(runs)
    generators = summarise.generators(runs)
    summary = summarise.test_summary(runs, generators)
    throughput = (
        summary.groupby("run_id", as_index=False, sort=False)
        .agg(messages=("messages", lambda s: s.sum(min_count=1)), msg_per_s=("msg_per_s", lambda s: s.sum(min_count=1)))
    )
    e2e_each = [summarise.end_to_end(run) for run in runs]
    e2e = summarise.e2e_table(e2e_each)
    usage = resources.usage(runs)
    settings = summarise.settings(runs)
    components = resources.components(usage, throughput, settings.set_index("run_id")["host_cores"])
    broker_cpu = (
        components[components["component"] == "broker"][["run_id", "cpu_us_per_msg"]]
        .rename(columns={"cpu_us_per_msg": "broker_cpu_us_per_msg"})
    )
    fetch = broker.consumer_fetch(runs)
    figures = (
        summary.merge(e2e[["run_id", "e2e_p50_ms", "e2e_p99_ms"]], on="run_id", how="left")
        .merge(broker_cpu, on="run_id", how="left")
        .merge(fetch, on="run_id", how="left")
    )
    tiers = sizing.tiers(components)
    steps = capacity.steps(runs)
    levels = capacity.levels(steps)
    timeline = summarise.throughput_timeline(runs)
    fault_timeline, fault_rows = faults.faults(runs)
    tenant_timeline, tenant_floods = per_tenant.timeline(runs)
    tenant_table = per_tenant.tenant_table(runs)
    report = Report(
        runs=runs,
        settings=settings,
        generators=generators,
        summary=summary,
        throughput=throughput,
        timeline=timeline,
        progression=summarise.progression(summary),
        figures=figures,
        acks=summarise.acks_comparison(figures),
        brokers=summarise.broker_comparison(figures),
        e2e=e2e,
        e2e_warmup=summarise.e2e_warmup_table(e2e_each),
        e2e_distribution=summarise.e2e_distribution(e2e_each),
        verification=per_tenant.with_tenant_verdicts(verification.verification(runs), tenant_table),
        rebalances=verification.rebalances(runs),
        ingestors=verification.ingestors(runs),
        broker_metrics=broker.broker_metrics(runs),
        consumer_fetch=fetch,
        processes=resources.processes(usage),
        components=components,
        sides=resources.sides(components),
        tiers=tiers,
        tier_costs=sizing.tier_costs(tiers),
        sizing=sizing.sizing(tiers, settings, target_rate),
        target_rate=target_rate,
        resource_timeline=resources.timeline(usage),
        capacity_steps=steps,
        capacity_levels=levels,
        capacity=capacity.verdicts(levels),
        events=events.events(runs, timeline),
        fault_timeline=fault_timeline,
        faults=fault_rows,
        tenants=tenant_table,
        tenant_phases=per_tenant.phase_table(runs),
        tenant_timeline=tenant_timeline,
        tenant_floods=tenant_floods,
        share=share_queue.share_table(runs, throughput, e2e),
        share_deliveries=share_queue.delivery_counts(runs),
    )
    report.notes.extend(notes(report))
    report.conclusions.extend(conclusions(report))
    return report


def notes(report: Report) -> list[str]:
    """What was missing or could not be combined, per run."""
    out = []
    e2e = report.e2e.set_index("run_id")
    # a run with tenants keeps its load, consumers and ledgers per tenant (the Tenants section)
    with_tenants = set(report.tenants["run_id"])
    for run in report.runs:
        missing = []
        per_tenant_run = run.run_id in with_tenants
        if not run.meta:
            missing.append("meta.json (settings unknown)")
        if not run.load_summaries and not per_tenant_run:
            missing.append("load generator summary")
        elif run.load_requests.empty and run.k6_raw.empty and not per_tenant_run:
            missing.append("raw request rows (no throughput-over-time chart)")
        if not run.consumers and not per_tenant_run:
            missing.append("consumer reports")
        if not run.ledgers and not per_tenant_run:
            missing.append("ingestor ledgers")
        if run.resources.empty:
            missing.append("resources.csv")
        if run.prom.empty or not (run.prom["scope"] == "metrics").any():
            missing.append("broker metrics")
        if missing:
            out.append(f"`{run.run_id}`: not available: {', '.join(missing)}.")
        note = e2e["note"].get(run.run_id) if run.run_id in e2e.index else ""
        if run.consumers and note:
            out.append(f"`{run.run_id}`: end-to-end latency: {note}.")
        out.extend(f"`{run.run_id}`: {problem}." for problem in run.problems)
    unpooled = report.summary[report.summary["latency_source"].str.startswith(summarise.NOT_POOLED)]
    out.extend(
        f"`{row.run_id}` ({row.scenario}): batch-latency percentiles of {row.generators:.0f} load generators could "
        "not be pooled (summaries only: no raw request rows, no merged summary); they are shown per generator and "
        "were not averaged."
        for row in unpooled.itertuples()
    )
    return out


def _n(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def conclusions(report: Report) -> list[str]:
    """Findings stated from the figures, the seeds' "Key findings" in short."""
    out = []
    v = report.verification
    if len(v):
        bad = v[v["status"] != "verified"]
        if bad.empty:
            total = v["verified"].sum()
            out.append(
                f"**Integrity**: all {len(v)} runs verified by the consumers: 0 lost, 0 duplicated, 0 reordered, "
                f"0 corrupt across {_n(total)} messages."
            )
        else:
            out.extend(f"**Integrity** `{row.run_id}`: {row.verdict}." for row in bad.itertuples())

    s = report.summary.dropna(subset=["msg_per_s"])
    if len(s):
        best = s.loc[s["msg_per_s"].idxmax()]
        out.append(
            f"**Highest throughput**: {_n(best['msg_per_s'])} msg/s ({best['mb_per_s']:.2f} MB/s) in "
            f"`{best['run_id']}` ({best['broker']} {best['broker_version']}, acks={best['acks']}, "
            f"{best['message_size']} B messages, batches of {best['batch_size']}), "
            f"{best['error_rate']:.2%} errors."
        )
        errors = s[s["error_rate"] > 0]
        out.extend(
            f"**Errors** `{row.run_id}`: {row.error_rate:.2%} of produce requests failed "
            f"({_n(row.errors)} of {_n(row.error_checks)})"
            + (f"; {_n(row.messages_failed)} messages not acknowledged" if row.messages_failed > 0 else "")
            + "." for row in errors.itertuples()
        )
    failed = report.summary[report.summary["thresholds_ok"].eq(False)]
    out.extend(
        f"**Thresholds failed** `{row.run_id}` ({row.scenario}): {row.failed_thresholds} (from the "
        f"{row.thresholds_from}; the load generator exits 99)." for row in failed.itertuples()
    )

    def pick(table: pd.DataFrame, label: str) -> pd.DataFrame:
        return table[table["metric"] == label]

    for row in pick(report.acks, "msg/s").to_dict("records"):
        p99 = pick(report.acks, "batch p99 (ms)")
        p99 = p99[(p99["broker"] == row["broker"]) & (p99["runs"] == row["runs"])]
        latency = ""
        if len(p99) and p99["1"].notna().all() and p99["all"].notna().all():
            latency = f"; batch p99 {p99['1'].iloc[0]:.1f} → {p99['all'].iloc[0]:.1f} ms"
        out.append(
            f"**acks=all vs acks=1** on {row['broker']}: throughput {row['change_pct']:+.1f}% "
            f"({_n(row['1'])} → {_n(row['all'])} msg/s){latency}."
        )

    for row in pick(report.brokers, "msg/s").itertuples():
        cpu = pick(report.brokers, "broker CPU µs/msg")
        cpu = cpu[(cpu["acks"] == row.acks) & (cpu["runs"] == row.runs)]
        cpu_text = ""
        if len(cpu) and cpu["kafka"].notna().all() and cpu["chronik"].notna().all():
            c = cpu.iloc[0]
            cpu_text = (
                f"; broker CPU {c['chronik']:.1f} vs {c['kafka']:.1f} µs per message ({c['ratio']:.2f}×)"
            )
        out.append(
            f"**chronik vs Kafka** at acks={row.acks}: chronik reached {row.ratio:.2f}× Kafka's throughput "
            f"({_n(row.chronik)} vs {_n(row.kafka)} msg/s){cpu_text}."
        )

    racks = report.settings.set_index("run_id")["racks"]
    for row in report.consumer_fetch.dropna(subset=["follower_fetch_share"]).itertuples():
        rack_text = f" (racks {racks.get(row.run_id)})" if pd.notna(racks.get(row.run_id)) else ""
        out.append(
            f"**Follower fetching** `{row.run_id}`{rack_text}: consumers fetched {_n(row.follower_fetch_bytes)} "
            f"bytes from followers and {_n(row.leader_fetch_bytes)} from leaders "
            f"({row.follower_fetch_share:.1%} from followers)."
        )

    out.extend(capacity.verdict_lines(report.capacity))
    out.extend(capacity.comparison_lines(report.capacity))

    for side in report.sides.itertuples():
        if side.load_generator_limit:
            out.append(
                f"**Load generator limit** `{side.run_id}`: the load generator used {side.load_generator_share:.0%} "
                f"of the machine (more than {resources.LOAD_GENERATOR_WARN_SHARE:.0%}): the figures may show what "
                "it could send, not what the system could carry; give the generators their own machines "
                "(`--generators N`) or send more messages per request."
            )
    comps = report.components
    if len(comps):
        cores = report.settings.set_index("run_id")["host_cores"]
        for run_id, group in comps.groupby("run_id", sort=False):
            busiest = group.loc[group["avg_cores"].idxmax()]
            host = cores.get(run_id)
            total = group["avg_cores"].sum()
            of_host = f" of the host's {host}" if pd.api.types.is_number(host) and pd.notna(host) else ""
            out.append(
                f"**CPU** `{run_id}`: all processes used {total:.2f} cores on average{of_host}; the busiest "
                f"component was {busiest['component']} ({busiest['avg_cores']:.2f} cores average, "
                f"{busiest['peak_cores']:.2f} peak)."
            )
    if report.notes:
        out.append("Some pieces were missing or could not be combined: see **Notes**.")
    return out
