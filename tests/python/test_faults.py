"""scripts/faults.py without a cluster: the --faults SPEC parser (what it
accepts, what it refuses and why), the Kafka subset fault-compare.sh runs,
the undo and restart primitives on a plain `sleep` process (SIGSTOP
undone by `undo`; a killed process started again from its /proc image), and
slow-disk on a real cgroup: a process started by scripts/in-cgroup.sh in
the cgroup `prepare` made, its fsynced writes timed before and under the
throttle (a throttle that does not slow them fails), then lifted and
removed; a data directory on tmpfs refused."""

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


def test_kafka_takes_every_kind_now():
    spec_text = "kill:leader@20s,restart@+10s;disk-full:node1@80s+10s;slow-disk:follower@30s+5s;pause:node3@60s+3s"
    assert len(faults.parse(spec_text, broker="kafka")) == 4
    assert faults.for_broker(spec_text, "kafka") == spec_text
    assert faults.for_broker(spec_text, "chronik") == spec_text


def test_slow_disk_limits():
    (f,) = faults.parse("slow-disk:node2@60s+20s")
    assert (f.kind, f.target, f.at_s, f.duration_s) == ("slow-disk", "node2", 60.0, 20.0)
    assert dict(f.limit) == {"wbps": 1 << 20, "wiops": 50} and "wbps=1048576 wiops=50" in str(f)
    (f,) = faults.parse("slow-disk:leader@1s+2s,wiops=10", slow_disk="wbps=512k wiops=30")
    assert dict(f.limit) == {"wbps": 512 << 10, "wiops": 10}  # the fault's own over FAULT_SLOW_DISK's
    (f,) = faults.parse("slow-disk:3@1s+2s,wbps=2m,wiops=5")
    assert dict(f.limit) == {"wbps": 2 << 20, "wiops": 5} and f.target == "node3"
    assert faults.parse("kill:node1@1s+1s")[0].limit == ()


@pytest.mark.parametrize("text, why", [
    ("slow-disk:node2@60s", "needs a duration"),
    ("slow-disk:node2@1s+1s,wiops=0", "positive"),
    ("slow-disk:node2@1s+1s,wbps=1x", "wbps=BYTES"),
    ("slow-disk:node2@1s+1s,wiops=5k", "plain number"),
    ("pause:node2@1s+1s,wiops=5", "only slow-disk"),
    ("slow-disk:node2@1s,restart@+2s", "only kill and stop"),
])
def test_slow_disk_refused_with_the_reason(text, why):
    with pytest.raises(faults.SpecError, match=why):
        faults.parse(text)


def test_slow_disk_refused_on_a_filesystem_without_a_disk():
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.major(os.stat(shm).st_dev) != 0:
        pytest.skip("no tmpfs at /dev/shm")
    with pytest.raises(faults.Refused, match="without a block device"):
        faults.block_device(str(shm / "not-yet" / "data"))


def _io_backend_or_skip():
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    try:
        return faults.io_backend()
    except faults.Refused as e:  # the parse/prepare refusal, not a silent no-op: said by the skip
        pytest.skip(str(e))


# writes 4 KiB and fsyncs it N times per line read, answering with the seconds it took
_WRITER = ("import os, sys, time\n"
           "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)\n"
           "print('ready', flush=True)\n"
           "for line in sys.stdin:\n"
           "    t = time.monotonic()\n"
           "    for _ in range(int(line)):\n"
           "        os.write(fd, b'x' * 4096)\n"
           "        os.fsync(fd)\n"
           "    print(time.monotonic() - t, flush=True)\n")


def test_slow_disk_really_slows_fsyncs(tmp_path):
    backend, _ = _io_backend_or_skip()
    data = tmp_path / "node1-data"
    data.mkdir()
    try:
        faults.block_device(str(data))
    except faults.Refused as e:
        pytest.skip(f"pytest's tmp_path: {e}")
    state_dir = tmp_path / "run-sd" / "faults"
    limit = "wbps=1m wiops=10"
    assert faults.main(["prepare", f"slow-disk:node1@1s+1s,{limit.replace(' ', ',')}", "--state", str(state_dir),
                        "--nodes", "1", "--data-dir", f"1={data}"]) == 0
    state = faults.State(state_dir)
    cgroup = Path(state.data["io"]["root"]) / "node1"
    writer = subprocess.Popen([str(FAULTS_PY.parent / "in-cgroup.sh"), str(cgroup), sys.executable, "-c", _WRITER,
                               str(data / "f")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"

        def timed(n: int) -> float:
            writer.stdin.write(f"{n}\n")
            writer.stdin.flush()
            return float(writer.stdout.readline())

        before = timed(6)
        detail = faults.apply_throttle(state, "node1", writer.pid, faults.io_limit(limit))
        assert "read back" in detail and state.data["throttles"]["node1"]["dev"] in detail
        under = timed(6)
        lifted = faults.lift_throttle(state, "node1")
        after = timed(6)
        # 6 fsynced writes (one or more write IOs each) at <= 10 write IOPS: half a second or more
        print(f"6 fsynced writes: {before:.3f} s, throttled {under:.3f} s, lifted {after:.3f} s")
        assert under >= 0.4 and under > 5 * before, (before, under)
        assert "write IOs reached the disk under it" in lifted, lifted
        assert after < under / 3, (after, under)
        rule = (cgroup / ("io.max" if backend == "v2" else "blkio.throttle.write_iops_device")).read_text()
        assert "wiops=10" not in rule and " 10" not in rule and "node1" not in state.data["throttles"]
    finally:
        writer.kill()
        writer.wait()
    faults.undo_all(faults.State(state_dir), final=True)
    assert not cgroup.exists() and faults.State(state_dir).data["cgroups"] == []


def test_apply_throttle_refuses_a_process_outside_the_cgroup(tmp_path):
    _io_backend_or_skip()
    state_dir = tmp_path / "run-sd-out" / "faults"
    data = tmp_path / "d"
    data.mkdir()
    try:
        faults.block_device(str(data))
    except faults.Refused as e:
        pytest.skip(f"pytest's tmp_path: {e}")
    assert faults.main(["prepare", "slow-disk:node1@1s+1s", "--state", str(state_dir), "--nodes", "1",
                        "--data-dir", f"1={data}"]) == 0
    p = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(RuntimeError, match="would slow nothing"):
            faults.apply_throttle(faults.State(state_dir), "node1", p.pid, {"wiops": 10})
    finally:
        p.kill()
        p.wait()
        faults.undo_all(faults.State(state_dir), final=True)


def test_parse_cli_exit_status():
    run = lambda *a: subprocess.run([sys.executable, str(FAULTS_PY), "parse", *a], capture_output=True, text=True)
    ok = run("kill:leader@20s,restart@+10s")
    assert ok.returncode == 0 and "kill leader at 20 s for 10 s" in ok.stdout
    bad = run("pause:node3@60s")
    assert bad.returncode == 2 and "bounded" in bad.stderr
    assert run("kill:leader@2s+1s", "--network").returncode == 1
    assert run("partition:node2@2s+1s", "--network").returncode == 0
    refused = subprocess.run([sys.executable, str(FAULTS_PY), "parse", "slow-disk:node2@2s+1s"], capture_output=True,
                             text=True, env={**os.environ, "FAULT_CGROUP2": "/nonexistent",
                                             "FAULT_BLKIO_V1": "/nonexistent"})
    assert refused.returncode == 2 and "block-I/O throttle" in refused.stderr


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
