"""Histogram decoding and merging: percentiles come from merged distributions, never averages."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from reports import build_report, latency
from reports.latency import HlogError

from .conftest import FIXTURES


def write_hlog(path, *histograms, tag=None):
    lines = ["#test", "#[StartTime: 1795000000.000 (seconds since epoch)]",
             '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"']
    prefix = f"Tag={tag}," if tag else ""
    lines += [f"{prefix}{i:.3f},1.000,{h.get_max_value():.3f},{h.encode().decode()}" for i, h in enumerate(histograms)]
    path.write_text("\n".join(lines) + "\n")


def hist(*value_counts):
    h = latency.new_histogram()
    for value, count in value_counts:
        h.record_value(value, count)
    return h


def test_decodes_the_rust_harness_hlog_to_the_harness_percentiles():
    # figures printed by chronik_harness::histogram::Percentiles (fixtures/hlog/README.md)
    intervals = latency.read_hlog(FIXTURES / "hlog" / "rust-harness.hlog")
    assert [i.start_s for i in intervals] == [0.0, 1.0]
    p = latency.histogram_percentiles(latency.merge(i.histogram for i in intervals))
    assert p["count"] == 1006
    assert p["mean"] == pytest.approx(3278.5934393638167)
    assert (p["p50"], p["p99"], p["p99.9"], p["p99.99"], p["max"]) == (3001, 3001, 40031, 250111, 250111)


def test_merged_p99_is_the_p99_of_the_union_not_the_average(tmp_path):
    # replica A: 900 x 1 ms + 100 x 5 ms (p99 = 5 ms); replica B: 1000 x 2 ms (p99 = 2 ms).
    # Averaging the p99s gives 3.5 ms; the union's 1980th of 2000 values is 5 ms.
    a = hist((1000, 900), (5000, 100))
    b = hist((2000, 1000))
    write_hlog(tmp_path / "a.hlog", a)
    write_hlog(tmp_path / "b.hlog", b)
    merged = latency.merge_hlogs([tmp_path / "a.hlog", tmp_path / "b.hlog"])
    p = latency.histogram_percentiles(merged)
    averaged = (latency.histogram_percentiles(a)["p99"] + latency.histogram_percentiles(b)["p99"]) / 2
    assert p["count"] == 2000
    assert 5000 <= p["p99"] <= 5005  # 5000 at 3 significant digits
    assert p["p50"] == 2000
    assert abs(averaged - 3500) < 5
    assert abs(p["p99"] - averaged) > 1000


def consumer_report(name, hlog, p99_us, count, kind="replica"):
    return {"kind": kind, "verdict": {"clean": True, "conclusive": kind == "merged", "failures": []},
            "counts": {"consumed": count, "verified": count},
            "latency": {"e2e": {"count": count, "meanUs": 0, "p50Us": 2000, "p90Us": 2000, "p95Us": 2000,
                                "p99Us": p99_us, "p999Us": 5000, "p9999Us": 5000, "maxUs": 5003},
                        "hlog": f"/elsewhere/{hlog}"}}


def test_the_report_takes_e2e_percentiles_from_the_replicas_hlogs(tmp_path):
    run = tmp_path / "run"
    (run / "consumers").mkdir(parents=True)
    write_hlog(run / "consumers" / "consumer-a.hlog", hist((1000, 900)), hist((5000, 100)))
    write_hlog(run / "consumers" / "consumer-b.hlog", hist((2000, 1000)))
    (run / "consumers" / "consumer-a.json").write_text(json.dumps(consumer_report("a", "consumer-a.hlog", 5003, 1000)))
    (run / "consumers" / "consumer-b.json").write_text(json.dumps(consumer_report("b", "consumer-b.hlog", 2000, 1000)))
    # a merged report whose own percentiles are (wrongly) the average: must not be used
    (run / "consumers" / "merged.json").write_text(json.dumps(consumer_report("m", "merged.hlog", 3501, 2000, "merged")))
    e2e = build_report([run]).e2e.iloc[0]
    assert e2e["source"] == "2 replica .hlog files merged"
    assert e2e["count"] == 2000
    assert 5.000 <= e2e["e2e_p99_ms"] <= 5.005
    assert e2e["e2e_p50_ms"] == 2.0


def test_tagged_interval_lines_are_read(tmp_path):
    write_hlog(tmp_path / "t.hlog", hist((10, 3)), tag="service")
    [interval] = latency.read_hlog(tmp_path / "t.hlog")
    assert interval.tag == "service"
    assert interval.histogram.get_total_count() == 3


def test_a_torn_last_line_of_a_killed_writer_is_left_out(tmp_path):
    path = tmp_path / "killed.hlog"
    write_hlog(path, hist((10, 3)), hist((20, 2)))
    path.write_text(path.read_text() + "2.000,1.000,84223.000,HISTFAAAAMR4nC2M")  # SIGKILL mid-line
    intervals = latency.read_hlog(path)
    assert [i.histogram.get_total_count() for i in intervals] == [3, 2]
    # a broken line that is not the torn end is still an error
    path.write_text(path.read_text() + "\n")
    with pytest.raises(HlogError):
        latency.read_hlog(path)


def test_a_broken_payload_is_an_hlog_error(tmp_path):
    (tmp_path / "bad.hlog").write_text("0.000,1.000,5.000,HISTFAAAnotbase64!!\n")
    with pytest.raises(HlogError):
        latency.read_hlog(tmp_path / "bad.hlog")


def test_values_beyond_the_range_saturate_instead_of_failing():
    wide = HdrHistogram(1, 100 * latency.HIGHEST_TRACKABLE_US, 3)
    wide.record_value(10 * latency.HIGHEST_TRACKABLE_US)
    merged = latency.merge([wide, hist((7, 1))])
    assert merged.get_total_count() == 2
    assert merged.get_max_value() >= latency.HIGHEST_TRACKABLE_US * 0.999


def test_sample_percentiles_interpolate_like_k6():
    p = latency.sample_percentiles([4.0, 1.0, 3.0, 2.0])
    # linear between closest ranks: rank (n-1)p
    assert p["p50"] == pytest.approx(2.5)
    assert p["p90"] == pytest.approx(3.7)
    assert p["p99"] == pytest.approx(3.97)
    assert (p["count"], p["mean"], p["max"]) == (4, 2.5, 4.0)


def test_empty_inputs_give_missing_percentiles():
    assert np.isnan(latency.sample_percentiles([])["p99"])
    assert latency.histogram_percentiles(latency.new_histogram())["count"] == 0
    assert latency.percentile_distribution(latency.new_histogram()).empty


def test_the_warmup_window_is_kept_out_of_the_headline(tmp_path):
    """run-all.sh --warmup records measured_from; intervals before it (the
    warm-up's slow start: 900 ms samples) are reported apart, never in the
    headline, and a rebalance in the measured window is named with its time."""
    run = tmp_path / "run"
    (run / "consumers").mkdir(parents=True)
    # intervals start at 1795000000 + 0, 1, 2, 3 s; the load is measured from + 2 s
    write_hlog(run / "consumers" / "consumer-a.hlog",
               hist((900_000, 50)), hist((800_000, 50)), hist((2000, 1000)), hist((3000, 1000)))
    report = consumer_report("a", "consumer-a.hlog", 3000, 2100)
    base_us = 1_795_000_000_000_000
    report["run"] = {"rebalances": 3, "rebalanceEvents": [
        {"atUs": base_us - 5_000_000, "kind": "assign", "partitions": 6},   # the group forming
        {"atUs": base_us + 2_500_000, "kind": "revoke", "partitions": 6},   # 0.5 s into the measured load
        {"atUs": base_us + 2_700_000, "kind": "assign", "partitions": 3},
    ]}
    (run / "consumers" / "consumer-a.json").write_text(json.dumps(report))
    (run / "meta.json").write_text(json.dumps({"run_id": "w", "settings": {
        "load_from": 1_795_000_000.0, "measured_from": 1_795_000_002.0, "measured_until": 1_795_000_010.0}}))
    built = build_report([run])
    e2e = built.e2e.iloc[0]
    assert e2e["count"] == 2000 and e2e["e2e_max_ms"] < 4  # no warm-up sample in the headline
    assert e2e["source"].endswith("(measured window)")
    warm = built.e2e_warmup.iloc[0]
    assert warm["count"] == 100 and warm["e2e_p50_ms"] >= 799
    r = built.rebalances
    assert list(r["window"]) == ["before the load", "measured", "measured"]
    assert r["at_s"].iloc[1] == pytest.approx(0.5)
    from reports.render import render_markdown
    text = render_markdown(built)
    assert "**Rebalances during the measured window**: 2" in text
    assert "before the load: 1" in text and "Warm-up (`--warmup`)" in text


def test_a_run_without_a_window_keeps_every_interval(tmp_path):
    run = tmp_path / "run"
    (run / "consumers").mkdir(parents=True)
    write_hlog(run / "consumers" / "consumer-a.hlog", hist((900_000, 50)), hist((2000, 1000)))
    (run / "consumers" / "consumer-a.json").write_text(json.dumps(consumer_report("a", "consumer-a.hlog", 3000, 1050)))
    built = build_report([run])
    assert built.e2e.iloc[0]["count"] == 1050 and built.e2e_warmup.empty and built.rebalances.empty
