"""Summary figures of the fixture runs against figures computed by hand from
the numbers the fixtures were made with (fixtures/make_fixtures.py)."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
import pytest

from .conftest import ACKS1, ACKSALL, KAFKA, PLAN, RUNS_DIR, row


def requests_of(run_id, gen):
    path = RUNS_DIR / run_id / "load" / gen / f"requests-{PLAN}.csv.gz"
    with gzip.open(path, "rt") as f:
        return list(csv.DictReader(f))


def raw_latencies(run_id, gen):
    """batch_latency samples of a generator: latency_ms of every request sent."""
    return [float(r["latency_ms"]) for r in requests_of(run_id, gen) if r["error"] != "not_sent"]


def summary_of(run_id, gen):
    """gen-<i>'s summary, or ``merged`` for load/merged-<plan>.json."""
    load = RUNS_DIR / run_id / "load"
    path = load / f"merged-{PLAN}.json" if gen == "merged" else load / gen / f"summary-{PLAN}.json"
    return json.loads(path.read_text())


def summary_stat(run_id, gen, metric, stat):
    return summary_of(run_id, gen)["metrics"][metric]["values"][stat]


def test_throughput_and_errors_per_test(report):
    s = report.summary
    acks1 = row(s, run_id=ACKS1)
    # 2 generators x 1200 requests x 100 messages, 600 messages not acknowledged; longest generator 20.0 s
    assert acks1["messages"] == 239_400
    assert acks1["msg_per_s"] == pytest.approx(239_400 / 20.0)
    # from the generators' payload_bytes (239,400 x 256 B) over 20 s
    assert acks1["payload_bytes"] == 239_400 * 256
    assert acks1["mb_per_s"] == pytest.approx(11_970 * 256 / 1e6)
    # 3 x 503, a 500, a malformed answer, 2 partial failures: 7 failed requests of 2,400
    assert acks1["error_rate"] == pytest.approx(7 / 2400)
    assert acks1["messages_failed"] == 600
    assert acks1["generators"] == 2
    assert acks1["dropped"] == 1  # gen-0's one late request
    assert row(s, run_id=ACKSALL)["msg_per_s"] == pytest.approx(220_000 / 20.0)
    kafka = row(s, run_id=KAFKA)
    assert kafka["msg_per_s"] == pytest.approx(230_000 / 20.0)
    assert kafka["mb_per_s"] == pytest.approx(11_500 * 256 / 1e6)
    assert kafka["error_rate"] == 0


def test_the_merged_summary_is_not_another_generator(runs, report):
    acks1 = next(r for r in runs if r.run_id == ACKS1)
    assert [s.generator for s in acks1.load_summaries] == ["gen-0", "gen-1"]
    assert [s.generator for s in acks1.merged_summaries] == ["merged"]
    assert set(report.generators[report.generators["run_id"] == ACKS1]["generator"]) == {"gen-0", "gen-1"}
    # the merged summary counts the same messages: counting it too would double them
    assert row(report.summary, run_id=ACKS1)["messages"] == summary_stat(ACKS1, "merged", "messages_produced", "count")


def test_per_generator_rates_use_each_generators_duration(report):
    r = row(report.generators, run_id=ACKS1, generator="gen-1")
    assert r["msg_per_s"] == pytest.approx(119_400 / 19.95)
    assert r["error_rate"] == pytest.approx(7 / 1200)
    assert r["messages_failed"] == 600


def test_several_generators_percentiles_come_from_pooled_raw_samples(report):
    pooled = raw_latencies(ACKS1, "gen-0") + raw_latencies(ACKS1, "gen-1")
    expected = np.percentile(pooled, 99, method="linear")
    averaged = (summary_stat(ACKS1, "gen-0", "batch_latency", "p(99)")
                + summary_stat(ACKS1, "gen-1", "batch_latency", "p(99)")) / 2
    got = row(report.summary, run_id=ACKS1)
    assert got["latency_source"] == "raw samples of 2 generators pooled"
    assert got["batch_p99_ms"] == pytest.approx(expected)
    assert got["batch_p50_ms"] == pytest.approx(np.percentile(pooled, 50, method="linear"))
    # chronik-loadgen's merged summary pooled the same rows
    assert got["batch_p99_ms"] == pytest.approx(summary_stat(ACKS1, "merged", "batch_latency", "p(99)"), abs=1e-3)
    # the fixture's generators differ enough that averaging would be visibly wrong
    assert abs(got["batch_p99_ms"] - averaged) / expected > 0.05


def test_one_generators_raw_samples_reproduce_its_summary(report):
    got = row(report.summary, run_id=ACKSALL)
    assert got["latency_source"] == "raw samples"
    for column, stat in (("batch_p50_ms", "p(50)"), ("batch_p95_ms", "p(95)"), ("batch_p99_ms", "p(99)"),
                         ("batch_p99.9_ms", "p(99.9)"), ("batch_max_ms", "max")):
        assert got[column] == pytest.approx(summary_stat(ACKSALL, "gen-0", "batch_latency", stat), abs=1e-3)


def test_requests_never_sent_are_dropped_not_latency_samples(runs, report):
    from reports.tidy import load_samples

    acksall = next(r for r in runs if r.run_id == ACKSALL)
    samples = load_samples(acksall)
    # 2,215 scheduled, 15 never sent: 2,200 latency samples, 15 dropped
    assert (samples["metric"] == "batch_latency").sum() == 2200
    assert samples.loc[samples["metric"] == "requests_dropped", "value"].sum() == 15
    # their messages were never produced: failed, as chronik-loadgen counts them, yet no request failed
    assert samples.loc[samples["metric"] == "messages_failed", "value"].sum() == 1500
    assert samples.loc[samples["metric"] == "produce_errors", "value"].sum() == 0
    # the summary's requests_dropped adds the 4 sent late (beyond schedule_slack_ms)
    got = row(report.summary, run_id=ACKSALL)
    assert got["dropped"] == 19 and got["messages_failed"] == 1500 and got["error_rate"] == 0
    assert got["thresholds_ok"]


