"""What every Python-run compatibility driver shares (compat/README.md, "Driver contract").

Owns: the driver command line and main, the result line format, the payload
of the test messages and the checks on what came back (exact set,
per-partition order, commit-resume start offsets, group split), the steps of
the produce-fetch, group, commit-resume, idempotent, transactions and share
checks given a client's calls, a group member polling on a thread of its
own, and the `security` check's four steps. Knows no Kafka client: the drivers
(confluent_driver.py, kafka_python_driver.py, aiokafka_driver.py,
kcat_driver.py, perf_driver.py) bring one and call these functions; the
security settings are spelled in librdkafka's property names, which
confluent-kafka and kcat (-X) both take.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import traceback
import uuid
from typing import Callable, Iterable

CHECK_NAMES = ("produce-fetch", "group", "commit-resume", "idempotent", "transactions", "admin", "security",
               "cluster-ops", "share")
# What a driver that does not implement a check reports for it.
NOT_CHECKED = {
    "admin": "admin APIs are checked with Kafka's own CLI tools (the kafka-cli row)",
    "transactions": "this client has no transactional producer",
    "security": "this driver has no TLS/SASL step (compat/run.sh SECURITY_CLIENTS)",
    "cluster-ops": "cluster operations are checked with Kafka's own CLI tools (the kafka-cli row)",
    "share": "this driver has no share-consumer step (compat/run.sh SHARE_CLIENTS)",
}
# The SASL mechanism of the `security` check (the broker enables only this one).
SCRAM_MECHANISM = "SCRAM-SHA-512"
ASSIGNORS = ("default", "range", "roundrobin", "cooperative-sticky")
# Partitions of the topics each check creates (the brief of compat/README.md).
PRODUCE_PARTITIONS = 3
GROUP_PARTITIONS = 6


def parse_args(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--bootstrap", required=True, help="host:port of the broker")
    p.add_argument("--check", required=True, choices=CHECK_NAMES)
    p.add_argument("--assignor", default="default", choices=ASSIGNORS)
    p.add_argument("--phase", choices=("a", "b"), help="commit-resume phase")
    p.add_argument("--state", help="commit-resume state file (phase a writes, b reads)")
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--stage-timeout", type=float, default=60.0,
                   help="seconds one wait (a rebalance, a read-back) may take")
    sec = p.add_argument_group("security check")
    sec.add_argument("--sasl-bootstrap", help="host:port of the SASL_SSL listener")
    sec.add_argument("--ssl-bootstrap", help="host:port of the SSL listener (client certificate required)")
    sec.add_argument("--ssl-ca", help="PEM CA file the broker's certificate chains to")
    sec.add_argument("--ssl-cert", help="PEM client certificate")
    sec.add_argument("--ssl-key", help="PEM key of --ssl-cert")
    sec.add_argument("--sasl-username")
    sec.add_argument("--sasl-password")
    sec.add_argument("--topic-prefix", help="the topic prefix both principals may use (ALL)")
    sec.add_argument("--group-prefix", help="the group prefix both principals may use (ALL)")
    sec.add_argument("--denied-topic", help="an existing topic neither principal has an ACL on")
    args = p.parse_args()
    if args.check == "security":
        missing = [a for a in SECURITY_ARGS if getattr(args, a) is None]
        if missing:
            p.error("--check security needs " + ", ".join("--" + a.replace("_", "-") for a in missing))
    return args


SECURITY_ARGS = ("sasl_bootstrap", "ssl_bootstrap", "ssl_ca", "ssl_cert", "ssl_key", "sasl_username",
                 "sasl_password", "topic_prefix", "group_prefix", "denied_topic")


class Reporter:
    """Prints one JSON result line per check on stdout (nothing else goes there)."""

    def __init__(self, client: str, version: str):
        self.client = client
        self.version = version
        self.emitted: set[str] = set()

    def emit(self, check: str, result: str, detail: str) -> None:
        assert result in ("pass", "fail", "n/a"), result
        line = {"client": self.client, "version": self.version, "check": check,
                "result": result, "detail": detail}
        print(json.dumps(line), flush=True)
        self.emitted.add(check)

    def verdict(self, check: str, problems: list[str], ok_detail: str) -> bool:
        if problems:
            self.emit(check, "fail", "; ".join(problems)[:2000])
            return False
        self.emit(check, "pass", ok_detail)
        return True


def group_check_name(assignor: str) -> str:
    return "group" if assignor == "default" else f"group:{assignor}"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- messages ----------------------------------------------------------------

def message_key(i: int) -> bytes:
    return f"key-{i}".encode()


def message_value(tag: str, i: int) -> bytes:
    return f"{tag}-{i:07d}".encode()


def value_index(tag: str, value: bytes | None) -> int | None:
    """The sequence number i of a value made by message_value(tag, i), else None."""
    if value is None:
        return None
    s = value.decode(errors="replace")
    head, _, num = s.rpartition("-")
    if head != tag or not num.isdigit():
        return None
    return int(num)


# -- verification ------------------------------------------------------------

Record = tuple[int, int, bytes | None]  # (partition, offset, value)


def verify_acks(n: int, acks: dict[int, tuple[int, int]], errors: list[str]) -> list[str]:
    """acks: i -> (partition, offset) from delivery reports."""
    problems = []
    if errors:
        problems.append(f"{len(errors)} delivery errors, first: {errors[0]}")
    missing = [i for i in range(n) if i not in acks]
    if missing:
        problems.append(f"{len(missing)} of {n} not acknowledged (first i={missing[0]})")
    bad = [i for i, (p, o) in acks.items() if p < 0 or o < 0]
    if bad:
        problems.append(f"{len(bad)} acks without partition/offset (i={bad[0]}: {acks[bad[0]]})")
    positions = list(acks.values())
    if len(set(positions)) != len(positions):
        problems.append("two messages acknowledged at the same partition/offset")
    return problems


def verify_read_back(tag: str, n: int, records: Iterable[Record],
                     acks: dict[int, tuple[int, int]] | None) -> list[str]:
    """Exactly the n messages of `tag`, each once, in produce order per partition,
    and (when acks are known) at the partition/offset the producer was told."""
    problems = []
    seen: dict[int, tuple[int, int]] = {}
    dups, foreign = 0, 0
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for p, o, v in records:
        i = value_index(tag, v)
        if i is None or not 0 <= i < n:
            foreign += 1
            continue
        if i in seen:
            dups += 1
            continue
        seen[i] = (p, o)
        by_partition.setdefault(p, []).append((o, i))
    if foreign:
        problems.append(f"{foreign} records that are not ours")
    if dups:
        problems.append(f"{dups} duplicates")
    if len(seen) != n:
        missing = sorted(set(range(n)) - set(seen))
        problems.append(f"read {len(seen)} of {n} (first missing i={missing[0]})")
    for p, items in sorted(by_partition.items()):
        items.sort()
        seq = [i for _, i in items]
        if seq != sorted(seq):
            problems.append(f"partition {p}: produce order not kept")
    if acks is not None:
        moved = [i for i, pos in seen.items() if acks.get(i) != pos]
        if moved:
            i = moved[0]
            problems.append(f"{len(moved)} records not at their acked position "
                            f"(i={i}: acked {acks.get(i)}, read {seen[i]})")
    return problems


def partition_counts(records: Iterable[Record]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for p, _, _ in records:
        counts[p] = counts.get(p, 0) + 1
    return dict(sorted(counts.items()))


def split_ok(assignments: list[set[int]], per_member: int, partitions: int) -> bool:
    """Each member owns exactly per_member partitions, together all, none twice."""
    if any(len(a) != per_member for a in assignments):
        return False
    union = set().union(*assignments) if assignments else set()
    return len(union) == partitions and sum(len(a) for a in assignments) == partitions


def describe_split(assignments: list[set[int]]) -> str:
    return " ".join("[" + ",".join(map(str, sorted(a))) + "]" for a in assignments)


def wait_until(cond: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return cond()


def wait_stable(cond: Callable[[], bool], timeout: float, hold: float = 1.0,
                interval: float = 0.1) -> bool:
    """True once cond() has held for `hold` seconds in a row (a split seen in
    the middle of a rebalance does not count), False after `timeout`."""
    deadline = time.monotonic() + timeout
    since = None
    while time.monotonic() < deadline:
        if cond():
            since = since if since is not None else time.monotonic()
            if time.monotonic() - since >= hold:
                return True
        else:
            since = None
        time.sleep(interval)
    return False


def group_scenario(start_member: Callable[[int], object], stage_timeout: float,
                   partitions: int = GROUP_PARTITIONS) -> tuple[list[str], str]:
    """The `group` check on any client: 3 members split the partitions 2/2/2;
    one leaves (close) and the other 2 own 3/3; a 4th joins and it is 2/2/2
    again. start_member(k) returns an object with assigned() -> set[int]
    (the member's current assignment), close() (leave the group, idempotent)
    and error (None or the first error the client reported).
    Returns (problems, detail)."""
    members = [start_member(k) for k in range(3)]
    stages: list[str] = []
    problems: list[str] = []
    try:
        for label, per_member, change in (
            ("3 members", partitions // 3, None),
            ("1 left", partitions // 2, "leave"),
            ("1 joined", partitions // 3, "join"),
        ):
            if change == "leave":
                members[0].close()
                members = members[1:]
            elif change == "join":
                members.append(start_member(3))
            t0 = time.monotonic()
            ok = wait_stable(lambda: split_ok([m.assigned() for m in members], per_member, partitions),
                             stage_timeout)
            split = describe_split([m.assigned() for m in members])
            stages.append(f"{label}: {split} after {time.monotonic() - t0:.1f}s")
            if not ok:
                want = "/".join([str(per_member)] * len(members))
                problems.append(f"{label}: wanted {want} within {stage_timeout:.0f}s, have {split}")
                break
            log(stages[-1])
    finally:
        for m in members:
            m.close()
    errors = [f"member {k}: {m.error}" for k, m in enumerate(members) if getattr(m, "error", None)]
    if problems and errors:
        problems.append("client errors: " + "; ".join(errors))
    return problems, "; ".join(stages)


def verify_resume(state: dict, records: list[Record]) -> list[str]:
    """Phase b of commit-resume: starts exactly at the committed offsets, reads
    none of what phase a consumed, and gets all the rest."""
    problems = []
    end = {int(p): o for p, o in state["end_offsets"].items()}
    # a partition phase a never committed starts from the beginning (auto.offset.reset=earliest)
    committed = {p: 0 for p in end}
    committed.update({int(p): o for p, o in state["committed"].items()})
    consumed_a = {(p, o) for p, o in state["consumed"]}
    first: dict[int, int] = {}
    got = set()
    for p, o, _ in records:
        first.setdefault(p, o)
        got.add((p, o))
    for p, c in sorted(committed.items()):
        if c < end[p] and first.get(p) != c:
            problems.append(f"partition {p}: committed {c}, first read {first.get(p)}")
    reread = got & consumed_a
    if reread:
        problems.append(f"{len(reread)} records re-read that phase a had committed, e.g. {min(reread)}")
    want = {(p, o) for p in end for o in range(committed[p], end[p])}
    if want - got:
        problems.append(f"{len(want - got)} of the {len(want)} uncommitted records not read, "
                        f"e.g. {min(want - got)}")
    if len(records) != len(got):
        problems.append(f"{len(records) - len(got)} duplicate deliveries in phase b")
    return problems


class ThreadMember:
    """A group member for group_scenario whose client lives on a thread of
    its own (clients that are not thread-safe create, poll and close it
    there). A subclass sets its fields, then calls this __init__, which
    starts run(): it polls until stopping() and stores the partitions the
    client has in `_assigned`; whatever it raises becomes .error."""

    def __init__(self):
        self._assigned: set[int] = set()
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()

    def run(self) -> None:
        raise NotImplementedError

    def stopping(self) -> bool:
        return self._stop.is_set()

    def _main(self) -> None:
        try:
            self.run()
        except Exception as e:  # surfaced through .error in the check's detail
            self.error = repr(e)
        finally:
            self._assigned = set()

    def assigned(self) -> set[int]:
        return set(self._assigned)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


# -- the checks, given a client's calls --------------------------------------
# The calls are plain functions (an asyncio client runs each in asyncio.run):
#   create_topic(bootstrap, topic, partitions, timeout): created and visible
#   produce(bootstrap, topic, tag, n, timeout) -> (acks, errors) of verify_acks:
#       message_key(i) / message_value(tag, i) for i < n, acks=all
#   read_assigned(bootstrap, topic, partitions, n, timeout) -> [Record]:
#       partitions 0.. from the beginning via assign(), until n records or timeout


def produce_fetch_check(rep: Reporter, args: argparse.Namespace, create_topic: Callable,
                        produce: Callable, read_assigned: Callable, acks_note: str) -> None:
    """The `produce-fetch` check: --messages to a new topic, every one acked
    (acks_note says how), read back at the acked offsets in produce order."""
    topic = unique("compat-produce")
    create_topic(args.bootstrap, topic, PRODUCE_PARTITIONS, args.stage_timeout)
    acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
    rep.verdict("produce", verify_acks(args.messages, acks, errors),
                f"{args.messages} acked ({acks_note}), per partition "
                f"{partition_counts((p, o, None) for p, o in acks.values())}")
    records = read_assigned(args.bootstrap, topic, PRODUCE_PARTITIONS, args.messages, args.stage_timeout)
    rep.verdict("fetch", verify_read_back(topic, args.messages, records, acks),
                f"{len(records)} read back via assign(), order and offsets as acked")


def idempotent_check(rep: Reporter, args: argparse.Namespace, create_topic: Callable,
                     produce_idempotent: Callable, read_assigned: Callable, setting: str) -> None:
    """The `idempotent` check: as produce-fetch through the idempotent
    producer (`setting` names how it was asked for), one verdict."""
    topic = unique("compat-idempotent")
    create_topic(args.bootstrap, topic, PRODUCE_PARTITIONS, args.stage_timeout)
    acks, errors = produce_idempotent(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
    problems = verify_acks(args.messages, acks, errors)
    if not problems:
        records = read_assigned(args.bootstrap, topic, PRODUCE_PARTITIONS, args.messages, args.stage_timeout)
        problems = verify_read_back(topic, args.messages, records, acks)
    rep.verdict("idempotent", problems, f"{setting}: {args.messages} acked and read back once, in order")


def group_check(rep: Reporter, args: argparse.Namespace, create_topic: Callable,
                member: Callable[[str, str], object]) -> None:
    """The `group` check: group_scenario on a new topic of GROUP_PARTITIONS;
    member(group, topic) starts one member of the group."""
    topic, group = unique("compat-group"), unique("compat-group")
    create_topic(args.bootstrap, topic, GROUP_PARTITIONS, args.stage_timeout)
    problems, detail = group_scenario(lambda k: member(group, topic), args.stage_timeout)
    rep.verdict(group_check_name(args.assignor), problems, detail)


def next_offsets(records: Iterable[tuple]) -> dict[int, int]:
    """partition -> the offset after the last of the records read from it
    ((partition, offset, ...) in read order): what their reader commits."""
    after: dict[int, int] = {}
    for p, o, *_ in records:
        after[p] = o + 1
    return after


def end_offsets(positions: Iterable[tuple]) -> dict[int, int]:
    """partition -> one past the highest offset of `positions` ((partition, offset, ...))."""
    end: dict[int, int] = {}
    for p, o, *_ in positions:
        end[p] = max(end.get(p, 0), o + 1)
    return end


def save_resume_state(path: str, topic: str, group: str, committed: dict[int, int],
                      consumed: Iterable[tuple], end: dict[int, int]) -> None:
    """What commit-resume's phase a leaves phase b (verify_resume's `state`)."""
    save_state(path, {"topic": topic, "group": group, "committed": committed,
                      "consumed": [(p, o) for p, o, *_ in consumed], "end_offsets": end})


def resume_plan(path: str) -> tuple[dict, dict[int, int], Callable[[list[Record]], bool]]:
    """Phase b's start: (the state phase a saved, its committed offsets, and
    done(records): True once the records read reach every partition's end)."""
    state = load_state(path)
    end = {int(p): o for p, o in state["end_offsets"].items()}
    committed = {int(p): o for p, o in state["committed"].items()}

    def done(records: list[Record]) -> bool:
        high: dict[int, int] = {}
        for p, o, _ in records:
            high[p] = max(high.get(p, -1), o)
        return all(high.get(p, committed.get(p, 0) - 1) + 1 >= e for p, e in end.items())

    return state, committed, done


