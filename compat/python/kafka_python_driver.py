"""Compatibility driver for Python kafka-python (pure-Python client) - compat/README.md.

Runs one check per invocation against --bootstrap and prints its JSON result
line(s). Owns only the kafka-python calls; messages, verification and the
group scenario come from compat_common. kafka-python objects are not
thread-safe: every consumer lives and dies on one thread.
"""

from __future__ import annotations

import threading
import time

import kafka
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.structs import OffsetAndMetadata

import compat_common as cc

CLIENT = "kafka-python"
VERSION = kafka.__version__
ASSIGNORS = {"range": (RangePartitionAssignor,), "roundrobin": (RoundRobinPartitionAssignor,),
             "cooperative-sticky": (CooperativeStickyAssignor,)}


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                            timeout_ms=int(timeout * 1000), wait_for_metadata=True)
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, tag: str, n: int, timeout: float,
            **extra) -> tuple[dict[int, tuple[int, int]], list[str]]:
    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **extra)

    def on_ok(i):
        return lambda md: acks.__setitem__(i, (md.partition, md.offset))

    def on_err(i):
        return lambda exc: errors.append(f"i={i}: {exc!r}")

    try:
        for i in range(n):
            fut = producer.send(topic, key=cc.message_key(i), value=cc.message_value(tag, i))
            fut.add_callback(on_ok(i))
            fut.add_errback(on_err(i))
        producer.flush(timeout)
    finally:
        producer.close(timeout=10)
    return acks, errors


def consumer(bootstrap: str, **conf) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         auto_offset_reset="earliest", **conf)


def poll_records(c: KafkaConsumer, until, timeout: float, on_record=None) -> list:
    """poll() until until(records) or timeout; returns (partition, offset, value)."""
    records = []
    deadline = time.monotonic() + timeout
    while not until(records) and time.monotonic() < deadline:
        for tp, batch in c.poll(timeout_ms=500).items():
            for r in batch:
                records.append((tp.partition, r.offset, r.value))
                if on_record is not None and on_record(records):
                    return records
    return records


def read_assigned(bootstrap: str, topic: str, partitions: int, n: int, timeout: float) -> list:
    c = consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        return poll_records(c, lambda rs: len(rs) >= n, timeout)
    finally:
        c.close()


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    topic = cc.unique("compat-produce")
    create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
    acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
    rep.verdict("produce", cc.verify_acks(args.messages, acks, errors),
                f"{args.messages} acked (acks=all, client defaults), per partition "
                f"{cc.partition_counts((p, o, None) for p, o in acks.values())}")
    records = read_assigned(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.messages,
                            args.stage_timeout)
    rep.verdict("fetch", cc.verify_read_back(topic, args.messages, records, acks),
                f"{len(records)} read back via assign(), order and offsets as acked")


