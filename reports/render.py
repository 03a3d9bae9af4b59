"""The report as Markdown, in the shape of the seed reports: configuration,
per-test tables, progression, acks and broker comparisons, end-to-end latency,
verification, resources, conclusions.

Owns: number formatting (``11,970``, ``0.25%``, ``33.4 ms``, ``1.70 s``,
``310.0 MiB``), Markdown tables, section order and wording of absent pieces
("not available"). Must not: compute figures (everything comes from a
``Report``) or draw charts (it only links the PNGs it is given).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from .broker import FETCH_FIGURES
from .report import Report

NA = "n/a"
NOT_AVAILABLE = "_not available_"


# --- numbers ------------------------------------------------------------------


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or (not isinstance(x, str) and pd.isna(x))


def fmt_int(x) -> str:
    return NA if _missing(x) else f"{float(x):,.0f}"


def fmt_float(x, digits: int = 2) -> str:
    return NA if _missing(x) else f"{float(x):,.{digits}f}"


def fmt_pct(x, digits: int = 2) -> str:
    """A fraction as a percentage: 0.0025 -> 0.25%."""
    return NA if _missing(x) else f"{float(x) * 100:.{digits}f}%"


def fmt_change(x) -> str:
    """A percentage change: -8.1 -> -8.1%."""
    return NA if _missing(x) or math.isinf(float(x)) else f"{float(x):+.1f}%"


def fmt_ratio(x) -> str:
    return NA if _missing(x) or math.isinf(float(x)) else f"{float(x):.2f}×"


def fmt_ms(x) -> str:
    """Milliseconds as the seeds write them: 0.45 ms, 33.4 ms, 223 ms, 1.70 s."""
    if _missing(x):
        return NA
    x = float(x)
    if x >= 1000:
        return f"{x / 1000:.2f} s"
    if x >= 100:
        return f"{x:.0f} ms"
    if x >= 1:
        return f"{x:.1f} ms"
    return f"{x:.2f} ms"


def fmt_bytes(x) -> str:
    if _missing(x):
        return NA
    x = float(x)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if x >= size:
            return f"{x / size:.1f} {unit}"
    return f"{x:.0f} B"


def fmt_text(x) -> str:
    return NA if _missing(x) or x == "" else str(x)


def fmt_code(x) -> str:
    return NA if _missing(x) else f"`{x}`"


# --- tables ---------------------------------------------------------------------

Column = tuple[str, str, Callable[[object], str]]  # header, frame column, formatter


def markdown_table(frame: pd.DataFrame, columns: Sequence[Column], right: Sequence[str] = ()) -> str:
    """``frame`` as a Markdown table; ``right`` names headers to right-align (numbers)."""
    headers = [h for h, _, _ in columns]
    align = ["---:" if h in right else "---" for h in headers]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    for record in frame.to_dict("records"):
        cells = [fmt(record.get(col)) for _, col, fmt in columns]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def _numbers(columns: Sequence[Column], text: Sequence[str]) -> list[str]:
    return [h for h, _, _ in columns if h not in text]


def _table_section(title: str, frame: pd.DataFrame, cols: Sequence[Column], text: Sequence[str],
                   *after: str) -> list[str]:
    """A section that is one table of `frame` (the `text` columns left-aligned),
    then the lines `after`; NOT_AVAILABLE when the frame is empty."""
    out = [f"## {title}", ""]
    if frame.empty:
        return out + [NOT_AVAILABLE]
    return out + [markdown_table(frame, cols, _numbers(cols, text)), *after]


# --- sections -------------------------------------------------------------------


def _header(report: Report) -> list[str]:
    s = report.settings
    started = s["started_at"].dropna() if "started_at" in s else pd.Series(dtype=object)
    finished = s["finished_at"].dropna() if "finished_at" in s else pd.Series(dtype=object)
    span = ""
    if len(started):
        end = f" – {finished.max():%Y-%m-%d %H:%M:%S} UTC" if len(finished) else ""
        span = f" ({started.min():%Y-%m-%d %H:%M:%S} UTC{end})"
    hosts = s[["hostname", "host_cores", "host_memory_bytes"]].dropna(how="all").drop_duplicates() if len(s) else s
    host_text = "; ".join(
        f"{fmt_text(h.hostname)}: {fmt_text(h.host_cores)} cores, {fmt_bytes(h.host_memory_bytes)}"
        for h in hosts.itertuples()
    ) or "not available"
    commits = ", ".join(f"`{c[:12]}`" for c in s["git_commit"].dropna().unique()) if len(s) else ""
    generators = ", ".join(s["load_generator"].dropna().unique()) if len(s) else ""
    return [
        "# Chronik load-test report",
        "",
        f"**Runs**: {len(report.runs)}{span}  ",
        f"**Host**: {host_text}  ",
        f"**Load generator**: {generators or 'not available'}  ",
        f"**Commit**: {commits or 'not available'}",
    ]


def _verification(report: Report) -> list[str]:
    v = report.verification
    out = ["## Verification", ""]
    if v.empty:
        return out + [NOT_AVAILABLE]
    out += [f"- `{row.run_id}`: **{row.verdict}**" for row in v.itertuples()]
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Decided by", "source", fmt_text), ("Consumed", "consumed", fmt_int),
        ("Verified", "verified", fmt_int), ("Lost", "lost", fmt_int), ("Duplicated", "duplicates", fmt_int),
        ("Reordered", "reordered", fmt_int), ("Corrupt", "corrupt", fmt_int), ("Gaps", "gaps", fmt_int),
        ("Redeliveries", "redeliveries", fmt_int), ("Acknowledged (ledgers)", "acknowledged", fmt_int),
        ("Failed (ledgers)", "failed", fmt_int),
    ]
    out += ["", markdown_table(v, cols, _numbers(cols, ["Run", "Decided by"]))]
    return out + _events(report) + _rebalances(report)


def _events(report: Report) -> list[str]:
    """Faults the run's driver caused, each with what throughput did around it."""
    e = report.events
    if e.empty:
        return []
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("At (s into the load)", "second", lambda x: fmt_float(x, 1)),
        ("Event", "kind", fmt_text), ("Target", "target", fmt_code), ("What happened", "detail", fmt_text),
        ("msg/s in the 10 s before", "before_msg_per_s", fmt_int),
        ("Lowest msg/s in the 30 s after", "lowest_after_msg_per_s", fmt_int),
        ("Back to 90 % after (s)", "recovered_after_s", lambda x: fmt_float(x, 0)),
    ]
    return ["", "### Events during the run", "", markdown_table(e, cols, _numbers(cols, ["Run", "Event", "Target",
                                                                                   "What happened"])),
            "", "The verdict above covers the whole run, these events included."]


