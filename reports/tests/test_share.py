"""The share-group section (run-all.sh --test share-queue): the per-run row
and the deliveries by delivery count read from the merged consumer report's
``share`` section, the verdict line (a redelivery is no failure, reordering
is not either, a record accepted twice is), and the Markdown, on a run
written here by hand: 10,000 records, consumer-1 SIGKILLed 30 s into the
load, 1,200 of its records redelivered (delivery count 2, 30 of them 3)."""

from __future__ import annotations

import json
from pathlib import Path

from reports import build_report
from reports.load import load_run
from reports.render import render_markdown
from reports.tests.conftest import row
from reports.verification import verdict

T0 = 1_795_000_000.0


def write_run(root: Path, *, accepted_twice: int = 0, reordered: int = 7) -> Path:
    run = root / "20261129T120000Z-share-queue"
    (run / "consumers").mkdir(parents=True)
    meta = {"run_id": run.name, "started_at": "2026-11-29T12:00:00Z",
            "broker": {"kind": "chronik", "version": "0.1.0"},
            "settings": {"test": "share-queue", "consumer_mode": "share", "consumers": 3,
                         "killed_consumer": "consumer-1", "killed_at": T0 + 30.25,
                         "measured_from": T0, "kill_consumer_at": "30s"}}
    (run / "meta.json").write_text(json.dumps(meta))
    failures = ["acceptedTwice"] if accepted_twice else []
    explanation = ["1230 redeliveries (1200 at delivery count 2, 30 at delivery count 3): the broker gave "
                   "these records out again ... Member(s) that died holding records: consumer-1"]
    merged = {
        "kind": "merged",
        "verdict": {"clean": not failures, "conclusive": True, "failures": failures, "notes": []},
        "counts": {"consumed": 11_230, "verified": 10_000, "duplicates": 0, "reordered": reordered, "corrupt": 0,
                   "redeliveries": 1_000, "lost": 0, "gaps": 0},
        "latency": {"e2e": {"count": 10_000, "p50Us": 4_000, "p99Us": 16_500_000, "p999Us": 17_000_000,
                            "maxUs": 17_200_000}},
        "reconciliation": {"acknowledged": 10_000, "lost": 0},
        "share": {"group": "verify-x", "recordsAccepted": 9_800, "acceptedTwice": accepted_twice,
                  "acceptOutcomeUnknown": 200, "notAccepted": 0, "ackFailed": 0, "deliveries": 11_230,
                  "redeliveries": 1_230, "maxDeliveryCount": 3, "membersDied": 1,
                  "byDeliveryCount": {"1": 10_000, "2": 1_200, "3": 30},
                  "firstDeliveryLatency": {"count": 10_000, "p50Us": 3_900, "p99Us": 25_000, "maxUs": 90_000},
                  "members": [{"clientId": f"consumer-{i}", "stopReason": "checkpoint" if i == 1 else "signal"}
                              for i in range(3)],
                  "explanation": explanation},
    }
    (run / "consumers" / "merged.json").write_text(json.dumps(merged))
    return run


def test_the_share_row_and_deliveries_by_count(tmp_path):
    report = build_report([load_run(write_run(tmp_path))])
    r = row(report.share, run_id="20261129T120000Z-share-queue")
    assert (r.records_accepted, r.accepted_twice, r.accept_outcome_unknown, r.lost) == (9_800, 0, 200, 0)
    assert (r.deliveries, r.redeliveries, r.max_delivery_count) == (11_230, 1_230, 3)
    assert (r.killed_consumer, r.killed_at_s, r.members, r.members_died) == ("consumer-1", 30.2, 3, 1)
    assert (r.e2e_p99_ms, r.first_p99_ms) == (16_500.0, 25.0)
    assert r.verdict == "at least once, each record accepted once"
    counts = report.share_deliveries
    assert list(counts["delivery_count"]) == [1, 2, 3]
    assert list(counts["deliveries"]) == [10_000, 1_200, 30]


def test_redeliveries_and_reordering_are_no_failure_but_accepting_twice_is(tmp_path):
    run = load_run(write_run(tmp_path / "ok"))
    v = verdict(run)
    assert v.status == "verified"
    assert "1,230 redeliveries (max delivery count 3)" in v.line
    bad = load_run(write_run(tmp_path / "bad", accepted_twice=4))
    v = verdict(bad)
    assert v.status == "integrity"
    assert "4 accepted twice" in v.line
    assert row(build_report([bad]).share, run_id=bad.run_id).verdict == "FAILED: acceptedTwice"


def test_the_markdown_names_the_killed_consumer_and_explains(tmp_path):
    md = render_markdown(build_report([load_run(write_run(tmp_path))]))
    section = md[md.index("## Share group (queue)"):]
    assert "`consumer-1` SIGKILLed 30.2 s into the load" in section
    assert "| Run | 1 | 2 | 3 |" in section
    assert "10,000 | 1,200 | 30" in section
    assert "Member(s) that died holding records: consumer-1" in section
    assert "| 16.50 s | 17.00 s | 17.20 s | 25.0 ms |" in section


def test_runs_without_a_share_group_have_no_section(report):
    assert report.share.empty
    assert "## Share group" not in render_markdown(report)