def commit_resume_check(rep: Reporter, args: argparse.Namespace, create_topic: Callable,
                        produce: Callable, consume_commit: Callable, read_group: Callable) -> None:
    """The `commit-resume` check, one phase an invocation (the broker restarts
    in between). Phase a: --messages to a new topic, then
    consume_commit(topic, group, half) reads exactly `half` of them as a new
    group member and, when it has them all, commits next_offsets of them;
    it returns (the records read, the committed offsets OffsetFetch then
    reports). Phase b: read_group(group, topic, done) reads as a member of
    that group until done(records) or the stage timeout; verify_resume."""
    if args.phase == "a":
        topic, group = unique("compat-resume"), unique("compat-resume")
        create_topic(args.bootstrap, topic, PRODUCE_PARTITIONS, args.stage_timeout)
        acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
        problems = verify_acks(args.messages, acks, errors)
        if problems:
            rep.emit("commit-resume", "fail", "phase a produce: " + "; ".join(problems))
            return
        half = args.messages // 2
        records, committed = consume_commit(topic, group, half)
        if len(records) < half:
            rep.emit("commit-resume", "fail", f"phase a consumed {len(records)} of {half}")
            return
        want = next_offsets(records)
        if committed != want:
            rep.emit("commit-resume", "fail", f"committed {want}, OffsetFetch says {committed}")
            return
        save_resume_state(args.state, topic, group, committed, records, end_offsets(acks.values()))
        log(f"phase a: consumed {len(records)}, committed {committed}")
        return
    state, committed, done = resume_plan(args.state)
    records = read_group(state["group"], state["topic"], done)
    rep.verdict("commit-resume", verify_resume(state, records),
                f"resumed after broker restart at {committed}, read the other {len(records)}")


