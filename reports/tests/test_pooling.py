"""chronik-loadgen's raw request rows: pooled across generators (never
averaged), and bad answers counted as failures.

Each test writes a results directory in the layout of load/SPEC.md
("Results"): ``load/gen-<i>/requests-<plan>.csv.gz`` and
``summary-<plan>.json``."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from reports import build_report, render_markdown
from reports.load import REQUEST_COLUMNS
from reports.tidy import load_requests, load_samples

from .conftest import ACKS1, PLAN, row

T0 = 1_795_341_600.0  # 2026-11-22T10:00:00Z


def read_requests(run_dir, gen) -> pd.DataFrame:
    return pd.read_csv(run_dir / "load" / gen / f"requests-{PLAN}.csv.gz", dtype=str, keep_default_na=False)


def write_requests(run_dir, gen, frame: pd.DataFrame) -> None:
    path = run_dir / "load" / gen / f"requests-{PLAN}.csv.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame[REQUEST_COLUMNS].to_csv(path, index=False, compression={"method": "gzip", "mtime": 0})


def regroup(run_dir, groups: list[pd.DataFrame]) -> None:
    """Rewrites ``run_dir``'s load/ as one generator per frame of ``groups``,
    each with a copy of gen-0's summary (the raw rows decide the percentiles)."""
    summary = json.loads((run_dir / "load" / "gen-0" / f"summary-{PLAN}.json").read_text())
    for gen in (run_dir / "load").glob("gen-*"):
        for f in gen.iterdir():
            f.unlink()
        gen.rmdir()
    for i, frame in enumerate(groups):
        write_requests(run_dir, f"gen-{i}", frame)
        (run_dir / "load" / f"gen-{i}" / f"summary-{PLAN}.json").write_text(json.dumps(summary))


def batch_figures(run_dir) -> pd.Series:
    s = row(build_report([run_dir]).summary, run_id=ACKS1)
    return s[["batch_p50_ms", "batch_p90_ms", "batch_p95_ms", "batch_p99_ms", "batch_p99.9_ms", "batch_max_ms",
              "batch_avg_ms"]].astype(float)


def test_pooling_two_generators_equals_one_generator_holding_every_sample(copy_run, tmp_path):
    two = copy_run(ACKS1)
    rows = pd.concat([read_requests(two, "gen-0"), read_requests(two, "gen-1")], ignore_index=True)
    pooled = batch_figures(two)

    one = shutil.copytree(two, tmp_path / "one")
    regroup(one, [rows])
    alone = batch_figures(one)
    assert row(build_report([one]).summary, run_id=ACKS1)["latency_source"] == "raw samples"
    np.testing.assert_allclose(pooled.to_numpy(), alone.to_numpy(), rtol=0, atol=1e-9)

    # the same samples dealt differently over three generators: the same figures
    dealt = shutil.copytree(two, tmp_path / "dealt")
    shuffled = rows.sample(frac=1, random_state=7).reset_index(drop=True)
    regroup(dealt, [shuffled.iloc[i::3] for i in range(3)])
    np.testing.assert_allclose(batch_figures(dealt).to_numpy(), alone.to_numpy(), rtol=0, atol=1e-9)
    assert row(build_report([dealt]).summary, run_id=ACKS1)["latency_source"] == "raw samples of 3 generators pooled"

    # and not the average of the generators' own percentiles
    latencies = [pd.to_numeric(g["latency_ms"]) for g in (read_requests(two, "gen-0"), read_requests(two, "gen-1"))]
    averaged = np.mean([np.percentile(v, 99, method="linear") for v in latencies])
    assert abs(pooled["batch_p99_ms"] - averaged) > 1


def test_throughput_over_time_pools_generators_too(copy_run):
    two = copy_run(ACKS1)
    before = build_report([two]).timeline.set_index("second")["msg_per_s"]
    rows = pd.concat([read_requests(two, "gen-0"), read_requests(two, "gen-1")], ignore_index=True)
    regroup(two, [rows])
    after = build_report([two]).timeline.set_index("second")["msg_per_s"]
    pd.testing.assert_series_equal(before, after)


def request(seq, *, status=200, ok=100, failed=0, error="", route="batch", sent=True, latency=20.0, messages=100):
    scheduled = T0 + seq / 10
    return {
        "seq": seq, "scheduled_s": f"{scheduled:.6f}", "sent_s": f"{scheduled + 0.0005:.6f}" if sent else "",
        "latency_ms": f"{latency:.3f}" if sent else "", "route": route, "status": status, "messages": messages,
        "ok": ok, "failed": failed, "bytes_out": 29600 if sent else 0, "bytes_in": 1260 if sent else 0,
        "step": "s0", "error": error,
    }


