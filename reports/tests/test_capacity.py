"""The max sustainable rate of find-max runs (reports/capacity.py), from
synthetic summaries shaped as chronik-loadgen writes them for the staircase
plan load/plans/find-max.json (per-step submetrics tagged ``{step:NAME}``,
the steps in the top-level ``steps``), and as a legacy run's k6
find-max.js wrote them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from reports import build_report, load_runs
from reports.load import REQUEST_COLUMNS
from reports.render import render_markdown

from .conftest import ACKSALL, KAFKA, LEGACY, row

BATCH = 100


def step_metrics(name, rate, duration, *, p99, errors=0, dropped=0, interrupted=0, produced_ratio=1.0,
                 shape="loadgen"):
    """The step-tagged submetrics of one staircase step: ``dropped`` requests
    never sent on schedule, ``interrupted`` still unanswered after the gap."""
    scheduled = rate * duration
    started = scheduled - dropped
    completed = started - interrupted
    if shape == "k6":
        tag = f"{{scenario:{name}}}"
        m = {f"batches_started{tag}": {"type": "counter", "values": {"count": started}}}
        if dropped:
            m[f"dropped_iterations{tag}"] = {"type": "counter", "values": {"count": dropped}}
    else:
        tag = f"{{step:{name}}}"
        m = {
            f"requests_scheduled{tag}": {"type": "counter", "values": {"count": scheduled}},
            f"requests_started{tag}": {"type": "counter", "values": {"count": started}},
            f"requests_dropped{tag}": {"type": "counter", "values": {"count": dropped}},
            f"requests_interrupted{tag}": {"type": "counter", "values": {"count": interrupted}},
        }
    m.update({
        f"batch_latency{tag}": {"type": "trend", "values": {"p(50)": p99 / 3, "p(99)": p99, "count": completed}},
        f"produce_errors{tag}": {"type": "rate", "values": {"rate": errors / completed, "passes": errors,
                                                             "fails": completed - errors}},
        f"messages_produced{tag}": {"type": "counter",
                                    "values": {"count": (completed - errors) * BATCH * produced_ratio}},
    })
    return m


def write_find_max(run_dir, plan, *, levels=(200, 400, 600), repeats=2, duration=10, p99_ms=1000, shape="loadgen"):
    """plan[(repeat, level)] -> step_metrics keyword arguments. chronik-loadgen:
    one generator's summary and the merged summary (the same figures, as
    ``run`` writes both with one generator); a legacy run: k6's summary."""
    steps, metrics, t = [], {}, 0
    for r in range(1, repeats + 1):
        for level in levels:
            name = f"r{r}_l{level}"
            steps.append({"name": name, "repeat": r, "rate": level, "start_s": t, "duration_s": duration})
            metrics.update(step_metrics(name, level, duration, shape=shape, **plan[(r, level)]))
            t += duration + 5
    if shape == "k6":
        summary = {
            "metrics": metrics,
            "state": {"testRunDurationMs": t * 1000},
            "chronik": {
                "scenario": "find-max",
                "config": {"p99_ms": p99_ms, "error_rate": 0, "dropped_ratio": 0.01, "batch_size": BATCH},
                "find_max": {"levels": list(levels), "step_s": duration, "gap_s": 5, "repeats": repeats,
                             "steps": [{"name": s["name"], "repeat": s["repeat"], "rate": s["rate"],
                                        "startS": s["start_s"], "durationS": s["duration_s"]} for s in steps]},
            },
        }
        (run_dir / "k6" / "k6-find-max-summary.json").write_text(json.dumps(summary))
        return
    summary = {
        "tool": "chronik-loadgen", "schema_version": 1, "generators": 1, "index": 0,
        "plan": {"name": "find-max", "route": "batch", "batch_size": BATCH,
                 "staircase": {"levels": list(levels), "step": f"{duration}s", "gap": "5s", "repeat": repeats},
                 "thresholds": {"p99_ms": p99_ms, "error_rate": 0, "dropped_ratio": 0.01}},
        "state": {"testRunDurationMs": t * 1000},
        "metrics": metrics,
        "steps": steps,
        "thresholds_ok": False, "failed_thresholds": [],
    }
    gen = run_dir / "load" / "gen-0"
    gen.mkdir(parents=True, exist_ok=True)
    (gen / "summary-find-max.json").write_text(json.dumps(summary))
    (run_dir / "load" / "merged-find-max.json").write_text(json.dumps({**summary, "index": None}))


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


@pytest.mark.parametrize("shape, run_id", [("loadgen", ACKSALL), ("k6", LEGACY)])
def test_dropped_and_interrupted_requests_count_against_a_step(copy_run, shape, run_id):
    run = copy_run(run_id)
    # budget at 200/s x 10 s is 20 requests: 15 dropped + 5 interrupted fails, 19 holds
    write_find_max(run, {
        (1, 200): {"p99": 100, "dropped": 15, "interrupted": 4},
        (1, 400): {"p99": 100, "dropped": 15, "interrupted": 25},
    }, levels=(200, 400), repeats=1, shape=shape)
    report = build_report(load_runs([run]))
    assert row(report.capacity_steps, step="r1_l200").held
    step = row(report.capacity_steps, step="r1_l400")
    assert not step.held and step.interrupted == 25 and "40 dropped/interrupted" in step.why
    assert row(report.capacity, run_id=report.runs[0].run_id).max_level == 200


def test_the_new_per_step_shape_is_read_as_given(copy_run):
    """requests_interrupted is the generator's own count (not started - answered);
    the dropped budget is dropped_ratio of requests_scheduled{step:…}."""
    run = copy_run(ACKSALL)
    write_find_max(run, {(1, 200): good(), (1, 400): good()}, levels=(200, 400), repeats=1)
    merged = run / "load" / "merged-find-max.json"
    data = json.loads(merged.read_text())
    m = data["metrics"]
    # r1_l200: every started request answered, yet 25 still in flight when the gap ended
    m["requests_interrupted{step:r1_l200}"]["values"]["count"] = 25
    # r1_l400 scheduled 4,000: 39 dropped is within its budget of 40
    m["requests_dropped{step:r1_l400}"]["values"]["count"] = 39
    merged.write_text(json.dumps(data))
    report = build_report(load_runs([run]))
    low, high = row(report.capacity_steps, step="r1_l200"), row(report.capacity_steps, step="r1_l400")
    assert not low.held and low.interrupted == 25 and "25 dropped/interrupted ≥ 20" in low.why
    assert high.held and (high.dropped, high.budget) == (39, 40)
    # the merged summary is the generators' figures, not one more climb
    assert row(report.capacity_levels, level=400.0).climbs == 1
    # its failed step gates are summed up, not listed, in the thresholds column
    data["thresholds_ok"] = False
    data["failed_thresholds"] = ["batch_latency{step:r1_l400}: p(99)<1000", "requests_dropped{step:r1_l200}: x"]
    merged.write_text(json.dumps(data))
    got = build_report(load_runs([run])).summary.set_index("scenario").loc["find-max"]
    assert got["failed_thresholds"] == "2 step gates (find-max: see Max sustainable rate)"


def test_the_verdict_comes_from_the_merged_summary_not_one_generators_share(copy_run):
    run = copy_run(ACKSALL)
    write_find_max(run, {(1, 200): good(), (1, 400): {"p99": 1500}}, levels=(200, 400), repeats=1)
    # a second generator whose own share held at 400: the pooled figures failed it
    gen1 = run / "load" / "gen-1"
    gen1.mkdir()
    share = json.loads((run / "load" / "gen-0" / "summary-find-max.json").read_text())
    share["metrics"]["batch_latency{step:r1_l400}"]["values"]["p(99)"] = 300
    (gen1 / "summary-find-max.json").write_text(json.dumps({**share, "index": 1, "generators": 2}))
    report = build_report(load_runs([run]))
    assert len(report.capacity_steps) == 2
    assert row(report.capacity, run_id=report.runs[0].run_id).max_level == 200


def staircase_rows(rate, steps, *, gap=5, t0=1_795_341_600.0, slow=None, late=(), not_sent=(), stuck=()):
    """One generator's raw rows of a staircase: ``rate`` maps a step to this
    generator's requests/s; ``slow`` (step -> share) answered in 2 s, the rest
    in 100 ms; ``late``/``not_sent``/``stuck`` (step, i) pairs."""
    rows, start, seq = [], 0.0, 0
    for name, duration in steps:
        n = int(rate[name] * duration)
        slow_n = round(n * (slow or {}).get(name, 0))
        for i in range(n):
            scheduled = t0 + start + i / rate[name]
            latency = 2000.0 if i < slow_n else 100.0
            if (name, i) in stuck:
                latency = (duration + gap) * 1000.0  # answered after the gap
            row = {"seq": seq, "scheduled_s": f"{scheduled:.6f}", "route": "batch", "messages": BATCH,
                   "bytes_out": 29600, "step": name}
            if (name, i) in not_sent:
                row.update(sent_s="", latency_ms="", status=0, ok=0, failed=BATCH, bytes_in=0, error="not_sent")
            else:
                delay = 0.2 if (name, i) in late else 0.001
                row.update(sent_s=f"{scheduled + delay:.6f}", latency_ms=f"{latency:.3f}", status=200, ok=BATCH,
                           failed=0, bytes_in=1260, error="")
            rows.append(row)
            seq += 1
        start += duration + gap
    return pd.DataFrame(rows)[REQUEST_COLUMNS]


