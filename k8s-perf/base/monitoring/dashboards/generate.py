"""k8s-perf/base/monitoring/dashboards/generate.py - writes the Grafana
dashboards beside it (chronik-{broker,ingestor,consumer,loadgen}.json).

Owns: which panels exist and their PromQL. Every metric named here is one
the binaries export (chronik-loadgen's included); CI
(k8s-perf/tests/check_dashboards.py) parses every query and runs it against
a Prometheus that scraped the real binaries. Percentiles are always
histogram_quantile over histograms summed across pods (merged), never an
average of per-pod percentiles.

  python3 generate.py          write the JSON files
  python3 generate.py --check  exit 1 if the committed files differ
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
NS = 'namespace=~"$namespace"'
RI = "$__rate_interval"


def rate(metric: str, by: str = "", matchers: str = NS) -> str:
    agg = f"sum by ({by}) " if by else "sum "
    return f"{agg}(rate({metric}{{{matchers}}}[{RI}]))"


def quantiles(bucket: str, qs=(0.5, 0.99), by: str = "", matchers: str = NS) -> list[tuple[str, str]]:
    """histogram_quantile of a classic histogram merged across pods."""
    extra = f", {by}" if by else ""
    label = "{{" + by + "}} " if by else ""
    return [(f"histogram_quantile({q}, sum by (le{extra}) (rate({bucket}{{{matchers}}}[{RI}])))", f"{label}p{q * 100:g}")
            for q in qs]


def panel(title: str, targets: list[tuple[str, str]], unit: str = "short", kind: str = "timeseries",
          description: str = "") -> dict:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": [{"refId": chr(65 + i), "expr": expr, "legendFormat": legend, "datasource": DS}
                    for i, (expr, legend) in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"]}},
    }


def variable(name: str, query: str, label: str) -> dict:
    return {"name": name, "label": label, "type": "query", "datasource": DS, "refresh": 2,
            "query": {"query": query, "refId": name},
            "includeAll": True, "allValue": ".*", "multi": False,
            "current": {"text": "All", "value": "$__all"}}


def dashboard(uid: str, title: str, panels: list[dict], variables: list[dict]) -> dict:
    y = 0
    for i, p in enumerate(panels):
        w = 24 if p.pop("wide", False) else 12
        x = 0 if w == 24 or i % 2 == 0 else 12
        p["gridPos"] = {"h": 8, "w": w, "x": x, "y": y}
        p["id"] = i + 1
        if w == 24 or x == 12:
            y += 8
    ds_var = {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
              "current": {}, "hide": 0}
    return {
        "uid": uid, "title": title, "tags": ["chronik", "chronik-perf"], "timezone": "utc",
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "annotations": {"list": []},
        "templating": {"list": [ds_var, *variables]},
        "panels": panels,
    }


NS_VAR = variable("namespace", "label_values(chronik_requests_total, namespace)", "Namespace")


def broker() -> dict:
    p = [
        panel("Produced records/s", [(rate("chronik_records_in_total"), "records in"),
                                     (rate("chronik_batches_in_total"), "batches in")], "ops"),
        panel("Fetched records/s", [(rate("chronik_records_out_total"), "records out")], "ops"),
        panel("Requests/s by API", [(rate("chronik_requests_total", "api"), "{{api}}")], "reqps"),
        panel("Request errors/s by API", [(rate("chronik_request_errors_total", "api"), "{{api}}")], "reqps"),
        panel("Produce latency (all brokers merged)",
              quantiles("chronik_request_duration_seconds_bucket", (0.5, 0.99, 0.999), matchers=f'{NS}, api="Produce"'), "s"),
        panel("Fetch latency (all brokers merged; includes long-poll waits)",
              quantiles("chronik_request_duration_seconds_bucket", (0.5, 0.99), matchers=f'{NS}, api="Fetch"'), "s"),
        panel("fsync latency", quantiles("chronik_fsync_duration_seconds_bucket", (0.5, 0.99, 0.999)), "s"),
        panel("fsyncs/s and group-commit rounds/s", [(rate("chronik_fsync_total"), "fsyncs"),
                                                     (rate("chronik_group_commit_duration_seconds_count"), "rounds")], "ops"),
        panel("Group commit size (median bytes per round)",
              quantiles("chronik_group_commit_bytes_bucket", (0.5, 0.99)), "bytes"),
        panel("Network bytes/s", [(rate("chronik_network_bytes_in_total"), "in"),
                                  (rate("chronik_network_bytes_out_total"), "out")], "Bps"),
        panel("Produce memory (in flight vs limit, per broker)",
              [(f'sum by (pod) (chronik_produce_memory_in_use_bytes{{{NS}}})', "{{pod}} in use"),
               (f'max(chronik_produce_memory_limit_bytes{{{NS}}})', "limit")], "bytes"),
        panel("Produce backpressure events/s", [(rate("chronik_produce_backpressure_total"), "backpressure")], "ops"),
        panel("Connections", [(f'sum(chronik_connections_open{{{NS}}})', "open"),
                              (rate("chronik_connections_total"), "accepted/s")]),
        panel("Connections closed on error/s", [(rate("chronik_connections_closed_on_error_total", "reason"), "{{reason}}")], "ops"),
        panel("Under-replicated / offline partitions",
              [(f'max(chronik_cluster_under_replicated_partitions{{{NS}}})', "under-replicated"),
               (f'max(chronik_cluster_offline_partitions{{{NS}}})', "offline")]),
        panel("ISR size per partition (smallest view)",
              [(f'min by (topic, partition) (chronik_cluster_isr_size{{{NS}}})', "{{topic}}/{{partition}}")]),
        panel("Replica lag (messages, worst replica)",
              [(f'max by (topic, partition) (chronik_cluster_replica_lag_messages{{{NS}}})', "{{topic}}/{{partition}}")]),
        panel("Leader changes, ISR shrinks and expands /s",
              [(rate("chronik_cluster_leader_changes_total"), "leader changes"),
               (rate("chronik_cluster_isr_shrinks_total"), "ISR shrinks"),
               (rate("chronik_cluster_isr_expands_total"), "ISR expands")], "ops"),
        panel("Controller, raft term, live brokers",
              [(f'sum(chronik_cluster_controller_active{{{NS}}})', "active controllers"),
               (f'max(chronik_cluster_raft_term{{{NS}}})', "raft term"),
               (f'min(chronik_cluster_live_brokers{{{NS}}})', "live brokers (lowest view)")]),
        panel("Not yet durable (log end offset - high watermark)",
              [(f'sum by (topic) (chronik_log_end_offset{{{NS}}} - chronik_high_watermark{{{NS}}})', "{{topic}}")]),
        panel("Log size by topic", [(f'sum by (topic) (chronik_log_size_bytes{{{NS}}})', "{{topic}}")], "bytes",
              description="Summed over partitions and replicas."),
        panel("Log start offset by topic", [(f'sum by (topic) (chronik_log_start_offset{{{NS}}})', "{{topic}}")]),
        panel("Client quotas: byte rate per entity",
              [(rate("chronik_client_quota_recorded_total", "quota_type, user, client_id",
                     NS + ', quota_type=~"Produce|Fetch"'), "{{quota_type}} {{user}} {{client_id}}")], "Bps",
              description="Only clients with a quota are measured (docs/quotas.md); per broker summed over brokers."),
        panel("Client quotas: throttle time per entity",
              [(rate("chronik_client_quota_throttle_time_ms_total", "quota_type, user, client_id"),
                "{{quota_type}} {{user}} {{client_id}}")], "ms",
              description="Throttle time given per second (throttle_time_ms; the channel is muted as long)."),
    ]
    return dashboard("chronik-broker", "Chronik broker", p, [NS_VAR])


def ingestor() -> dict:
    p = [
        panel("Messages/s: accepted, delivered, failed",
              [(rate("ingestor_messages_accepted_total"), "accepted"),
               (rate("ingestor_messages_delivered_total"), "delivered"),
               (rate("ingestor_messages_failed_total"), "failed")], "ops"),
        panel("Rejected messages/s (never handed to Kafka)",
              [(rate("ingestor_messages_rejected_total", "reason"), "{{reason}}")], "ops"),
        panel("Failed deliveries/s by error", [(rate("ingestor_messages_failed_by_error_total", "error"), "{{error}}")], "ops"),
        panel("HTTP requests/s by route and status",
              [(rate("ingestor_http_requests_total", "route, status"), "{{route}} {{status}}")], "reqps"),
        panel("HTTP latency by route (all ingestors merged)",
              quantiles("ingestor_http_request_duration_seconds_bucket", (0.5, 0.99), by="route"), "s"),
        panel("In flight", [(f'sum(ingestor_messages_in_flight{{{NS}}})', "messages"),
                            (f'sum(ingestor_http_requests_in_flight{{{NS}}})', "requests"),
                            (f'sum(ingestor_producer_queue_depth{{{NS}}})', "librdkafka queue")]),
    ]
    return dashboard("chronik-ingestor", "Chronik ingestors", p, [NS_VAR])


def consumer() -> dict:
    p = [
        panel("Verified and consumed messages/s",
              [(rate("chronik_consumer_verified_total"), "verified"),
               (rate("chronik_consumer_consumed_total"), "consumed"),
               (rate("chronik_consumer_redeliveries_total"), "redeliveries"),
               (rate("chronik_consumer_foreign_total"), "foreign")], "ops"),
        panel("Integrity failures (must stay 0)",
              [(f'sum(chronik_consumer_duplicates_total{{{NS}}})', "duplicates"),
               (f'sum(chronik_consumer_reordered_total{{{NS}}})', "reordered"),
               (f'sum(chronik_consumer_corrupt_total{{{NS}}})', "corrupt")], kind="stat"),
        panel("Sequence gaps (each replica's own view; merge decides loss)",
              [(f'sum by (pod) (chronik_consumer_gaps{{{NS}}})', "{{pod}}")],
              description="A replica owning some partitions sees its partners' sequences as gaps; "
                          "chronik-consumer merge (run.sh) gives the verdict."),
        panel("End-to-end latency (all replicas merged)",
              quantiles("chronik_consumer_e2e_latency_seconds_bucket", (0.5, 0.99, 0.999)), "s"),
        panel("Consumer lag by topic", [(f'sum by (topic) (chronik_consumer_lag{{{NS}}})', "{{topic}}")]),
        panel("Rebalances and producers",
              [(f'sum(chronik_consumer_rebalances_total{{{NS}}})', "rebalances"),
               (f'max(chronik_consumer_producers{{{NS}}})', "producers seen")]),
        panel("High watermark by topic", [(f'sum by (topic) (chronik_consumer_high_watermark{{{NS}}})', "{{topic}}")]),
    ]
    return dashboard("chronik-consumer", "Chronik verifying consumers", p, [NS_VAR])


LG = f'{NS}, chronik_perf_run_id=~"$run", plan=~"$plan"'


def loadgen() -> dict:
    """chronik-loadgen's live figures (load/SPEC.md); every generator of a run
    (the Job's indexes) summed. The run's exact figures are the merged raw
    rows (chronik-loadgen merge), not these."""
    req = "chronik_loadgen_requests_total"
    p = [
        panel("Offered vs answered requests/s (all generators)",
              [(f"sum(chronik_loadgen_target_rate{{{LG}}})", "offered (the plan now)"),
               (rate(req, matchers=LG), "answered")], "reqps",
              description="Open model: the plan's rate is offered whatever the ingestors do; "
                          "a gap between the two lines is requests in flight, late or never sent."),
        panel("Generators and requests in flight",
              [(f"count(chronik_loadgen_target_rate{{{LG}}})", "generators"),
               (f"sum(chronik_loadgen_in_flight{{{LG}}})", "in flight")]),
        panel("Messages/s by outcome (per the ingestors' answers)",
              [(rate("chronik_loadgen_messages_total", "outcome", LG), "{{outcome}}")], "ops"),
        panel("Requests/s by route and status (0 = no answer)",
              [(rate(req, "route, code", LG), "{{route}} {{code}}")], "reqps"),
        panel("Request latency (all generators merged)",
              quantiles("chronik_loadgen_request_duration_seconds_bucket", (0.5, 0.9, 0.95, 0.99), by="route",
                        matchers=LG), "s"),
        panel("Dropped requests/s (late or never sent: the schedule was not offered)",
              [(rate("chronik_loadgen_requests_dropped_total", matchers=LG), "dropped")], "ops"),
        panel("Failed request ratio (no answer or status >= 400)",
              [(rate(req, matchers=LG + ', code=~"0|[45].."') + " / " + rate(req, matchers=LG), "failed / all")],
              "percentunit"),
        panel("Message failure ratio (failed / all answered messages)",
              [(rate("chronik_loadgen_messages_total", matchers=LG + ', outcome="failed"') + " / "
                + rate("chronik_loadgen_messages_total", matchers=LG), "failed / all")], "percentunit"),
    ]
    ns = variable("namespace", "label_values(chronik_loadgen_target_rate, namespace)", "Namespace")
    run = variable("run", "label_values(chronik_loadgen_target_rate, chronik_perf_run_id)", "Run (run id)")
    plan = variable("plan", "label_values(chronik_loadgen_target_rate, plan)", "Plan")
    return dashboard("chronik-loadgen", "Chronik load generators (chronik-loadgen)", p, [ns, run, plan])


DASHBOARDS = {"chronik-broker.json": broker, "chronik-ingestor.json": ingestor,
              "chronik-consumer.json": consumer, "chronik-loadgen.json": loadgen}


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for name, build in DASHBOARDS.items():
        text = json.dumps(build(), indent=2) + "\n"
        path = HERE / name
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"dashboards out of date (run {Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