def _fault_timeline(report: Report, charts: Mapping[str, str]) -> list[str]:
    """Runs with a fault schedule: the verdict over the whole run, the chart,
    and each fault's recovery figures."""
    f = report.faults
    if f.empty:
        return []
    out = ["## Fault timeline", ""]
    v = report.verification.set_index("run_id") if len(report.verification) else pd.DataFrame()
    for run_id, group in f.groupby("run_id", sort=False):
        broker = group["broker"].iloc[0]
        verdict = v["verdict"].get(run_id, "not available") if len(v) else "not available"
        ledgers = ""
        if len(v) and run_id in v.index and not _missing(v.loc[run_id, "acknowledged"]):
            ledgers = (f"; the ingestors' ledgers: {fmt_int(v.loc[run_id, 'acknowledged'])} acknowledged, "
                       f"{fmt_int(v.loc[run_id, 'failed'])} failed")
        out.append(f"- `{run_id}` ({fmt_text(broker)}): {len(group[group['ran']])} faults; verdict over the whole "
                   f"run, faults included: **{verdict}**{ledgers}")
    if "fault_timeline" in charts:
        out += ["", f"![Fault timeline]({charts['fault_timeline']})"]
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Fault", "kind", fmt_text), ("Target", "target", fmt_code),
        ("At (s)", "at_s", lambda x: fmt_float(x, 1)), ("Lasted (s)", "lasted_s", lambda x: fmt_float(x, 1)),
        ("Longest ack gap (s)", "ack_gap_s", lambda x: fmt_float(x, 1)),
        ("Acks resumed after (s)", "acks_resumed_after_s", lambda x: fmt_float(x, 1)),
        ("p99 before", "p99_before_ms", fmt_ms), ("p99 during", "p99_during_ms", fmt_ms),
        ("p99 peak", "p99_peak_ms", fmt_ms),
        ("p99 within 2× after (s)", "p99_back_after_s", lambda x: fmt_float(x, 0)),
        ("Msgs not answered in time", "messages_unanswered", fmt_int),
        ("Msgs answered failed", "messages_refused", fmt_int),
        ("ISR shrank after (s)", "isr_shrank_after_s", lambda x: fmt_float(x, 1)),
        ("ISRs full again after (s)", "isr_full_after_s", lambda x: fmt_float(x, 1)),
        ("Leader changes", "leader_changes", fmt_int),
    ]
    out += ["", markdown_table(f, cols, _numbers(cols, ["Run", "Fault", "Target"]))]
    details = [f"`{r.run_id}` {r.kind} {r.target} at {fmt_float(r.at_s, 1)} s: {r.detail}"
               + (f"; then {r.end_detail}" if r.end_detail else "")
               + (f"; leaders: {r.leader_moves}" if isinstance(r.leader_moves, str) and r.leader_moves else "")
               + (f"; {r.isr_note} (its return to full is timed)" if isinstance(r.isr_note, str) and r.isr_note
                  else "")
               for r in f.itertuples()]
    out += ["", "What each fault did:", "", *[f"- {d}" for d in details]]
    out += ["", "Times are seconds after the fault began (At: since the load's first request). Longest ack gap: "
            "the longest stretch, from the fault to 30 s after its end (or the next fault), in which no "
            "acknowledged request completed; acks resumed at its end (0: no gap over 1 s). p99: batch latency "
            "of the requests sent in each second; during = the p99 of every request sent while the fault was in "
            "force (from injection to undo); before = median of the per-second p99 in the 10 s before the "
            "run's first fault (the steady state: a later fault's own 10 s may still hold an earlier one's tail); "
            "within 2× after: "
            "when the per-second p99 was back within twice that for 3 s in a row (0: it never left). Msgs not "
            "answered in time: messages of requests sent from the fault on (to the same horizon) that the load "
            "generator stopped waiting for after the plan's timeout and counted failed; it never resends, but the "
            "ingestor kept them and its idempotent producer went on retrying: whether they were acknowledged in the "
            "end is in the ledgers' totals above (the verdict checks every acknowledged message). Msgs answered "
            "failed: the ingestor answered them failed (not acknowledged, not expected by the verdict). ISR: from the brokers' Metadata polled every 0.5 s (the view most nodes gave): when "
            "some partition's ISR first went from full to short of its replicas, and when every ISR was full "
            "again after that."]
    return out


