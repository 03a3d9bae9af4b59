"""Share groups (KIP-932) through Kafka's own tools - compat/README.md, the `share` column.

Runs the classes behind kafka-console-share-consumer.sh (ConsoleShareConsumer),
kafka-share-groups.sh (ShareGroupCommand), kafka-groups.sh (GroupsCommand),
kafka-features.sh (FeatureCommand), kafka-configs.sh (ConfigCommand,
--entity-type groups), VerifiableShareConsumer, VerifiableProducer and
kafka-console-producer.sh (ConsoleProducer) with `java -cp` (kafka_tools.py),
and judges each check on what those tools print. Every check first asks
kafka-features describe for share.version (finalized >= 1: share groups on)
and sets the group's configs with kafka-configs: share.auto.offset.reset=
earliest and share.record.lock.duration.ms (--lock-ms, default 15000, the
smallest a Kafka broker accepts).

Checks (one JSON line each, the driver contract's format):
  share-verifiable  N records (VerifiableProducer, acks=all, 2 partitions);
         3 VerifiableShareConsumers of one group (--acknowledgement-mode
         sync, max.poll.records 50) read them: every produced offset is
         consumed at least once and accepted (a successful
         offsets_acknowledged event) exactly once, each by a consumer that
         received it, no acknowledgement fails.
  share-redelivery  (a) a ConsoleShareConsumer holds a batch of acquired
         records (its stdout is not read, so it blocks printing its first
         batch and never acknowledges it); a second consumer of the group
         gets those records only when the acquisition lock expires (not
         before lock - 2 s), with delivery count >= 2, and every other
         record once with delivery count 1. (b) a holder like it is SIGKILLed;
         another consumer gets every record it held with delivery count >= 2
         within the lock duration plus the stage timeout (Kafka 4.3.1 releases
         a dead connection's records at once).
  share-archive  share.delivery.count.limit=2: records a consumer rejects
         (--reject) are never delivered again; records a consumer releases
         (--release) come back once (delivery 2), are released again and are
         then archived; a later consumer gets only the records produced
         after them, once each.
  share-admin  kafka-share-groups --list / --list --state / --describe
         --members / --describe --state while a member reads (Stable, one
         member, both partitions assigned); --reset-offsets refused while
         it is active; kafka-groups --list shows the group as Share; after
         it leaves: Empty, --describe --offsets with lag 0,
         --reset-offsets --to-earliest --execute (start offset 0, lag = log
         end; a new member reads every record again), --delete-offsets,
         --delete (gone from --list); kafka-configs --describe of the group.
  share-failover  (3 nodes; --kill-node-cmd and --restart-node-cmd) a
         topic with RF 3; consumers accept part of it; the leader of its
         partition is SIGKILLed: another consumer never gets an accepted
         record again; the node is restarted and, once in sync, the leader
         of the __share_group_state partition the group's state hashes to
         (Kafka's key GROUP:TOPIC_ID:PARTITION, Java String.hashCode modulo
         the partition count: partition 0 where there is one) is SIGKILLed:
         the next consumer again gets no accepted record, and by the end
         every record was accepted.

Standalone (any broker):
  python3 compat/python/share_groups.py --bootstrap HOST:PORT
      [--checks share-verifiable,share-redelivery,share-archive,share-admin]
      [--kill-node-cmd 'CMD {id}' --restart-node-cmd 'CMD {id}']   (share-failover)
      [--messages N] [--stage-timeout S] [--lock-ms MS]
As the kafka-cli driver's `--check share` (cli_driver.py): the four
single-node checks, one `share` line. Standard library only (no Kafka
client library: everything goes through the tools).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import compat_common as cc
import kafka_tools as kt
from kafka_tools import StepFailed, Steps

CLIENT = "kafka-cli"
TOOLS = "org.apache.kafka.tools."
TOPICS = TOOLS + "TopicCommand"
FEATURES = TOOLS + "FeatureCommand"
CONFIGS = "kafka.admin.ConfigCommand"
SHARE_GROUPS = TOOLS + "consumer.group.ShareGroupCommand"
GROUPS = TOOLS + "GroupsCommand"
CONSOLE_SHARE = TOOLS + "consumer.ConsoleShareConsumer"
VERIFIABLE_SHARE = TOOLS + "VerifiableShareConsumer"
VERIFIABLE_PRODUCER = TOOLS + "VerifiableProducer"
CONSOLE_PRODUCER = TOOLS + "ConsoleProducer"
SINGLE_NODE_CHECKS = ("share-verifiable", "share-redelivery", "share-archive", "share-admin")
ALL_CHECKS = SINGLE_NODE_CHECKS + ("share-failover",)
STATE_TOPIC = "__share_group_state"
# ConsoleShareConsumer's formatter: partition, offset and delivery count first
SHOW_DELIVERY = ["--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
                 "--formatter-property", "print.delivery=true"]
CONSOLE_LINE = re.compile(r"^Partition:(\d+)\tOffset:(\d+)\tDelivery:(\d+)(?:\t(.*))?$")


# -- tools in the background ---------------------------------------------------

class Background:
    """One of Kafka's tools running on its own: its stdout lines, each with
    the time it was read (a reader thread), or, with read=False, nothing
    read until the caller asks (a holder whose output is left unread blocks
    once the pipe is full). stderr goes to a file, copied to the log at the end."""

    def __init__(self, ctx: "Ctx", name: str, main: str, *argv: str, read: bool = True):
        self.name = name
        self.lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._err = open(ctx.workdir / f"{name}.stderr", "w+")
        cmd = kt.java_cmd(main, "--bootstrap-server", ctx.bootstrap, *argv)
        cc.log(f"start {name}: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._err, stdin=subprocess.DEVNULL)
        ctx.background.append(self)
        self._reader: threading.Thread | None = None
        if read:
            self._reader = threading.Thread(target=self._read_all, daemon=True)
            self._reader.start()

    def _read_all(self) -> None:
        for raw in self.proc.stdout:
            with self._lock:
                self.lines.append((time.time(), raw.decode(errors="replace").rstrip("\n")))

    def snapshot(self) -> list[tuple[float, str]]:
        with self._lock:
            return list(self.lines)

    def first_line(self, timeout: float) -> tuple[float, str] | None:
        """(read=False only) The first stdout line, nothing more."""
        got: list[tuple[float, str]] = []

        def one() -> None:
            raw = self.proc.stdout.readline()
            if raw:
                got.append((time.time(), raw.decode(errors="replace").rstrip("\n")))

        t = threading.Thread(target=one, daemon=True)
        t.start()
        t.join(timeout)
        return got[0] if got else None

    def rest(self) -> list[str]:
        """(read=False only, once it is dead) the whole lines it printed and
        were not read (a line cut off where the pipe filled up is left out)."""
        text = self.proc.stdout.read().decode(errors="replace")
        return text.split("\n")[:-1]

    def wait_for(self, cond: Callable[[list[tuple[float, str]]], bool], timeout: float) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond(self.snapshot()):
                return True
            if self.proc.poll() is not None:
                if self._reader:
                    self._reader.join(5)
                return cond(self.snapshot())
            time.sleep(0.1)
        return cond(self.snapshot())

    def exited(self, timeout: float) -> int | None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._reader:
            self._reader.join(5)
        return rc

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM (the tools' shutdown hooks close the consumer: acknowledgements
        are committed), SIGKILL after `timeout`."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.exited(timeout)
        if rc is None:
            self.kill()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def stderr_tail(self, n: int = 3) -> str:
        self._err.flush()
        self._err.seek(0)
        return " | ".join(self._err.read().strip().splitlines()[-n:])[:400]

    def close(self) -> None:
        self.kill()
        if self._reader:
            self._reader.join(5)
        self._err.seek(0)
        text = self._err.read().strip()
        if text:
            cc.log(f"{self.name} stderr:\n{text[-3000:]}")
        self._err.close()


def console_records(lines: list[str]) -> list[tuple[int, int, int, str]]:
    """(partition, offset, delivery count, value) of each ConsoleShareConsumer line."""
    out = []
    for line in lines:
        m = CONSOLE_LINE.match(line)
        if m:
            out.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4) or ""))
    return out


def json_events(lines: list[str]) -> list[dict]:
    events = []
    for line in lines:
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    return events


# -- the context of one run ------------------------------------------------------

class Ctx:
    def __init__(self, args: argparse.Namespace, workdir: Path):
        self.args = args
        self.bootstrap = args.bootstrap
        self.timeout = args.stage_timeout
        self.lock_s = args.lock_ms / 1000
        self.workdir = workdir
        self.background: list[Background] = []
        self.s = Steps(args.bootstrap, args.stage_timeout)

    def cleanup(self) -> None:
        for b in self.background:
            try:
                b.close()
            except Exception as e:  # never let one leftover keep the others alive
                cc.log(f"closing {b.name}: {e!r}")
        self.background = []

    def file(self, name: str, text: str) -> str:
        path = self.workdir / name
        path.write_text(text)
        return str(path)


_SHARE_ON: dict[str, str] = {}  # bootstrap -> the share.version level found (asked once a run)


def share_version(s: Steps) -> None:
    """kafka-features describe: share.version finalized >= 1."""
    if s.bootstrap in _SHARE_ON:
        s.done.append(f"share.version {_SHARE_ON[s.bootstrap]} (kafka-features describe, earlier)")
        return
    out = s.tool("features describe: share.version finalized", FEATURES, "describe",
                 expect=lambda o: True)
    m = re.search(r"Feature: share\.version\s+SupportedMinVersion: \d+\s+SupportedMaxVersion: (\d+)\s+"
                  r"FinalizedVersionLevel: (\d+)", out)
    if not m or int(m.group(2)) < 1:
        s.done.pop()
        raise StepFailed("features describe: share groups are off: "
                         + (f"share.version finalized {m.group(2)} (supported up to {m.group(1)})" if m
                            else "no share.version feature"))
    s.done[-1] = f"features describe: share.version {m.group(2)}"
    _SHARE_ON[s.bootstrap] = m.group(2)


def create_topic(s: Steps, topic: str, partitions: int, rf: int = 1, *extra: str) -> None:
    s.tool(f"topics --create {topic} ({partitions} partition(s), RF {rf})", TOPICS, "--create", "--topic", topic,
           "--partitions", str(partitions), "--replication-factor", str(rf), *extra,
           expect=lambda o: f"Created topic {topic}." in o)


def group_configs(ctx: Ctx, group: str, **extra: str) -> None:
    configs = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(ctx.args.lock_ms),
               **{k.replace("_", "."): v for k, v in extra.items()}}
    spec = ",".join(f"{k}={v}" for k, v in configs.items())
    ctx.s.tool(f"configs --alter groups {spec}", CONFIGS, "--entity-type", "groups", "--entity-name", group,
               "--alter", "--add-config", spec, expect=lambda o: f"Completed updating config for group {group}." in o)


def verifiable_produce(ctx: Ctx, topic: str, n: int, keys: int = 0, throughput: int = 0) -> dict[int, set[int]]:
    """VerifiableProducer, acks=all: the acknowledged offsets per partition
    (throughput: records a second, so that they go in small batches)."""
    argv = ["--topic", topic, "--max-messages", str(n), "--acks", "-1"]
    if keys:
        argv += ["--repeating-keys", str(keys)]
    if throughput:
        argv += ["--throughput", str(throughput)]
    out = ctx.s.tool(f"VerifiableProducer {n} records (acks=all)", VERIFIABLE_PRODUCER, *argv,
                     expect=lambda o: f'"acked":{n}' in o.replace(" ", ""))
    acked: dict[int, set[int]] = {}
    count = 0
    for e in json_events(out.splitlines()):
        if e.get("name") == "producer_send_success":
            acked.setdefault(e["partition"], set()).add(e["offset"])
            count += 1
    ctx.s.state(f"{n} distinct offsets acknowledged", count == n and sum(map(len, acked.values())) == n,
                f"{count} producer_send_success events, {sum(map(len, acked.values()))} distinct offsets")
    return acked


def console_produce(ctx: Ctx, topic: str, tag: str, first: int, n: int, pad: int = 0) -> None:
    """kafka-console-producer (acks=all) of values TAG-i[-padding], i = first..first+n-1,
    to a one-partition topic: value i lands at offset i (one producer, in order)."""
    data = "".join(f"{tag}-{i:07d}{'-' + 'p' * pad if pad else ''}\n" for i in range(first, first + n))
    r = kt.java(CONSOLE_PRODUCER, "--bootstrap-server", ctx.bootstrap, "--topic", topic,
                "--request-required-acks", "all", timeout=ctx.timeout * 2, stdin=data)
    ctx.s.state(f"console-producer {n} records ({tag})", r.returncode == 0 and "ERROR" not in r.stderr,
                f"exit {r.returncode}: {r.stderr.strip()[-300:]}")


def value_matches(tag: str, offset: int, value: str) -> bool:
    return value.split("-p", 1)[0] == f"{tag}-{offset:07d}"


# -- share-verifiable ------------------------------------------------------------

def check_verifiable(ctx: Ctx) -> str:
    s, n = ctx.s, ctx.args.messages
    topic, group = cc.unique("compat-share-v"), cc.unique("compat-share-v")
    create_topic(s, topic, 2)
    produced = verifiable_produce(ctx, topic, n, keys=100)
    want = {(p, o) for p, offs in produced.items() for o in offs}
    group_configs(ctx, group)
    conf = ctx.file(f"{group}.properties", "max.poll.records=50\n")
    consumers = [Background(ctx, f"verifiable-share-{i}", VERIFIABLE_SHARE, "--topic", topic, "--group-id", group,
                            "--acknowledgement-mode", "sync", "--command-config", conf) for i in range(3)]

    def accepted_union() -> set[tuple[int, int]]:
        got = set()
        for c in consumers:
            for e in json_events([line for _, line in c.snapshot()]):
                if e.get("name") == "offsets_acknowledged" and e.get("success"):
                    got |= {(pp["partition"], o) for pp in e["partitions"] for o in pp["offsets"]}
        return got

    deadline = time.time() + ctx.timeout * 2
    while time.time() < deadline and not want <= accepted_union():
        time.sleep(0.2)
    for c in consumers:
        c.stop()
    s.state("3 VerifiableShareConsumers started", all(
        any(e.get("name") == "startup_complete" for e in json_events([x for _, x in c.snapshot()]))
        for c in consumers), "a consumer printed no startup_complete: "
        + "; ".join(c.stderr_tail() for c in consumers))
    consumed_count: dict[tuple[int, int], int] = {}
    accepted_by: dict[tuple[int, int], list[int]] = {}
    failed_acks, per_consumer, not_received = [], [], []
    for i, c in enumerate(consumers):
        events = json_events([x for _, x in c.snapshot()])
        mine_consumed: set[tuple[int, int]] = set()
        accepted = 0
        for e in events:
            if e.get("name") == "records_consumed":
                for pp in e["partitions"]:
                    for o in pp["offsets"]:
                        key = (pp["partition"], o)
                        consumed_count[key] = consumed_count.get(key, 0) + 1
                        mine_consumed.add(key)
            elif e.get("name") == "offsets_acknowledged":
                if not e.get("success"):
                    failed_acks.append(f"consumer {i}: {e.get('error')}")
                    continue
                for pp in e["partitions"]:
                    for o in pp["offsets"]:
                        key = (pp["partition"], o)
                        accepted_by.setdefault(key, []).append(i)
                        accepted += 1
                        if key not in mine_consumed:
                            not_received.append(f"{key} by consumer {i}")
        per_consumer.append(f"{len(mine_consumed)} consumed/{accepted} accepted")
    missing = sorted(want - set(consumed_count))
    s.state("every produced offset consumed at least once", not missing,
            f"{len(missing)} never consumed, e.g. {missing[:5]}")
    unaccepted = sorted(want - set(accepted_by))
    s.state("every produced offset accepted", not unaccepted, f"{len(unaccepted)} never accepted, e.g. {unaccepted[:5]}")
    twice = sorted(k for k, v in accepted_by.items() if len(v) > 1)
    s.state("no offset accepted twice", not twice,
            f"{len(twice)} accepted more than once, e.g. {[(k, accepted_by[k]) for k in twice[:5]]}")
    stray = sorted(set(accepted_by) - want)
    s.state("only produced offsets accepted", not stray, f"accepted offsets never produced: {stray[:5]}")
    s.state("each accepted by the consumer that received it", not not_received, "; ".join(not_received[:5]))
    s.state("no failed acknowledgement", not failed_acks, "; ".join(failed_acks[:3]))
    redelivered = sum(1 for v in consumed_count.values() if v > 1)
    return (f"{n} records, 2 partitions, 3 consumers ({', '.join(per_consumer)}); each accepted exactly once, "
            f"{redelivered} delivered more than once")


# -- share-redelivery ------------------------------------------------------------

def holder(ctx: Ctx, name: str, topic: str, group: str) -> tuple[Background, float, str]:
    """A ConsoleShareConsumer whose output is not read after its first line:
    one record (values of 100 KiB: more than a pipe holds) fills the pipe, so
    it blocks printing its second record, before acknowledging anything of its
    first batch (acknowledgements go with the next poll) if that batch has two
    records or more (1 MiB a partition: about ten). Returns it, when its first
    line came and that line."""
    h = Background(ctx, name, CONSOLE_SHARE, "--topic", topic, "--group", group, *SHOW_DELIVERY, read=False)
    first = h.first_line(ctx.timeout)
    if first is None:
        raise StepFailed(f"{name}: no record within {ctx.timeout:.0f} s: {h.stderr_tail()}")
    ctx.s.state(f"{name} acquired records and blocks ({first[1][:40]}...)", True, "")
    return h, first[0], first[1]


def reader(ctx: Ctx, name: str, topic: str, group: str, n: int, timeout: float) -> list[tuple[float, tuple]]:
    """A ConsoleShareConsumer (accepting) that exits after n records."""
    c = Background(ctx, name, CONSOLE_SHARE, "--topic", topic, "--group", group, "--max-messages", str(n),
                   *SHOW_DELIVERY)
    c.wait_for(lambda lines: len(lines) >= n, timeout)
    rc = c.exited(15)
    got = [(t, r) for t, line in c.snapshot() for r in console_records([line])]
    ctx.s.state(f"{name}: {n} records", len(got) == n,
                f"got {len(got)} of {n} within {timeout:.0f} s (exit {rc}): {c.stderr_tail()}")
    return got


def check_redelivery(ctx: Ctx) -> str:
    s, lock = ctx.s, ctx.lock_s
    topic, group = cc.unique("compat-share-r"), cc.unique("compat-share-r")
    n, pad = 30, 100 * 1024
    create_topic(s, topic, 1)
    group_configs(ctx, group)
    # (a) the holder stays alive: the acquisition lock alone frees its records
    console_produce(ctx, topic, "a", 0, n, pad)
    h1, t1, first = holder(ctx, "holder-a", topic, group)
    got = reader(ctx, "reader-a", topic, group, n, lock + ctx.timeout)
    h1.kill()
    held = console_records([first] + h1.rest())
    held_offsets = {o for _, o, _, _ in held}
    s.state(f"holder-a printed {len(held)} records, each delivery 1, values in order", bool(held) and all(
        d == 1 and value_matches("a", o, v) for _, o, d, v in held),
        f"holder printed (offset, delivery, value) {[(o, d, v[:12]) for _, o, d, v in held[:5]]}")
    offsets = sorted(o for _, (_, o, _, _) in got)
    s.state(f"reader-a got offsets 0..{n - 1} once each", offsets == list(range(n)), f"got {offsets[:10]}...")
    early = [(o, round(t - t1, 1)) for t, (_, o, d, _) in got if o in held_offsets and t - t1 < lock - 2]
    s.state(f"held records not delivered before the lock expired ({lock:.0f} s)", not early,
            f"delivered {len(early)} held records early, (offset, s after the holder's first) {early[:5]}")
    count1 = [o for _, (_, o, d, _) in got if o in held_offsets and d < 2]
    s.state("held records redelivered with delivery count >= 2", not count1,
            f"{len(count1)} held records came with delivery count 1, e.g. {count1[:5]}")
    wrong = [o for _, (_, o, d, v) in got if not value_matches("a", o, v)]
    s.state("reader-a values match their offsets", not wrong, f"e.g. offsets {wrong[:5]}")
    redelivered = sorted(t - t1 for t, (_, o, d, _) in got if d >= 2)
    s.state("(a) some records were redelivered", bool(redelivered), "no record came with delivery count >= 2")
    a_detail = (f"(a) a live holder blocked after printing {len(held_offsets)} of {n}: {len(redelivered)} "
                f"redelivered (delivery >= 2) {redelivered[0]:.1f}-{redelivered[-1]:.1f} s after its first "
                f"record (lock {lock:.0f} s), {n - len(redelivered)} delivered once")
    # (b) the holder is SIGKILLed
    console_produce(ctx, topic, "a", n, n, pad)
    h2, _, first = holder(ctx, "holder-b", topic, group)
    h2.kill()
    killed = time.time()
    held = console_records([first] + h2.rest())
    held_offsets = {o for _, o, _, _ in held}
    s.state(f"holder-b SIGKILLed holding {len(held)}+ records", bool(held) and all(d == 1 for _, _, d, _ in held),
            f"holder printed (offset, delivery) {[(o, d) for _, o, d, _ in held[:5]]}")
    got = reader(ctx, "reader-b", topic, group, n, lock + ctx.timeout)
    offsets = sorted(o for _, (_, o, _, _) in got)
    s.state(f"reader-b got offsets {n}..{2 * n - 1} once each", offsets == list(range(n, 2 * n)),
            f"got {offsets[:10]}...")
    count1 = [o for _, (_, o, d, _) in got if o in held_offsets and d < 2]
    s.state("records held by the killed consumer redelivered with delivery count >= 2", not count1,
            f"{len(count1)} came with delivery count 1, e.g. {count1[:5]}")
    after = sorted(t - killed for t, (_, o, d, _) in got if d >= 2)
    return (f"{a_detail}; (b) a holder SIGKILLed after printing {len(held_offsets)} of {n}: {len(after)} "
            f"redelivered (delivery >= 2) {after[0]:.1f}-{after[-1]:.1f} s after the kill, "
            f"{n - len(after)} delivered once")


# -- share-archive ---------------------------------------------------------------

def console_run(ctx: Ctx, name: str, topic: str, group: str, *argv: str) -> list[tuple[int, int, int, str]]:
    """A ConsoleShareConsumer run to its end (--max-messages or --timeout-ms)."""
    c = Background(ctx, name, CONSOLE_SHARE, "--topic", topic, "--group", group, *SHOW_DELIVERY, *argv)
    rc = c.exited(ctx.timeout * 2)
    if rc is None:
        raise StepFailed(f"{name}: still running after {ctx.timeout * 2:.0f} s")
    return console_records([line for _, line in c.snapshot()])


def check_archive(ctx: Ctx) -> str:
    s = ctx.s
    topic, group = cc.unique("compat-share-a"), cc.unique("compat-share-a")
    n, idle = 10, "4000"
    create_topic(s, topic, 1)
    group_configs(ctx, group, share_delivery_count_limit="2")
    console_produce(ctx, topic, "rejected", 0, n)
    got = console_run(ctx, "rejecter", topic, group, "--reject", "--max-messages", str(n))
    s.state(f"--reject: got the {n} records once, delivery 1",
            sorted(o for _, o, _, _ in got) == list(range(n)) and all(d == 1 for *_, d, _ in got),
            f"got {[(o, d) for _, o, d, _ in got]}")
    console_produce(ctx, topic, "released", n, n)
    got = console_run(ctx, "releaser", topic, group, "--release", "--timeout-ms", idle)
    seen = sorted((o, d) for _, o, d, _ in got)
    want = sorted([(o, 1) for o in range(n, 2 * n)] + [(o, 2) for o in range(n, 2 * n)])
    s.state("--release: the released records came back exactly once more (delivery 1, then 2), "
            "the rejected never", seen == want,
            f"got (offset, delivery) {seen[:24]}{'...' if len(seen) > 24 else ''}, want {n} offsets "
            f"{n}..{2 * n - 1} twice")
    console_produce(ctx, topic, "accepted", 2 * n, n)
    got = console_run(ctx, "accepter", topic, group, "--timeout-ms", idle)
    seen = sorted((o, d) for _, o, d, _ in got)
    s.state("a new consumer gets only the later records, once each (rejected and archived ones never)",
            seen == [(o, 1) for o in range(2 * n, 3 * n)], f"got (offset, delivery) {seen[:24]}")
    return (f"{n} rejected: never again; {n} released twice (delivery 1, 2): archived at "
            f"share.delivery.count.limit=2; then {n} new: delivered once each, nothing else")


# -- share-admin -----------------------------------------------------------------

def groups_tool(ctx: Ctx, name: str, *argv: str, expect: Callable[[str], bool], exit_code: int = 0) -> str:
    return ctx.s.tool(name, SHARE_GROUPS, *argv, expect=expect, exit_code=exit_code)


def describe_rows(out: str, group: str, topic: str) -> dict[int, tuple[str, str]]:
    """--describe --offsets: partition -> (START-OFFSET, LAG)."""
    rows = {}
    for m in re.finditer(rf"^{re.escape(group)}\s+{re.escape(topic)}\s+(\d+)\s+(\S+)\s+(\S+)\s*$", out, re.M):
        rows[int(m.group(1))] = (m.group(2), m.group(3))
    return rows


def wait_state(ctx: Ctx, group: str, state: str) -> str:
    out, deadline = "", time.time() + ctx.timeout
    while time.time() < deadline:
        r = ctx.s.run(SHARE_GROUPS, "--describe", "--group", group, "--state")
        out = r.stdout + r.stderr
        if re.search(rf"^{re.escape(group)}\s+\S+\s+\(\d+\)\s+{state}\s", out, re.M):
            return out
        time.sleep(1)
    raise StepFailed(f"share-groups --describe --state: not {state} within {ctx.timeout:.0f} s: "
                     + " | ".join(out.strip().splitlines()[-2:]))


def check_admin(ctx: Ctx) -> str:
    s = ctx.s
    topic, group = cc.unique("compat-share-g"), cc.unique("compat-share-g")
    n = 20
    create_topic(s, topic, 2)
    produced = verifiable_produce(ctx, topic, n, keys=10)
    ends = {p: max(offs) + 1 for p, offs in produced.items()}
    s.state("records in both partitions", sorted(ends) == [0, 1], f"log ends {ends}")
    group_configs(ctx, group)
    s.tool("configs --describe groups", CONFIGS, "--entity-type", "groups", "--entity-name", group, "--describe",
           expect=lambda o: "share.auto.offset.reset=earliest" in o
           and f"share.record.lock.duration.ms={ctx.args.lock_ms}" in o)
    member = Background(ctx, "member", CONSOLE_SHARE, "--topic", topic, "--group", group, *SHOW_DELIVERY)
    s.state(f"a member read the {n} records", member.wait_for(lambda lines: len(lines) >= n, ctx.timeout),
            f"read {len(member.snapshot())}: {member.stderr_tail()}")
    g = re.escape(group)
    groups_tool(ctx, "share-groups --list", "--list", expect=lambda o: re.search(rf"^{g}$", o, re.M) is not None)
    groups_tool(ctx, "share-groups --list --state (Stable)", "--list", "--state",
                expect=lambda o: re.search(rf"^{g}\s+Stable\s*$", o, re.M) is not None)
    groups_tool(ctx, "share-groups --describe --members (1 member, both partitions)", "--describe", "--group", group,
                "--members", expect=lambda o: re.search(
                    rf"^{g}\s+\S+\s+\S+\s+console-share-consumer\s+2\s+{re.escape(topic)}:0,1\s*$", o, re.M)
                is not None)
    groups_tool(ctx, "share-groups --describe --state (Stable, 1 member)", "--describe", "--group", group, "--state",
                expect=lambda o: re.search(rf"^{g}\s+\S+\s+\(\d+\)\s+Stable\s+1\s*$", o, re.M) is not None)
    s.tool("groups --list (type Share)", GROUPS, "--list",
           expect=lambda o: re.search(rf"^{g}\s+Share\s+share\s*$", o, re.M) is not None)
    groups_tool(ctx, "share-groups --reset-offsets refused while a member is active", "--reset-offsets", "--group",
                group, "--topic", topic, "--to-earliest", "--execute", exit_code=1,
                expect=lambda o: f"Share group '{group}' is not empty." in o)
    member.stop()
    wait_state(ctx, group, "Empty")
    s.done.append("share-groups --describe --state: Empty after the member left")
    out = groups_tool(ctx, "share-groups --describe --offsets (lag 0)", "--describe", "--group", group, "--offsets",
                      expect=lambda o: True)
    rows = describe_rows(out, group, topic)
    no_lag = " (LAG '-': the broker gave no lag, DescribeShareGroupOffsets v1's Lag, KIP-1226)" if any(
        lag == "-" for _, lag in rows.values()) else ""
    s.state("--describe --offsets: both partitions, numeric start offsets, lag 0",
            sorted(rows) == [0, 1] and all(st.isdigit() and int(st) <= ends[p] and lag == "0"
                                           for p, (st, lag) in rows.items()),
            f"rows (partition: start, lag) {rows}; log ends {ends}{no_lag}")
    groups_tool(ctx, "share-groups --reset-offsets --to-earliest --execute", "--reset-offsets", "--group", group,
                "--topic", topic, "--to-earliest", "--execute",
                expect=lambda o: all(re.search(rf"^{g}\s+{re.escape(topic)}\s+{p}\s+0\s*$", o, re.M)
                                     for p in (0, 1)))
    out = groups_tool(ctx, "share-groups --describe after the reset", "--describe", "--group", group,
                      expect=lambda o: True)
    rows = describe_rows(out, group, topic)
    s.state("start offset 0, lag = log end", rows == {p: ("0", str(ends[p])) for p in (0, 1)},
            f"rows {rows}, log ends {ends}")
    again = Background(ctx, "member-again", CONSOLE_SHARE, "--topic", topic, "--group", group, "--max-messages",
                       str(n), *SHOW_DELIVERY)
    again.wait_for(lambda lines: len(lines) >= n, ctx.timeout)
    again.exited(15)
    reread = {(p, o) for p, o, _, _ in console_records([x for _, x in again.snapshot()])}
    s.state(f"a new member reads all {n} again after the reset",
            reread == {(p, o) for p, offs in produced.items() for o in offs},
            f"read {len(reread)} of {n}: {again.stderr_tail()}")
    groups_tool(ctx, "share-groups --delete-offsets", "--delete-offsets", "--group", group, "--topic", topic,
                expect=lambda o: re.search(rf"^{re.escape(topic)}\s+Successful\s*$", o, re.M) is not None)
    groups_tool(ctx, "share-groups --describe: no offsets left", "--describe", "--group", group,
                expect=lambda o: f"Share group '{group}' has no offset information." in o
                and not describe_rows(o, group, topic))
    groups_tool(ctx, "share-groups --delete", "--delete", "--group", group,
                expect=lambda o: f"Deletion of requested share groups ('{group}') was successful." in o)
    groups_tool(ctx, "share-groups --list: gone", "--list", expect=lambda o: re.search(rf"^{g}$", o, re.M) is None)
    return "; ".join(s.done)


# -- share-failover --------------------------------------------------------------

def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def state_partition(group: str, topic_id: str, partition: int, partitions: int) -> int:
    """The __share_group_state partition of a share-partition's state (Kafka:
    Utils.abs(\"GROUP:TOPIC_ID:PARTITION\".hashCode()) % partitions)."""
    h = java_string_hash(f"{group}:{topic_id}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def describe_topic(ctx: Ctx, topic: str) -> tuple[str, dict[int, tuple[int, list[int]]]]:
    """(topic id, partition -> (leader, isr)) from kafka-topics --describe."""
    r = ctx.s.run(TOPICS, "--describe", "--topic", topic)
    out = r.stdout
    m = re.search(r"TopicId:\s*(\S+)", out)
    parts = {}
    for row in re.finditer(r"Partition:\s*(\d+)\s+Leader:\s*(-?\d+|none)\s+Replicas:\s*\S+\s+Isr:\s*([\d,]*)", out):
        leader = int(row.group(2)) if row.group(2) != "none" else -1
        parts[int(row.group(1))] = (leader, [int(x) for x in row.group(3).split(",") if x])
    return (m.group(1) if m else ""), parts


def wait_topic(ctx: Ctx, topic: str, partition: int, cond: Callable[[int, list[int]], bool], what: str,
               timeout: float) -> tuple[int, list[int]]:
    deadline, last = time.time() + timeout, (-1, [])
    while time.time() < deadline:
        _, parts = describe_topic(ctx, topic)
        if partition in parts:
            last = parts[partition]
            if cond(*last):
                return last
        time.sleep(1)
    raise StepFailed(f"{topic}-{partition}: {what} not within {timeout:.0f} s (leader, isr) {last}")


def node_cmd(ctx: Ctx, template: str, node: int, what: str) -> None:
    cmd = template.replace("{id}", str(node))
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=ctx.timeout)
    cc.log(f"{what}: {cmd}: exit {r.returncode} {r.stdout[-300:]} {r.stderr[-300:]}")
    ctx.s.state(f"{what} node {node}", r.returncode == 0, f"'{cmd}' exit {r.returncode}: {r.stderr[-300:]}")


def share_round(ctx: Ctx, name: str, topic: str, group: str, max_messages: int | None,
                until: set[int] | None = None) -> tuple[set[int], set[int]]:
    """A VerifiableShareConsumer (sync acknowledgements, 50 records a poll)
    until it has accepted max_messages (it exits) or, with `until`, until
    every offset of `until` has been accepted (then SIGTERM). Returns the
    offsets it received and those it accepted (partition 0)."""
    conf = ctx.file(f"{group}.properties", "max.poll.records=50\n")
    argv = ["--topic", topic, "--group-id", group, "--acknowledgement-mode", "sync", "--command-config", conf]
    if max_messages is not None:
        argv += ["--max-messages", str(max_messages)]
    c = Background(ctx, name, VERIFIABLE_SHARE, *argv)

    def sets(lines) -> tuple[set[int], set[int]]:
        got, acc = set(), set()
        for e in json_events([x for _, x in lines]):
            if e.get("name") == "records_consumed":
                got |= {o for pp in e["partitions"] for o in pp["offsets"]}
            elif e.get("name") == "offsets_acknowledged" and e.get("success"):
                acc |= {o for pp in e["partitions"] for o in pp["offsets"]}
        return got, acc

    if until is None:
        c.exited(ctx.timeout * 2)
    else:
        c.wait_for(lambda lines: until <= sets(lines)[1], ctx.timeout * 2)
    c.stop()
    got, acc = sets(c.snapshot())
    ctx.s.state(f"{name}: accepted {len(acc)} of {len(got)} received", bool(acc),
                f"accepted nothing: {c.stderr_tail()}")
    return got, acc


def check_failover(ctx: Ctx) -> str:
    s, a = ctx.s, ctx.args
    if not (a.kill_node_cmd and a.restart_node_cmd):
        raise StepFailed("share-failover needs --kill-node-cmd and --restart-node-cmd")
    topic, group = cc.unique("compat-share-f"), cc.unique("compat-share-f")
    waves, part = (300, 150, 150), 100
    create_topic(s, topic, 1, 3, "--config", "min.insync.replicas=2")
    group_configs(ctx, group)
    # small batches (a share-partition acquires whole batches): the first consumer accepts only part
    produced = verifiable_produce(ctx, topic, waves[0], throughput=200).get(0, set())
    got1, acc1 = share_round(ctx, "before-kills", topic, group, part)
    topic_id, parts = describe_topic(ctx, topic)
    leader = parts.get(0, (-1, []))[0]
    s.state(f"{topic}-0 led by node {leader}", leader >= 0 and bool(topic_id), f"describe: {parts}, id {topic_id}")
    _, state_parts = describe_topic(ctx, STATE_TOPIC)
    sp = state_partition(group, topic_id, 0, len(state_parts)) if state_parts else -1
    s.state(f"{STATE_TOPIC}: {len(state_parts)} partitions, the group's state in partition {sp}", sp >= 0,
            f"no {STATE_TOPIC} partitions")
    node_cmd(ctx, a.kill_node_cmd, leader, f"SIGKILL the leader of {topic}-0:")
    new, _ = wait_topic(ctx, topic, 0, lambda ld, isr: ld not in (-1, leader), "a new leader", ctx.timeout)
    s.done.append(f"{topic}-0 now led by node {new}")
    produced |= verifiable_produce(ctx, topic, waves[1]).get(0, set())
    got2, acc2 = share_round(ctx, "after-leader-kill", topic, group, None, until=produced - acc1)
    again = sorted(got2 & acc1)
    s.state("no record accepted before the leader's kill delivered again", not again,
            f"{len(again)} accepted before the kill were delivered again, e.g. {again[:5]}")
    node_cmd(ctx, a.restart_node_cmd, leader, "restart")
    wait_topic(ctx, topic, 0, lambda ld, isr: leader in isr, f"node {leader} back in the ISR", ctx.timeout * 2)
    wait_topic(ctx, STATE_TOPIC, sp, lambda ld, isr: len(isr) >= 3 and ld >= 0, "all 3 replicas in sync",
               ctx.timeout * 2)
    s.done.append(f"node {leader} back in sync")
    state_leader = describe_topic(ctx, STATE_TOPIC)[1][sp][0]
    node_cmd(ctx, a.kill_node_cmd, state_leader, f"SIGKILL the leader of {STATE_TOPIC}-{sp}:")
    new_state, _ = wait_topic(ctx, STATE_TOPIC, sp, lambda ld, isr: ld not in (-1, state_leader), "a new leader",
                              ctx.timeout)
    s.done.append(f"{STATE_TOPIC}-{sp} now led by node {new_state}")
    produced |= verifiable_produce(ctx, topic, waves[2]).get(0, set())
    got3, acc3 = share_round(ctx, "after-state-kill", topic, group, None, until=produced - acc1 - acc2)
    again = sorted(got3 & (acc1 | acc2))
    s.state("no record accepted before the state leader's kill delivered again", not again,
            f"{len(again)} accepted earlier were delivered again, e.g. {again[:5]}")
    n = sum(waves)
    missing = sorted(produced - acc1 - acc2 - acc3)
    s.state(f"all {n} records accepted by the end", not missing and len(produced) == n,
            f"{len(missing)} never accepted, e.g. {missing[:5]}")
    node_cmd(ctx, a.restart_node_cmd, state_leader, "restart")
    return (f"{n} records (RF 3) in 3 waves: {len(acc1)} of the first {waves[0]} accepted; {topic}-0's leader "
            f"(node {leader}) SIGKILLed, node {new} led; {waves[1]} more produced, {len(acc2)} accepted; node "
            f"{leader} restarted and in sync; {STATE_TOPIC}-{sp}'s leader (node {state_leader}) SIGKILLed, node "
            f"{new_state} led; {waves[2]} more produced, {len(acc3)} accepted; no accepted record delivered again")


CHECKS: dict[str, Callable[[Ctx], str]] = {
    "share-verifiable": check_verifiable,
    "share-redelivery": check_redelivery,
    "share-archive": check_archive,
    "share-admin": check_admin,
    "share-failover": check_failover,
}


def run_check(name: str, args: argparse.Namespace) -> tuple[str, str, float]:
    """(result, detail, seconds) of one check; every background tool it
    started is gone when it returns."""
    started = time.time()
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        ctx = Ctx(args, Path(tmp))
        try:
            share_version(ctx.s)
            detail = CHECKS[name](ctx)
            result = "pass"
            detail = f"{time.time() - started:.1f} s: {detail} [{len(ctx.s.done)} steps ok]"
        except StepFailed as e:
            result, detail = "fail", f"{time.time() - started:.1f} s, after {len(ctx.s.done)} steps ok: {e}"
        except Exception as e:  # a crash is a result, reported like one
            cc.log(f"{name}: {e!r}")
            import traceback
            traceback.print_exc()
            result, detail = "fail", f"{time.time() - started:.1f} s: driver error: {e!r}"
        finally:
            ctx.cleanup()
    cc.log(f"{name}: steps ok: " + "; ".join(ctx.s.done))
    cc.log(f"{name}: {result} ({time.time() - started:.1f} s): {detail}")
    return result, detail, time.time() - started


def check_share(rep: cc.Reporter, args) -> None:
    """The kafka-cli driver's `share` column: the single-node checks, one line."""
    args.lock_ms = getattr(args, "lock_ms", 15000)
    args.kill_node_cmd = args.restart_node_cmd = None
    parts, ok = [], True
    for name in SINGLE_NODE_CHECKS:
        result, detail, _ = run_check(name, args)
        ok &= result == "pass"
        parts.append(f"{name} {result} ({detail})")
    rep.emit("share", "pass" if ok else "fail", "; ".join(parts)[:4000])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True, help="host:port[,host:port...] of the brokers")
    p.add_argument("--checks", default=",".join(SINGLE_NODE_CHECKS),
                   help=f"comma-separated, of {', '.join(ALL_CHECKS)} (default: the single-node ones)")
    p.add_argument("--messages", type=int, default=1000, help="records share-verifiable produces")
    p.add_argument("--stage-timeout", type=float, default=60.0, help="seconds one wait may take")
    p.add_argument("--lock-ms", type=int, default=15000, help="share.record.lock.duration.ms of the groups")
    p.add_argument("--kill-node-cmd", help="share-failover: shell command SIGKILLing node {id}")
    p.add_argument("--restart-node-cmd", help="share-failover: shell command restarting node {id} (its data kept)")
    p.add_argument("--client", default=CLIENT, help="the result lines' client name")
    args = p.parse_args()
    names = [c.strip() for c in args.checks.split(",") if c.strip()]
    unknown = [c for c in names if c not in CHECKS]
    if unknown:
        p.error(f"unknown checks {unknown} (known: {', '.join(ALL_CHECKS)})")
    rep = cc.Reporter(args.client, kt.tools_version())
    failed = 0
    for name in names:
        result, detail, _ = run_check(name, args)
        rep.emit(name, result, detail)
        failed += result == "fail"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