def aborted_batch(src: str, n: int) -> tuple[str, int]:
    """(tag, count) of the values the `transactions` check produces to src in
    the aborted transaction, after n in a committed one."""
    return src + "-aborted", max(n // 2, 1)


def transactions_verdict(rep: Reporter, args: argparse.Namespace, src: str, dst: str, read: Callable,
                         committed: dict[int, int | None], processed: int, transactions: int, how: str,
                         first_problems: Iterable[str] = ()) -> None:
    """The `transactions` check's read-back and verdict, once the driver has
    produced n = --messages values message_value(src, i) in a committed
    transaction and the aborted_batch(src, n) in an aborted one to src, and
    consume-transform-produced src to dst (b"out-" + value) in `transactions`
    transactions of `processed` records in all, the group's offsets sent as
    `how` says; `committed` is what OffsetFetch then says of src (partition
    -> offset; None or < 0: nothing). read(bootstrap, topic, want, timeout,
    isolation, starts) returns the values of every partition of topic, from
    starts[p] (< 0 or missing: the beginning), until `want` records and one
    quiet second more. first_problems come first."""
    n, b, timeout = args.messages, args.bootstrap, args.stage_timeout
    aborted_tag, aborted = aborted_batch(src, n)
    input_committed = read(b, src, n, timeout, "read_committed", None)
    input_all = read(b, src, n + aborted, timeout, "read_uncommitted", None)
    out = read(b, dst, n, timeout, "read_committed", None)
    starts = {p: -1 if o is None else o for p, o in committed.items()}
    lag = len(read(b, src, 0, timeout, "read_committed", starts))
    expected = {b"out-" + message_value(src, i) for i in range(n)}
    seen_aborted = sum(1 for v in input_all if v.startswith(aborted_tag.encode()))
    problems = list(first_problems)
    if processed != n:
        problems.append(f"consume-transform-produce processed {processed} of {n}")
    problems += verify_transactions(n, input_committed, aborted_tag, out, expected, seen_aborted, lag)
    rep.verdict("transactions", problems,
                f"{n} committed + {aborted} aborted; read_committed saw {len(input_committed)}, "
                f"read_uncommitted {len(input_all)}; {n} transformed once in {transactions} "
                f"transactions with {how}; lag after {lag}")


def run_main(reporter: Reporter, args: argparse.Namespace, checks: dict[str, Callable]) -> int:
    """Dispatch args.check; a crash becomes a fail line (never a silent exit)."""
    name = args.check
    result_name = {"group": group_check_name(args.assignor)}.get(name, name)
    try:
        if name not in checks:
            reporter.emit(result_name, "n/a", NOT_CHECKED[name])
            return 0
        checks[name](reporter, args)
        return 0
    except Exception as e:  # a crash is a result, reported like one
        traceback.print_exc()
        pending = ["produce", "fetch"] if name == "produce-fetch" else [result_name]
        for check in pending:
            if check not in reporter.emitted:
                reporter.emit(check, "fail", f"driver error: {e!r}")
        return 1


def checks_in(namespace: dict) -> dict[str, Callable]:
    """The checks a driver module defines (pass its globals()): check_<name>,
    dashes as underscores, for each of CHECK_NAMES; run_main reports the
    others n/a."""
    funcs = {name: "check_" + name.replace("-", "_") for name in CHECK_NAMES}
    return {name: namespace[func] for name, func in funcs.items() if func in namespace}


def driver_main(doc: str, client: str, version: str, checks: dict[str, Callable]) -> int:
    """A driver's main: its command line (the first line of `doc` describes
    it), then run_main on a Reporter of client and version."""
    args = parse_args(doc.splitlines()[0])
    return run_main(Reporter(client, version), args, checks)


# -- share groups (KIP-932) -------------------------------------------------
# The `share` check (compat/README.md): the twin of compat/driver/share.go and
# ShareCheck.java, the same plan, problems and words.

SHARE_CONSUMERS = 2
SHARE_QUIET = 2.0  # s the consumers keep polling once every record is accepted
SHARE_LOCK_MS = "15000"  # the group's share.record.lock.duration.ms (Kafka's minimum)
ACCEPT, RELEASE, REJECT = "accept", "release", "reject"


class SharePlan:
    """What a share consumer does with each of n records: `release` is
    released on its first delivery (accepted when it comes back), `reject`
    rejected (it must never come back), every other record accepted."""

    def __init__(self, n: int):
        if n < 4:
            raise ValueError(f"share needs --messages >= 4, got {n}")
        self.n, self.release, self.reject = n, n // 2, n // 3

    def ack_for(self, i: int, count: int) -> str:
        if i == self.reject:
            return REJECT
        return RELEASE if i == self.release and count <= 1 else ACCEPT


class ShareRun:
    """What the consumers of one run share: every delivery as (consumer,
    index or -1, (partition, offset), delivery count, ack), the
    acknowledgement and consumer errors; thread-safe."""

    def __init__(self, plan: SharePlan, topic: str):
        self.plan, self.topic = plan, topic
        self.deliveries: list[tuple[int, int, tuple[int, int], int, str]] = []
        self.ack_errors: list[str] = []
        self.errors: list[str] = []
        self.polled: set[int] = set()  # consumers whose first poll returned
        self.stop = threading.Event()
        self._lock = threading.Lock()

    def delivered(self, consumer: int, value: bytes | None, at: tuple[int, int], count: int) -> str:
        """Records one delivery; returns the ack the plan says to send."""
        i = value_index(self.topic, value)
        i = i if i is not None and 0 <= i < self.plan.n else -1
        ack = self.plan.ack_for(i, count)
        with self._lock:
            self.deliveries.append((consumer, i, at, count, ack))
        return ack

    def ack_error(self, msg: str) -> None:
        with self._lock:
            self.ack_errors.append(msg)

    def done(self) -> bool:
        with self._lock:
            return len({d[1] for d in self.deliveries if d[4] == ACCEPT and d[1] >= 0}) >= self.plan.n - 1


def verify_share(plan: SharePlan, deliveries: list, acks: dict[int, tuple[int, int]],
                 ack_errors: list[str]) -> list[str]:
    """Every record but the rejected one accepted exactly once, where its
    producer was told it landed; the released one delivered with counts 1
    then 2; the rejected one once; counts >= 1; nothing foreign; no
    acknowledgement error. How the records were split between the consumers
    is not judged: one may take them all before the other's first fetch
    (share_summary reports the split)."""
    problems = []
    if ack_errors:
        problems.append(f"{len(ack_errors)} acknowledgement errors, first: {ack_errors[0]}")
    accepted: dict[int, int] = {}
    counts: dict[int, list[int]] = {}
    foreign = bad_count = moved = 0
    for _consumer, i, at, count, ack in deliveries:
        if i < 0:
            foreign += 1
            continue
        bad_count += count < 1
        moved += i in acks and tuple(acks[i]) != tuple(at)
        counts.setdefault(i, []).append(count)
        if ack == ACCEPT:
            accepted[i] = accepted.get(i, 0) + 1
    if foreign:
        problems.append(f"{foreign} records that are not ours")
    if bad_count:
        problems.append(f"{bad_count} deliveries with a delivery count below 1")
    if moved:
        problems.append(f"{moved} records not at their acked position")
    others = [i for i in range(plan.n) if i != plan.reject]
    missing = [i for i in others if accepted.get(i, 0) == 0]
    twice = [i for i in others if accepted.get(i, 0) > 1]
    if missing:
        problems.append(f"{len(missing)} of {plan.n - 1} records never accepted (first {missing[:5]})")
    if twice:
        problems.append(f"{len(twice)} records accepted more than once (first {twice[:5]})")
    rel = ",".join(map(str, sorted(counts.get(plan.release, []))))
    if rel != "1,2":
        problems.append(f"released record {plan.release}: delivery counts [{rel}], want [1,2] "
                        "(released on the first, accepted on the second)")
    rej = ",".join(map(str, sorted(counts.get(plan.reject, []))))
    if rej != "1":
        problems.append(f"rejected record {plan.reject}: delivery counts [{rej}], want [1] "
                        "(a rejected record must not come back)")
    return problems


def share_summary(plan: SharePlan, deliveries: list) -> str:
    per_consumer = [0] * SHARE_CONSUMERS
    back = ""
    for consumer, i, _at, count, ack in deliveries:
        per_consumer[consumer] += ack == ACCEPT
        if i == plan.release and count >= 2:
            back = f"consumer {consumer + 1}"
    return (f"accepted {'+'.join(map(str, per_consumer))} by the {SHARE_CONSUMERS} consumers "
            f"({len(deliveries)} deliveries); record {plan.release} released, back with delivery count 2 "
            f"to {back or 'no consumer'}; record {plan.reject} rejected")


def share_check(rep: Reporter, args: argparse.Namespace, create_topic: Callable, set_group_configs: Callable,
                produce: Callable, consume: Callable, how: dict[str, str],
                wait_assigned: Callable | None = None, heartbeat_ms: Callable | None = None) -> None:
    """The `share` check given a client's calls: create_topic (as above);
    set_group_configs(bootstrap, group, {name: value}, timeout) on the GROUP
    resource; produce (as above, acks=all); consume(run, c, group) as share
    consumer c until run.stop, calling run.delivered for each record and
    acknowledging as it answers, run.ack_error for each failed
    acknowledgement, adding c to run.polled once its first poll returned,
    then leaving the group; wait_assigned(bootstrap, group, topic, n,
    timeout) -> None once the group's describe shows n members each assigned
    partitions of topic at the assignment epoch, else what it saw last. A
    client that cannot describe share groups (wait_assigned None) waits
    instead, once every consumer has polled, the group's heartbeat interval
    (heartbeat_ms(bootstrap, group, timeout), DescribeConfigs) plus a second:
    by then the member that joined first has heard that the second took
    partitions from it (its acknowledgements of a partition taken from it
    fail in the client). `how` names
    the client's calls: "configs" (the config call), "consumers" (the
    consumers and their acks), "describe" (wait_assigned's call, or why none)."""
    started = time.monotonic()
    plan = SharePlan(args.messages)
    topic, group = unique("compat-share"), unique("compat-share")
    run = ShareRun(plan, topic)
    create_topic(args.bootstrap, topic, PRODUCE_PARTITIONS, args.stage_timeout)
    set_group_configs(args.bootstrap, group, {"share.auto.offset.reset": "earliest",
                                              "share.record.lock.duration.ms": SHARE_LOCK_MS}, args.stage_timeout)

    def consumer_main(c: int) -> None:
        try:
            consume(run, c, group)
        except Exception as e:  # surfaced in the verdict
            log(f"share consumer {c + 1}: {e!r}")
            with run._lock:
                run.errors.append(f"consumer {c + 1}: {e!r}")

    threads = [threading.Thread(target=consumer_main, args=(c,), daemon=True) for c in range(SHARE_CONSUMERS)]
    for t in threads:
        t.start()
    problems = []
    waited = time.monotonic()
    both_assigned = False
    settled = ""
    if wait_assigned is not None:  # both members in the group with partitions before the records come
        last = wait_assigned(args.bootstrap, group, topic, SHARE_CONSUMERS, args.stage_timeout)
        both_assigned = last is None
        if not both_assigned:
            problems.append(f"{how['describe']} did not show {SHARE_CONSUMERS} members each assigned partitions "
                            f"of {topic} at the assignment epoch within {args.stage_timeout:.0f}s (last: {last})")
    else:
        wait_until(lambda: len(run.polled) == SHARE_CONSUMERS or bool(run.errors), args.stage_timeout, 0.05)
        interval = 5000
        try:
            interval = heartbeat_ms(args.bootstrap, group, args.stage_timeout) if heartbeat_ms else interval
        except Exception as e:  # the default is Kafka's (and its minimum)
            log(f"share.heartbeat.interval.ms of {group}: {e!r}; assuming {interval} ms")
        time.sleep(interval / 1000 + 1)
        settled = f", {interval / 1000 + 1:.0f}s after both polled (share.heartbeat.interval.ms {interval} + 1 s)"
    assigned_in = time.monotonic() - waited
    acks, errors = produce(args.bootstrap, topic, topic, plan.n, args.stage_timeout)
    produce_problems = verify_acks(plan.n, acks, errors)
    problems += [f"produce: {p}" for p in produce_problems]
    produced = time.monotonic() - started
    if not produce_problems:
        wait_until(lambda: run.done() or bool(run.errors), args.stage_timeout, 0.05)
    finished = run.done()
    if finished:
        time.sleep(SHARE_QUIET)
    run.stop.set()
    for k, t in enumerate(threads):
        t.join(args.stage_timeout + 30)
        if t.is_alive():
            problems.append(f"consumer {k + 1} did not close within the stage timeout")
    with run._lock:
        deliveries = list(run.deliveries)
    if not finished:
        problems.append(f"not every record accepted within {args.stage_timeout:.0f}s")
    problems += verify_share(plan, deliveries, acks, run.ack_errors)
    problems += run.errors
    summary = share_summary(plan, deliveries)
    if problems:
        problems.append(f"({summary})")
    assigned = (f"each assigned partitions at the assignment epoch ({how['describe']}) after {assigned_in:.1f}s"
                if both_assigned else f"records produced {assigned_in:.1f}s after they subscribed{settled} "
                                      f"({how['describe']})")
    rep.verdict("share", problems,
                f"share group {group} (share.auto.offset.reset=earliest set by {how['configs']} on the GROUP "
                f"resource), {SHARE_CONSUMERS} {how['consumers']}, {assigned}; {plan.n} produced (acks=all) to "
                f"{PRODUCE_PARTITIONS} partitions by {produced:.1f}s; no acknowledgement error: {summary}; each "
                f"record accepted once, the released one on its return, the rejected one never back "
                f"({SHARE_QUIET:.0f}s quiet after); {time.monotonic() - started:.1f}s in all")


# -- security ----------------------------------------------------------------

StepResult = tuple[list[str], str]  # (problems, what happened)


def librdkafka_security(ca: str, cert: str, key: str, sasl: tuple[str, str] | None = None) -> dict[str, str]:
    """librdkafka settings for the secured broker: TLS with the client certificate
    (ssl.client.auth=required covers every TLS listener) and, given (user, password),
    SASL_SSL with SCRAM_MECHANISM; else SSL, whose principal is the certificate's."""
    conf = {"ssl.ca.location": ca, "ssl.certificate.location": cert, "ssl.key.location": key,
            "security.protocol": "SSL"}
    if sasl is not None:
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM_MECHANISM,
                     "sasl.username": sasl[0], "sasl.password": sasl[1]})
    return conf