def test_without_a_merged_summary_the_generators_raw_rows_are_pooled(copy_run):
    run = copy_run(ACKSALL)
    steps = [("r1_l200", 10), ("r1_l400", 10)]
    # each of two generators offers half of every level
    half = {"r1_l200": 100, "r1_l400": 200}
    gen0 = staircase_rows(half, steps, late={("r1_l400", i) for i in range(3)},
                          not_sent={("r1_l400", i) for i in range(10, 15)}, stuck={("r1_l400", 1990)})
    # gen-1 alone fails r1_l400 on p99 (1.5 % answered in 2 s); pooled, 0.75 % do: p99 holds
    gen1 = staircase_rows(half, steps, slow={"r1_l400": 0.015})
    summary = {
        "tool": "chronik-loadgen", "schema_version": 1, "generators": 2,
        "plan": {"name": "find-max", "batch_size": BATCH, "schedule_slack_ms": 50,
                 "thresholds": {"p99_ms": 1000, "error_rate": 0, "dropped_ratio": 0.01}},
        "state": {"testRunDurationMs": 25_000}, "metrics": {},
        "steps": [{"name": n, "repeat": 1, "rate": half[n], "start_s": k * 15, "duration_s": d}
                  for k, (n, d) in enumerate(steps)],
    }
    for i, rows in enumerate((gen0, gen1)):
        gen = run / "load" / f"gen-{i}"
        gen.mkdir(parents=True, exist_ok=True)
        rows.to_csv(gen / "requests-find-max.csv.gz", index=False)
        (gen / "summary-find-max.json").write_text(json.dumps({**summary, "index": i}))
    report = build_report(load_runs([run]))
    high = row(report.capacity_steps, step="r1_l400")
    # the level is the whole offered rate, not one generator's half
    assert list(report.capacity_steps["level"]) == [200, 400]
    # 5 never sent + 3 late, 1 answered after the gap; budget 1 % of 4,000
    assert (high.dropped, high.interrupted, high.budget) == (8, 1, 40)
    assert high.batch_p99_ms == pytest.approx(100.0) and high.held
    gen1_p99 = np.percentile(pd.to_numeric(gen1[gen1["step"] == "r1_l400"]["latency_ms"]), 99, method="linear")
    assert gen1_p99 == pytest.approx(2000.0)
    assert high.msg_per_s == pytest.approx((4000 - 5) * BATCH / 10)
    assert row(report.capacity, run_id=report.runs[0].run_id).max_level == 400





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


def test_a_legacy_k6_find_max_run_still_gives_its_verdict(copy_run):
    run = copy_run(LEGACY)
    write_find_max(run, {
        (1, 200): good(), (1, 400): good(300), (1, 600): {"p99": 100, "errors": 2},
        (2, 200): good(), (2, 400): good(350), (2, 600): good(),
    }, shape="k6")
    report = build_report(load_runs([run]))
    v = row(report.capacity, run_id=report.runs[0].run_id)
    assert (v.max_level, v.first_failed_level, v.climbs) == (400, 600, 2)


def test_capacity_command_prints_the_verdict(copy_run, capsys):
    from reports.__main__ import main

    run = copy_run(ACKSALL)
    write_find_max(run, {(1, 200): good(), (1, 400): {"p99": 3000}}, levels=(200, 400), repeats=1)
    assert main(["capacity", str(run)]) == 0
    out = capsys.readouterr().out
    assert "Max sustainable rate" in out and "20,000 msg/s offered" in out
    assert main(["capacity", str(copy_run(KAFKA))]) == 1


def test_a_level_skipped_after_a_failure_in_its_climb_never_counts_as_held(copy_run):
    """One generator ends a climb at its first failing step; the levels above
    it are listed as skipped (never offered): they must not hold on the strength
    of the other climbs alone."""
    run = copy_run(ACKSALL)
    write_find_max(run, {(1, 200): good(), (1, 400): good(), (2, 200): good(), (2, 400): {"p99": 1500}},
                   levels=(200, 400), repeats=2)
    for path in (run / "load" / "merged-find-max.json", run / "load" / "gen-0" / "summary-find-max.json"):
        data = json.loads(path.read_text())
        data["steps"].append({"name": "r2_l600", "repeat": 2, "rate": 600, "start_s": 0, "duration_s": 10, "skipped": True})
        data["steps"].append({"name": "r1_l600", "repeat": 1, "rate": 600, "start_s": 0, "duration_s": 10})
        data["metrics"].update(step_metrics("r1_l600", 600, 10, p99=100))
        data["skipped_steps"] = ["r2_l600"]
        path.write_text(json.dumps(data))
    report = build_report(load_runs([run]))
    skipped = row(report.capacity_steps, step="r2_l600")
    assert not skipped.held and "not offered" in skipped.why
    level600 = row(report.capacity_levels, level=600.0)
    assert (level600.held_in, level600.climbs, bool(level600.held)) == (1, 2, False)
    assert row(report.capacity, run_id=report.runs[0].run_id).max_level == 200
