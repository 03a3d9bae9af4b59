"""The tenants section (run-all.sh --test noisy-neighbour): per-tenant
figures, the flood window and its phases, the verdict of a run without
consumers of its own, the Markdown table and the chart, on runs written here
by hand (every figure is checkable from the rows below).

The fixture: two tenants for 30 s from T0. calm sends 10 requests/s of 100
messages all the time, answered in 20 ms, except while the flood runs (10 s
to 20 s), when they take 200 ms. noisy sends 50 requests/s from 10 s to
20 s, answered in 500 ms; its ingestor saw 40 throttled answers adding up
to 4,000 ms of throttle time. The second run is the same under a quota, on
Kafka, with the calm tenant's batches back to 20 ms during the flood and 1
message of calm's lost.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from reports import build_report
from reports.charts import write_charts
from reports.load import load_run
from reports.render import render_markdown
from reports.tenants import flood_window, phase_table, tenant_runs, tenant_table
from reports.tests.conftest import row

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc).timestamp()
COLUMNS = "seq,scheduled_s,sent_s,latency_ms,route,status,messages,ok,failed,bytes_out,bytes_in,step,error"


def requests(rate: int, start_s: float, end_s: float, latency) -> list[str]:
    """Rows of one generator: ``rate`` requests/s sent from start_s to end_s (exclusive)."""
    out = []
    for i in range(round((end_s - start_s) * rate)):
        at = T0 + start_s + i / rate
        out.append(f"{i},{at:.6f},{at + 0.0001:.6f},{latency(at - T0):.3f},batch,200,100,100,0,29600,1260,s0,")
    return out


def write_tenant(root: Path, name: str, rows: list[str], *, lost: int, throttle_ms: int, throttled: int) -> None:
    t = root / "tenants" / name
    gen = t / "load" / "gen-0"
    gen.mkdir(parents=True)
    with gzip.open(gen / f"requests-noisy-neighbour-{name}.csv.gz", "wt") as f:
        f.write("\n".join([COLUMNS, *rows]) + "\n")
    messages = 100 * len(rows)
    duration_ms = (float(rows[-1].split(",")[1]) - float(rows[0].split(",")[1])) * 1000 + 100
    summary = {"tool": "chronik-loadgen", "schema_version": 1, "generators": 1, "index": 0,
               "plan": {"name": f"noisy-neighbour-{name}", "batch_size": 100, "message_size": 256},
               "state": {"testRunDurationMs": duration_ms}, "thresholds_ok": True, "failed_thresholds": [],
               "metrics": {"messages_produced": {"values": {"count": messages}},
                           "payload_bytes": {"values": {"count": messages * 256}}}}
    (gen / f"summary-noisy-neighbour-{name}.json").write_text(json.dumps(summary))
    (t / "consumers").mkdir()
    merged = {"kind": "merged",
              "counts": {"consumed": messages - lost, "verified": messages - lost, "lost": lost},
              "verdict": {"conclusive": True, "failures": ["lost"] if lost else []},
              "coverage": {"complete": True},
              "latency": {"e2e": {"count": messages, "p50Us": 30_000, "p99Us": 250_000}}}
    (t / "consumers" / "merged.json").write_text(json.dumps(merged))
    (t / "ingestors").mkdir()
    ledger = {"ingestor_id": name, "producer_id": 7, "next_sequence": messages, "acknowledged": [[0, messages - 1]],
              "failed": [], "acknowledged_count": messages, "failed_count": 0, "in_flight": 0}
    (t / "ingestors" / "ingestor-0-ledger.json").write_text(json.dumps(ledger))
    (t / "ingestors" / "ingestor-0-metrics.prom").write_text(
        "# TYPE ingestor_produce_throttle_time_ms counter\n"
        f"ingestor_produce_throttle_time_ms_total {throttle_ms}\n"
        "# TYPE ingestor_produce_throttled_responses counter\n"
        f"ingestor_produce_throttled_responses_total {throttled}\n# EOF\n")


def write_run(root: Path, run_id: str, broker: str, quota: str, calm_flood_ms: float, calm_lost: int) -> Path:
    root.mkdir(parents=True)
    meta = {"run_id": run_id, "started_at": "2026-11-22T12:00:00Z", "broker": {"kind": broker},
            "settings": {"test": "noisy-neighbour", "acks": "all", "batch_size": 100, "message_size": 256,
                         "ingestors": 2, "consumers": 2, "partitions": 6, "tenants": "calm noisy", "quota": quota,
                         "quota_entity": "clients=chronik-ingestor-noisy" if quota else ""}}
    (root / "meta.json").write_text(json.dumps(meta))
    write_tenant(root, "calm", requests(10, 0, 30, lambda s: calm_flood_ms if 10 <= s < 20 else 20.0),
                 lost=calm_lost, throttle_ms=0, throttled=0)
    write_tenant(root, "noisy", requests(50, 10, 20, lambda s: 500.0),
                 lost=0, throttle_ms=4000 if quota else 0, throttled=40 if quota else 0)
    return root


@pytest.fixture
def nn_runs(tmp_path):
    return [load_run(write_run(tmp_path / "a", "nn-a", "chronik", "", 200.0, 0)),
            load_run(write_run(tmp_path / "b", "nn-b", "kafka", "producer_byte_rate=1000000", 20.0, 1))]


def test_each_tenant_is_read_as_a_run_under_the_parents_id(nn_runs):
    tenants = tenant_runs(nn_runs[0])
    assert [name for name, _ in tenants] == ["calm", "noisy"]
    assert {t.run_id for _, t in tenants} == {"nn-a"}
    assert len(tenants[0][1].load_requests) == 300 and len(tenants[1][1].load_requests) == 500


def test_the_flood_is_the_busiest_tenant_once_it_starts_after_another(nn_runs):
    name, start, end = flood_window(tenant_runs(nn_runs[0]))
    assert name == "noisy"
    assert start.timestamp() == pytest.approx(T0 + 10.0001, abs=1e-4)
    assert end.timestamp() == pytest.approx(T0 + 10.0001 + 499 / 50, abs=1e-4)


def test_no_flood_without_a_tenant_starting_later(nn_runs):
    calm_only = [t for t in tenant_runs(nn_runs[0]) if t[0] == "calm"]
    assert flood_window(calm_only) is None


def test_tenant_table(nn_runs):
    t = tenant_table(nn_runs)
    assert len(t) == 4
    calm = row(t, run_id="nn-a", tenant="calm")
    assert calm["messages"] == 30_000
    # 30,000 messages over the generator's 29.9 s + 0.1 s
    assert calm["msg_per_s"] == pytest.approx(1000.0)
    assert calm["mb_per_s"] == pytest.approx(1000 * 256 / 1e6)
    # a third of calm's requests took 200 ms: its p99 is theirs, its p50 the others'
    assert calm["batch_p50_ms"] == pytest.approx(20.0) and calm["batch_p99_ms"] == pytest.approx(200.0)
    assert calm["e2e_p99_ms"] == pytest.approx(250.0)
    assert calm["throttle_ms"] == 0 and calm["lost"] == 0 and calm["status"] == "verified"
    noisy = row(t, run_id="nn-b", tenant="noisy")
    assert noisy["quota"] == "producer_byte_rate=1000000" and noisy["broker"] == "kafka"
    assert noisy["msg_per_s"] == pytest.approx(50_000 / 10.08, rel=1e-6)
    assert noisy["throttle_ms"] == 4000 and noisy["throttled_responses"] == 40
    assert noisy["throttle_ms_per_s"] == pytest.approx(4000 / 10.08, rel=1e-6)
    lost = row(t, run_id="nn-b", tenant="calm")
    assert lost["lost"] == 1 and lost["status"] == "loss"


def test_phases_split_calm_latency_at_the_flood(nn_runs):
    p = phase_table(nn_runs)
    calm = p[(p["run_id"] == "nn-a") & (p["tenant"] == "calm")].set_index("phase")
    assert list(calm.index) == ["before flood", "flood", "after flood"]
    assert calm.loc["before flood", "requests"] == 100  # 0 s .. 9.9 s; the one at 10 s is in the flood
    assert calm.loc["before flood", "batch_p99_ms"] == pytest.approx(20.0)
    assert calm.loc["flood", "batch_p99_ms"] == pytest.approx(200.0)
    assert calm.loc["after flood", "batch_p99_ms"] == pytest.approx(20.0)
    throttled = p[(p["run_id"] == "nn-b") & (p["tenant"] == "calm")].set_index("phase")
    assert throttled.loc["flood", "batch_p99_ms"] == pytest.approx(20.0)
    noisy = p[(p["run_id"] == "nn-a") & (p["tenant"] == "noisy")]
    assert list(noisy["phase"]) == ["flood"] and int(noisy["requests"].iloc[0]) == 500


def test_report_shows_tenants_side_by_side_and_a_chart(nn_runs, tmp_path):
    report = build_report(nn_runs)
    v = report.verification.set_index("run_id")
    # a run with tenants is decided by its tenants' consumers, the worst of them
    assert v.loc["nn-a", "status"] == "verified" and v.loc["nn-b", "status"] == "loss"
    assert v.loc["nn-a", "verified"] == 30_000 + 50_000 and v.loc["nn-b", "lost"] == 1
    charts = write_charts(report, tmp_path / "charts")
    assert "tenants" in charts and charts["tenants"].stat().st_size > 0
    md = render_markdown(report, {k: f"charts/{p.name}" for k, p in charts.items()})
    section = md[md.index("## Tenants"):md.index("## Test configuration")]
    lines = [line for line in section.splitlines() if line.startswith("| calm") or line.startswith("| noisy")]
    # per tenant, both runs side by side (tenant first), then the phases
    assert [line.split(" | ")[0:2] for line in lines[:4]] == [
        ["| calm", "`nn-a`"], ["| calm", "`nn-b`"], ["| noisy", "`nn-a`"], ["| noisy", "`nn-b`"]]
    assert "| noisy | `nn-b` | kafka | producer_byte_rate=1000000 | 4,960 |" in section
    assert "4,000 | 396.83 | 40 |" in section
    assert "before flood" in section and "![Tenants over time](charts/tenants.png)" in section


def test_a_run_without_tenants_has_no_tenants_section(report):
    assert report.tenants.empty and report.tenant_phases.empty
    assert "## Tenants" not in render_markdown(report)
