"""The verdict line: explicit about loss, never "Verified" when something is wrong."""

from __future__ import annotations

import json
import shutil

from reports import build_report, load_run, render_markdown
from reports.verification import verdict

from .conftest import ACKS1, ACKSALL, KAFKA, row


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_clean_runs_are_verified_with_their_message_counts(report):
    v = report.verification.set_index("run_id")
    assert v.loc[ACKS1, "verdict"] == "Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt across 239,400 messages"
    assert v.loc[ACKSALL, "verdict"].endswith("across 220,000 messages")
    assert (v["status"] == "verified").all()
    assert v.loc[KAFKA, "acknowledged"] == 230_000


def test_acknowledged_but_never_consumed_is_loss(copy_run):
    run = copy_run(ACKS1)

    def lose(d):
        d["counts"].update(lost=17, verified=239_383, consumed=239_383, gaps=17, unexplainedGaps=17)
        d["verdict"].update(clean=False, failures=["lost", "gaps"])

    edit_json(run / "consumers" / "merged.json", lose)
    r = build_report([run])
    got = row(r.verification, run_id=ACKS1)
    assert got["status"] == "loss"
    assert got["verdict"].startswith("LOSS DETECTED: 17 lost (acknowledged, never consumed)")
    assert "across 239,383 messages" in got["verdict"]
    markdown = render_markdown(r)
    assert "**LOSS DETECTED: 17 lost" in markdown
    assert "Verified: 0 lost" not in markdown


def test_gaps_without_a_ledger_are_loss_when_coverage_is_complete(copy_run):
    run = copy_run(ACKSALL)

    def gaps(d):
        d["counts"].update(gaps=5, unexplainedGaps=5)
        d["verdict"].update(clean=False, failures=["gaps"])
        d.pop("reconciliation", None)

    edit_json(run / "consumers" / "merged.json", gaps)
    v = verdict(load_run(run))
    assert v.status == "loss"
    assert v.line.startswith("LOSS DETECTED: 5 sequences missing")


def test_duplicates_without_loss_are_an_integrity_failure(copy_run):
    run = copy_run(KAFKA)

    def dup(d):
        d["counts"].update(duplicates=3)
        d["verdict"].update(clean=False, failures=["duplicates"])

    edit_json(run / "consumers" / "merged.json", dup)
    v = verdict(load_run(run))
    assert v.status == "integrity"
    assert v.line == "INTEGRITY FAILURE: 0 lost, 3 duplicated, 0 reordered, 0 corrupt across 230,000 messages"


def test_incomplete_coverage_is_inconclusive(copy_run):
    run = copy_run(ACKSALL)

    def partial(d):
        d["verdict"]["conclusive"] = False
        d["coverage"].update(complete=False, unconsumedOffsets=1200)

    edit_json(run / "consumers" / "merged.json", partial)
    v = verdict(load_run(run))
    assert v.status == "inconclusive"
    assert "1,200 offsets not consumed" in v.line


def test_replicas_without_a_merge_cannot_decide_loss(copy_run):
    run = copy_run(ACKS1)
    (run / "consumers" / "merged.json").unlink()
    v = verdict(load_run(run))
    assert v.status == "inconclusive"
    assert "no merged.json" in v.line


def test_a_lone_replica_decides_when_there_is_no_merge(copy_run):
    run = copy_run(ACKSALL)
    (run / "consumers" / "merged.json").unlink()
    v = verdict(load_run(run))
    assert (v.status, v.source) == ("verified", "consumer-0.json")


def test_no_consumer_report_is_not_available(copy_run):
    run = copy_run(ACKS1)
    shutil.rmtree(run / "consumers")
    r = build_report([run])
    assert row(r.verification, run_id=ACKS1)["verdict"] == "Verification not available: no consumer report"
    assert "Verification not available: no consumer report" in render_markdown(r)
