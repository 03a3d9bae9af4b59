"""The fault timeline (run-all.sh --faults): each scheduled fault placed on
the load's timeline with its recovery figures, from meta.json's events, the
raw request rows and faults/partitions.csv."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from reports import build_report, render_markdown
from reports.__main__ import main as cli
from reports.faults import _acks, _isr, _p99
from reports.tidy import load_requests

from .conftest import ACKS1, row


def _requests(rows: list[tuple[float, float, int]]) -> pd.DataFrame:
    """(sent second, latency ms, ok) rows as load_requests gives them, from t0."""
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    return pd.DataFrame({
        "time": [t0 + pd.Timedelta(seconds=s) for s, _, _ in rows], "latency_ms": [l for _, l, _ in rows],
        "ok": [ok for _, _, ok in rows], "failed": [0 for _ in rows], "sent": True, "request_failed": False,
    }), t0


def test_acks_resume_at_the_end_of_the_longest_silence_after_the_fault():
    # answers every 0.1 s until 10.0, then requests sent 10.1..13 all answered at 14.5, then steady again
    rows = [(s / 10, 20.0, 100) for s in range(0, 100)]
    rows += [(s / 10, (14.5 - s / 10) * 1000, 100) for s in range(101, 130)]
    rows += [(s / 10, 20.0, 100) for s in range(150, 300)]
    requests, t0 = _requests(rows)
    out = _acks(requests, t0, at=10.0, horizon=40.0)
    assert abs(out["acks_resumed_after_s"] - 4.5) < 1e-6
    assert abs(out["ack_gap_s"] - (14.5 - 9.92)) < 1e-6
    steady, t0 = _requests([(s / 10, 20.0, 100) for s in range(0, 300)])
    assert _acks(steady, t0, at=10.0, horizon=40.0)["acks_resumed_after_s"] == 0.0


def test_p99_back_within_twice_the_steady_state_for_three_seconds():
    p99 = [40.0] * 10 + [5000, 3000, 90, 60, 50, 40, 40] + [40.0] * 10
    timeline = pd.DataFrame({"second": range(len(p99)), "batch_p99_ms": p99})
    out = _p99(timeline, at=10.2, horizon=30, steady_from=10.2)
    assert out["p99_before_ms"] == 40.0 and out["p99_peak_ms"] == 5000
    assert abs(out["p99_back_after_s"] - (13 - 10.2)) < 1e-9  # 90 > 80 at second 12; 60, 50, 40 from 13
    calm = pd.DataFrame({"second": range(30), "batch_p99_ms": [40.0] * 30})
    assert _p99(calm, at=10.0, horizon=30, steady_from=10.0)["p99_back_after_s"] == 0.0


def test_isr_shrink_full_again_and_leader_moves():
    states = pd.DataFrame({
        "second": [0, 0, 13.5, 13.5, 16.0, 16.0],
        "partition": [0, 1, 0, 1, 0, 1],
        "leader": [2, 1, 3, 1, 3, 1],
        "replicas": [3] * 6,
        "isr": [3, 3, 2, 2, 3, 3],
    })
    out = _isr(states, at=10.0, horizon=40.0, rf=3)
    assert out["isr_shrank_after_s"] == 3.5 and out["isr_full_after_s"] == 6.0
    assert out["leader_changes"] == 1 and out["leader_moves"] == "p0 2→3 at +3.5 s"
    quiet = _isr(states[states["second"] == 0], at=10.0, horizon=40.0, rf=3)
    assert np.isnan(quiet["isr_shrank_after_s"]) and quiet["leader_changes"] == 0
    # a later fault that begins while an ISR is still short: no shrink of its own, the return to full timed
    later = _isr(states, at=14.0, horizon=40.0, rf=3)
    assert np.isnan(later["isr_shrank_after_s"]) and later["isr_full_after_s"] == 2.0
    assert later["isr_note"] and later["leader_changes"] == 0


def _with_fault(copy_run):
    run = copy_run(ACKS1)
    base = build_report([run])
    start = load_requests(base.runs[0])["time"].min()
    at = start + pd.Timedelta(seconds=10)
    meta = json.loads((run / "meta.json").read_text())
    meta["events"] = [
        {"at": at.isoformat(), "kind": "kill", "target": "node2", "detail": "leader of t-0, SIGKILL pid 1",
         "end": (at + pd.Timedelta(seconds=5)).isoformat(), "end_detail": "restarted as pid 2"},
        {"at": (at + pd.Timedelta(seconds=1)).isoformat(), "kind": "delete-pod", "target": "chronik-0",
         "detail": "deleted"},
    ]
    (run / "meta.json").write_text(json.dumps(meta))
    t = at.timestamp()
    (run / "faults").mkdir()
    (run / "faults" / "partitions.csv").write_text(
        "time,partition,leader,replicas,isr\n"
        f"{t - 5:.3f},0,2,1 2 3,1 2 3\n{t - 5:.3f},1,1,1 2 3,1 2 3\n"
        f"{t + 4:.3f},0,3,1 2 3,1 3\n{t + 4:.3f},1,1,1 2 3,1 3\n"
        f"{t + 7:.3f},0,3,1 2 3,1 2 3\n{t + 7:.3f},1,1,1 2 3,1 2 3\n")
    return run


def test_a_scheduled_fault_gets_the_timeline_section_and_its_figures(copy_run):
    run = _with_fault(copy_run)
    r = build_report([run])
    f = row(r.faults, kind="kill")
    assert abs(f["at_s"] - 10) < 1e-6 and abs(f["lasted_s"] - 5) < 1e-6
    assert abs(f["isr_shrank_after_s"] - 4) < 1e-3 and abs(f["isr_full_after_s"] - 7) < 1e-3
    assert f["leader_changes"] == 1
    assert not np.isnan(f["acks_resumed_after_s"]) and not np.isnan(f["p99_before_ms"])
    assert f["messages_unanswered"] + f["messages_refused"] == f["messages_failed"]
    assert set(r.fault_timeline["run_id"]) == {ACKS1} and r.fault_timeline["msg_per_s"].sum() > 0
    # the k8s event stays in the events table, the scheduled fault does not
    assert list(r.events["kind"]) == ["delete-pod"]
    md = render_markdown(r, {"fault_timeline": "charts/fault_timeline.png"})
    assert "## Fault timeline" in md and "![Fault timeline](charts/fault_timeline.png)" in md
    assert f"| `{ACKS1}` | kill | `node2` | 10.0 | 5.0 |" in md
    assert "leader of t-0, SIGKILL pid 1; then restarted as pid 2; leaders: p0 2→3 at +4.0 s" in md


def test_no_fault_no_section(report):
    assert report.faults.empty and report.fault_timeline.empty
    assert "## Fault timeline" not in render_markdown(report)


def test_cli_faults_prints_figures_and_fails_without_a_fault(copy_run, capsys):
    run = _with_fault(copy_run)
    assert cli(["faults", str(run)]) == 0
    assert "kill node2 at 10.0 s for 5.0 s" in capsys.readouterr().out
    plain = copy_run("20261122T101000Z-chronik-acksall")
    assert cli(["faults", str(plain)]) == 1
