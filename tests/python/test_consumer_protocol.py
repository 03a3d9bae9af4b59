"""KIP-848 consumer groups with a real client: confluent-kafka (librdkafka
>= 2.4) with group.protocol=consumer, so membership goes through
ConsumerGroupHeartbeat and the broker assigns. Two members consume every
message of a 6-partition topic exactly once between them; when one leaves,
the other takes over its partitions and reads on from the committed
offsets. Revoked partitions are committed in the revoke callback, so a
partition handed over mid-stream is read on from where its previous owner
stopped: the broker must accept that commit at the member's epoch, and hand
the partition over only after it.

Online migration (group.consumer.migration.policy=bidirectional): a classic
consumer (group.protocol=classic) is consuming when a KIP-848 consumer joins
its group: the group is upgraded, the classic member rejoins inside it and
the two split the partitions; when the KIP-848 member leaves, the group is
downgraded and the classic member gets every partition back. Every record
is delivered throughout."""

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, KafkaException, libversion

from chronik import admin_client, create_topic, produce_range, unique_topic

PARTITIONS = 6
TIMEOUT_S = 60


def member(bootstrap, group, name, protocol="consumer", strategy=None):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    }
    if protocol == "classic":
        conf.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                     "partition.assignment.strategy": strategy})
    return Consumer(conf)


def commit_revoked(consumer, partitions):
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as e:
        # Nothing consumed yet: nothing to commit.
        if e.args[0].code() != KafkaError._NO_OFFSET:
            raise


def owned(c):
    return sorted(tp.partition for tp in c.assignment())


def assert_consumer_group_of_two(admin, group):
    """The admin client describes the group with ConsumerGroupDescribe: a
    KIP-848 group of two members."""
    described = admin.describe_consumer_groups([group])[group].result(15)
    assert described.type == ConsumerGroupType.CONSUMER, described
    assert len(described.members) == 2, described