def _rebalances(report: Report) -> list[str]:
    """Rebalances during the measured window, each with its time, so a reader
    can tell a consumer-group event from a broker stall; the others counted."""
    r = report.rebalances
    if r.empty:
        return []
    measured = r[r["window"] == "measured"]
    elsewhere = r[r["window"] != "measured"].groupby(["run_id", "window"], sort=False).size()
    out = [""]
    if measured.empty:
        out.append("No consumer-group rebalance during the measured window.")
    else:
        out += [f"**Rebalances during the measured window**: {len(measured)} (consumer-group events; "
                "end-to-end latency around them includes the group's pause, not only the broker's)", ""]
        cols: list[Column] = [
            ("Run", "run_id", fmt_code), ("Consumer", "consumer", fmt_text),
            ("At (s into the measured window)", "at_s", fmt_float), ("Callback", "kind", fmt_text),
            ("Partitions", "partitions", fmt_int),
        ]
        out.append(markdown_table(measured, cols, _numbers(cols, ["Run", "Consumer", "Callback"])))
    if len(elsewhere):
        out += ["", "Rebalance callbacks outside it: " + "; ".join(
            f"`{run_id}` {window}: {n}" for (run_id, window), n in elsewhere.items()) + "."]
    return out


def _configuration(report: Report) -> list[str]:
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Test", "test", fmt_text), ("Broker", "broker", fmt_text),
        ("Version", "broker_version", fmt_text), ("Acks", "acks", fmt_text), ("Msg size (B)", "message_size", fmt_int),
        ("Batch", "batch_size", fmt_int), ("Ingestors", "ingestors", fmt_int), ("Consumers", "consumers", fmt_int),
        ("Partitions", "partitions", fmt_int), ("WAL profile", "wal_profile", fmt_text),
        ("Produce profile", "produce_profile", fmt_text), ("Duration (s)", "planned_duration_s", fmt_int),
    ]
    out = ["## Test configuration", "", markdown_table(report.settings, cols, ["Msg size (B)", "Batch", "Ingestors",
                                                                               "Consumers", "Partitions", "Duration (s)"])]
    flags = report.settings.dropna(subset=["broker_flags"])
    flags = flags[flags["broker_flags"] != ""]
    if len(flags):
        out += ["", *(f"- `{r.run_id}` broker flags: `{r.broker_flags}`" for r in flags.itertuples())]
    secured = report.settings.dropna(subset=["security"])
    secured = secured[~secured["security"].isin(["", "PLAINTEXT"])]
    if len(secured):
        out += ["", *(f"- `{r.run_id}` security: {r.security}" for r in secured.itertuples())]
    return out


