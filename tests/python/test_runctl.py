"""scripts/runctl.py against fake verifying consumers (stdlib HTTP servers
serving /summary): the settle, drained and verified steps of a run, and the
meta.json writer's typing (every value arrives as an argument)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

RUNCTL = Path(__file__).resolve().parents[2] / "scripts" / "runctl.py"


class FakeConsumer:
    """Serves `summary` (a dict, replaced at will) at /summary."""

    def __init__(self):
        self.summary = {"counts": {"verified": 0}, "rebalances": 0, "assigned": []}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                body = json.dumps(owner.summary).encode()
                self.send_response(200 if self.path == "/summary" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def assign(self, partitions, rebalances, verified=0, lag=0):
        self.summary = {
            "counts": {"verified": verified}, "rebalances": rebalances,
            "assigned": [{"topic": "t", "partition": p, "lag": lag} for p in partitions],
        }


@pytest.fixture
def consumers():
    made = [FakeConsumer(), FakeConsumer()]
    yield made
    for c in made:
        c.server.shutdown()


def split_later(a: FakeConsumer, b: FakeConsumer, delay: float) -> None:
    """After `delay` seconds (on a thread), the group rebalances so that `a`
    owns partitions 0-2 (its third rebalance) and `b` 3-5 (its first)."""
    def split():
        time.sleep(delay)
        a.assign(range(3), rebalances=3)
        b.assign(range(3, 6), rebalances=1)

    threading.Thread(target=split).start()


def runctl(*args, timeout=30):
    return subprocess.run([sys.executable, str(RUNCTL), *args], capture_output=True, text=True, timeout=timeout)


def test_settle_waits_for_the_rebalance_then_stability(consumers):
    a, b = consumers
    a.assign(range(6), rebalances=1)  # the first member holds everything
    split_later(a, b, 0.8)
    started = time.monotonic()
    r = runctl("settle", "--partitions", "6", "--stable", "1", "--poll", "0.1", "--timeout", "10", a.url, b.url)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    # one owner held all 6 for 0.8 s, but without a quiet second it was not stable
    assert took >= 1.8, (took, r.stderr)
    assert "stable after" in r.stderr and "6 partitions over 2 consumers, 4 rebalances" in r.stderr


def test_settle_waits_for_a_consumer_that_has_not_joined_yet(consumers):
    """One member holding every partition, quiet for longer than --stable, is
    not a settled group while the other verifying consumer has not joined: it
    would rebalance the group once the load runs (seen in a real run)."""
    a, b = consumers
    a.assign(range(6), rebalances=1)
    split_later(a, b, 2.0)  # b joins the group only then
    started = time.monotonic()
    r = runctl("settle", "--partitions", "6", "--stable", "0.5", "--poll", "0.1", "--timeout", "10", a.url, b.url)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - started >= 2.4, r.stderr
    assert "(not in the group)" in r.stderr and "6 partitions over 2 consumers, 4 rebalances" in r.stderr


def test_settle_fails_clearly_when_a_partition_stays_doubly_assigned(consumers):
    a, b = consumers
    a.assign(range(4), rebalances=1)
    b.assign(range(3, 6), rebalances=1)
    r = runctl("settle", "--partitions", "6", "--stable", "0.2", "--poll", "0.1", "--timeout", "1", a.url, b.url)
    assert r.returncode == 1
    assert "not settled within 1 s: assigned twice: t-3" in r.stderr


def test_settle_fails_when_partitions_are_missing_or_a_consumer_is_down(consumers):
    a, b = consumers
    a.assign(range(2), rebalances=1)
    b.server.shutdown()
    b.server.server_close()
    r = runctl("settle", "--partitions", "6", "--poll", "0.1", "--timeout", "0.5", a.url, b.url)
    assert r.returncode == 1
    assert "2/6 partitions assigned" in r.stderr and "no /summary from" in r.stderr


def test_drained_and_verified(consumers):
    a, b = consumers
    a.assign(range(3), rebalances=1, verified=60)
    b.assign(range(3, 6), rebalances=1, verified=40, lag=2)
    assert runctl("verified", a.url, b.url).stdout.strip() == "100"
    lagging = runctl("drained", "--acked", "100", "--partitions", "6", a.url, b.url)
    assert lagging.returncode == 1 and "lag 6" in lagging.stderr
    b.assign(range(3, 6), rebalances=1, verified=40, lag=0)
    assert runctl("drained", "--acked", "100", "--partitions", "6", a.url, b.url).returncode == 0
    assert runctl("drained", "--acked", "101", "--partitions", "6", a.url, b.url).returncode == 1


def test_meta_keeps_values_as_data(tmp_path):
    out = tmp_path / "meta.json"
    hostile = 'x"; import os; os.system("false") #'
    r = runctl("meta", str(out), "--run-id", hostile, "--started-at", "2026-11-24T00:00:00Z", "--broker", "chronik",
               "--broker-flag=--wal-profile", "--broker-flag=medium", "--setting", 'acks="1"',
               "--setting", "rate=200", "--setting", "duration_s=null", "--setting", f"topic={hostile}",
               "--version", "loadgen=chronik-loadgen 1.0.0 (vegeta v12.13.0)")
    assert r.returncode == 0, r.stderr
    meta = json.loads(out.read_text())
    assert meta["run_id"] == hostile and meta["settings"]["topic"] == hostile
    assert meta["settings"]["acks"] == "1" and meta["settings"]["rate"] == 200
    assert meta["settings"]["duration_s"] is None
    assert meta["broker"]["flags"] == ["--wal-profile", "medium"]
    assert meta["versions"]["loadgen"] == "chronik-loadgen 1.0.0 (vegeta v12.13.0)" and meta["host"]["cores"] >= 1
    assert runctl("meta", str(out), "--run-id", "x", "--started-at", "t", "--broker", "b",
                  "--setting", "novalue").returncode != 0


def test_meta_for_a_cluster_run_takes_the_host_and_the_load_figures(tmp_path):
    load = tmp_path / "load"
    (load / "gen-0").mkdir(parents=True)
    (load / "merged-smoke.json").write_text(json.dumps(
        {"plan": {"batch_size": 100, "message_size": 256}, "state": {"testRunDurationMs": 61234}}))
    # a generator's own summary is not the run's figure
    (load / "gen-0" / "summary-smoke.json").write_text(json.dumps(
        {"plan": {"batch_size": 7, "message_size": 7}, "state": {"testRunDurationMs": 99999}}))
    out = tmp_path / "meta.json"
    r = runctl("meta", str(out), "--run-id", "k", "--started-at", "t0", "--broker", "chronik",
               "--host", "kind=kubernetes", "--host", "context=ctx; rm -rf /", "--host", "nodes=3",
               "--setting", "acks=\"1\"", "--load-dir", str(load))
    assert r.returncode == 0, r.stderr
    m = json.loads(out.read_text())
    assert m["host"] == {"kind": "kubernetes", "context": "ctx; rm -rf /", "nodes": 3}
    assert m["settings"] == {"acks": "1", "batch_size": 100, "message_size": 256, "duration_s": 61.2}


def test_verified_reads_a_summary_from_stdin_and_manifest_env(tmp_path):
    r = subprocess.run([sys.executable, str(RUNCTL), "verified", "-"], input='{"counts": {"verified": 42}}',
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "42"
    bad = subprocess.run([sys.executable, str(RUNCTL), "verified", "-"], input="not json",
                         capture_output=True, text=True, timeout=30)
    assert bad.stdout.strip() == "0"
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(
        "kind: Deployment\nmetadata:\n  name: chronik-ingestor\nspec:\n  env:\n"
        "        - name: CHRONIK_INGESTOR_ACKS\n          value: \"all\"\n---\n"
        "kind: StatefulSet\nmetadata:\n  name: chronik\nspec:\n  env:\n"
        "        - name: CHRONIK_WAL_PROFILE\n          value: medium\n")
    assert runctl("manifest-env", str(rendered), "chronik-ingestor", "CHRONIK_INGESTOR_ACKS").stdout == "all\n"
    assert runctl("manifest-env", str(rendered), "chronik", "CHRONIK_WAL_PROFILE").stdout == "medium\n"
    assert runctl("manifest-env", str(rendered), "chronik", "CHRONIK_INGESTOR_ACKS").stdout == ""


def test_saved_answers_are_sources_as_k8s_passes_them(tmp_path):
    """k8s-perf fetches /summary and /ledger through kubectl and hands runctl
    the saved files: the drain check is the one run-all.sh uses."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    part = lambda p, lag: {"topic": "t", "partition": p, "lag": lag}  # noqa: E731
    a.write_text(json.dumps({"counts": {"verified": 70}, "assigned": [part(0, 0), part(1, 0)]}))
    b.write_text(json.dumps({"counts": {"verified": 30}, "assigned": [part(2, 0)]}))
    assert runctl("verified", str(a), str(b)).stdout.strip() == "100"
    assert runctl("drained", "--acked", "100", "--partitions", "3", str(a), str(b)).returncode == 0
    # a partition nobody owns keeps the run undrained even with every message verified
    missing = runctl("drained", "--acked", "100", "--partitions", "4", str(a), str(b))
    assert missing.returncode == 1 and "3/4 partitions assigned" in missing.stderr
    unreadable = runctl("drained", "--acked", "0", "--partitions", "3", str(a), str(tmp_path / "gone.json"))
    assert unreadable.returncode == 1 and "no /summary from" in unreadable.stderr
    ledger = tmp_path / "ledger.json"
    ledger.write_text(json.dumps({"producer_id": 1, "acknowledged": [[0, 9]], "acknowledged_count": 10,
                                  "in_flight": 3}))
    assert runctl("in-flight", str(ledger)).stdout.strip() == "3"
    assert runctl("in-flight", str(tmp_path / "gone.json")).stdout.strip() == "1"
    assert runctl("ledger-total", str(ledger), str(ledger)).stdout.strip() == "20"


