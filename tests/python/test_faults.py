"""scripts/faults.py without a cluster: the --faults SPEC parser (what it
accepts, what it refuses and why), the Kafka subset fault-compare.sh runs,
and the undo and restart primitives on a plain `sleep` process (SIGSTOP
undone by `undo`; a killed process started again from its /proc image)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FAULTS_PY = Path(__file__).resolve().parents[2] / "scripts" / "faults.py"
sys.path.insert(0, str(FAULTS_PY.parent))  # its fault_spec module
spec = importlib.util.spec_from_file_location("faults", FAULTS_PY)
faults = importlib.util.module_from_spec(spec)
sys.modules["faults"] = faults
spec.loader.exec_module(faults)


def test_the_issue_example_parses_in_start_order():
    parsed = faults.parse("pause:node3@60s+3s;kill:leader@20s,restart@+10s;partition:node2@40s+8s;"
                          "disk-full:node1@80s+10s")
    assert [(f.kind, f.target, f.at_s, f.duration_s) for f in parsed] == [
        ("kill", "leader", 20.0, 10.0), ("partition", "node2", 40.0, 8.0), ("pause", "node3", 60.0, 3.0),
        ("disk-full", "node1", 80.0, 10.0)]


@pytest.mark.parametrize("text, at, duration, target", [
    ("kill:node2@1.5m+20", 90.0, 20.0, "node2"),
    ("stop:2@5s,restart@+1m", 5.0, 60.0, "node2"),
    ("kill:follower@7", 7.0, None, "follower"),  # restarted when the load ends
    (" pause:leader@3s+0.5s ; ", 3.0, 0.5, "leader"),
])
def test_times_targets_and_restarts(text, at, duration, target):
    (f,) = faults.parse(text)
    assert (f.at_s, f.duration_s, f.target) == (at, duration, target)


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("crash:node1@1s+1s", "unknown fault"),
    ("kill:node1", "not KIND:TARGET@AT"),
    ("pause:node3@60s", "needs a duration"),
    ("partition:node2@40s", "needs a duration"),
    ("pause:node1@1s,restart@+2s", "only kill and stop"),
    ("kill:node1@1s+2s,restart@+2s", "not both"),
    ("kill:node4@1s+1s", "no node4 in a 3-node cluster"),
    ("pause:node1@1s+0s", "positive"),
    ("kill:leader@25s,restart@+10s", "after the load's 30 s"),
    ("kill:leader@10s+1x", "not KIND:TARGET@AT"),
])
def test_refused_with_the_reason(text, why):
    with pytest.raises(faults.SpecError, match=why):
        faults.parse(text, duration_s=30)


def test_disk_full_is_chronik_only_and_left_out_of_kafkas_run():
    spec_text = "kill:leader@20s,restart@+10s;disk-full:node1@80s+10s;pause:node3@60s+3s"
    with pytest.raises(faults.SpecError, match="Chronik only"):
        faults.parse(spec_text, broker="kafka")
    kafka = faults.for_broker(spec_text, "kafka")
    assert kafka == "kill:leader@20s,restart@+10s;pause:node3@60s+3s"
    assert len(faults.parse(kafka, broker="kafka")) == 2
    assert faults.for_broker(spec_text, "chronik") == spec_text


def test_parse_cli_exit_status():
    run = lambda *a: subprocess.run([sys.executable, str(FAULTS_PY), "parse", *a], capture_output=True, text=True)
    ok = run("kill:leader@20s,restart@+10s")
    assert ok.returncode == 0 and "kill leader at 20 s for 10 s" in ok.stdout
    bad = run("pause:node3@60s")
    assert bad.returncode == 2 and "bounded" in bad.stderr
    assert run("kill:leader@2s+1s", "--network").returncode == 1
    assert run("partition:node2@2s+1s", "--network").returncode == 0


def _state(tmp_path: Path) -> "faults.State":
    d = tmp_path / "run-x" / "faults"
    d.mkdir(parents=True)
    return faults.State(d)


def _stat(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_undo_resumes_a_paused_process(tmp_path):
    p = subprocess.Popen(["sleep", "30"])
    try:
        state = _state(tmp_path)
        state.data["paused"]["node1"] = p.pid
        state.save()
        os.kill(p.pid, signal.SIGSTOP)
        for _ in range(50):
            if _stat(p.pid) == "T":
                break
            time.sleep(0.02)
        assert _stat(p.pid) == "T"
        done = faults.undo_all(faults.State(state.dir), final=True)
        assert any("SIGCONT" in d for d in done)
        time.sleep(0.1)
        assert _stat(p.pid) in ("S", "R")
        assert json.loads((state.dir / "state.json").read_text())["paused"] == {}
    finally:
        p.kill()
        p.wait()


def test_a_killed_process_is_started_again_from_its_image(tmp_path):
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        p = subprocess.Popen(["sleep", "31"], stdout=out, stderr=out, cwd=tmp_path)
    for _ in range(100):  # until the child has exec'd (before, its cmdline is empty or Python's)
        if Path(f"/proc/{p.pid}/cmdline").read_bytes().startswith(b"sleep\0"):
            break
        time.sleep(0.01)
    image = faults._process_image(p.pid)
    assert image["cmd"] == ["sleep", "31"] and image["cwd"] == str(tmp_path) and image["stdout"] == str(log)
    p.kill()
    p.wait()
    assert faults._wait_gone(p.pid, 2)
    again = faults._restart(image, None)
    try:
        assert faults._alive(again)
        assert Path(f"/proc/{again}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"31"]
    finally:
        os.kill(again, signal.SIGKILL)
        faults._wait_gone(again, 2)