def _results(report: Report, charts: Mapping[str, str]) -> list[str]:
    out = ["## Results per test", ""]
    s = report.summary
    if s["scenario"].isna().all():
        out.append(f"{NOT_AVAILABLE}: no load generator summary in any run.")
    else:
        cols: list[Column] = [
            ("Run", "run_id", fmt_code), ("Scenario", "scenario", fmt_text), ("Broker", "broker", fmt_text),
            ("Acks", "acks", fmt_text), ("Load generators", "generators", fmt_int), ("Messages", "messages", fmt_int),
            ("Msg/s", "msg_per_s", fmt_int), ("MB/s", "mb_per_s", fmt_float), ("Wire MB/s", "wire_mb_per_s", fmt_float),
            ("Error rate", "error_rate", fmt_pct), ("Failed msgs", "messages_failed", fmt_int),
            ("Dropped reqs", "dropped", fmt_int), ("Batch p50", "batch_p50_ms", fmt_ms),
            ("p90", "batch_p90_ms", fmt_ms), ("p95", "batch_p95_ms", fmt_ms), ("p99", "batch_p99_ms", fmt_ms),
            ("p99.9", "batch_p99.9_ms", fmt_ms), ("max", "batch_max_ms", fmt_ms),
            ("Percentiles from", "latency_source", fmt_text), ("Thresholds", "thresholds_ok", fmt_text),
        ]
        if s["accepted_per_s"].notna().any():
            # fire-and-forget: accepted is not delivered (the seeds' Test 5)
            cols.insert(7, ("Accepted msg/s", "accepted_per_s", fmt_int))
        table = s.assign(thresholds_ok=[_fmt_thresholds(ok, failed) for ok, failed
                                        in zip(s["thresholds_ok"], s["failed_thresholds"])])
        out.append(markdown_table(table, cols, _numbers(cols, ["Run", "Scenario", "Broker", "Acks", "Percentiles from",
                                                               "Thresholds"])))
        out += ["", "Msg/s: messages the load generators (chronik-loadgen) counted as produced, from the ingestor's "
                "per-message answers (acknowledged by the broker), ÷ the longest generator's duration; MB/s: "
                "payload bytes (`payload_bytes`, else msg/s × message size) in 10⁶ B; wire MB/s: `data_sent`. "
                "Error rate: failed produce requests (an error status, no answer, a malformed answer, or a message "
                "not acknowledged) ÷ all, pooled over generators; failed msgs: messages not acknowledged; dropped "
                "reqs: requests not sent on schedule. "
                "Batch latency percentiles: from raw samples pooled over generators (here or in the generators' "
                "merged summary), or one generator's summary; never averaged across generators. "
                "Thresholds: the plan's gates that set the load generator's exit status (99 when one failed)."]
    for key, title in (("throughput", "Throughput over time"), ("batch_latency", "Batch latency percentiles")):
        if key in charts:
            out += ["", f"![{title}]({charts[key]})"]
    g = report.generators
    if len(g) and g.groupby(["run_id", "scenario"])["generator"].nunique().max() > 1:
        cols = [
            ("Run", "run_id", fmt_code), ("Generator", "generator", fmt_text), ("HTTP reqs", "requests", fmt_int),
            ("Req/s", "req_per_s", fmt_float), ("Messages", "messages", fmt_int), ("Msg/s", "msg_per_s", fmt_int),
            ("Batch p50", "batch_p50_ms", fmt_ms), ("p90", "batch_p90_ms", fmt_ms), ("p95", "batch_p95_ms", fmt_ms),
            ("p99", "batch_p99_ms", fmt_ms), ("Errors", "error_rate", fmt_pct),
            ("Failed msgs", "messages_failed", fmt_int), ("Dropped reqs", "dropped", fmt_int),
        ]
        out += ["", "### Per load generator", "", markdown_table(g, cols, _numbers(cols, ["Run", "Generator"])),
                "", "Each generator's own share of the load; its percentiles are not pooled figures."]
    return out


