"""Transactions (KIP-98) with confluent-kafka's transactional API.

What a read_committed consumer sees is the contract: only committed
transactions' records, never an aborted or still-open one; offsets sent to a
transaction count only when it commits; a second producer with the same
transactional.id fences the first; a transaction left open past its timeout
is aborted by the coordinator.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

PARTITIONS = 3


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_topic(admin, partitions=PARTITIONS) -> str:
    name = unique("txn")
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    return name


def txn_producer(bootstrap, txn_id, timeout_ms=60000) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": timeout_ms, "linger.ms": 5})
    p.init_transactions(30)
    return p


def read_all(bootstrap, topic, isolation, expect=None, timeout=15.0, idle=2.0):
    """Values in `topic` as a consumer with `isolation` sees them: until
    `expect` values arrived, or nothing new came for `idle` seconds."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.subscribe([topic])
    values, deadline, last = [], time.monotonic() + timeout, time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if expect is None and values and time.monotonic() - last > idle:
                    break
                if expect is not None and len(values) >= expect:
                    break
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            values.append(m.value().decode())
            last = time.monotonic()
    finally:
        c.close()
    return values


def produce(p, topic, values):
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % PARTITIONS)


def test_committed_records_are_visible_and_aborted_ones_never(broker, admin):
    topic = make_topic(admin)
    p = txn_producer(broker.bootstrap, unique("tx"))
    p.begin_transaction()
    produce(p, topic, [f"c1-{i}" for i in range(30)])
    p.commit_transaction(30)
    p.begin_transaction()
    produce(p, topic, [f"a-{i}" for i in range(20)])
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    produce(p, topic, [f"c2-{i}" for i in range(10)])
    p.commit_transaction(30)

    committed = read_all(broker.bootstrap, topic, "read_committed", expect=40)
    assert sorted(committed) == sorted([f"c1-{i}" for i in range(30)] + [f"c2-{i}" for i in range(10)])
    everything = read_all(broker.bootstrap, topic, "read_uncommitted", expect=60)
    assert len(everything) == 60, "read_uncommitted sees the aborted records too"


def test_an_open_transaction_holds_read_committed_consumers_back(broker, admin):
    topic = make_topic(admin, partitions=1)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"before", partition=0)
    plain.flush(10)
    p = txn_producer(broker.bootstrap, unique("tx"))
    p.begin_transaction()
    p.produce(topic, value=b"inside", partition=0)
    p.flush(10)
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(10)
    # the last stable offset stops at the open transaction's first record
    seen = read_all(broker.bootstrap, topic, "read_committed", timeout=6, idle=3)
    assert seen == ["before"], seen
    p.commit_transaction(30)
    seen = read_all(broker.bootstrap, topic, "read_committed", expect=3)
    assert seen == ["before", "inside", "after"], seen


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(broker, admin):
    topic = make_topic(admin)
    txn_id = unique("tx")
    first = txn_producer(broker.bootstrap, txn_id)
    first.begin_transaction()
    produce(first, topic, ["zombie-1"])
    first.flush(10)
    second = txn_producer(broker.bootstrap, txn_id)  # aborts first's open transaction
    with pytest.raises(KafkaException) as fenced:
        # first's transaction is still open as far as it knows
        produce(first, topic, ["zombie-2"])
        first.commit_transaction(30)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].code() in (
        KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), fenced.value
    second.begin_transaction()
    produce(second, topic, ["live-1"])
    second.commit_transaction(30)
    seen = read_all(broker.bootstrap, topic, "read_committed", expect=1, idle=3)
    assert seen == ["live-1"], seen


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(broker, admin):
    source, sink = make_topic(admin, partitions=1), make_topic(admin, partitions=1)
    seed = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        seed.produce(source, value=f"in-{i}".encode(), partition=0)
    seed.flush(10)
    group = unique("ctp")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.subscribe([source])
    batch = []
    deadline = time.monotonic() + 20
    while len(batch) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            batch.append(m)
    assert len(batch) == 10
    p = txn_producer(broker.bootstrap, unique("tx"))

    def transform(first, last, commit):
        p.begin_transaction()
        for m in batch[first:last]:
            p.produce(sink, value=b"out-" + m.value(), partition=0)
        p.send_offsets_to_transaction([TopicPartition(source, 0, batch[last - 1].offset() + 1)],
                                      c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    transform(0, 5, commit=True)
    assert c.committed([TopicPartition(source, 0)], 10)[0].offset == 5
    transform(5, 10, commit=False)
    assert c.committed([TopicPartition(source, 0)], 10)[0].offset == 5, "an aborted transaction's offsets are dropped"
    transform(5, 10, commit=True)
    assert c.committed([TopicPartition(source, 0)], 10)[0].offset == 10
    c.close()
    out = read_all(broker.bootstrap, sink, "read_committed", expect=10)
    assert sorted(out) == sorted(f"out-in-{i}" for i in range(10)), "each input transformed exactly once"


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(broker, admin):
    topic = make_topic(admin, partitions=1)
    p = txn_producer(broker.bootstrap, unique("tx"), timeout_ms=2000)
    p.begin_transaction()
    p.produce(topic, value=b"abandoned", partition=0)
    p.flush(10)
    time.sleep(5)
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=b"later", partition=0)
    plain.flush(10)
    seen = read_all(broker.bootstrap, topic, "read_committed", expect=1, idle=3)
    assert seen == ["later"], "the timed-out transaction was aborted, and no longer holds consumers back"
