"""scripts/test_lanes.py - `make cargo-test`: the workspace's Rust tests, their
binaries run side by side.

`cargo test` runs its test binaries one after another, and most of them spend
their time waiting on brokers they started (elections, session timeouts,
fsync), not computing: run serially they took about 9 minutes here while a
core sat idle. This builds them with `cargo test --no-run` (the release
artifacts `make build` made, so nothing is compiled twice), then runs every
binary as cargo would (in its package's directory, with the same arguments
after `--`) in LANES lanes at once, the longest first by the times the last
run recorded. Each binary still runs its own tests on its default threads.

Binaries that must not overlap (EXCLUSIVE below: the network-namespace
and tmpfs tests, which change the host's network and mounts, and the
measurements of a broker's idle CPU) run one at a time, beside
the others; the benchmark's tests, which must hold an offered rate (SOLO),
run alone before the lanes start.

Owns: the lanes, the record of each binary's time (LANE_TIMES, kept in the
target directory, so a shared cache carries it to the next clean clone), and
the summary. Must not: decide which tests exist (cargo does) or retry a
failure.

    python3 scripts/test_lanes.py [--lanes N] [-- TEST-BINARY-ARGS...]

Prints each binary's result and time as it ends, the output of every failed
one in full, then one line per binary, slowest first; exit 1 if any failed.
Env: CARGO (default cargo), LANES (default 2), LANE_TIMEOUT (s per binary,
default 1800).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMES = REPO / "target" / "test-lane-times.json"
# Test binaries (by target name) of which at most one runs at a time.
EXCLUSIVE = {"network_partition", "fault_schedule", "disk_full", "idle_cpu"}
# Test binaries (package, target name) that run alone, before the lanes: they
# hold an offered rate and fail, under --strict, below 95 % of it, which a
# neighbour's CPU can cause on 2 cores.
SOLO = {("chronik-bench", "faults"), ("chronik-bench", "interrupt"), ("chronik-bench", "modes"),
        ("chronik-bench", "open_loop")}


@dataclass
class Binary:
    package: str
    name: str
    kind: str
    path: str
    cwd: str
    took: float = 0.0
    status: str = "not run"
    output: str = field(default="", repr=False)

    @property
    def key(self) -> str:
        return f"{self.package}/{self.kind}/{self.name}"


def build(cargo: str) -> list[Binary]:
    """`cargo test --release --workspace --no-run`: the test binaries it made."""
    cmd = [cargo, "test", "--release", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    binaries = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("profile", {}).get("test"):
            continue
        if not msg.get("executable"):
            continue
        target = msg["target"]
        package = msg["package_id"]
        name = Path(msg["manifest_path"]).parent
        binaries.append(Binary(package=_package_name(package, msg), name=target["name"],
                               kind=target["kind"][0], path=msg["executable"], cwd=str(name)))
    if proc.returncode != 0:
        sys.exit(f"test_lanes: {' '.join(cmd)} failed ({proc.returncode})")
    return binaries


def _package_name(package_id: str, msg: dict) -> str:
    # package ids look like "path+file:///.../ingestor#chronik-ingestor@0.1.0"
    tail = package_id.rsplit("#", 1)[-1]
    return tail.split("@", 1)[0] or Path(msg["manifest_path"]).parent.name


def load_times() -> dict[str, float]:
    try:
        return {k: float(v) for k, v in json.loads(TIMES.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def save_times(binaries: list[Binary], old: dict[str, float]) -> None:
    times = dict(old)
    times.update({b.key: round(b.took, 1) for b in binaries if b.status in ("ok", "FAILED")})
    try:
        TIMES.parent.mkdir(parents=True, exist_ok=True)
        TIMES.write_text(json.dumps(times, indent=1, sort_keys=True))
    except OSError as e:
        print(f"test_lanes: could not record the times: {e}", file=sys.stderr)


class Lanes:
    """LANES workers taking binaries longest-first; EXCLUSIVE ones one at a time."""

    def __init__(self, queue: list[Binary], args: list[str], timeout: float):
        self.queue = queue
        self.args = args
        self.timeout = timeout
        self.lock = threading.Lock()
        self.exclusive_busy = False
        self.wake = threading.Condition(self.lock)

    def _next(self) -> Binary | None:
        with self.wake:
            while True:
                if not self.queue:
                    return None
                for i, b in enumerate(self.queue):
                    if b.name in EXCLUSIVE and self.exclusive_busy:
                        continue
                    if b.name in EXCLUSIVE:
                        self.exclusive_busy = True
                    return self.queue.pop(i)
                self.wake.wait()

    def _done(self, b: Binary) -> None:
        with self.wake:
            if b.name in EXCLUSIVE:
                self.exclusive_busy = False
            self.wake.notify_all()
            print(f"test_lanes: {b.status:7} {b.took:6.1f} s  {b.package} {b.kind} {b.name}", flush=True)

    def worker(self) -> None:
        while (b := self._next()) is not None:
            run_one(b, self.args, self.timeout)
            self._done(b)


def run_one(b: Binary, args: list[str], timeout: float) -> None:
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out:
        try:
            env = {**os.environ, "CARGO_MANIFEST_DIR": b.cwd, "CARGO_PKG_NAME": b.package}
            proc = subprocess.run([b.path, *args], cwd=b.cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout, start_new_session=True)
            b.status = "ok" if proc.returncode == 0 else "FAILED"
        except subprocess.TimeoutExpired:
            b.status = "FAILED"
            out.write(f"\ntest_lanes: {b.name} ran past {timeout:.0f} s and was killed\n")
        out.seek(0)
        b.output = out.read()
    b.took = time.monotonic() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lanes", type=int, default=int(os.environ.get("LANES", "2")))
    p.add_argument("args", nargs="*", help="after --: arguments for every test binary")
    opts = p.parse_args()
    cargo = os.environ.get("CARGO", "cargo")
    timeout = float(os.environ.get("LANE_TIMEOUT", "1800"))
    binaries = build(cargo)
    old = load_times()
    # longest first (unknown ones first of all: they may be long); ties by name
    queue = sorted(binaries, key=lambda b: (-old.get(b.key, float("inf")), b.key))
    solo = [b for b in queue if (b.package, b.name) in SOLO]
    queue = [b for b in queue if (b.package, b.name) not in SOLO]
    print(f"test_lanes: {len(solo)} test binaries alone, then {len(queue)} in {opts.lanes} lanes", flush=True)
    started = time.monotonic()
    lanes = Lanes(solo, opts.args, timeout)
    lanes.worker()
    lanes = Lanes(queue, opts.args, timeout)
    workers = [threading.Thread(target=lanes.worker) for _ in range(max(1, opts.lanes))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.monotonic() - started
    save_times(binaries, old)
    failed = [b for b in binaries if b.status != "ok"]
    for b in failed:
        print(f"\n===== {b.package} {b.kind} {b.name} ({b.path}) FAILED; its output:\n{b.output}", flush=True)
    print("\ntest_lanes: binaries, slowest first:")
    for b in sorted(binaries, key=lambda b: -b.took):
        print(f"  {b.took:6.1f} s  {b.status:7} {b.package} {b.kind} {b.name}")
    serial = sum(b.took for b in binaries)
    print(f"test_lanes: {len(binaries) - len(failed)} of {len(binaries)} binaries passed in {wall:.0f} s "
          f"({serial:.0f} s of binaries run in {opts.lanes} lanes)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
