"""ListOffsets through the consumer: offsets_for_times (by timestamp, and the
-2 earliest / -1 latest specials) and get_watermark_offsets."""

from confluent_kafka import OFFSET_END, TopicPartition

from chronik import DeliveryLog, consumer, create_topic, high_watermarks, producer, unique_topic

BASE_TS_MS = 1_700_000_000_000
COUNT = 10


def produce_timestamped(bootstrap, topic, linger_ms):
    """Message i has CreateTime BASE + i*1000 ms."""
    deliveries = DeliveryLog()
    p = producer(bootstrap, acks="all", linger_ms=linger_ms)
    for i in range(COUNT):
        p.produce(topic, value=b"ts-%d" % i, partition=0, timestamp=BASE_TS_MS + i * 1000,
                  on_delivery=deliveries.callback)
        if linger_ms == 0:
            p.flush(10)          # one batch per message
    assert p.flush(30) == 0 and deliveries.errors == []


def offsets_for_times(bootstrap, topic, timestamps):
    """One ListOffsets per timestamp: a request may name a partition only once."""
    c = consumer(bootstrap)
    offsets = []
    try:
        for ts in timestamps:
            (tp,) = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert tp.error is None, f"ListOffsets {topic}/0 @{ts}: {tp.error}"
            offsets.append(tp.offset)
    finally:
        c.close()
    return offsets


def check_timestamp_lookup(bootstrap, topic):
    cases = {
        BASE_TS_MS - 5000: 0,                   # before everything: first offset
        BASE_TS_MS: 0,                          # exact hit
        BASE_TS_MS + 3500: 4,                   # between: first with ts >= target
        BASE_TS_MS + 4000: 4,
        BASE_TS_MS + (COUNT - 1) * 1000: COUNT - 1,
        BASE_TS_MS + COUNT * 1000: OFFSET_END,  # after everything: none (-1)
        -2: 0,                                  # EARLIEST
        -1: COUNT,                              # LATEST = log end offset
    }
    got = offsets_for_times(bootstrap, topic, list(cases))
    assert dict(zip(cases, got)) == cases


def test_offsets_for_times_across_batches(broker, admin):
    topic = create_topic(admin, unique_topic("lo-batches"))
    produce_timestamped(broker.bootstrap, topic, linger_ms=0)
    check_timestamp_lookup(broker.bootstrap, topic)


def test_offsets_for_times_inside_one_batch(broker, admin):
    topic = create_topic(admin, unique_topic("lo-onebatch"))
    produce_timestamped(broker.bootstrap, topic, linger_ms=200)
    check_timestamp_lookup(broker.bootstrap, topic)


def test_watermarks(broker, admin):
    topic = create_topic(admin, unique_topic("wm"), partitions=2)
    assert high_watermarks(broker.bootstrap, topic, [0, 1]) == {0: (0, 0), 1: (0, 0)}
    produce_timestamped(broker.bootstrap, topic, linger_ms=5)
    assert high_watermarks(broker.bootstrap, topic, [0, 1]) == {0: (0, COUNT), 1: (0, 0)}
