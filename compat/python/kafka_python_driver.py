"""Compatibility driver for Python kafka-python (pure-Python client) - compat/README.md.

Runs one check per invocation against --bootstrap and prints its JSON result
line(s). Owns only the kafka-python calls; messages, verification and the
checks' steps come from compat_common. kafka-python objects are not
thread-safe: every consumer lives and dies on one thread.
"""

from __future__ import annotations

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


def assign_from(c: KafkaConsumer, topic: str, partitions: int, starts: dict[int, int] | None = None) -> None:
    """assign() partitions 0..partitions-1 of topic, from the beginning but
    where starts[p] is an offset (>= 0)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    for p, o in (starts or {}).items():
        if o >= 0:
            c.seek(tps[p], o)


def read_assigned(bootstrap: str, topic: str, partitions: int, n: int, timeout: float) -> list:
    c = consumer(bootstrap)
    try:
        assign_from(c, topic, partitions)
        return poll_records(c, lambda rs: len(rs) >= n, timeout)
    finally:
        c.close()


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    cc.produce_fetch_check(rep, args, create_topic, produce, read_assigned, "acks=all, client defaults")


class Member(cc.ThreadMember):
    """One group member: consumer created, polled and closed on its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str):
        self.conf = {"group_id": group}
        if assignor in ASSIGNORS:
            self.conf["partition_assignment_strategy"] = ASSIGNORS[assignor]
        self.bootstrap, self.topic = bootstrap, topic
        super().__init__()

    def run(self) -> None:
        c = consumer(self.bootstrap, **self.conf)
        try:
            c.subscribe([self.topic])
            while not self.stopping():
                c.poll(timeout_ms=200)
                self._assigned = {tp.partition for tp in c.assignment()}
        finally:
            c.close(autocommit=False)


def check_group(rep: cc.Reporter, args) -> None:
    cc.group_check(rep, args, create_topic,
                   lambda group, topic: Member(args.bootstrap, group, topic, args.assignor))


def check_commit_resume(rep: cc.Reporter, args) -> None:
    timeout = args.stage_timeout

    def consume_commit(topic: str, group: str, half: int) -> tuple[list, dict]:
        c = consumer(args.bootstrap, group_id=group)
        try:
            c.subscribe([topic])
            # stop exactly at `half` records even if a poll returned more
            records = poll_records(c, lambda rs: len(rs) >= half, timeout,
                                   on_record=lambda rs: len(rs) >= half)
            if len(records) < half:
                return records, {}
            offsets = {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                       for p, o in cc.next_offsets(records).items()}
            c.commit(offsets)
            return records, {tp.partition: c.committed(tp) for tp in offsets}
        finally:
            c.close(autocommit=False)

    def read_group(group: str, topic: str, done) -> list:
        c = consumer(args.bootstrap, group_id=group)
        try:
            c.subscribe([topic])
            return poll_records(c, done, timeout)
        finally:
            c.close(autocommit=False)

    cc.commit_resume_check(rep, args, create_topic, produce, consume_commit, read_group)


def check_idempotent(rep: cc.Reporter, args) -> None:
    cc.idempotent_check(rep, args, create_topic, lambda *a: produce(*a, enable_idempotence=True),
                        read_assigned, "enable_idempotence=True")


def read_values(bootstrap: str, topic: str, want: int, timeout: float, isolation: str,
                starts: dict[int, int] | None = None) -> list[bytes]:
    """Values of every partition of topic (from `starts` or the beginning):
    until `want` records, then one more quiet second for any extra."""
    c = consumer(bootstrap, isolation_level=isolation)
    try:
        assign_from(c, topic, cc.PRODUCE_PARTITIONS, starts)
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
    aborted_tag, aborted = cc.aborted_batch(src, n)
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
    cc.transactions_verdict(rep, args, src, dst, read_values, committed, processed, transactions,
                            "send_offsets_to_transaction")


def main() -> int:
    return cc.driver_main(__doc__, CLIENT, VERSION, cc.checks_in(globals()))


if __name__ == "__main__":
    raise SystemExit(main())
