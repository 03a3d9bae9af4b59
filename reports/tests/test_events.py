"""Events a run caused (k8s-perf/run.sh --delete-pod): placed on the load
timeline, with what throughput did around each fault."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from reports import build_report, render_markdown
from reports.events import _around

from .conftest import ACKS1, row


def test_no_events_no_section(report):
    assert report.events.empty
    assert "### Events during the run" not in render_markdown(report)


def test_a_deleted_pod_is_placed_on_the_timeline_and_named_in_the_report(copy_run):
    run = copy_run(ACKS1)
    base = build_report([run])
    first = base.timeline[base.timeline["run_id"] == ACKS1]
    assert len(first) >= 20
    meta = json.loads((run / "meta.json").read_text())
    # the load's first sample, as the events module finds it, plus 10 s
    from reports.tidy import load_samples
    start = load_samples(base.runs[0])["time"].min()
    at = (start + pd.Timedelta(seconds=10.5)).isoformat()
    back = (start + pd.Timedelta(seconds=18)).isoformat()
    meta["events"] = [{"at": at, "kind": "delete-pod", "target": "chronik-0", "detail": "deleted (uid x)"},
                      {"at": back, "kind": "pod-ready", "target": "chronik-0", "detail": "Ready 7 s after"}]
    (run / "meta.json").write_text(json.dumps(meta))
    r = build_report([run])
    fault = row(r.events, kind="delete-pod")
    assert abs(fault["second"] - 10.5) < 1e-6
    assert fault["before_msg_per_s"] > 0
    marker = row(r.events, kind="pod-ready")
    assert np.isnan(marker["before_msg_per_s"])  # a fault's end is not a fault
    md = render_markdown(r)
    assert "### Events during the run" in md
    assert "| delete-pod | `chronik-0` | deleted (uid x) |" in md


def test_recovery_counts_from_the_fault_to_the_first_second_back_after_the_dip():
    rate = [100.0] * 10 + [100.0, 40.0, 0.0, 0.0, 50.0, 95.0, 100.0] + [100.0] * 20
    timeline = pd.DataFrame({"run_id": "r", "second": range(len(rate)), "msg_per_s": rate})
    before, lowest, recovered = _around(timeline, 10.0)
    assert before == 100.0 and lowest == 0.0
    assert recovered == 5.0  # dips at 11, back at >= 90 at second 15
    steady = pd.DataFrame({"run_id": "r", "second": range(40), "msg_per_s": [100.0] * 40})
    assert _around(steady, 10.0)[2] == 0.0
