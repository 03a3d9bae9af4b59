"""The Markdown of the share-group section (runs whose verifying consumers
were one KIP-932 share group: ``run-all.sh --test share-queue``): records/s,
end-to-end latency of every record and of first deliveries, acceptance,
redeliveries by delivery count, the killed consumer, and the consumer's own
explanation of each redelivery.

Owns: the section's wording and columns. Must not: compute figures (they
come from ``reports/share.py`` through the ``Report``).
"""

from __future__ import annotations

from .render import Column, fmt_code, fmt_float, fmt_int, fmt_ms, fmt_text, markdown_table, _numbers
from .report import Report

TITLE = "## Share group (queue)"


def share_section(report: Report) -> list[str]:
    """The section, or nothing when no run consumed as a share group."""
    t = report.share
    if t.empty:
        return []
    cols: list[Column] = [
        ("Run", "run_id", fmt_code), ("Broker", "broker", fmt_text), ("Members", "members", fmt_int),
        ("Msg/s", "msg_per_s", fmt_int), ("Accepted", "records_accepted", fmt_int),
        ("Accepted twice", "accepted_twice", fmt_int), ("Not accepted", "not_accepted", fmt_int),
        ("Outcome unknown", "accept_outcome_unknown", fmt_int), ("Lost", "lost", fmt_int),
        ("Deliveries", "deliveries", fmt_int), ("Redeliveries", "redeliveries", fmt_int),
        ("Max delivery count", "max_delivery_count", fmt_int),
        ("E2E p50", "e2e_p50_ms", fmt_ms), ("E2E p99", "e2e_p99_ms", fmt_ms), ("E2E p99.9", "e2e_p999_ms", fmt_ms),
        ("E2E max", "e2e_max_ms", fmt_ms), ("First-delivery p99", "first_p99_ms", fmt_ms),
    ]
    out = [TITLE, ""]
    for r in t.itertuples():
        killed = (f"; `{r.killed_consumer}` SIGKILLed {fmt_float(r.killed_at_s, 1)} s into the load"
                  if isinstance(r.killed_consumer, str) and r.killed_consumer else "")
        out.append(f"- `{r.run_id}` ({r.broker}, group `{r.group}`): **{r.verdict}**{killed}")
    out += ["", markdown_table(t, cols, _numbers(cols, ["Run", "Broker"])), ""]
    out += [f"- `{r.run_id}` E2E from: {r.e2e_source}" for r in t.itertuples()] + [""]
    counts = report.share_deliveries
    if len(counts):
        pivot = counts.pivot_table(index="run_id", columns="delivery_count", values="deliveries", aggfunc="sum")
        out += ["Deliveries by delivery count (1 = first delivery; 2 and above = redelivered by the broker):", "",
                "| Run | " + " | ".join(str(c) for c in pivot.columns) + " |",
                "|---|" + "---:|" * len(pivot.columns)]
        for run_id, values in pivot.iterrows():
            out.append(f"| `{run_id}` | " + " | ".join(fmt_int(v) for v in values) + " |")
        out.append("")
    for r in t.itertuples():
        for line in r.explanation:
            out.append(f"- `{r.run_id}`: {line}")
    out += ["", "At-least-once: a redelivery (delivery count above 1, after a record's acquisition lock expired or "
            "its holder died) is counted, not a fault. Each member acknowledges a record only after a checkpoint "
            "of its report names it, so a SIGKILLed member's last checkpoint is merged with the others. A record "
            "ACCEPTED twice, or consumed and never accepted, fails the run; so does an acknowledged message never "
            "consumed (Lost). Outcome unknown: records the killed member was accepting at its last checkpoint that "
            "nobody received again (the broker took that ACCEPT). E2E covers every record's first sight by a "
            "member, redeliveries included (they wait out the lock); First-delivery p99: delivery count 1 only."]
    return out
