"""ACLs through confluent-kafka (librdkafka): AdminClient create_acls /
describe_acls / delete_acls against a broker running Kafka's
StandardAuthorizer, and what a producer and a consumer of this connection
(User:ANONYMOUS over PLAINTEXT) then see: TOPIC_AUTHORIZATION_FAILED on a
topic an ACL reserves for someone else, GROUP_AUTHORIZATION_FAILED for a
denied group, while open topics keep working."""

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   ResourcePatternType, ResourceType)

from chronik import DeliveryLog, admin_client, create_topic, producer, unique_topic

AUTHORIZER = ("--authorizer-class-name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "--allow-everyone-if-no-acl-found")


def binding(rtype, name, principal, op, perm, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def everything():
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                            AclOperation.ANY, AclPermissionType.ANY)


def test_acls_created_listed_enforced_and_deleted(make_broker):
    b = make_broker(*AUTHORIZER, "--group-initial-rebalance-delay-ms", "0")
    admin = admin_client(b.bootstrap)
    open_topic, secret = unique_topic("acl-open"), unique_topic("acl-secret")
    create_topic(admin, open_topic)
    create_topic(admin, secret)
    denied_group = unique_topic("acl-group")

    futures = admin.create_acls([
        binding(ResourceType.TOPIC, secret, "User:alice", AclOperation.READ, AclPermissionType.ALLOW),
        binding(ResourceType.GROUP, denied_group, "User:ANONYMOUS", AclOperation.READ,
                AclPermissionType.DENY),
    ])
    for f in futures.values():
        assert f.result(15) is None
    listed = admin.describe_acls(everything()).result(15)
    assert {(a.name, a.principal, a.permission_type) for a in listed} == {
        (secret, "User:alice", AclPermissionType.ALLOW),
        (denied_group, "User:ANONYMOUS", AclPermissionType.DENY),
    }

    # produce: the secret topic is refused, the open one served
    p = producer(b.bootstrap, **{"message.timeout.ms": 10000})
    log = DeliveryLog()
    p.produce(secret, key=b"secret", value=b"x", on_delivery=log.callback)
    p.produce(open_topic, key=b"open", value=b"y", on_delivery=log.callback)
    p.flush(20)
    assert [key for _, _, key, _ in log.ok] == [b"open"], log
    assert [(err.code(), key) for err, key in log.errors] == [
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, b"secret")], log

    # consume: a group READ-denied to this principal cannot commit
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": denied_group,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(open_topic, 0, 0)])
        msg, deadline = None, time.time() + 20
        while msg is None and time.time() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is None and msg.value() == b"y"
        try:
            c.commit(message=msg, asynchronous=False)
            raise AssertionError("a commit to a READ-denied group succeeded")
        except Exception as e:  # KafkaException carrying the broker's error
            assert e.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, e
    finally:
        c.close()

    # delete everything; the secret topic opens up again (no ACL covers it)
    deleted = admin.delete_acls([everything()])
    assert len(list(deleted.values())[0].result(15)) == 2
    assert admin.describe_acls(everything()).result(15) == []
    # (a new producer: librdkafka remembers the topic's authorization error)
    p = producer(b.bootstrap, **{"message.timeout.ms": 10000})
    log = DeliveryLog()
    p.produce(secret, value=b"z", on_delivery=log.callback)
    p.flush(20)
    assert log.errors == [] and len(log.ok) == 1, log