def _progression(report: Report) -> list[str]:
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Test", "test", fmt_text), ("Broker", "broker", fmt_text), ("Acks", "acks", fmt_text),
        ("Batch", "batch_size", fmt_int), ("Msg size (B)", "message_size", fmt_int), ("Ingestors", "ingestors", fmt_int),
        ("Msg/s", "msg_per_s", fmt_int), ("MB/s", "mb_per_s", fmt_float), ("Error rate", "error_rate", fmt_pct),
        ("Batch p50", "batch_p50_ms", fmt_ms), ("vs first", "vs_first", fmt_ratio),
        ("vs previous", "vs_previous_pct", fmt_change),
    ]
    return _table_section("Throughput progression", report.progression, cols, ["Run", "Test", "Broker", "Acks"])


def _comparison(table: pd.DataFrame, title: str, group_by: str, a: str, b: str, a_head: str, b_head: str,
                change: Column, absent: str) -> list[str]:
    out = [f"## {title}", ""]
    if table.empty:
        return out + [f"{NOT_AVAILABLE}: {absent}"]
    value_fmt = {"msg/s": fmt_int, "error rate": fmt_pct, "MB/s": fmt_float, "broker CPU µs/msg": fmt_float,
                 **{label: fmt_bytes for label in list(FETCH_FIGURES.values())[:2]},
                 FETCH_FIGURES["follower_fetch_share"]: lambda v: fmt_pct(v, 1)}
    for (group, runs), rows in table.groupby([group_by, "runs"], sort=False, observed=True):
        first = rows.iloc[0]
        shape = (f"{first['scenario']}, {first['message_size']} B × {first['batch_size']}, "
                 f"{first['partitions']} partitions, {first['ingestors']} ingestors")
        formatted = rows.assign(
            **{
                a: [value_fmt.get(m, fmt_ms)(v) for m, v in zip(rows["metric"].astype(str), rows[a])],
                b: [value_fmt.get(m, fmt_ms)(v) for m, v in zip(rows["metric"].astype(str), rows[b])],
                # the values carry their unit
                "metric": rows["metric"].astype(str).str.removesuffix(" (ms)"),
            }
        )
        cols: list[Column] = [("Metric", "metric", fmt_text), (a_head, a, fmt_text), (b_head, b, fmt_text), change]
        runs_text = " vs ".join(f"`{r}`" for r in runs.split(" vs "))
        out += [f"**{group_by} = {group}** — {shape}; runs {runs_text}", "",
                markdown_table(formatted, cols, [a_head, b_head, change[0]]), ""]
    return out[:-1]


def _e2e(report: Report, charts: Mapping[str, str]) -> list[str]:
    e = report.e2e
    out = ["## End-to-end latency (send → consume, merged HdrHistograms)", ""]
    if e.empty or (e["source"] == "not available").all():
        return out + [f"{NOT_AVAILABLE}: no consumer latency in any run."]
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Source", "source", fmt_text), ("Messages", "count", fmt_int),
        ("mean", "e2e_mean_ms", fmt_ms), ("p50", "e2e_p50_ms", fmt_ms), ("p90", "e2e_p90_ms", fmt_ms),
        ("p95", "e2e_p95_ms", fmt_ms), ("p99", "e2e_p99_ms", fmt_ms), ("p99.9", "e2e_p99.9_ms", fmt_ms),
        ("max", "e2e_max_ms", fmt_ms),
    ]
    out.append(markdown_table(e, cols, _numbers(cols, ["Run", "Source"])))
    out += ["", "Percentiles of the union of every consumer replica's `.hlog` (HdrHistogram interval logs), "
            "never averages of per-replica percentiles; each message counts once, at its first delivery "
            "(re-reads are counted as redeliveries in Verification, not timed)."]
    w = report.e2e_warmup
    if not w.empty:
        out += ["", "Warm-up (`--warmup`), excluded from the figures above:", "",
                markdown_table(w, cols, _numbers(cols, ["Run", "Source"]))]
    if "e2e_latency" in charts:
        out += ["", f"![End-to-end latency]({charts['e2e_latency']})"]
    return out


