"""Consumer groups with confluent-kafka (librdkafka): three members split a
6-partition topic 2/2/2, the group rebalances when one leaves, and after a
broker restart a new member resumes from the committed offsets without
re-reading anything that was committed."""

import time

from confluent_kafka import Consumer

from chronik import admin_client, create_topic, produce_range, unique_topic

PARTITIONS = 6
GROUP_TIMEOUT_S = 30


def member(bootstrap, group, name, strategy):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "partition.assignment.strategy": strategy,
    })
    return c


def owned(c):
    return sorted(tp.partition for tp in c.assignment())


def poll_until(consumers, done, received, timeout=GROUP_TIMEOUT_S):
    """Polls every consumer (rebalance callbacks run inside poll) until done()."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                received.append((c, m.partition(), m.offset(), int(m.value())))
        if done():
            return True
    return False


def test_three_members_split_rebalance_and_resume_after_restart(make_broker):
    b = make_broker("--wal-profile", "low")
    topic = unique_topic("groups")
    create_topic(admin_client(b.bootstrap), topic, partitions=PARTITIONS)
    produce_range(b.bootstrap, topic, 0, 600, PARTITIONS)
    group = unique_topic("grp")

    members = [member(b.bootstrap, group, f"m{i}", "range") for i in range(3)]
    for c in members:
        c.subscribe([topic])
    received = []
    split = poll_until(members, lambda: len(received) >= 600 and all(len(owned(c)) == 2 for c in members), received)
    assignment = [owned(c) for c in members]
    assert split, f"no 2/2/2 split: {assignment}, received {len(received)}"
    assert sorted(p for a in assignment for p in a) == list(range(PARTITIONS))
    assert sorted(v for *_, v in received) == list(range(600)), "each message once across the group"
    for c in members:
        c.commit(asynchronous=False)

    leaver = members.pop()
    leaver.close()
    rebalanced = poll_until(members, lambda: sorted(p for c in members for p in owned(c)) == list(range(PARTITIONS)), received)
    assert rebalanced, f"the two remaining members do not cover all partitions: {[owned(c) for c in members]}"
    assert sorted(len(owned(c)) for c in members) == [3, 3]
    for c in members:
        c.close()

    b.restart()
    produce_range(b.bootstrap, topic, 600, 660, PARTITIONS)
    resumed = member(b.bootstrap, group, "after-restart", "range")
    resumed.subscribe([topic])
    after = []
    poll_until([resumed], lambda: len(after) >= 60, after)
    # Anything re-read would show up within a short extra wait.
    poll_until([resumed], lambda: False, after, timeout=2)
    resumed.close()
    values = sorted(v for *_, v in after)
    assert values == list(range(600, 660)), f"resume re-read or missed messages: {values[:10]}... ({len(values)})"


def test_cooperative_sticky_and_roundrobin_assignors_split_evenly(broker):
    topic = unique_topic("assignors")
    create_topic(admin_client(broker.bootstrap), topic, partitions=PARTITIONS)
    for strategy in ("roundrobin", "cooperative-sticky"):
        group = unique_topic(f"grp-{strategy}")
        members = [member(broker.bootstrap, group, f"{strategy}-{i}", strategy) for i in range(3)]
        for c in members:
            c.subscribe([topic])
        ok = poll_until(members, lambda: all(len(owned(c)) == 2 for c in members), [])
        assignment = [owned(c) for c in members]
        for c in members:
            c.close()
        assert ok, f"{strategy}: no 2/2/2 split: {assignment}"
        assert sorted(p for a in assignment for p in a) == list(range(PARTITIONS))