def security_endpoint(args: argparse.Namespace, listener: str,
                      password: str | None = None) -> tuple[str, dict[str, str]]:
    """(bootstrap, librdkafka settings) of "SASL_SSL" (as --sasl-username, with
    `password` or --sasl-password) or "SSL" (as the client certificate)."""
    if listener == "SASL_SSL":
        sasl = (args.sasl_username, password if password is not None else args.sasl_password)
        return args.sasl_bootstrap, librdkafka_security(args.ssl_ca, args.ssl_cert, args.ssl_key, sasl)
    return args.ssl_bootstrap, librdkafka_security(args.ssl_ca, args.ssl_cert, args.ssl_key)


def wrong_password(args: argparse.Namespace) -> str:
    return "not-" + args.sasl_password


def librdkafka_scram_note(version: str) -> str:
    """Why a librdkafka older than 2.6.1 fails SCRAM here: it repeats its client
    nonce in the client-final message (confluentinc/librdkafka#4895); Kafka 4.x
    refuses that, and so does chronik (RFC 5802: the nonce must be echoed exactly)."""
    nums = [int(x) for x in version.split(".")[:3] if x.isdigit()]
    if len(nums) == 3 and tuple(nums) < (2, 6, 1):
        return (f"librdkafka {version} < 2.6.1 repeats the client nonce in SCRAM's client-final message "
                "(confluentinc/librdkafka#4895), which Kafka 4.x and chronik refuse")
    return ""