def _ingestors(report: Report) -> list[str]:
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Ingestor", "ingestor", fmt_text), ("Acknowledged", "acknowledged", fmt_int),
        ("Failed", "failed", fmt_int), ("In flight", "in_flight", fmt_int), ("Accepted", "accepted", fmt_int),
        ("Delivered", "delivered", fmt_int), ("Delivery failed", "failed_metric", fmt_int),
        ("Rejected", "rejected", fmt_int),
    ]
    return _table_section("Ingestors", report.ingestors, cols, ["Run", "Ingestor"],
                          "", "Acknowledged / failed / in flight: the ingestor's ledger; the rest: its final metrics.")


def _broker_metrics(report: Report) -> list[str]:
    b = report.broker_metrics
    out = ["## Broker metrics", ""]
    if b.empty or b["value"].isna().all():
        return out + [NOT_AVAILABLE]
    order = list(dict.fromkeys(b["run_id"]))
    wide = b.pivot(index="figure", columns="run_id", values="value").reindex(list(dict.fromkeys(b["figure"])))[order]
    formats = {"mean fsync (ms)": lambda v: fmt_float(v, 3), "fsync time (s)": lambda v: fmt_float(v, 1),
               **{label: fmt_bytes for label in list(FETCH_FIGURES.values())[:2]},
               FETCH_FIGURES["follower_fetch_share"]: lambda v: fmt_pct(v, 1)}
    formatted = wide.reset_index().assign(
        **{run: [formats.get(f, fmt_int)(v) for f, v in zip(wide.index, wide[run])] for run in order}
    )
    cols: list[Column] = [("Figure", "figure", fmt_text), *((f"`{r}`", r, fmt_text) for r in order)]
    return out + [markdown_table(formatted, cols, [f"`{r}`" for r in order]), "",
                  "Counters summed over every broker's snapshot. Consumer bytes: record bytes the brokers returned "
                  "to consumers' fetches (`chronik_consumer_fetch_bytes_total`) as the partition's leader or as a "
                  "follower (KIP-392: `run-all.sh --racks`, a consumer's `client.rack`), each broker's count at "
                  "the end less its count as the measured load began; n/a where the broker exports no such counter "
                  "(Apache Kafka here)."]


def _resources(report: Report, charts: Mapping[str, str]) -> list[str]:
    out = ["## Resource utilisation", ""]
    if report.components.empty:
        return out + [f"{NOT_AVAILABLE}: no resources.csv."]
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Component", "component", fmt_text), ("Processes", "processes", fmt_int),
        ("Avg cores", "avg_cores", fmt_float), ("Peak cores", "peak_cores", fmt_float),
        ("Peak RSS", "peak_rss_bytes", fmt_bytes), ("Msg/s per core", "msg_per_s_per_core", fmt_int),
        ("CPU µs/msg", "cpu_us_per_msg", fmt_float), ("Share of machine", "machine_share", _fmt_share),
    ]
    out += [markdown_table(report.components, cols, _numbers(cols, ["Run", "Component"])), "",
            "Avg cores: CPU seconds ÷ the sampled window; peak: the busiest one-second interval (processes of a "
            "component summed). CPU µs/msg: the component's CPU seconds over the run ÷ messages produced. "
            "Share of machine: avg cores ÷ the host's cores."]
    if not report.sides.empty:
        scols: list[Column] = [
            ("Run", "run_id", fmt_code), ("Load generator (chronik-loadgen)", "load_generator_share", _fmt_share),
            ("System under test", "system_share", _fmt_share), ("Everything sampled", "total_share", _fmt_share),
            ("Pipeline CPU µs/msg", "pipeline_cpu_us_per_msg", fmt_float),
            ("Load generator over half the machine", "load_generator_limit",
             lambda x: "**yes**: the figures may be the load generator's limit" if x else "no"),
        ]
        out += ["", "### Where the cores go", "",
                markdown_table(report.sides, scols, _numbers(scols, ["Run", "Load generator over half the machine"])),
                "", "Load generator: the `loadgen` processes of resources.csv"
                + (" (and a legacy run's `k6` ones)" if (report.components["component"] == "k6").any() else "")
                + ". System under test: ingestors + brokers + consumers. Pipeline CPU µs/msg: load generator + "
                "system under test. When the load generator takes more than half of the machine, the run measured "
                "the load generator as much as the system: the conclusions say so."]
        out += _tier_costs(report) + _sizing(report)
    if "cpu" in charts:
        out += ["", f"![CPU per component]({charts['cpu']})"]
    pcols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Component", "component", fmt_text), ("Process", "name", fmt_text),
        ("PID", "pid", fmt_text), ("Avg cores", "avg_cores", fmt_float), ("Peak cores", "peak_cores", fmt_float),
        ("Peak RSS", "peak_rss_bytes", fmt_bytes),
    ]
    return out + ["", "### Per process", "",
                  markdown_table(report.processes, pcols, ["Avg cores", "Peak cores", "Peak RSS"])]


