"""Run the real chronik-server binary and talk to it with confluent-kafka.

Shared by conftest.py (pytest fixtures) and the test modules. Owns: starting
and stopping a broker process (port 0, LISTENING line, /ready poll, SIGTERM),
and the client-side helpers the tests repeat: create a topic and wait for it,
produce with delivery reports, read a partition range back with assign().

The read-back helpers here use assign() with explicit offsets, never
subscribe() or commit: group membership is what test_consumer_groups.py and
test_consumer_protocol.py test, with their own consumers.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[2]
LISTENING_RE = re.compile(r"^LISTENING kafka=(\S+) metrics=(\S+)\s*$")
START_TIMEOUT_S = float(os.environ.get("CHRONIK_START_TIMEOUT", "60"))
STOP_TIMEOUT_S = float(os.environ.get("STOP_TIMEOUT", "30"))
# --default-partitions of the session broker (conftest.py)
DEFAULT_PARTITIONS = 3


def server_binary() -> Path:
    """The broker under test: $CHRONIK_SERVER_BIN, else target/release/chronik-server."""
    return Path(os.environ.get("CHRONIK_SERVER_BIN", REPO_ROOT / "target/release/chronik-server"))


class BrokerProcess:
    """One chronik-server process on 127.0.0.1 with its data in `data_dir`.

    Can be stopped and started again on the same data dir (restart tests).
    stdout goes to a file (the broker prints a single LISTENING line there),
    stderr to another; both are kept beside the data dir for post-mortems.
    """

    def __init__(self, binary: Path, data_dir: Path, log_dir: Path, extra_args=()):
        self.binary = Path(binary)
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen | None = None
        self.bootstrap = ""
        self.metrics = ""
        self.starts = 0

    # -- lifecycle -------------------------------------------------------
    def start(self) -> "BrokerProcess":
        assert self.proc is None, "broker already running"
        if not self.binary.is_file():
            raise FileNotFoundError(
                f"{self.binary} not found: run `cargo build --release -p chronik-server` "
                "or set CHRONIK_SERVER_BIN"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.stdout_path = self.log_dir / f"stdout.{self.starts}.log"
        self.stderr_path = self.log_dir / f"stderr.{self.starts}.log"
        args = [
            str(self.binary),
            "--listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0",
            "--data-dir", str(self.data_dir),
            *self.extra_args,
        ]
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            self._wait_listening()
            self._wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def _fail(self, what: str):
        raise RuntimeError(f"chronik-server {what}; stderr tail:\n{self.stderr_tail()}")

    def _wait_listening(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.stdout_path.read_text(errors="replace").splitlines():
                m = LISTENING_RE.match(line)
                if m:
                    self.bootstrap, self.metrics = m.group(1), m.group(2)
                    return
            if self.proc.poll() is not None:
                self._fail(f"exited with status {self.proc.returncode} before LISTENING")
            time.sleep(0.05)
        self._fail(f"printed no LISTENING line within {START_TIMEOUT_S}s")

    def _wait_ready(self):
        deadline = time.monotonic() + START_TIMEOUT_S
        last = None
        while time.monotonic() < deadline:
            try:
                status, _ = self.http_get("/ready")
                if status == 200:
                    return
                last = status
            except OSError as e:
                last = e
            if self.proc.poll() is not None:
                self._fail(f"exited with status {self.proc.returncode} before /ready")
            time.sleep(0.05)
        self._fail(f"/ready not 200 within {START_TIMEOUT_S}s (last: {last})")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (graceful shutdown) and wait; SIGKILL after `timeout`.

        Returns the exit status; -9 means it had to be killed.
        """
        if self.proc is None:
            return 0
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> int:
        rc = self.stop()
        self.start()
        return rc

    # -- introspection ---------------------------------------------------
    def http_get(self, path: str, timeout: float = 2.0):
        try:
            with urllib.request.urlopen(f"http://{self.metrics}{path}", timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def stderr_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no stderr)"


# -- client helpers ----------------------------------------------------------

LISTENERS_RE = re.compile(r"listener\.([A-Z_]+)=(\S+)")
METRICS_RE = re.compile(r"metrics=(\S+)")