def test_merged_summary_gives_the_percentiles_without_raw_rows(report):
    got = row(report.summary, run_id=KAFKA)
    assert got["latency_source"] == "merged summary (2 generators pooled by chronik-loadgen)"
    for column, stat in (("batch_p50_ms", "p(50)"), ("batch_p99_ms", "p(99)"), ("batch_p99.9_ms", "p(99.9)")):
        assert got[column] == summary_stat(KAFKA, "merged", "batch_latency", stat)
    assert not any("could not be pooled" in n for n in report.notes)


def test_summaries_alone_are_not_pooled_and_shown_per_generator(copy_run):
    from reports import build_report, render_markdown

    run = copy_run(KAFKA)
    (run / "load" / f"merged-{PLAN}.json").unlink()
    r = build_report([run])
    got = row(r.summary, run_id=KAFKA)
    assert got["latency_source"].startswith("not pooled: 2 generators")
    assert np.isnan(got["batch_p99_ms"])
    per_gen = r.generators.set_index("generator")
    assert per_gen.loc["gen-0", "batch_p99_ms"] == summary_stat(KAFKA, "gen-0", "batch_latency", "p(99)")
    assert per_gen.loc["gen-1", "batch_p99_ms"] == summary_stat(KAFKA, "gen-1", "batch_latency", "p(99)")
    assert any("could not be pooled" in n and KAFKA in n for n in r.notes)
    # thresholds: each generator's own, without the merged summary
    assert got["thresholds_from"] == "each generator's summary" and got["thresholds_ok"]
    assert "### Per load generator" in render_markdown(r)


def test_thresholds_that_set_the_exit_status(report):
    from reports import render_markdown

    acks1 = row(report.summary, run_id=ACKS1)
    assert acks1["thresholds_from"] == "merged summary"
    assert not acks1["thresholds_ok"]
    assert acks1["failed_thresholds"] == "produce_errors: rate<=0.001; http_req_failed: rate<=0.001"
    assert row(report.summary, run_id=ACKSALL)["thresholds_ok"]
    assert any(c.startswith("**Thresholds failed** `20261122T100000Z-chronik-acks1`") for c in report.conclusions)
    md = render_markdown(report)
    assert "| **failed**: produce_errors: rate<=0.001; http_req_failed: rate<=0.001 |" in md
    assert "| held |" in md


def test_the_header_names_the_load_generator(report):
    from reports import render_markdown

    assert set(report.settings["load_generator"]) == {"chronik-loadgen 0.1.0 (vegeta v12.13.0)"}
    assert "**Load generator**: chronik-loadgen 0.1.0 (vegeta v12.13.0)" in render_markdown(report)


def test_throughput_over_time_counts_messages_per_second(report):
    t = report.timeline[report.timeline["run_id"] == ACKS1].set_index("second")["msg_per_s"]
    assert len(t) == 20
    assert t[0] == 12_000  # 2 generators x 60 requests x 100 messages
    # gen-0's request 300 left 80 ms late: still in second 5
    assert t[5] == 12_000
    # gen-1's bad answers (requests 720-722 and 780-783) fall in seconds 12 and 13
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
    gen = row(report.components, run_id=ACKS1, component="loadgen")
    # two generators at 0.06 and 0.07 cores on a 2-core host
    assert gen["processes"] == 2
    assert gen["avg_cores"] == pytest.approx((4 * 0.01 + 20 * 0.06 + 4 * 0.01 + 20 * 0.07) / 24)
    assert gen["machine_share"] == pytest.approx(gen["avg_cores"] / 2)
    side = row(report.sides, run_id=ACKS1)
    comps = report.components[report.components["run_id"] == ACKS1].set_index("component")
    assert side["load_generator_share"] == pytest.approx(comps.loc["loadgen", "machine_share"])
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
        if fields[1] == "loadgen":  # 0.8 cores per generator each second: 1.6 of 2 cores
            n[fields[2]] = n.get(fields[2], -1) + 1
            fields[4] = f"{0.5 + 0.8 * n[fields[2]]:.4f}"
        out.append(",".join(fields))
    (run / "resources.csv").write_text("\n".join(out) + "\n")
    r = build_report([run])
    side = row(r.sides, run_id=ACKS1)
    assert side["load_generator_share"] == pytest.approx(0.8, rel=0.02)
    assert side["load_generator_limit"]
    assert any(c.startswith("**Load generator limit**") and "80%" in c for c in r.conclusions)
    md = render_markdown(r)
    assert "**yes**: the figures may be the load generator's limit" in md
    assert "| Load generator (chronik-loadgen) |" in md


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
    path = run / "load" / "gen-0" / f"summary-{PLAN}.json"
    data = json.loads(path.read_text())
    data["metrics"]["messages_accepted"] = {"type": "counter", "values": {"count": 300_000, "rate": 15_000}}
    path.write_text(json.dumps(data))
    r = build_report([run])
    assert row(r.summary, run_id=ACKSALL)["accepted_per_s"] == pytest.approx(300_000 / 20.0)
    md = render_markdown(r)
    assert "| Msg/s | Accepted msg/s |" in md
    assert "| 15,000 |" in md
