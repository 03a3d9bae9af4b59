"""Runs from before issue 33 (k6 runners in ``k6/``, component ``k6``,
``versions.k6``) still render, with the same rules as chronik-loadgen's."""

from __future__ import annotations

import csv
import gzip
import json
import shutil

import numpy as np
import pytest

from reports import build_report, render_markdown

from .conftest import LEGACY, LEGACY_DIR, row

RUN = LEGACY_DIR / LEGACY


def k6_raw(runner, metric):
    with gzip.open(RUN / "k6" / runner / "raw-produce-batch.csv.gz", "rt") as f:
        return [float(r["metric_value"]) for r in csv.DictReader(f) if r["metric_name"] == metric]


def k6_summary(runner):
    return json.loads((RUN / "k6" / runner / "k6-produce-batch-summary.json").read_text())


@pytest.fixture(scope="module")
def legacy():
    return build_report([RUN])


def test_k6_runners_are_the_load_generators(legacy):
    assert list(legacy.generators["generator"]) == ["runner-0", "runner-1"]
    s = row(legacy.summary, run_id=LEGACY)
    # 2 runners x 240 iterations x 100 messages, 3 refused; 12 s
    assert s["messages"] == 47_700 and s["msg_per_s"] == pytest.approx(47_700 / 12)
    assert s["error_rate"] == pytest.approx(3 / 480)
    pooled = k6_raw("runner-0", "batch_latency") + k6_raw("runner-1", "batch_latency")
    assert s["latency_source"] == "raw samples of 2 generators pooled"
    assert s["batch_p99_ms"] == pytest.approx(np.percentile(pooled, 99, method="linear"))
    assert legacy.timeline["msg_per_s"].sum() == 47_700


def test_k6_thresholds_are_read_per_runner(legacy):
    s = row(legacy.summary, run_id=LEGACY)
    assert s["thresholds_from"] == "each generator's summary"
    assert not s["thresholds_ok"] and s["failed_thresholds"] == "runner-1: produce_errors: rate<0.01"


def test_k6_summaries_alone_are_not_pooled_and_plain_k6_med_is_the_p50(copy_run):
    run = copy_run(LEGACY)
    for f in run.glob("k6/*/raw-*.csv.gz"):
        f.unlink()
    r = build_report([run])
    assert row(r.summary, run_id=LEGACY)["latency_source"].startswith("not pooled: 2 generators")
    per = r.generators.set_index("generator")
    assert per.loc["runner-1", "batch_p50_ms"] == k6_summary("runner-1")["metrics"]["batch_latency"]["values"]["med"]
    assert np.isnan(per.loc["runner-1", "batch_p99.9_ms"])


def test_one_k6_runner_flat_in_k6_dir(copy_run):
    run = copy_run(LEGACY)
    shutil.rmtree(run / "k6" / "runner-1")
    for f in (run / "k6" / "runner-0").iterdir():
        f.rename(run / "k6" / f.name)
    (run / "k6" / "runner-0").rmdir()
    r = build_report([run])
    s = row(r.summary, run_id=LEGACY)
    assert list(r.generators["generator"]) == ["k6"] and s["latency_source"] == "raw samples"
    for f in (run / "k6").glob("raw-*"):
        f.unlink()
    assert row(build_report([run]).summary, run_id=LEGACY)["latency_source"] == "k6 summary (legacy run)"


def test_k6_processes_are_the_load_generator_in_where_the_cores_go(legacy):
    comps = legacy.components.set_index("component")
    assert list(legacy.components["component"]) == ["k6", "ingestor", "broker"]
    side = row(legacy.sides, run_id=LEGACY)
    assert side["load_generator_share"] == pytest.approx(comps.loc["k6", "machine_share"])
    assert side["pipeline_cpu_us_per_msg"] == pytest.approx(comps["cpu_us_per_msg"].sum())


def test_versions_k6_names_the_load_generator(legacy):
    assert row(legacy.settings, run_id=LEGACY)["load_generator"] == "k6 v1.8.1"
    assert "**Load generator**: k6 v1.8.1" in render_markdown(legacy)
