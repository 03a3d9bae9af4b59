"""The max sustainable rate of find-max runs (reports/capacity.py), from
synthetic k6 summaries shaped as k6/scenarios/find-max.js writes them."""

from __future__ import annotations

import json

import numpy as np

from reports import build_report, load_runs
from reports.render import render_markdown

from .conftest import ACKSALL, KAFKA, row

BATCH = 100


def step_metrics(name, rate, duration, *, p99, errors=0, dropped=0, interrupted=0, produced_ratio=1.0):
    """The step-tagged submetrics of one staircase step."""
    started = rate * duration - dropped
    completed = started - interrupted
    tag = f"{{scenario:{name}}}"
    m = {
        f"batch_latency{tag}": {"type": "trend", "values": {"p(50)": p99 / 3, "p(99)": p99, "count": completed}},
        f"produce_errors{tag}": {"type": "rate", "values": {"rate": errors / completed, "passes": errors,
                                                             "fails": completed - errors}},
        f"batches_started{tag}": {"type": "counter", "values": {"count": started}},
        f"messages_produced{tag}": {"type": "counter",
                                    "values": {"count": (completed - errors) * BATCH * produced_ratio}},
    }
    if dropped:
        m[f"dropped_iterations{tag}"] = {"type": "counter", "values": {"count": dropped}}
    return m


def write_find_max(run_dir, plan, *, levels=(200, 400, 600), repeats=2, duration=10, p99_ms=1000):
    """plan[(repeat, level)] -> step_metrics keyword arguments."""
    steps, metrics, t = [], {}, 0
    for r in range(1, repeats + 1):
        for level in levels:
            name = f"r{r}_l{level}"
            steps.append({"name": name, "repeat": r, "rate": level, "startS": t, "durationS": duration})
            metrics.update(step_metrics(name, level, duration, **plan[(r, level)]))
            t += duration + 5
    summary = {
        "metrics": metrics,
        "state": {"testRunDurationMs": t * 1000},
        "chronik": {
            "scenario": "find-max",
            "config": {"p99_ms": p99_ms, "error_rate": 0, "dropped_ratio": 0.01, "batch_size": BATCH},
            "find_max": {"levels": list(levels), "step_s": duration, "gap_s": 5, "repeats": repeats, "steps": steps},
        },
    }
    (run_dir / "k6" / "k6-find-max-summary.json").write_text(json.dumps(summary))


def good(p99=100):
    return {"p99": p99}


def test_the_highest_level_held_in_every_climb_is_the_max(copy_run):
    chronik = copy_run(ACKSALL)
    write_find_max(chronik, {
        (1, 200): good(), (1, 400): good(300), (1, 600): good(900),
        (2, 200): good(), (2, 400): good(350), (2, 600): {"p99": 1500},
    })
    report = build_report(load_runs([chronik]))
    v = row(report.capacity, run_id=report.runs[0].run_id)
    assert v.max_level == 400
    assert v.max_offered_msg_per_s == 40_000
    assert v.first_failed_level == 600
    assert v.monotone
    assert (v.batch_p99_min_ms, v.batch_p99_max_ms) == (300, 350)
    level600 = row(report.capacity_levels, level=600.0)
    assert (level600.held_in, level600.climbs, bool(level600.held)) == (1, 2, False)
    failed = row(report.capacity_steps, step="r2_l600")
    assert not failed.held and "p99 1500 ms" in failed.why


def test_dropped_and_interrupted_iterations_count_against_a_step(copy_run):
    run = copy_run(ACKSALL)
    # budget at 200/s x 10 s is 20 iterations: 15 dropped + 5 interrupted fails, 19 holds
    write_find_max(run, {
        (1, 200): {"p99": 100, "dropped": 15, "interrupted": 4},
        (1, 400): {"p99": 100, "dropped": 15, "interrupted": 25},
    }, levels=(200, 400), repeats=1)
    report = build_report(load_runs([run]))
    assert row(report.capacity_steps, step="r1_l200").held
    step = row(report.capacity_steps, step="r1_l400")
    assert not step.held and step.interrupted == 25 and "40 dropped/interrupted" in step.why
    assert row(report.capacity, run_id=report.runs[0].run_id).max_level == 200


def test_errors_fail_a_step_and_a_failing_lower_level_is_flagged(copy_run):
    run = copy_run(ACKSALL)
    write_find_max(run, {
        (1, 200): {"p99": 100, "errors": 3}, (1, 400): good(), (1, 600): {"p99": 2000},
        (2, 200): good(), (2, 400): good(), (2, 600): good(),
    })
    report = build_report(load_runs([run]))
    v = row(report.capacity, run_id=report.runs[0].run_id)
    assert v.max_level == 400 and not v.monotone
    assert "errors" in row(report.capacity_steps, step="r1_l200").why


def test_no_level_held(copy_run):
    run = copy_run(ACKSALL)
    write_find_max(run, {(1, 200): {"p99": 5000}}, levels=(200,), repeats=1)
    report = build_report(load_runs([run]))
    assert np.isnan(row(report.capacity, run_id=report.runs[0].run_id).max_level)
    assert any("no level held" in c for c in report.conclusions)


def test_chronik_and_kafka_side_by_side(copy_run):
    chronik, kafka = copy_run(ACKSALL), copy_run(KAFKA)
    write_find_max(chronik, {(r, lv): good() for r in (1, 2) for lv in (200, 400, 600)})
    write_find_max(kafka, {
        (1, 200): good(), (1, 400): {"p99": 100, "dropped": 200}, (1, 600): {"p99": 4000},
        (2, 200): good(), (2, 400): good(), (2, 600): {"p99": 4000},
    })
    report = build_report(load_runs([chronik, kafka]))
    assert list(report.capacity.sort_values("broker")["max_level"]) == [600, 200]
    ratio = [c for c in report.conclusions if "chronik vs Kafka" in c and "Max sustainable" in c]
    assert ratio and "3.00×" in ratio[0]
    text = render_markdown(report)
    assert "## Max sustainable rate" in text and "### Per step" in text


def test_reports_without_find_max_have_no_capacity_section(report):
    assert report.capacity.empty
    assert "## Max sustainable rate" not in render_markdown(report)


def test_capacity_command_prints_the_verdict(copy_run, capsys):
    from reports.__main__ import main

    run = copy_run(ACKSALL)
    write_find_max(run, {(1, 200): good(), (1, 400): {"p99": 3000}}, levels=(200, 400), repeats=1)
    assert main(["capacity", str(run)]) == 0
    out = capsys.readouterr().out
    assert "Max sustainable rate" in out and "20,000 msg/s offered" in out
    assert main(["capacity", str(copy_run(KAFKA))]) == 1