class ClientCannot(Exception):
    """Raised by a security step the client cannot do at all (a known client
    defect, named in the message): the step is reported as not possible."""


def security_check(rep: Reporter, args: argparse.Namespace,
                   produce_consume: Callable[[str, dict[str, str], str, str], StepResult],
                   refused_login: Callable[[str, dict[str, str]], StepResult],
                   denied_produce: Callable[[str, dict[str, str]], StepResult]) -> None:
    """The `security` check on any client, four steps (compat/README.md), each
    given the (bootstrap, librdkafka settings) of its security_endpoint:
      (1) produce_consume(bootstrap, conf, topic, group) over "SASL_SSL": N
          messages as the SCRAM user to a new granted topic, all read back in
          a granted group;
      (2) the same over "SSL" as the client certificate's principal;
      (3) refused_login(bootstrap, conf) with a wrong SCRAM password: it fails
          with an authentication error;
      (4) denied_produce(bootstrap, conf), over each listener: producing to
          the ungranted topic fails with TOPIC_AUTHORIZATION_FAILED.
    A step returns (problems, what happened); one that raises has that as its
    problem, unless it raises ClientCannot. Emits one `security` line naming
    every step's outcome: fail if any step has a problem, else n/a if some
    step was not possible for this client, else pass."""
    sasl_as = f"SASL_SSL {SCRAM_MECHANISM} as {args.sasl_username}"
    steps: list[tuple[str, Callable[[], StepResult]]] = [
        (f"(1) {sasl_as}",
         lambda: produce_consume(*security_endpoint(args, "SASL_SSL"), unique(args.topic_prefix + "sasl"),
                                 unique(args.group_prefix + "sasl"))),
        ("(2) SSL, client certificate required, as its subject",
         lambda: produce_consume(*security_endpoint(args, "SSL"), unique(args.topic_prefix + "mtls"),
                                 unique(args.group_prefix + "mtls"))),
        ("(3) wrong password",
         lambda: refused_login(*security_endpoint(args, "SASL_SSL", wrong_password(args)))),
        (f"(4) produce to ungranted {args.denied_topic} over {sasl_as}",
         lambda: denied_produce(*security_endpoint(args, "SASL_SSL"))),
        (f"(4) produce to ungranted {args.denied_topic} over SSL as the certificate",
         lambda: denied_produce(*security_endpoint(args, "SSL"))),
    ]
    failed, impossible, details = False, False, []
    for name, step in steps:
        t0 = time.monotonic()
        try:
            problems, what = step()
        except ClientCannot as e:
            impossible = True
            details.append(f"{name}: not possible with this client: {e}")
            log(details[-1])
            continue
        except Exception as e:  # the step's failure, not the driver's
            traceback.print_exc()
            problems, what = [f"error: {e!r}"], ""
        took = f"{time.monotonic() - t0:.1f}s"
        if problems:
            failed = True
            details.append(f"{name}: FAILED after {took}: " + "; ".join(problems))
        else:
            details.append(f"{name}: {what} ({took})")
        log(details[-1])
    result = "fail" if failed else "n/a" if impossible else "pass"
    rep.emit("security", result, "; ".join(details)[:2000])


