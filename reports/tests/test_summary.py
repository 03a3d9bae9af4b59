"""Summary figures of the fixture runs against figures computed by hand from
the numbers the fixtures were made with (fixtures/make_fixtures.py)."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pytest

from .conftest import ACKS1, ACKSALL, KAFKA, RUNS_DIR, row


def raw_values(run_id, runner_dir, metric):
    path = RUNS_DIR / run_id / "k6" / runner_dir / "raw-produce-batch.csv.gz"
    with gzip.open(path, "rt") as f:
        return [float(r["metric_value"]) for r in csv.DictReader(f) if r["metric_name"] == metric]


def summary_stat(run_id, runner_dir, metric, stat):
    path = RUNS_DIR / run_id / "k6" / runner_dir / "k6-produce-batch-summary.json"
    return json.loads(path.read_text())["metrics"][metric]["values"][stat]


def test_throughput_and_errors_per_test(report):
    s = report.summary
    acks1 = row(s, run_id=ACKS1)
    # 2 runners x 1200 iterations x 100 messages, 6 iterations refused (503); longest runner 20.0 s
    assert acks1["messages"] == 239_400
    assert acks1["msg_per_s"] == pytest.approx(239_400 / 20.0)
    # from k6's payload_bytes (239,400 x 256 B) over 20 s
    assert acks1["payload_bytes"] == 239_400 * 256
    assert acks1["mb_per_s"] == pytest.approx(11_970 * 256 / 1e6)
    assert acks1["error_rate"] == pytest.approx(6 / 2400)
    assert acks1["runners"] == 2
    assert row(s, run_id=ACKSALL)["msg_per_s"] == pytest.approx(220_000 / 20.0)
    kafka = row(s, run_id=KAFKA)
    assert kafka["msg_per_s"] == pytest.approx(230_000 / 20.0)
    # no payload_bytes in plain k6 summaries: msg/s x message size
    assert kafka["mb_per_s"] == pytest.approx(11_500 * 256 / 1e6)
    assert kafka["error_rate"] == 0


def test_per_runner_rates_use_each_runners_duration(report):
    r = row(report.runners, run_id=ACKS1, runner="runner-1")
    assert r["msg_per_s"] == pytest.approx(119_400 / 19.95)
    assert r["error_rate"] == pytest.approx(6 / 1200)


def test_several_runners_percentiles_come_from_pooled_raw_samples(report):
    pooled = raw_values(ACKS1, "runner-0", "batch_latency") + raw_values(ACKS1, "runner-1", "batch_latency")
    expected = np.percentile(pooled, 99, method="linear")
    averaged = (summary_stat(ACKS1, "runner-0", "batch_latency", "p(99)")
                + summary_stat(ACKS1, "runner-1", "batch_latency", "p(99)")) / 2
    got = row(report.summary, run_id=ACKS1)
    assert got["latency_source"] == "raw samples of 2 runners merged"
    assert got["batch_p99_ms"] == pytest.approx(expected)
    assert got["batch_p50_ms"] == pytest.approx(np.percentile(pooled, 50, method="linear"))
    # the fixture's runners differ enough that averaging would be visibly wrong
    assert abs(got["batch_p99_ms"] - averaged) / expected > 0.05


def test_one_runners_raw_samples_reproduce_its_k6_summary(report):
    got = row(report.summary, run_id=ACKSALL)
    assert got["latency_source"] == "raw samples"
    # k6/lib/summary.js's trend stats: p(50) (not med) and p(99.9)
    for column, stat in (("batch_p50_ms", "p(50)"), ("batch_p95_ms", "p(95)"), ("batch_p99_ms", "p(99)"),
                         ("batch_p99.9_ms", "p(99.9)"), ("batch_max_ms", "max")):
        assert got[column] == pytest.approx(summary_stat(ACKSALL, ".", "batch_latency", stat), abs=1e-3)


def test_summaries_alone_are_not_merged_and_shown_per_runner(report):
    got = row(report.summary, run_id=KAFKA)
    assert got["latency_source"].startswith("not merged: 2 runners")
    assert np.isnan(got["batch_p99_ms"])
    per_runner = report.runners[report.runners["run_id"] == KAFKA].set_index("runner")
    assert per_runner.loc["runner-0", "batch_p99_ms"] == summary_stat(KAFKA, "runner-0", "batch_latency", "p(99)")
    assert per_runner.loc["runner-1", "batch_p99_ms"] == summary_stat(KAFKA, "runner-1", "batch_latency", "p(99)")
    # plain k6 summaries: med is the p50, and there is no p(99.9)
    assert per_runner.loc["runner-1", "batch_p50_ms"] == summary_stat(KAFKA, "runner-1", "batch_latency", "med")
    assert per_runner["batch_p99.9_ms"].isna().all()
    assert any("could not be merged" in n and KAFKA in n for n in report.notes)


def test_throughput_over_time_counts_messages_per_second(report):
    t = report.timeline[report.timeline["run_id"] == ACKS1].set_index("second")["msg_per_s"]
    assert len(t) == 20
    assert t[0] == 12_000  # 2 runners x 60 iterations x 100 messages
    # runner-1's refused iterations 720-722 and 780-782 fall in seconds 12 and 13
    assert t[12] == t[13] == 12_000 - 300
    assert t.sum() == 239_400


def test_progression_is_chronological_against_the_first_run(report):
    p = report.progression
    assert list(p["run_id"]) == [ACKS1, ACKSALL, KAFKA]
    assert p["vs_first"].iloc[1] == pytest.approx(11_000 / 11_970)
    assert p["vs_previous_pct"].iloc[2] == pytest.approx((11_500 - 11_000) / 11_000 * 100)


def test_acks_comparison_pairs_the_chronik_runs(report):
    a = report.acks
    assert set(a["broker"]) == {"chronik"}
    msg = row(a, metric="msg/s")
    assert (msg["1"], msg["all"]) == (pytest.approx(11_970), pytest.approx(11_000))
    assert msg["change_pct"] == pytest.approx((11_000 - 11_970) / 11_970 * 100)


def test_broker_comparison_pairs_the_acks_all_runs(report):
    b = report.brokers
    assert set(b["acks"]) == {"all"}
    msg = row(b, metric="msg/s")
    assert msg["ratio"] == pytest.approx(11_000 / 11_500)
    cpu = row(b, metric="broker CPU µs/msg")
    assert cpu["chronik"] == pytest.approx(5.62e6 / 220_000)
    assert cpu["kafka"] == pytest.approx(6.45e6 / 230_000)


def test_e2e_latency_is_the_union_of_the_replica_hlogs(report):
    merged = json.loads((RUNS_DIR / ACKS1 / "consumers" / "merged.json").read_text())["latency"]["e2e"]
    replicas = [json.loads((RUNS_DIR / ACKS1 / "consumers" / f"consumer-{i}.json").read_text())["latency"]["e2e"]
                for i in (0, 1)]
    got = row(report.e2e, run_id=ACKS1)
    assert got["source"] == "2 replica .hlog files merged"
    # merged.hlog beside merged.json holds the same samples again: not added
    assert got["count"] == 239_400
    assert got["e2e_p99_ms"] == merged["p99Us"] / 1000
    assert got["e2e_p50_ms"] == merged["p50Us"] / 1000
    averaged = sum(r["p99Us"] for r in replicas) / 2 / 1000
    assert abs(got["e2e_p99_ms"] - averaged) > 10


def test_resources_per_component(report):
    broker = row(report.components, run_id=ACKS1, component="broker")
    # chronik-server: 24 one-second intervals, 2 x 0.01 idle, 19 x 0.25 and one 0.40 busy, 2 x 0.01 idle
    cpu = 4 * 0.01 + 19 * 0.25 + 0.40
    assert broker["cpu_seconds"] == pytest.approx(cpu)
    assert broker["avg_cores"] == pytest.approx(cpu / 24)
    assert broker["peak_cores"] == pytest.approx(0.40)
    assert broker["peak_rss_bytes"] == 325_058_560
    assert broker["cpu_us_per_msg"] == pytest.approx(cpu * 1e6 / 239_400)
    assert broker["msg_per_s_per_core"] == pytest.approx(11_970 / (cpu / 24))
    ingestors = row(report.components, run_id=ACKS1, component="ingestor")
    # two processes; their busiest second together: 0.18 + 0.30
    assert ingestors["processes"] == 2
    assert ingestors["peak_cores"] == pytest.approx(0.48)
    assert ingestors["avg_cores"] == pytest.approx((4 * 0.01 + 20 * 0.18 + 4 * 0.01 + 19 * 0.20 + 0.30) / 24)


def test_where_the_cores_go(report):
    k6 = row(report.components, run_id=ACKS1, component="k6")
    # two runners at 0.30 and 0.32 cores on a 2-core host
    assert k6["machine_share"] == pytest.approx(k6["avg_cores"] / 2)
    side = row(report.sides, run_id=ACKS1)
    comps = report.components[report.components["run_id"] == ACKS1].set_index("component")
    assert side["load_generator_share"] == pytest.approx(comps.loc["k6", "machine_share"])
    assert side["system_share"] == pytest.approx(comps.loc[["ingestor", "broker", "consumer"], "machine_share"].sum())
    assert side["pipeline_cpu_us_per_msg"] == pytest.approx(comps["cpu_us_per_msg"].sum())
    assert not side["load_generator_limit"]
    assert not any("Load generator limit" in c for c in report.conclusions)


def test_a_busy_load_generator_is_called_out(copy_run):
    from reports import build_report, render_markdown

    run = copy_run(ACKS1)
    lines = (run / "resources.csv").read_text().splitlines()
    out, n = [lines[0]], {}
    for line in lines[1:]:
        fields = line.split(",")
        if fields[1] == "k6":  # 0.8 cores per runner each second: 1.6 of 2 cores
            n[fields[2]] = n.get(fields[2], -1) + 1
            fields[4] = f"{0.5 + 0.8 * n[fields[2]]:.4f}"
        out.append(",".join(fields))
    (run / "resources.csv").write_text("\n".join(out) + "\n")
    r = build_report([run])
    side = row(r.sides, run_id=ACKS1)
    assert side["load_generator_share"] == pytest.approx(0.8, rel=0.02)
    assert side["load_generator_limit"]
    assert any(c.startswith("**Load generator limit**") and "80%" in c for c in r.conclusions)
    assert "**yes**: the figures may be k6's limit" in render_markdown(r)


def test_resources_accept_epoch_timestamps(report):
    kafka = row(report.components, run_id=KAFKA, component="broker")
    assert kafka["avg_cores"] == pytest.approx((4 * 0.01 + 19 * 0.31 + 0.52) / 24)


def test_a_restarted_process_starts_a_new_series(copy_run):
    from reports import build_report

    run = copy_run(ACKSALL)
    lines = (run / "resources.csv").read_text().splitlines()
    # the broker restarts after 12 samples: new pid, CPU counting from 0 again
    out, seen = [lines[0]], 0
    for line in lines[1:]:
        fields = line.split(",")
        if fields[1] == "broker":
            seen += 1
            if seen > 12:
                fields[3] = "5999"
                fields[4] = f"{float(fields[4]) - 3.0:.4f}"
        out.append(",".join(fields))
    (run / "resources.csv").write_text("\n".join(out) + "\n")
    r = build_report([run])
    procs = r.processes[r.processes["component"] == "broker"]
    assert sorted(procs["pid"]) == [5101, 5999]
    assert (procs["avg_cores"] >= 0).all()


def test_ingestor_ledgers_and_metrics(report):
    ing = row(report.ingestors, run_id=ACKS1, ingestor="ingestor-1")
    assert (ing["acknowledged"], ing["failed"], ing["in_flight"], ing["rejected"]) == (119_700, 0, 0, 600)


def test_broker_metrics_for_chronik_and_kafka(report):
    m = report.broker_metrics.set_index(["run_id", "figure"])["value"]
    assert m[(ACKS1, "mean fsync (ms)")] == pytest.approx(1.6821 / 3912 * 1000)
    assert m[(KAFKA, "records in")] == 230_000
    assert m[(KAFKA, "produce requests")] == 230_000 // 250
    assert np.isnan(m[(KAFKA, "fsync calls")])


def test_fire_mode_accepted_messages_are_shown_apart_from_produced(copy_run):
    from reports import build_report, render_markdown

    run = copy_run(ACKSALL)
    path = run / "k6" / "k6-produce-batch-summary.json"
    data = json.loads(path.read_text())
    data["metrics"]["messages_accepted"] = {"type": "counter", "values": {"count": 300_000, "rate": 15_000}}
    path.write_text(json.dumps(data))
    r = build_report([run])
    assert row(r.summary, run_id=ACKSALL)["accepted_per_s"] == pytest.approx(300_000 / 20.0)
    md = render_markdown(r)
    assert "| Msg/s | Accepted msg/s |" in md
    assert "| 15,000 |" in md