def poll_until(consumers, done, received, timeout=TIMEOUT_S):
    """Polls every consumer until done(); fails on a consumer error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            received.append((c, m.partition(), int(m.value())))
        if done():
            return True
    return False


def test_two_members_consume_everything_once_and_hand_over_on_leave(make_broker):
    assert libversion()[1] >= 0x020400FF, f"librdkafka {libversion()[0]} lacks group.protocol=consumer"
    b = make_broker("--wal-profile", "low", "--group-consumer-heartbeat-interval-ms", "500")
    topic = unique_topic("kip848")
    create_topic(admin_client(b.bootstrap), topic, partitions=PARTITIONS)
    produce_range(b.bootstrap, topic, 0, 600, PARTITIONS)
    group = unique_topic("grp848")

    first, second = member(b.bootstrap, group, "first"), member(b.bootstrap, group, "second")
    members = [first, second]
    for c in members:
        c.subscribe([topic], on_revoke=commit_revoked)
    received = []
    split = poll_until(members, lambda: len(received) >= 600 and all(len(owned(c)) == 3 for c in members), received)
    assignment = [owned(c) for c in members]
    assert split, f"no 3/3 split: {assignment}, received {len(received)}"
    assert sorted(p for a in assignment for p in a) == list(range(PARTITIONS)), assignment
    # A short extra wait would show anything read twice.
    poll_until(members, lambda: False, received, timeout=2)
    values = sorted(v for *_, v in received)
    assert values == list(range(600)), f"not each message exactly once: {len(values)} read"
    # The group runs the new protocol (the admin client describes it with
    # ConsumerGroupDescribe).
    admin = admin_client(b.bootstrap)  # kept alive until the future resolves
    assert_consumer_group_of_two(admin, group)
    for c in members:
        c.commit(asynchronous=False)

    second.close()
    produce_range(b.bootstrap, topic, 600, 1200, PARTITIONS)
    after = []
    took_over = poll_until([first], lambda: owned(first) == list(range(PARTITIONS)) and len(after) >= 600, after)
    assert took_over, f"the remaining member owns {owned(first)}, read {len(after)}"
    poll_until([first], lambda: False, after, timeout=2)
    values = sorted(v for *_, v in after)
    assert values == list(range(600, 1200)), f"hand-over re-read or missed messages: {values[:10]}... ({len(values)})"
    first.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_classic_group_upgrades_online_and_downgrades_back(make_broker, strategy):
    """An eager classic client revokes everything before it rejoins; a
    cooperative one rejoins owning its partitions and gives up only those
    the broker takes away."""
    assert libversion()[1] >= 0x020400FF, f"librdkafka {libversion()[0]} lacks group.protocol=consumer"
    b = make_broker("--wal-profile", "low", "--group-consumer-heartbeat-interval-ms", "500",
                    "--group-initial-rebalance-delay-ms", "0",
                    "--group-consumer-migration-policy", "bidirectional")
    topic = unique_topic("migrate")
    admin = admin_client(b.bootstrap)  # kept alive until its futures resolve
    create_topic(admin, topic, partitions=PARTITIONS)
    group = unique_topic("grpmig")
    produce_range(b.bootstrap, topic, 0, 600, PARTITIONS)

    classic = member(b.bootstrap, group, "classic", protocol="classic", strategy=strategy)
    # Lost partitions (an ILLEGAL_GENERATION) cannot be committed: they are
    # read again from the last commit.
    classic.subscribe([topic], on_revoke=commit_revoked, on_lost=lambda c, p: None)
    received = []
    alone = poll_until([classic], lambda: len(received) >= 600 and owned(classic) == list(range(PARTITIONS)),
                       received)
    assert alone, f"the classic member owns {owned(classic)}, read {len(received)}"
    classic.commit(asynchronous=False)

    # A KIP-848 member joins the classic group: it is upgraded online.
    modern = member(b.bootstrap, group, "modern")
    modern.subscribe([topic], on_revoke=commit_revoked)
    both = [classic, modern]
    produce_range(b.bootstrap, topic, 600, 1200, PARTITIONS)

    def split():
        a, m = owned(classic), owned(modern)
        return a and m and sorted(a + m) == list(range(PARTITIONS))

    shared = poll_until(both, lambda: split() and len({v for *_, v in received}) >= 1200, received)
    assignment = {"classic": owned(classic), "modern": owned(modern)}
    assert shared, f"no split between the two members: {assignment}, read {len({v for *_, v in received})}"
    assert not set(assignment["classic"]) & set(assignment["modern"]), assignment
    assert_consumer_group_of_two(admin, group)
    for c in both:
        c.commit(asynchronous=False)

    # The KIP-848 member leaves: the group is downgraded and the classic
    # member takes every partition back.
    modern.close()
    produce_range(b.bootstrap, topic, 1200, 1800, PARTITIONS)
    back = poll_until([classic], lambda: owned(classic) == list(range(PARTITIONS))
                      and len({v for *_, v in received}) >= 1800, received)
    assert back, f"the classic member owns {owned(classic)}, read {len({v for *_, v in received})}"
    values = {v for *_, v in received}
    assert values == set(range(1800)), f"records never delivered: {sorted(set(range(1800)) - values)[:10]}"
    described = admin.describe_consumer_groups([group])[group].result(15)
    assert described.type == ConsumerGroupType.CLASSIC, described
    classic.close()


def test_a_regex_resolves_on_the_broker_over_whole_names_internal_topics_included(make_broker):
    """KIP-848 broker-side regex resolution as Kafka 4.x's coordinator does
    it: matched against whole topic names (`<p>orders` does not take
    `<p>orders-v2`), internal topics included (`^__consumer_offsets$` is
    assigned), and re-resolved when a matching topic appears."""
    b = make_broker("--wal-profile", "low", "--group-consumer-heartbeat-interval-ms", "500")
    admin = admin_client(b.bootstrap)
    prefix = unique_topic("rx") + "-"
    for name in (prefix + "orders", prefix + "orders-v2"):
        create_topic(admin, name, partitions=1)
    c = member(b.bootstrap, unique_topic("grprx"), "regex")
    c.subscribe(["^" + prefix + "orders$", "^__consumer_offsets$"])

    def assigned():
        return sorted({tp.topic for tp in c.assignment()})

    def poll_for(want, timeout=TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and assigned() != want:
            c.poll(0.1)
        return assigned()

    assert poll_for(sorted([prefix + "orders", "__consumer_offsets"])) == sorted(
        [prefix + "orders", "__consumer_offsets"])
    c.unsubscribe()
    c.subscribe(["^" + prefix + "late-.*"])
    assert poll_for([]) == []
    create_topic(admin, prefix + "late-1", partitions=2)
    assert poll_for([prefix + "late-1"]) == [prefix + "late-1"]
    assert sorted(tp.partition for tp in c.assignment()) == [0, 1]
    c.close()
