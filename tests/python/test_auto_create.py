"""Producing to a topic that does not exist: created with the broker's default
partition count when --auto-create-topics is true, refused when false."""

from confluent_kafka import KafkaError

from chronik import (DEFAULT_PARTITIONS, DeliveryLog, admin_client, producer, read_partitions,
                     unique_topic, wait_for_topic)


def test_produce_auto_creates_topic(broker, admin):
    topic = unique_topic("auto")
    assert topic not in admin.list_topics(timeout=10).topics
    deliveries = DeliveryLog()
    p = producer(broker.bootstrap, acks="all")
    values = [b"auto-%d" % i for i in range(60)]
    for i, v in enumerate(values):
        p.produce(topic, key=b"k%d" % i, value=v, on_delivery=deliveries.callback)
    assert p.flush(30) == 0
    assert deliveries.errors == [], deliveries.errors[:5]

    wait_for_topic(admin, topic, DEFAULT_PARTITIONS)
    per_partition = {}
    for part, _, _, _ in deliveries.ok:
        per_partition[part] = per_partition.get(part, 0) + 1
    assert set(per_partition) <= set(range(DEFAULT_PARTITIONS))
    got = read_partitions(broker.bootstrap, topic, per_partition)
    assert sorted(m.value() for ms in got.values() for m in ms) == sorted(values)


def test_no_auto_create_when_disabled(make_broker):
    b = make_broker("--auto-create-topics", "false")
    topic = unique_topic("noauto")
    deliveries = DeliveryLog()
    p = producer(b.bootstrap, acks="all", message_timeout_ms=4000,
                 topic_metadata_propagation_max_ms=1000)
    p.produce(topic, value=b"nowhere", on_delivery=deliveries.callback)
    assert p.flush(30) == 0
    assert deliveries.ok == [], "a produce to a missing topic succeeded with auto-create off"
    assert len(deliveries.errors) == 1
    assert deliveries.errors[0][0].code() in (
        KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT,
    ), deliveries.errors[0][0]
    assert topic not in admin_client(b.bootstrap).list_topics(timeout=10).topics
