"""Produce with confluent-kafka, read back with assign(), compare exactly.

Every compression codec x every acks level: each message comes back exactly
once, in produce order per partition, at contiguous offsets from 0, with its
key (including null keys), value (including null values), headers (including
repeated keys, null header values and no headers at all) and CreateTime
timestamp; the partition's ListOffsets high watermark equals the count sent.
"""

import os

import pytest

from chronik import DeliveryLog, create_topic, high_watermarks, producer, read_partitions, unique_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]
PARTITIONS = 2
MESSAGES = 400
BASE_TS_MS = 1_700_000_000_000


def message(i: int, tag: str):
    """Deterministic message i: (key, value, headers, timestamp_ms)."""
    key = None if i % 50 == 7 else f"key-{i}".encode()
    if i % 37 == 5:
        value = None                                  # a tombstone
    elif i % 41 == 3:
        value = b""                                   # empty, not null
    else:
        # compressible text of varying length, plus a few random-looking bytes
        filler = (f"{tag}|{i:06d}|" * (1 + i % 60)).encode()
        value = filler + bytes((i * 7 + j) % 256 for j in range(i % 17))
    if i % 10 == 0:
        headers = None
    elif i % 10 == 1:
        headers = [("seq", str(i).encode()), ("dup", b"a"), ("dup", b"b"), ("nullvalue", None)]
    else:
        headers = [("seq", str(i).encode()), ("tag", tag.encode())]
    return key, value, headers, BASE_TS_MS + i


def produce_all(bootstrap, topic, tag, count, partitions, **conf):
    """Send message(i) to partition i % partitions; returns the DeliveryLog."""
    deliveries = DeliveryLog()
    p = producer(bootstrap, **conf)
    for i in range(count):
        key, value, headers, ts = message(i, tag)
        p.produce(topic, value=value, key=key, headers=headers, partition=i % partitions,
                  timestamp=ts, on_delivery=deliveries.callback)
        p.poll(0)
    remaining = p.flush(30)
    assert remaining == 0, f"{remaining} messages still in the producer queue after 30 s"
    assert deliveries.errors == [], f"delivery errors: {deliveries.errors[:5]}"
    assert len(deliveries.ok) == count
    return deliveries


def check_partition(msgs, partition, tag, count, partitions):
    """Messages of one partition are exactly message(i) for i = partition, partition+P, ..."""
    expected_ids = list(range(partition, count, partitions))
    assert len(msgs) == len(expected_ids), f"partition {partition}: {len(msgs)} != {len(expected_ids)}"
    for offset, (m, i) in enumerate(zip(msgs, expected_ids)):
        key, value, headers, ts = message(i, tag)
        where = f"partition {partition} offset {m.offset()} (message {i})"
        assert m.offset() == offset, f"{where}: expected offset {offset}"
        assert m.key() == key, f"{where}: key {m.key()!r} != {key!r}"
        assert m.value() == value, f"{where}: value differs ({len(m.value() or b'')} vs {len(value or b'')} bytes)"
        assert m.headers() == headers, f"{where}: headers {m.headers()!r} != {headers!r}"
        ts_type, ts_ms = m.timestamp()
        assert (ts_type, ts_ms) == (1, ts), f"{where}: timestamp {(ts_type, ts_ms)} != (CreateTime, {ts})"


@pytest.mark.parametrize("acks", ACKS)
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker, admin, codec, acks):
    topic = create_topic(admin, unique_topic(f"rt-{codec}-acks{acks}"), partitions=PARTITIONS)
    tag = f"{codec}/{acks}"
    deliveries = produce_all(broker.bootstrap, topic, tag, MESSAGES, PARTITIONS,
                             acks=acks, compression_type=codec)

    if acks != "0":
        # the broker assigned contiguous offsets in produce order
        for part in range(PARTITIONS):
            offsets = [o for p, o, _, _ in deliveries.ok if p == part]
            assert offsets == list(range(len(offsets))), f"partition {part} acked offsets {offsets[:10]}..."

    expected = {p: len(range(p, MESSAGES, PARTITIONS)) for p in range(PARTITIONS)}
    got = read_partitions(broker.bootstrap, topic, expected)
    for part in range(PARTITIONS):
        check_partition(got[part], part, tag, MESSAGES, PARTITIONS)
    # nothing beyond what was sent: the log ends exactly there
    assert high_watermarks(broker.bootstrap, topic, range(PARTITIONS)) == {
        p: (0, n) for p, n in expected.items()
    }


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_large_message(broker, admin, codec):
    topic = create_topic(admin, unique_topic(f"large-{codec}"))
    values = [os.urandom(512 * 1024), b"x" * 900_000, os.urandom(10)]
    deliveries = DeliveryLog()
    p = producer(broker.bootstrap, acks="all", compression_type=codec)
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=deliveries.callback)
    assert p.flush(30) == 0
    assert deliveries.errors == []
    got = read_partitions(broker.bootstrap, topic, {0: len(values)})[0]
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == [0, 1, 2]


def test_read_from_middle(broker, admin):
    """A fetch starting inside a batch returns nothing before the asked offset."""
    topic = create_topic(admin, unique_topic("middle"))
    produce_all(broker.bootstrap, topic, "mid", 100, 1, acks="all", linger_ms=50)
    got = read_partitions(broker.bootstrap, topic, {0: 58}, start={0: 42})[0]
    assert [m.offset() for m in got] == list(range(42, 100))
    assert [m.value() for m in got] == [message(i, "mid")[1] for i in range(42, 100)]
