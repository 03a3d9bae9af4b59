"""Missing or broken pieces are reported as "not available", never a crash."""

from __future__ import annotations

import json
import shutil

from reports import build_report, render_markdown, write_charts

from .conftest import ACKS1, KAFKA, PLAN, row


def test_an_empty_results_directory_renders(tmp_path):
    run = tmp_path / "20261122T000000Z-empty"
    run.mkdir()
    r = build_report([run])
    md = render_markdown(r, write_charts(r, tmp_path / "charts"))
    assert "Verification not available: no consumer report" in md
    assert "_not available_: no load generator summary in any run." in md
    assert "not available: meta.json (settings unknown), load generator summary, consumer reports" in md
    assert "## Conclusions" in md
    assert not list((tmp_path / "charts").glob("*.png"))


def test_a_run_with_only_meta_json(tmp_path, copy_run):
    src = copy_run(ACKS1)
    run = tmp_path / "only-meta"
    run.mkdir()
    shutil.copy(src / "meta.json", run / "meta.json")
    md = render_markdown(build_report([run]))
    assert f"`{ACKS1}`" in md  # named by meta.json's run_id
    assert "| chronik | 0.1.0 | 1 |" in md


def test_missing_load_results_keep_the_run_in_the_tables(copy_run):
    run = copy_run(KAFKA)
    shutil.rmtree(run / "load")
    r = build_report([run])
    got = row(r.summary, run_id=KAFKA)
    assert got["latency_source"] == "not available"
    assert "not available: load generator summary" in render_markdown(r)
    # the consumers' figures are still there
    assert row(r.e2e, run_id=KAFKA)["count"] == 230_000


def test_unreadable_request_rows_are_noted_and_skipped(copy_run):
    run = copy_run(ACKS1)
    (run / "load" / "gen-1" / f"requests-{PLAN}.csv.gz").write_bytes(b"\x1f\x8b not gzip")
    r = build_report([run])
    assert any("requests-blocking-batch.csv.gz: unreadable CSV" in n for n in r.notes)
    # gen-1's rows are gone: the two generators' percentiles come from the merged summary
    assert row(r.summary, run_id=ACKS1)["latency_source"].startswith("merged summary (2 generators")


def test_undecodable_hlogs_fall_back_to_the_merged_reports_percentiles(copy_run):
    run = copy_run(ACKS1)
    (run / "consumers" / "consumer-1.hlog").write_text("0.000,1.000,5.000,HISTFAAAbroken\n")
    r = build_report([run])
    got = row(r.e2e, run_id=ACKS1)
    merged = json.loads((run / "consumers" / "merged.json").read_text())["latency"]["e2e"]
    assert got["source"] == "merged.json percentiles"
    assert got["e2e_p99_ms"] == merged["p99Us"] / 1000
    assert any("could not be decoded" in n and "instead of merging raw histograms" in n for n in r.notes)
    assert "could not be decoded" in render_markdown(r)


def test_a_missing_hlog_falls_back_and_says_which(copy_run):
    run = copy_run(ACKS1)
    (run / "consumers" / "consumer-0.hlog").unlink()
    got = row(build_report([run]).e2e, run_id=ACKS1)
    assert got["note"].startswith("no .hlog for consumer-0")


def test_unreadable_files_are_noted_and_skipped(copy_run):
    run = copy_run(ACKS1)
    (run / "load" / "gen-1" / f"summary-{PLAN}.json").write_text("{not json")
    (run / "resources.csv").write_text("time,cpu\n1,2\n")
    r = build_report([run])
    assert any("unreadable JSON" in n for n in r.notes)
    assert any("resources.csv: missing columns" in n for n in r.notes)
    assert row(r.summary, run_id=ACKS1)["generators"] == 1
    assert "_not available_: no resources.csv." in render_markdown(r)