class ListenersBroker:
    """A broker started with `--listeners` (LISTENING prints
    `listener.NAME=ADDR` per listener): `start()` waits until it is ready
    and returns {listener name: address}; `stop()` SIGTERMs it."""

    def __init__(self, binary: Path, work: Path, args, timeout: float = 60.0):
        self.work, self.timeout = work, timeout
        self.stdout, self.stderr = work / "stdout.log", work / "stderr.log"
        self.cmd = [str(binary), "--metrics-listen", "127.0.0.1:0", "--data-dir", str(work / "data"),
                    *map(str, args)]
        self.proc = None

    def start(self) -> dict:
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        listeners, metrics = {}, None
        deadline = time.monotonic() + self.timeout
        while not listeners and time.monotonic() < deadline:
            assert self.proc.poll() is None, f"broker exited: {self.stderr.read_text()[-2000:]}"
            for line in self.stdout.read_text().splitlines():
                if line.startswith("LISTENING "):
                    listeners = dict(LISTENERS_RE.findall(line))
                    metrics = METRICS_RE.search(line).group(1)
            time.sleep(0.05)
        assert listeners, "no LISTENING line"
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{metrics}/ready", timeout=2) as r:
                    if r.status == 200:
                        return listeners
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"broker not ready: {self.stderr.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def make_certs(out: Path) -> Path:
    """A CA, broker and client certificates (scripts/make-certs.sh) in `out`."""
    subprocess.run(["bash", str(REPO_ROOT / "scripts/make-certs.sh"), str(out)],
                   check=True, capture_output=True)
    return out


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(admin: AdminClient, name: str, partitions: int = 1, config=None, timeout=15.0):
    """CreateTopics and wait for it; then wait until Metadata shows every partition."""
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=timeout, request_timeout=timeout,
    )
    futures[name].result(timeout)
    wait_for_topic(admin, name, partitions, timeout)
    return name


def wait_for_topic(admin: AdminClient, name: str, partitions: int, timeout=15.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=5)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return t
        last = t and (t.error, len(t.partitions))
        time.sleep(0.1)
    raise AssertionError(f"topic {name} not visible with {partitions} partitions (last: {last})")


@dataclass
class DeliveryLog:
    """Delivery reports, in the order the producer reported them."""
    ok: list = field(default_factory=list)      # (partition, offset, key, value)
    errors: list = field(default_factory=list)  # (KafkaError, key)

    def callback(self, err, msg):
        if err is not None:
            self.errors.append((err, msg.key()))
        else:
            self.ok.append((msg.partition(), msg.offset(), msg.key(), msg.value()))


# Python-side callbacks keep their names; librdkafka's properties are dotted.
_CALLBACKS = {"error_cb", "oauth_cb", "stats_cb", "throttle_cb", "logger"}


def _dotted(conf: dict) -> dict:
    return {k if k in _CALLBACKS else k.replace("_", "."): v for k, v in conf.items()}


def producer(bootstrap: str, **conf) -> Producer:
    base = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "message.timeout.ms": 30000,
        # idempotence needs InitProducerId, not (yet) in the broker contract tested here
        "enable.idempotence": False,
    }
    base.update(_dotted(conf))
    return Producer(base)


def produce_range(bootstrap: str, topic: str, start: int, stop: int, partitions: int) -> None:
    """Values b"start".."stop-1" with acks=all, value i to partition i % partitions;
    asserts every one was delivered."""
    deliveries = DeliveryLog()
    p = producer(bootstrap, acks="all")
    for i in range(start, stop):
        p.produce(topic, value=b"%d" % i, partition=i % partitions, on_delivery=deliveries.callback)
        p.poll(0)
    assert p.flush(30) == 0
    assert deliveries.errors == [], deliveries.errors[:5]


def consumer(bootstrap: str, **conf) -> Consumer:
    base = {
        "bootstrap.servers": bootstrap,
        # required by the Python client even for assign(); never used to join a group
        "group.id": f"chronik-tests-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
    }
    base.update(_dotted(conf))
    return Consumer(base)


# Consumer errors from the group coordinator lookup: the Python client
# insists on a group.id, so librdkafka may look up a coordinator even though
# assign() never needs one. Everything else fails the read.
_GROUP_ERRORS = {
    KafkaError._UNSUPPORTED_FEATURE,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
}


def read_partitions(bootstrap: str, topic: str, expected: dict, start: dict | None = None,
                    timeout: float = 30.0, **conf):
    """Read `expected[partition]` messages from each partition with assign().

    Starts at `start[partition]` (default 0). Returns {partition: [Message]} in
    the order received. Stops when every partition has its count (more would
    only show up in the high-watermark checks the callers do), or raises on
    timeout / a consumer error.
    """
    start = start or {}
    c = consumer(bootstrap, **conf)
    got = {p: [] for p in expected}
    errors = []
    try:
        c.assign([TopicPartition(topic, p, start.get(p, 0)) for p in expected])
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in expected.items()):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out reading {topic}: got "
                    f"{ {p: len(v) for p, v in got.items()} } of {expected}; errors {errors[:5]}"
                )
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() in _GROUP_ERRORS:
                        errors.append(m.error())
                        continue
                    raise AssertionError(f"consumer error on {topic}: {m.error()}")
                got.setdefault(m.partition(), []).append(m)
        return got
    finally:
        c.close()


def high_watermarks(bootstrap: str, topic: str, partitions, timeout=10.0) -> dict:
    """{partition: (low, high)} from ListOffsets (earliest and latest)."""
    c = consumer(bootstrap)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
                for p in partitions}
    finally:
        c.close()
