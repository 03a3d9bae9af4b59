"""ACLs through confluent-kafka (librdkafka): AdminClient create_acls /
describe_acls / delete_acls against a broker running Kafka's
StandardAuthorizer, and what a producer and a consumer of this connection
(User:ANONYMOUS over PLAINTEXT) then see: TOPIC_AUTHORIZATION_FAILED on a
topic an ACL reserves for someone else, GROUP_AUTHORIZATION_FAILED for a
denied group, while open topics keep working."""

import subprocess
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from chronik import (DeliveryLog, ListenersBroker, admin_client, create_topic, make_certs, producer,
                     unique_topic)

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

    # consume: a group READ-denied to this principal cannot commit. The
    # denied group may not be described either, so, as with Kafka, looking
    # up its coordinator (FindCoordinator) already reports
    # GROUP_AUTHORIZATION_FAILED; the assigned partition is still fetched.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": denied_group,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(open_topic, 0, 0)])
        msg, deadline, group_errors = None, time.time() + 20, []
        while msg is None and time.time() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is not None:
                group_errors.append(msg.error().code())
                msg = None
        assert msg is not None and msg.value() == b"y", group_errors
        assert set(group_errors) <= {KafkaError.GROUP_AUTHORIZATION_FAILED}, group_errors
        try:
            c.commit(message=msg, asynchronous=False)
            raise AssertionError("a commit to a READ-denied group succeeded")
        except Exception as e:  # KafkaException carrying the broker's error
            # the broker's GROUP_AUTHORIZATION_FAILED, or - the coordinator
            # lookup having been refused with it - "waiting for coordinator"
            code = e.args[0].code()
            deadline = time.time() + 10
            while (code == KafkaError._WAIT_COORD and KafkaError.GROUP_AUTHORIZATION_FAILED not in group_errors
                   and time.time() < deadline):
                event = c.poll(0.5)
                if event is not None and event.error() is not None:
                    group_errors.append(event.error().code())
            assert code == KafkaError.GROUP_AUTHORIZATION_FAILED or (
                code == KafkaError._WAIT_COORD and KafkaError.GROUP_AUTHORIZATION_FAILED in group_errors), \
                (e, group_errors)
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


def test_acls_apply_to_sasl_and_certificate_principals(server_bin, tmp_path):
    """The principal a connection authenticated as is the one ACLs name:
    User:admin (a super user, SCRAM) creates a topic and grants it to
    User:alice (SCRAM) and to the client certificate's subject DN (mTLS);
    they produce and read it, User:bob (SCRAM) is refused with
    TOPIC_AUTHORIZATION_FAILED, and an unauthenticated PLAINTEXT client
    (User:ANONYMOUS) is refused too."""
    certs = make_certs(tmp_path / "certs")
    scram = tmp_path / "scram.txt"
    scram.write_text("".join(f"SCRAM-SHA-512=[name={u},password={u}-secret,iterations=4096]\n"
                             for u in ("admin", "alice", "bob")))
    work = tmp_path / "broker"
    work.mkdir()
    broker = ListenersBroker(server_bin, work, [
        "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "--ssl-keystore-location", certs / "broker.keystore.pem",
        "--ssl-truststore-location", certs / "ca.pem",
        "--ssl-client-auth", "requested",
        "--sasl-enabled-mechanisms", "SCRAM-SHA-512",
        "--sasl-scram-credentials-file", scram,
        *AUTHORIZER[:2], "--super-users", "User:admin",
    ])
    listeners = broker.start()
    try:
        tls = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs / "ca.pem"),
               "sasl.mechanism": "SCRAM-SHA-512"}

        def as_user(user):
            return {**tls, "sasl.username": user, "sasl.password": f"{user}-secret"}

        mtls = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
                "ssl.certificate.location": str(certs / "client.pem"),
                "ssl.key.location": str(certs / "client.key")}
        sasl = listeners["SASL_SSL"]
        admin = AdminClient({"bootstrap.servers": sasl, **as_user("admin")})
        topic = unique_topic("acl-sasl")
        create_topic(admin, topic)
        dn = subject_dn(certs / "client.pem")
        grants = [binding(ResourceType.TOPIC, topic, who, op, AclPermissionType.ALLOW)
                  for who in ("User:alice", f"User:{dn}")
                  for op in (AclOperation.WRITE, AclOperation.READ)]
        for f in admin.create_acls(grants).values():
            assert f.result(15) is None

        def produce(bootstrap, conf, value):
            p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000,
                          "enable.idempotence": False, **conf})
            log = DeliveryLog()
            p.produce(topic, value=value, on_delivery=log.callback)
            p.flush(20)
            return log

        for bootstrap, conf, value in ((sasl, as_user("alice"), b"from alice"),
                                       (listeners["SSL"], mtls, b"from the certificate")):
            log = produce(bootstrap, conf, value)
            assert log.errors == [] and len(log.ok) == 1, (conf.get("sasl.username", dn), log)
        for bootstrap, conf in ((sasl, as_user("bob")), (listeners["PLAINTEXT"], {})):
            log = produce(bootstrap, conf, b"refused")
            assert [e.code() for e, _ in log.errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], log

        c = Consumer({"bootstrap.servers": sasl, "group.id": unique_topic("acl-reader"),
                      **as_user("alice")})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got, deadline = [], time.time() + 20
            while len(got) < 2 and time.time() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
            assert got == [b"from alice", b"from the certificate"], got
        finally:
            c.close()
    finally:
        broker.stop()


def subject_dn(cert) -> str:
    """The certificate's subject as Kafka prints it (RFC 2253, most specific first)."""
    out = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-subject", "-nameopt", "RFC2253"],
                         check=True, capture_output=True, text=True).stdout
    return out.strip().removeprefix("subject=")