# a tier as a sentence names it and as the sizing table does
TIER_NAMES = {
    "loadgen": ("load generator", "Load generator (chronik-loadgen)"),
    "ingestor": ("ingestor", "Ingestors"),
    "broker": ("broker", "Brokers"),
    "consumer": ("consumer", "Consumers"),
}
DASH = "—"


def _us(x) -> str:
    return f"{fmt_float(x)} µs"


def _tier_cost_line(c) -> str:
    """E.g. "The ingestor tier costs the most CPU per message: 11.32 µs, 3.7× the consumers' 3.05 µs." """
    line = f"The {TIER_NAMES[c.top_tier][0]} tier costs the most CPU per message: {_us(c.top_us_per_msg)}"
    ratio = f"{c.ingestor_to_consumer:.1f}×"
    if _missing(c.ingestor_us_per_msg) or _missing(c.consumer_us_per_msg):
        absent = "ingestor" if _missing(c.ingestor_us_per_msg) else "consumer"
        return line + f"; no {absent} CPU was sampled, so no ingestor-to-consumer ratio."
    if c.top_tier == "ingestor":
        return line + f", {ratio} the consumers' {_us(c.consumer_us_per_msg)}."
    return line + (f"; the ingestors' {_us(c.ingestor_us_per_msg)} is {ratio} the consumers' "
                   f"{_us(c.consumer_us_per_msg)}.")


def _tier_costs(report: Report) -> list[str]:
    """Per run: the tier with the most CPU per message, the ingestor-to-consumer ratio."""
    if report.tier_costs.empty:
        return []
    return ["", *(f"- `{c.run_id}`: {_tier_cost_line(c)}" for c in report.tier_costs.itertuples()),
            "", "Tiers: the load generator (chronik-loadgen), the ingestors, the brokers, the verifying consumers; "
            "a tier's CPU µs/msg is its processes' CPU seconds summed ÷ messages produced."]


def _pod_cpu(cores, source) -> str:
    return DASH if _missing(cores) else f"{float(cores):g} ({source})"


def _sizing(report: Report) -> list[str]:
    """What the target rate would take per tier: cores, and pods at the overlay's pod CPU."""
    z = report.sizing
    if z.empty:
        return []
    rate = fmt_int(report.target_rate)
    table = z.assign(
        tier=[TIER_NAMES[t][1] for t in z["tier"]],
        pod_cpu=[_pod_cpu(c, f) for c, f in zip(z["pod_cpu"], z["pod_cpu_from"])],
        overlay=[DASH + " (local)" if _missing(o) else f"`{o}`" for o in z["overlay"]],
    )
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Tier", "tier", fmt_text),
        ("CPU µs/msg (measured)", "cpu_us_per_msg", fmt_float), (f"Cores for {rate} msg/s", "cores", fmt_float),
        ("Overlay", "overlay", fmt_text),
        ("Pod CPU (cores)", "pod_cpu", fmt_text), ("Pods", "pods", lambda x: DASH if _missing(x) else fmt_int(x)),
    ]
    out = ["", f"#### Sizing for {rate} msg/s", "", markdown_table(table, cols, ["CPU µs/msg (measured)", cols[3][0],
                                                                            "Pod CPU (cores)", "Pods"]),
           "", f"**A linear projection from each run's own measured CPU per message**, nothing more: cores = CPU "
           f"µs/msg × {rate} msg/s ÷ 10⁶; pods = cores ÷ the pod CPU, rounded up. No headroom, and no non-linear "
           "effect (contention, batching, replication, the network, disks) is modelled, nor any minimum count (the "
           "brokers a replication factor needs): a floor to measure against at the target, not a plan. Pod CPU: "
           "the tier's container CPU limit in `k8s-perf/overlays/<overlay>` (meta.json's `settings.overlay`), "
           "else its CPU request (`request`; on the one-machine node "
           "`k8s-perf/run.sh` may have scaled requests down to fit). `python -m reports render --target-rate N` sets "
           "the rate."]
    if z["overlay"].isna().any():
        out[-1] += " A local run (no overlay) gets cores only: pods need an overlay."
    return out


