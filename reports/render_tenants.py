"""The Markdown of the tenants section (runs whose plan has tenants,
``run-all.sh --test noisy-neighbour``): one table per (run, tenant), one per
phase of the flood, and the chart. Several runs (without and with a quota,
Chronik and Kafka) are side by side in the same tables, grouped by tenant.

Owns: the section's wording and columns. Must not: compute figures (they
come from ``reports/tenants.py`` through the ``Report``) or draw.
"""

from __future__ import annotations

from collections.abc import Mapping

from .render import Column, fmt_code, fmt_float, fmt_int, fmt_ms, fmt_text, markdown_table, _numbers
from .report import Report

TITLE = "## Tenants"


def tenants_section(report: Report, charts: Mapping[str, str]) -> list[str]:
    """The section, or nothing when no run has tenants."""
    t = report.tenants
    if t.empty:
        return []
    ordered = t.sort_values(["tenant", "broker", "quota", "run_id"], kind="stable")
    cols: list[Column] = [
        ("Tenant", "tenant", fmt_text), ("Run", "run_id", fmt_code), ("Broker", "broker", fmt_text),
        ("Quota", "quota", fmt_text), ("Msg/s", "msg_per_s", fmt_int), ("MB/s", "mb_per_s", fmt_float),
        ("Failed msgs", "failed", fmt_int), ("Batch p50", "batch_p50_ms", fmt_ms), ("Batch p99", "batch_p99_ms", fmt_ms),
        ("E2E p99", "e2e_p99_ms", fmt_ms), ("Throttle (ms)", "throttle_ms", fmt_int),
        ("Throttle ms/s", "throttle_ms_per_s", fmt_float), ("Throttled answers", "throttled_responses", fmt_int),
        ("Acknowledged", "acknowledged", fmt_int), ("Lost", "lost", fmt_int),
    ]
    out = [TITLE, ""]
    out += [f"- `{r.run_id}` {r.tenant}: **{r.verdict}**" for r in ordered.itertuples()]
    out += ["", markdown_table(ordered, cols, _numbers(cols, ["Tenant", "Run", "Broker", "Quota"])), "",
            "Each tenant has its own ingestor (Kafka client.id `chronik-ingestor-<tenant>`), topic, verifying "
            "consumer and load generator. Msg/s and MB/s: messages the tenant's generator counted as acknowledged "
            "÷ its own run (a tenant that floods for part of the run: over its flood); batch percentiles: its raw "
            "rows; E2E p99: its consumer's `.hlog`. Throttle: the sum of `throttle_time_ms` in the broker's "
            "Produce answers to the tenant's ingestor (`ingestor_produce_throttle_time_ms_total`), and "
            "per second of the tenant's run; throttled answers: answers with `throttle_time_ms` > 0. Quota: the "
            "Kafka client quota set on the run's quota tenant before the load (kafka-configs)."]
    p = report.tenant_phases
    if len(p):
        pcols: list[Column] = [
            ("Tenant", "tenant", fmt_text), ("Run", "run_id", fmt_code), ("Broker", "broker", fmt_text),
            ("Quota", "quota", fmt_text), ("Phase", "phase", fmt_text), ("From (s)", "from_s", fmt_int),
            ("To (s)", "to_s", fmt_int), ("Requests", "requests", fmt_int), ("Msg/s", "msg_per_s", fmt_int),
            ("Batch p50", "batch_p50_ms", fmt_ms), ("Batch p99", "batch_p99_ms", fmt_ms),
        ]
        out += ["", "### Before, during and after the flood", "",
                markdown_table(p, pcols, _numbers(pcols, ["Tenant", "Run", "Broker", "Quota", "Phase"])), "",
                "The flood: the sending span of the tenant with the most requests in one second, when it began "
                "after another tenant. Seconds from the run's first request; each request counted in the phase it "
                "was sent in; msg/s: messages acknowledged ÷ the phase's length."]
    if "tenants" in charts:
        out += ["", f"![Tenants over time]({charts['tenants']})"]
    return out