def verify_transactions(n: int, committed: Iterable[bytes], aborted_tag: str,
                        out_values: list[bytes], expected_out: set[bytes],
                        uncommitted_input_aborted: int, lag: int) -> list[str]:
    """The `transactions` check's verdict: read_committed saw the n committed
    input values and none of the aborted ones; the read_committed output is
    exactly the transformed committed input, each once; a read_uncommitted
    read of the input did see the aborted records; and the group's committed
    offsets leave nothing committed to re-read (lag 0)."""
    problems = []
    committed = list(committed)
    leaked = [v for v in committed if v.startswith(aborted_tag.encode())]
    if leaked:
        problems.append(f"read_committed saw {len(leaked)} aborted records, e.g. {leaked[0]!r}")
    if len(committed) - len(leaked) != n:
        problems.append(f"read_committed saw {len(committed) - len(leaked)} committed input records, want {n}")
    if uncommitted_input_aborted == 0:
        problems.append("read_uncommitted saw no aborted record: the abort was not written")
    got = set(out_values)
    if len(out_values) != len(got):
        problems.append(f"{len(out_values) - len(got)} duplicate records in the output")
    if got != expected_out:
        problems.append(f"output: {len(expected_out - got)} missing, {len(got - expected_out)} unexpected")
    if lag != 0:
        problems.append(f"the group's committed offsets leave {lag} committed records to re-read")
    return problems


def save_state(path: str, state: dict) -> None:
    with open(path, "w") as f:
        json.dump(state, f)


def load_state(path: str) -> dict:
    with open(path) as f:
        return json.load(f)
