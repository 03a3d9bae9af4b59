"""Durability across restarts on the same data dir: graceful (SIGTERM, exit
status 0) and crash (SIGKILL) restarts keep every acknowledged message, the
topic's partitions and config overrides, and offsets continue after the old
log end."""

from confluent_kafka.admin import ConfigResource, ResourceType

from chronik import (DeliveryLog, admin_client, create_topic, high_watermarks, producer,
                     read_partitions, unique_topic, wait_for_topic)

PARTITIONS = 2


def produce(bootstrap, topic, start, count):
    deliveries = DeliveryLog()
    p = producer(bootstrap, acks="all", compression_type="lz4")
    for i in range(start, start + count):
        p.produce(topic, key=b"k%d" % i, value=b"restart-%06d" % i, partition=i % PARTITIONS,
                  headers=[("i", str(i).encode())], on_delivery=deliveries.callback)
        p.poll(0)
    assert p.flush(30) == 0
    assert deliveries.errors == [], deliveries.errors[:5]
    return deliveries


def expected_values(total):
    return {p: [b"restart-%06d" % i for i in range(p, total, PARTITIONS)] for p in range(PARTITIONS)}


def check_log(bootstrap, topic, total):
    want = expected_values(total)
    assert high_watermarks(bootstrap, topic, range(PARTITIONS)) == {p: (0, len(v)) for p, v in want.items()}
    got = read_partitions(bootstrap, topic, {p: len(v) for p, v in want.items()})
    for p, values in want.items():
        assert [m.value() for m in got[p]] == values, f"partition {p} differs after restart"
        assert [m.offset() for m in got[p]] == list(range(len(values)))


def test_data_survives_graceful_restart(make_broker):
    b = make_broker("--wal-profile", "medium", "--auto-create-topics", "false")
    topic = create_topic(admin_client(b.bootstrap), unique_topic("restart"), partitions=PARTITIONS,
                         config={"retention.ms": "86400000"})
    produce(b.bootstrap, topic, 0, 2000)
    check_log(b.bootstrap, topic, 2000)

    rc = b.restart()
    assert rc == 0, f"exit status {rc} after SIGTERM (graceful shutdown expected); stderr:\n{b.stderr_tail()}"

    admin = admin_client(b.bootstrap)
    wait_for_topic(admin, topic, PARTITIONS)
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(15)
    assert entries["retention.ms"].value == "86400000", "topic config override lost on restart"
    check_log(b.bootstrap, topic, 2000)

    # appends continue from the recovered log end offsets
    d = produce(b.bootstrap, topic, 2000, 100)
    for part in range(PARTITIONS):
        offsets = sorted(o for p, o, _, _ in d.ok if p == part)
        assert offsets == list(range(1000, 1050)), f"partition {part} offsets after restart {offsets[:5]}..."
    check_log(b.bootstrap, topic, 2100)


def test_acked_data_survives_sigkill(make_broker):
    b = make_broker("--wal-profile", "low", "--auto-create-topics", "false")
    topic = create_topic(admin_client(b.bootstrap), unique_topic("crash"), partitions=PARTITIONS)
    produce(b.bootstrap, topic, 0, 3000)
    b.kill()
    b.start()
    wait_for_topic(admin_client(b.bootstrap), topic, PARTITIONS)
    check_log(b.bootstrap, topic, 3000)