BAD_ANSWERS = [
    request(0),
    request(1, status=503, ok=0, failed=100, error="http_503"),
    request(2, status=502, ok=0, failed=100, error="http_502"),
    request(3, ok=60, failed=40, error="queue_full"),  # a partial per-message failure
    request(4, ok=0, failed=100, error="malformed_answer"),  # a 200 that does not account for every message
    request(5, status=0, ok=0, failed=100, error="timeout", latency=30_000.0),
    request(6, sent=False, status=0, ok=0, failed=100, error="not_sent"),
    request(7),
    request(8, route="single", messages=1, ok=1),
    request(9, route="single", messages=1, ok=0, failed=1, error="UNKNOWN_TOPIC_OR_PART"),
    request(10, ok=99, failed=1),  # a partial failure even without an error name
]


def bad_answers_run(tmp_path):
    run = tmp_path / "20261122T110000Z-bad-answers"
    write_requests(run, "gen-0", pd.DataFrame(BAD_ANSWERS))
    (run / "meta.json").write_text(json.dumps({"run_id": run.name, "settings": {"message_size": 256}}))
    return run


def test_bad_answers_are_failed_requests_and_failed_messages(tmp_path):
    from reports.load import load_run

    run = load_run(bad_answers_run(tmp_path))
    r = load_requests(run).set_index("seq")
    assert list(r.index[r["request_failed"]]) == [1, 2, 3, 4, 5, 9, 10]
    assert not r.loc[6, "sent"] and not r.loc[6, "request_failed"]

    s = load_samples(run)

    def total(metric):
        return s.loc[s["metric"] == metric, "value"].sum()

    # counted from the per-message answers, never assumed from an HTTP 200
    assert total("messages_produced") == 100 + 60 + 100 + 1 + 99
    # the unsent request's 100 messages failed too (as chronik-loadgen counts them)
    assert total("messages_failed") == 100 + 100 + 40 + 100 + 100 + 100 + 1 + 1
    assert total("produce_errors") == 7
    assert (s["metric"] == "produce_errors").sum() == 10  # every request sent
    assert total("requests_dropped") == 1
    # latency of every request sent (the timeout's too); the unsent one has none
    assert sorted(s.loc[s["metric"] == "batch_latency", "value"]) == [20.0] * 7 + [30_000.0]
    assert list(s.loc[s["metric"] == "single_latency", "value"]) == [20.0, 20.0]


def test_bad_answers_show_in_the_report(tmp_path):
    run = bad_answers_run(tmp_path)
    failed = {"count": 542, "rate": 542.0}
    summary = {
        "tool": "chronik-loadgen", "schema_version": 1, "generators": 1, "index": 0,
        "plan": {"name": PLAN, "batch_size": 100, "thresholds": {"p99_ms": 5000, "error_rate": 0.001}},
        "state": {"testRunDurationMs": 1000.0},
        "metrics": {
            "messages_produced": {"type": "counter", "values": {"count": 360, "rate": 360.0}},
            "messages_failed": {"type": "counter", "values": failed},
            "produce_errors": {"type": "rate", "values": {"rate": 7 / 10, "passes": 7, "fails": 3}},
            "http_reqs": {"type": "counter", "values": {"count": 10, "rate": 10.0}},
            "requests_dropped": {"type": "counter", "values": {"count": 1, "rate": 1.0}},
        },
        "thresholds_ok": False,
        "failed_thresholds": ["produce_errors: rate<=0.001", "http_req_failed: rate<=0.001",
                              "batch_latency: p(99)<5000"],
    }
    (run / "load" / "gen-0" / f"summary-{PLAN}.json").write_text(json.dumps(summary))
    r = build_report([run])
    got = row(r.summary, run_id=run.name)
    assert got["error_rate"] == pytest.approx(7 / 10)
    assert (got["messages_failed"], got["dropped"]) == (542, 1)
    # the percentiles come from the raw rows: the 30 s timeout is the slowest of 8
    assert got["batch_max_ms"] == 30_000.0 and got["latency_source"] == "raw samples"
    assert any("7 of 10" in c and "542 messages not acknowledged" in c for c in r.conclusions)
    md = render_markdown(r)
    assert "| Error rate | Failed msgs | Dropped reqs |" in md
    assert "| 70.00% | 542 | 1 |" in md
    assert "**failed**: produce_errors: rate<=0.001" in md
