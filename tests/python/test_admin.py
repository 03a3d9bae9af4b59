"""AdminClient against the broker: CreateTopics (with config overrides and
validate-only), Metadata, DescribeConfigs (topic and broker), DeleteTopics."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

from chronik import DeliveryLog, create_topic, high_watermarks, producer, unique_topic, wait_for_topic


def describe(admin, rtype, name, timeout=15):
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res], request_timeout=timeout)[res].result(timeout)


def error_code(exc_info):
    err = exc_info.value.args[0]
    assert isinstance(err, KafkaError), f"unexpected exception payload {err!r}"
    return err.code()


def test_create_topic_with_config_overrides(broker, admin):
    name = unique_topic("cfg")
    overrides = {"retention.ms": "3600000", "cleanup.policy": "delete", "max.message.bytes": "2097152"}
    create_topic(admin, name, partitions=3, config=overrides)

    entries = describe(admin, ResourceType.TOPIC, name)
    for key, value in overrides.items():
        assert key in entries, f"DescribeConfigs of {name} lacks {key}: {sorted(entries)}"
        assert entries[key].value == value, f"{key}: {entries[key].value!r} != {value!r}"
        assert not entries[key].is_default, f"{key} is an override but reported as default"


def test_describe_configs_broker(broker, admin):
    md = admin.list_topics(timeout=10)
    assert len(md.brokers) == 1
    broker_id = next(iter(md.brokers))
    entries = describe(admin, ResourceType.BROKER, str(broker_id))
    assert entries, "broker DescribeConfigs returned no entries"
    for name, entry in entries.items():
        assert entry.name == name


def test_list_topics_metadata(broker, admin):
    name = create_topic(admin, unique_topic("md"), partitions=4)
    md = admin.list_topics(timeout=10)
    assert name in md.topics
    (broker_id, b), = md.brokers.items()
    # the advertised address defaults to the bound listen address
    assert f"{b.host}:{b.port}" == broker.bootstrap
    t = md.topics[name]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2, 3]
    for p in t.partitions.values():
        assert p.error is None
        assert p.leader == broker_id
        assert list(p.replicas) == [broker_id]
        assert list(p.isrs) == [broker_id]


def test_create_existing_topic_fails(broker, admin):
    name = create_topic(admin, unique_topic("dup"))
    fut = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name]
    with pytest.raises(KafkaException) as exc:
        fut.result(15)
    assert error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS


def test_create_validate_only_creates_nothing(broker, admin):
    name = unique_topic("validate")
    fut = admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)],
                              validate_only=True)[name]
    assert fut.result(15) is None
    assert name not in admin.list_topics(timeout=10).topics


def test_delete_topic_removes_data(broker, admin):
    name = create_topic(admin, unique_topic("del"), partitions=2)
    deliveries = DeliveryLog()
    p = producer(broker.bootstrap, acks="all")
    for i in range(50):
        p.produce(name, value=b"v%d" % i, partition=i % 2, on_delivery=deliveries.callback)
    assert p.flush(30) == 0 and deliveries.errors == []

    assert admin.delete_topics([name], operation_timeout=15)[name].result(15) is None
    deadline = time.monotonic() + 15
    while name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{name} still listed 15 s after DeleteTopics"
        time.sleep(0.1)

    # the same name can be created again and starts empty
    create_topic(admin, name, partitions=1)
    wait_for_topic(admin, name, 1)
    assert high_watermarks(broker.bootstrap, name, [0]) == {0: (0, 0)}


def test_delete_unknown_topic_fails(broker, admin):
    name = unique_topic("never-created")
    fut = admin.delete_topics([name], operation_timeout=15)[name]
    with pytest.raises(KafkaException) as exc:
        fut.result(15)
    assert error_code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART
