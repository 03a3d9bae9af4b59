"""Bytes consumers fetched from leaders and from followers (KIP-392,
``run-all.sh --racks``): each broker's ``chronik_consumer_fetch_bytes_total``
at the end less its ``metrics/start/`` snapshot, summed over brokers; the
followers' share; n/a for Apache Kafka, which exports no such counter here."""

from __future__ import annotations

import json
import math

from reports import build_report, render_markdown
from reports.broker import consumer_fetch
from reports.load import load_runs

from .conftest import ACKSALL, KAFKA, row

# node -> (leader, follower) bytes at the start of the measured load and at the end
START = {1: (1_000, 0), 2: (500, 200), 3: (0, 0)}
END = {1: (41_000, 0), 2: (10_500, 60_200), 3: (0, 88_000)}


def fetch_prom(leader: int, follower: int) -> str:
    return f"""# HELP chronik_consumer_fetch_bytes Record bytes returned to consumers, by replica role.
# TYPE chronik_consumer_fetch_bytes counter
chronik_consumer_fetch_bytes_total{{replica="leader"}} {leader}
chronik_consumer_fetch_bytes_total{{replica="follower"}} {follower}
# TYPE chronik_records_in counter
chronik_records_in_total 10
# EOF
"""


def with_racks(run, end=END, start=START, racks="a,b,c"):
    """The run as run-all.sh --racks leaves it: one end snapshot per broker, and one as the load began."""
    metrics = run / "metrics"
    (metrics / "broker.prom").unlink()
    (metrics / "start").mkdir()
    for node, (leader, follower) in end.items():
        (metrics / f"broker-{node}.prom").write_text(fetch_prom(leader, follower))
    for node, (leader, follower) in start.items():
        (metrics / "start" / f"broker-{node}.prom").write_text(fetch_prom(leader, follower))
    meta = json.loads((run / "meta.json").read_text())
    meta["settings"]["racks"] = racks
    (run / "meta.json").write_text(json.dumps(meta))
    return run


def test_deltas_are_summed_over_brokers(copy_run):
    run = with_racks(copy_run(ACKSALL))
    got = row(consumer_fetch(load_runs([run])), run_id=ACKSALL)
    # leaders: 40,000 + 10,000 + 0; followers: 0 + 60,000 + 88,000
    assert got["leader_fetch_bytes"] == 50_000
    assert got["follower_fetch_bytes"] == 148_000
    assert math.isclose(got["follower_fetch_share"], 148_000 / 198_000)


def test_a_restarted_broker_counts_from_zero_again(copy_run):
    # node 3 restarted during the run: its counter (500) is below its start value (7,000)
    run = with_racks(copy_run(ACKSALL), start={**START, 3: (0, 7_000)}, end={**END, 3: (0, 500)})
    got = row(consumer_fetch(load_runs([run])), run_id=ACKSALL)
    assert got["follower_fetch_bytes"] == 60_000 + 500


def test_without_a_start_snapshot_the_end_is_the_run(copy_run):
    # brokers started for the run: a run without metrics/start/ counts from zero
    run = with_racks(copy_run(ACKSALL), start={})
    got = row(consumer_fetch(load_runs([run])), run_id=ACKSALL)
    assert got["leader_fetch_bytes"] == 51_500
    assert got["follower_fetch_bytes"] == 148_200


def test_no_follower_bytes_is_a_share_of_zero(copy_run):
    run = with_racks(copy_run(ACKSALL), end={n: (leader + 5, 0) for n, (leader, _) in START.items()},
                     start={n: (leader, 0) for n, (leader, _) in START.items()}, racks="")
    got = row(consumer_fetch(load_runs([run])), run_id=ACKSALL)
    assert (got["leader_fetch_bytes"], got["follower_fetch_bytes"], got["follower_fetch_share"]) == (15, 0, 0)


def test_kafka_and_older_chronik_runs_have_none(report):
    for run_id in (KAFKA, ACKSALL):  # the plain fixtures export no such counter
        got = row(report.consumer_fetch, run_id=run_id)
        assert math.isnan(got["leader_fetch_bytes"]) and math.isnan(got["follower_fetch_share"])
    assert not any("Follower fetching" in c for c in report.conclusions)


def test_the_report_shows_them_and_kafka_says_na(copy_run):
    chronik = with_racks(copy_run(ACKSALL))
    kafka = copy_run(KAFKA)
    r = build_report([chronik, kafka])
    md = render_markdown(r)
    # the broker metrics table: one column per run, Kafka n/a
    assert "| consumer bytes from leaders | 48.8 KiB | n/a |" in md
    assert "| consumer bytes from followers | 144.5 KiB | n/a |" in md
    assert "| follower share of consumer bytes | 74.7% | n/a |" in md
    # the run summary's conclusion names the racks
    assert any(c.startswith(f"**Follower fetching** `{ACKSALL}` (racks a,b,c): consumers fetched 148,000 bytes "
                            "from followers and 50,000 from leaders (74.7% from followers)") for c in r.conclusions)
    # the chronik vs Kafka comparison carries them, Kafka's side n/a
    share = r.brokers[r.brokers["metric"] == "follower share of consumer bytes"]
    assert len(share) == 1 and math.isnan(share["kafka"].iloc[0])
    assert math.isclose(share["chronik"].iloc[0], 148_000 / 198_000)
    assert "| follower share of consumer bytes | n/a | 74.7% | n/a |" in md