def share_member(fake: FakeConsumer, partitions, epoch=1, accepted=0, last_delivery_ago=None):
    fake.summary = {
        "counts": {"verified": accepted}, "rebalances": 1,
        "assigned": [{"topic": "t", "partition": p, "lag": None} for p in partitions],
        "share": {"memberEpoch": epoch, "accepted": accepted, "lastDeliveryAgoSecs": last_delivery_ago},
    }


def test_plan_consumers_reads_the_share_block(tmp_path):
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"consumers": {"mode": "share", "count": 3, "kill_consumer_at": "30s",
                                              "share_configs": ["share.record.lock.duration.ms=15000", "share.x=1"]}}))
    out = runctl("plan-consumers", str(plan))
    assert out.returncode == 0
    assert out.stdout.split() == ["share", "3", "30s", "share.record.lock.duration.ms=15000,share.x=1"]
    plan.write_text("{}")
    assert runctl("plan-consumers", str(plan)).stdout.split() == ["group", "-", "-", "-"]
    plan.write_text(json.dumps({"consumers": {"mode": "fanout"}}))
    bad = runctl("plan-consumers", str(plan))
    assert bad.returncode == 2 and "fanout" in bad.stderr


def test_share_settle_needs_every_member_joined_and_every_partition_held(consumers):
    a, b = consumers
    share_member(a, range(3))
    share_member(b, range(3, 6), epoch=0)
    waiting = runctl("share-settle", "--partitions", "6", a.url, b.url)
    assert waiting.returncode == 1 and "not in the share group yet" in waiting.stderr
    share_member(b, range(3, 5))
    assert "5/6 partitions held" in runctl("share-settle", "--partitions", "6", a.url, b.url).stderr
    # a share group may give one partition to several members
    share_member(b, range(2, 6))
    assert runctl("share-settle", "--partitions", "6", a.url, b.url).returncode == 0


def test_share_drained_counts_the_killed_members_checkpoint_and_waits_out_its_session(consumers, tmp_path):
    a, b = consumers
    share_member(a, range(3), accepted=60, last_delivery_ago=5.0)
    share_member(b, range(3, 6), accepted=30, last_delivery_ago=1.0)
    killed = tmp_path / "consumer-1.json"
    killed.write_text(json.dumps({"share": {"recordsAccepted": 8, "acceptOutcomeUnknown": 2}}))
    args = ["share-drained", "--acked", "100", "--lock-s", "15", "--killed-report", str(killed)]
    busy = runctl(*args, "--killed-at", str(time.time() - 100), a.url, b.url)
    assert busy.returncode == 1 and "still delivering" in busy.stderr
    share_member(b, range(3, 6), accepted=30, last_delivery_ago=4.0)
    assert runctl(*args, "--killed-at", str(time.time() - 100), a.url, b.url).returncode == 0
    recent = runctl(*args, "--killed-at", str(time.time() - 10), a.url, b.url)
    assert recent.returncode == 1 and "waiting out the killed member" in recent.stderr
    assert runctl("share-drained", "--acked", "100", a.url, b.url).returncode == 1  # 90 without the dead one's 10