class Member:
    """One group member: consumer created, polled and closed on its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str):
        self.conf = {"group_id": group}
        if assignor in ASSIGNORS:
            self.conf["partition_assignment_strategy"] = ASSIGNORS[assignor]
        self.bootstrap, self.topic = bootstrap, topic
        self._assigned: set[int] = set()
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = None
        try:
            c = consumer(self.bootstrap, **self.conf)
            c.subscribe([self.topic])
            while not self._stop.is_set():
                c.poll(timeout_ms=200)
                self._assigned = {tp.partition for tp in c.assignment()}
        except Exception as e:  # surfaced through .error in the check's detail
            self.error = repr(e)
        finally:
            self._assigned = set()
            if c is not None:
                c.close(autocommit=False)

    def assigned(self) -> set[int]:
        return set(self._assigned)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def check_group(rep: cc.Reporter, args) -> None:
    topic, group = cc.unique("compat-group"), cc.unique("compat-group")
    create_topic(args.bootstrap, topic, cc.GROUP_PARTITIONS, args.stage_timeout)
    problems, detail = cc.group_scenario(
        lambda k: Member(args.bootstrap, group, topic, args.assignor), args.stage_timeout)
    rep.verdict(cc.group_check_name(args.assignor), problems, detail)


def check_commit_resume(rep: cc.Reporter, args) -> None:
    if args.phase == "a":
        topic, group = cc.unique("compat-resume"), cc.unique("compat-resume")
        create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
        acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
        problems = cc.verify_acks(args.messages, acks, errors)
        if problems:
            rep.emit("commit-resume", "fail", "phase a produce: " + "; ".join(problems))
            return
        half = args.messages // 2
        c = consumer(args.bootstrap, group_id=group)
        try:
            c.subscribe([topic])
            # stop exactly at `half` records even if a poll returned more
            records = poll_records(c, lambda rs: len(rs) >= half, args.stage_timeout,
                                   on_record=lambda rs: len(rs) >= half)
            if len(records) < half:
                rep.emit("commit-resume", "fail", f"phase a consumed {len(records)} of {half}")
                return
            last: dict[int, int] = {}
            for p, o, _ in records:
                last[p] = o
            offsets = {TopicPartition(topic, p): OffsetAndMetadata(o + 1, "", -1)
                       for p, o in last.items()}
            c.commit(offsets)
            committed = {tp.partition: c.committed(tp) for tp in offsets}
        finally:
            c.close(autocommit=False)
        want = {tp.partition: om.offset for tp, om in offsets.items()}
        if committed != want:
            rep.emit("commit-resume", "fail", f"committed {want}, OffsetFetch says {committed}")
            return
        end: dict[int, int] = {}
        for p, o in acks.values():
            end[p] = max(end.get(p, 0), o + 1)
        cc.save_state(args.state, {"topic": topic, "group": group, "committed": committed,
                                   "consumed": [(p, o) for p, o, _ in records],
                                   "end_offsets": end})
        cc.log(f"phase a: consumed {len(records)}, committed {committed}")
        return
    state = cc.load_state(args.state)
    end = {int(p): o for p, o in state["end_offsets"].items()}
    committed = {int(p): o for p, o in state["committed"].items()}

    def done(records) -> bool:
        high: dict[int, int] = {}
        for p, o, _ in records:
            high[p] = max(high.get(p, -1), o)
        return all(high.get(p, committed.get(p, 0) - 1) + 1 >= e for p, e in end.items())

    c = consumer(args.bootstrap, group_id=state["group"])
    try:
        c.subscribe([state["topic"]])
        records = poll_records(c, done, args.stage_timeout)
    finally:
        c.close(autocommit=False)
    rep.verdict("commit-resume", cc.verify_resume(state, records),
                f"resumed after broker restart at {committed}, read the other {len(records)}")


def check_idempotent(rep: cc.Reporter, args) -> None:
    topic = cc.unique("compat-idempotent")
    create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
    acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout,
                           enable_idempotence=True)
    problems = cc.verify_acks(args.messages, acks, errors)
    if not problems:
        records = read_assigned(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.messages,
                                args.stage_timeout)
        problems = cc.verify_read_back(topic, args.messages, records, acks)
    rep.verdict("idempotent", problems,
                f"enable_idempotence=True: {args.messages} acked and read back once, in order")


def read_values(bootstrap: str, topic: str, want: int, timeout: float, isolation: str,
                starts: dict[int, int] | None = None) -> list[bytes]:
    """Values of every partition of topic (from `starts` or the beginning):
    until `want` records, then one more quiet second for any extra."""
    c = consumer(bootstrap, isolation_level=isolation)
    try:
        tps = [TopicPartition(topic, p) for p in range(cc.PRODUCE_PARTITIONS)]
        c.assign(tps)
        for tp in tps:
            if starts and starts.get(tp.partition, -1) >= 0:
                c.seek(tp, starts[tp.partition])
            else:
                c.seek_to_beginning(tp)
        records = poll_records(c, lambda rs: len(rs) >= want, timeout) if want else []
        records += poll_records(c, lambda rs: False, 1.0)
        return [v for _, _, v in records]
    finally:
        c.close()


def check_transactions(rep: cc.Reporter, args) -> None:
    """Committed and aborted transactions, then consume-transform-produce
    with the consumer's offsets committed in the producer's transactions
    (send_offsets_to_transaction): every committed input exactly once."""
    n, timeout, b = args.messages, args.stage_timeout, args.bootstrap
    src, dst = cc.unique("compat-txn-in"), cc.unique("compat-txn-out")
    for topic in (src, dst):
        create_topic(b, topic, cc.PRODUCE_PARTITIONS, timeout)
    aborted_tag, aborted = src + "-aborted", max(n // 2, 1)
    producer = KafkaProducer(bootstrap_servers=b, transactional_id=cc.unique("compat-txn"),
                             linger_ms=5)
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(n):
        producer.send(src, key=cc.message_key(i), value=cc.message_value(src, i))
    producer.commit_transaction()
    producer.begin_transaction()
    for i in range(aborted):
        producer.send(src, key=cc.message_key(i), value=cc.message_value(aborted_tag, i))
    producer.flush(timeout)
    producer.abort_transaction()
    producer.close()

    group = cc.unique("compat-txn-group")
    c = consumer(b, group_id=group, isolation_level="read_committed")
    c.subscribe([src])
    ctp = KafkaProducer(bootstrap_servers=b, transactional_id=cc.unique("compat-ctp"), linger_ms=5)
    ctp.init_transactions()
    processed, transactions = 0, 0
    deadline = time.monotonic() + timeout
    try:
        while processed < n and time.monotonic() < deadline:
            polled = c.poll(timeout_ms=500)
            if not polled:
                continue
            ctp.begin_transaction()
            offsets = {}
            for tp, batch in polled.items():
                for r in batch:
                    ctp.send(dst, key=r.key, value=b"out-" + r.value)
                    processed += 1
                offsets[tp] = OffsetAndMetadata(batch[-1].offset + 1, "", -1)
            ctp.send_offsets_to_transaction(offsets, c.group_metadata())
            ctp.commit_transaction()
            transactions += 1
        committed = {p: c.committed(TopicPartition(src, p)) for p in range(cc.PRODUCE_PARTITIONS)}
    finally:
        c.close()
        ctp.close()
    input_committed = read_values(b, src, n, timeout, "read_committed")
    input_all = read_values(b, src, n + aborted, timeout, "read_uncommitted")
    out = read_values(b, dst, n, timeout, "read_committed")
    starts = {p: (o if o is not None else -1) for p, o in committed.items()}
    lag = len(read_values(b, src, 0, timeout, "read_committed", starts))
    expected = {b"out-" + cc.message_value(src, i) for i in range(n)}
    seen_aborted = sum(1 for v in input_all if v.startswith(aborted_tag.encode()))
    problems = cc.verify_transactions(n, input_committed, aborted_tag, out, expected,
                                      seen_aborted, lag)
    if processed != n:
        problems.append(f"consume-transform-produce processed {processed} of {n}")
    rep.verdict("transactions", problems,
                f"{n} committed + {aborted} aborted; read_committed saw {len(input_committed)}, "
                f"read_uncommitted {len(input_all)}; {n} transformed once in {transactions} "
                f"transactions with send_offsets_to_transaction; lag after {lag}")


def main() -> int:
    args = cc.parse_args(__doc__.splitlines()[0])
    rep = cc.Reporter(CLIENT, VERSION)
    return cc.run_main(rep, args, {"produce-fetch": check_produce_fetch, "group": check_group,
                                   "commit-resume": check_commit_resume,
                                   "idempotent": check_idempotent,
                                   "transactions": check_transactions})


if __name__ == "__main__":
    raise SystemExit(main())