def _capacity(report: Report) -> list[list[str]]:
    """The find-max section; absent from reports without a find-max run."""
    if report.capacity.empty:
        return []
    out = ["## Max sustainable rate", ""]
    vcols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Broker", "broker", fmt_text), ("Max level (requests/s)", "max_level", fmt_int),
        ("Max msg/s offered", "max_offered_msg_per_s", fmt_int), ("Achieved msg/s min", "msg_per_s_min", fmt_int),
        ("max", "msg_per_s_max", fmt_int), ("Batch p99 min", "batch_p99_min_ms", fmt_ms),
        ("max", "batch_p99_max_ms", fmt_ms), ("First failing level", "first_failed_level", fmt_int),
        ("Climbs", "climbs", fmt_int), ("Every lower level held", "monotone", lambda x: "yes" if x else "**no**"),
    ]
    out += [markdown_table(report.capacity, vcols, _numbers(vcols, ["Run", "Broker", "Every lower level held"])), "",
            "A level holds in a climb when its step's batch p99 is under the plan's `thresholds.p99_ms`, its "
            "produce errors are within `thresholds.error_rate` and its dropped (not sent on schedule) + "
            "interrupted (unanswered when the step's gap ended) requests are under `thresholds.dropped_ratio` of "
            "the requests it scheduled, pooled over every load generator. Max: the highest level that held in "
            "every climb; min–max: the spread of that level's repeated steps."]
    lcols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Level (requests/s)", "level", fmt_int), ("Offered msg/s", "offered_msg_per_s", fmt_int),
        ("Held in", "held_in", fmt_int), ("of climbs", "climbs", fmt_int), ("Achieved msg/s min", "msg_per_s_min", fmt_int),
        ("max", "msg_per_s_max", fmt_int), ("Batch p99 min", "batch_p99_min_ms", fmt_ms), ("max", "batch_p99_max_ms", fmt_ms),
    ]
    scols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Step", "step", fmt_code), ("Msg/s", "msg_per_s", fmt_int),
        ("Batch p50", "batch_p50_ms", fmt_ms), ("p99", "batch_p99_ms", fmt_ms), ("Errors", "error_rate", fmt_pct),
        ("Dropped", "dropped", fmt_int), ("Interrupted", "interrupted", fmt_int), ("Held", "held", lambda x: "yes" if x else "no"),
        ("Why not", "why", fmt_text),
    ]
    out += ["", "### Per level", "", markdown_table(report.capacity_levels, lcols, _numbers(lcols, ["Run"])),
            "", "### Per step", "", markdown_table(report.capacity_steps, scols, _numbers(scols, ["Run", "Step", "Held", "Why not"]))]
    return [out]


def _fmt_share(x) -> str:
    return fmt_pct(x, 0)


def _fmt_thresholds(ok, failed) -> str:
    if _missing(ok):
        return NA
    return "held" if ok else f"**failed**: {failed}"


def render_markdown(report: Report, charts: Mapping[str, str] | None = None) -> str:
    """The report; ``charts`` maps chart names (``throughput``, ``batch_latency``,
    ``e2e_latency``, ``cpu``) to the image paths to link."""
    # render_tenants builds on this module's tables: imported here, not at the top (a cycle)
    from .render_share import share_section
    from .render_tenants import tenants_section

    charts = charts or {}
    sections = [
        _header(report),
        _verification(report),
        tenants_section(report, charts),
        share_section(report),
        _fault_timeline(report, charts),
        _configuration(report),
        _results(report, charts),
        _progression(report),
        *_capacity(report),
        _comparison(report.acks, "acks=1 vs acks=all", "broker", "1", "all", "acks=1", "acks=all",
                    ("Change", "change_pct", fmt_change), "no two runs differing only in acks."),
        _comparison(report.brokers, "chronik vs Apache Kafka", "acks", "kafka", "chronik", "Kafka", "chronik",
                    ("chronik / Kafka", "ratio", fmt_ratio), "no chronik and Kafka runs with the same settings."),
        _e2e(report, charts),
        _ingestors(report),
        _broker_metrics(report),
        _resources(report, charts),
        ["## Conclusions", "", *([f"- {c}" for c in report.conclusions] or [NOT_AVAILABLE])],
        ["## Notes", "", *([f"- {n}" for n in report.notes] or ["- Every input was present."])],
    ]
    return "\n\n".join("\n".join(section) for section in sections if section) + "\n"
