"""Compatibility driver for Python confluent-kafka (librdkafka) - compat/README.md.

Runs one check per invocation against --bootstrap and prints its JSON result
line(s). Owns only the confluent-kafka calls; messages, verification and the
checks' steps come from compat_common.
"""

from __future__ import annotations

import time

import confluent_kafka
from confluent_kafka import (AcknowledgeType, Consumer, KafkaError, KafkaException, Producer, ShareConsumer,
                             TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)

import compat_common as cc

CLIENT = "confluent-kafka"
VERSION = f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
# librdkafka names of the assignors; "default" leaves librdkafka's own choice
ASSIGNOR_CONFIG = {"range": "range", "roundrobin": "roundrobin",
                   "cooperative-sticky": "cooperative-sticky"}


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float,
                 conf: dict | None = None) -> None:
    """CreateTopics, then wait until Metadata shows every partition; `conf`
    adds client settings (the security check's TLS/SASL)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(conf or {})})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout)
    futures[topic].result(timeout=timeout)
    ok = cc.wait_until(
        lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == partitions,
        timeout)
    if not ok:
        raise RuntimeError(f"topic {topic} not visible with {partitions} partitions")


def produce(bootstrap: str, topic: str, tag: str, n: int, timeout: float,
            extra: dict | None = None) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """Produce n keyed messages; returns (acks i -> (partition, offset), errors)."""
    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         **(extra or {})})

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                errors.append(f"i={i}: {err}")
            else:
                acks[i] = (msg.partition(), msg.offset())
        return cb

    for i in range(n):
        producer.produce(topic, key=cc.message_key(i), value=cc.message_value(tag, i),
                         on_delivery=on_delivery(i))
        producer.poll(0)
    left = producer.flush(timeout)
    if left:
        errors.append(f"{left} messages still in flight after {timeout:.0f}s")
    return acks, errors


def poll_until(consumer: Consumer, until, timeout: float) -> list:
    """Poll until until(records) (or timeout); an error record raises."""
    records: list = []
    deadline = time.monotonic() + timeout
    while not until(records) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        records.append((msg.partition(), msg.offset(), msg.value()))
    return records


def poll_records(consumer: Consumer, until, timeout: float) -> list:
    """poll_until, then close the consumer."""
    try:
        return poll_until(consumer, until, timeout)
    finally:
        consumer.close()


def read_assigned(bootstrap: str, topic: str, partitions: int, n: int, timeout: float) -> list:
    """Read partitions 0..partitions-1 from the beginning until n records (or timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": cc.unique("compat-reader"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    return poll_records(consumer, lambda rs: len(rs) >= n, timeout)


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    cc.produce_fetch_check(rep, args, create_topic, produce, read_assigned, "acks=all")


class Member(cc.ThreadMember):
    """One group member polling on its own thread; assigned() is what
    consumer.assignment() said after the latest poll."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str):
        conf = {"bootstrap.servers": bootstrap, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if assignor in ASSIGNOR_CONFIG:
            conf["partition.assignment.strategy"] = ASSIGNOR_CONFIG[assignor]
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])
        super().__init__()

    def run(self) -> None:
        try:
            while not self.stopping():
                msg = self.consumer.poll(0.2)
                if msg is not None and msg.error() and self.error is None:
                    self.error = str(msg.error())
                self._assigned = {tp.partition for tp in self.consumer.assignment()}
        finally:
            self.consumer.close()


def check_group(rep: cc.Reporter, args) -> None:
    cc.group_check(rep, args, create_topic,
                   lambda group, topic: Member(args.bootstrap, group, topic, args.assignor))


def group_consumer(bootstrap: str, group: str, topic: str, conf: dict | None = None) -> Consumer:
    """A member of `group` subscribed to `topic`, from the start where nothing is committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **(conf or {})})
    consumer.subscribe([topic])
    return consumer


def read_group(bootstrap: str, group: str, topic: str, until, timeout: float, conf: dict | None = None) -> list:
    """A member of `group` reads `topic` until until(records) (or timeout)."""
    return poll_records(group_consumer(bootstrap, group, topic, conf), until, timeout)


def check_commit_resume(rep: cc.Reporter, args) -> None:
    timeout = args.stage_timeout

    def consume_commit(topic: str, group: str, half: int) -> tuple[list, dict]:
        consumer = group_consumer(args.bootstrap, group, topic)
        try:
            records = poll_until(consumer, lambda rs: len(rs) >= half, timeout)
            if len(records) < half:
                return records, {}
            offsets = [TopicPartition(topic, p, o) for p, o in sorted(cc.next_offsets(records).items())]
            consumer.commit(offsets=offsets, asynchronous=False)
            return records, {tp.partition: tp.offset for tp in consumer.committed(offsets, timeout=timeout)}
        finally:
            consumer.close()

    cc.commit_resume_check(rep, args, create_topic, produce, consume_commit,
                           lambda group, topic, done: read_group(args.bootstrap, group, topic, done, timeout))


def check_idempotent(rep: cc.Reporter, args) -> None:
    cc.idempotent_check(rep, args, create_topic,
                        lambda *a: produce(*a, {"enable.idempotence": True}),
                        read_assigned, "enable.idempotence=true")


def read_values(bootstrap: str, topic: str, want: int, timeout: float, isolation: str,
                starts: dict[int, int] | None = None) -> list[bytes]:
    """Values of every partition of topic (from `starts` where >= 0, else the
    beginning): until `want` records, then one more quiet second for any extra."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": cc.unique("compat-reader"),
                         "enable.auto.commit": False, "isolation.level": isolation})
    starts = starts or {}
    consumer.assign([TopicPartition(topic, p, starts[p] if starts.get(p, -1) >= 0
                                    else confluent_kafka.OFFSET_BEGINNING)
                     for p in range(cc.PRODUCE_PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline and (quiet_until is None or time.monotonic() < quiet_until):
            msg = consumer.poll(0.2)
            if msg is not None:
                if msg.error():
                    raise KafkaException(msg.error())
                values.append(msg.value())
            if quiet_until is None and len(values) >= want:
                quiet_until = time.monotonic() + 1.0
    finally:
        consumer.close()
    return values


def check_transactions(rep: cc.Reporter, args) -> None:
    """Committed and aborted transactions, then consume-transform-produce
    with the consumer's offsets committed in the producer's transactions
    (send_offsets_to_transaction): every committed input exactly once in
    the output."""
    n, timeout, b = args.messages, args.stage_timeout, args.bootstrap
    src, dst = cc.unique("compat-txn-in"), cc.unique("compat-txn-out")
    for topic in (src, dst):
        create_topic(b, topic, cc.PRODUCE_PARTITIONS, timeout)
    aborted_tag, aborted = cc.aborted_batch(src, n)
    producer = Producer({"bootstrap.servers": b, "transactional.id": cc.unique("compat-txn"),
                         "linger.ms": 5})
    producer.init_transactions(timeout)
    producer.begin_transaction()
    for i in range(n):
        producer.produce(src, key=cc.message_key(i), value=cc.message_value(src, i))
    producer.commit_transaction(timeout)
    producer.begin_transaction()
    for i in range(aborted):
        producer.produce(src, key=cc.message_key(i), value=cc.message_value(aborted_tag, i))
    producer.flush(timeout)
    producer.abort_transaction(timeout)

    group = cc.unique("compat-txn-group")
    consumer = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe([src])
    ctp = Producer({"bootstrap.servers": b, "transactional.id": cc.unique("compat-ctp"),
                    "linger.ms": 5})
    ctp.init_transactions(timeout)
    processed, transactions = 0, 0
    deadline = time.monotonic() + timeout
    try:
        while processed < n and time.monotonic() < deadline:
            batch = consumer.consume(100, 0.5)
            if not batch:
                continue
            ctp.begin_transaction()
            for msg in batch:
                if msg.error():
                    raise KafkaException(msg.error())
                ctp.produce(dst, key=msg.key(), value=b"out-" + msg.value())
                processed += 1
            ctp.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                            consumer.consumer_group_metadata(), timeout)
            ctp.commit_transaction(timeout)
            transactions += 1
        committed = consumer.committed([TopicPartition(src, p) for p in range(cc.PRODUCE_PARTITIONS)],
                                       timeout=timeout)
    finally:
        consumer.close()
    cc.transactions_verdict(rep, args, src, dst, read_values, {tp.partition: tp.offset for tp in committed},
                            processed, transactions, "send_offsets_to_transaction")


def check_security(rep: cc.Reporter, args) -> None:
    """The four steps of compat_common.security_check through confluent-kafka."""
    n, timeout = args.messages, args.stage_timeout

    def produce_consume(bootstrap: str, conf: dict, topic: str, group: str) -> cc.StepResult:
        create_topic(bootstrap, topic, cc.PRODUCE_PARTITIONS, timeout, conf)
        acks, errors = produce(bootstrap, topic, topic, n, timeout, conf)
        problems = cc.verify_acks(n, acks, errors)
        if problems:
            return problems, ""
        records = read_group(bootstrap, group, topic, lambda rs: len(rs) >= n, timeout, conf)
        return (cc.verify_read_back(topic, n, records, acks),
                f"{n} produced to {topic} (acks=all), read back by group {group}")

    def refused_login(bootstrap: str, conf: dict) -> cc.StepResult:
        errors: list[KafkaError] = []
        # a producer connects to its bootstrap broker at once; error_cb is served by poll()
        producer = Producer({"bootstrap.servers": bootstrap, **conf, "error_cb": errors.append})
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        deadline = time.monotonic() + timeout
        while not auth and time.monotonic() < deadline:
            producer.poll(0.2)
            auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if not auth:
            return [f"no _AUTHENTICATION error within {timeout:.0f}s (errors: "
                    f"{[e.str() for e in errors][:3]})"], ""
        return [], f"refused: _AUTHENTICATION {auth[0].str()[:300]}"

    def denied_produce(bootstrap: str, conf: dict) -> cc.StepResult:
        failures: list[KafkaError] = []
        delivered = []
        producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": int(timeout * 1000),
                             **conf})
        producer.produce(args.denied_topic, value=b"denied",
                         on_delivery=lambda err, msg: (failures if err else delivered).append(err or msg))
        producer.flush(timeout)
        if [e.code() for e in failures] != [KafkaError.TOPIC_AUTHORIZATION_FAILED]:
            return [f"want TOPIC_AUTHORIZATION_FAILED, got {[e.str() for e in failures]}, "
                    f"{len(delivered)} delivered"], ""
        return [], "delivery failed with TOPIC_AUTHORIZATION_FAILED"

    cc.security_check(rep, args, produce_consume, refused_login, denied_produce)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str], timeout: float) -> None:
    """IncrementalAlterConfigs (SET) on the GROUP config resource."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                              incremental_configs=entries)])
    for f in futures.values():
        f.result(timeout=timeout)


def check_share(rep: cc.Reporter, args) -> None:
    """Share groups (KIP-932) through librdkafka's share consumer
    (confluent_kafka.ShareConsumer, share.acknowledgement.mode=explicit):
    acknowledge() each record as the plan says, commit_sync() after each poll."""
    timeout = args.stage_timeout
    ack_type = {cc.ACCEPT: AcknowledgeType.ACCEPT, cc.RELEASE: AcknowledgeType.RELEASE,
                cc.REJECT: AcknowledgeType.REJECT}

    def consume(run: cc.ShareRun, c: int, group: str) -> None:
        consumer = ShareConsumer({"bootstrap.servers": args.bootstrap, "group.id": group,
                                  "share.acknowledgement.mode": "explicit"})
        try:
            consumer.subscribe([run.topic])
            while not run.stop.is_set():
                msgs = consumer.poll(0.5)
                run.polled.add(c)
                got = 0
                for msg in msgs:
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            run.ack_error(f"consumer {c + 1}: poll: {msg.error().str()}")
                        continue
                    ack = run.delivered(c, msg.value(), (msg.partition(), msg.offset()), msg.delivery_count() or 0)
                    consumer.acknowledge(msg, ack_type[ack])
                    got += 1
                if got:
                    for tp, err in consumer.commit_sync(timeout).items():
                        if err is not None:
                            run.ack_error(f"consumer {c + 1}: {tp.topic}[{tp.partition}]: {err}")
        finally:
            consumer.close()  # commits what is pending, leaves the group

    def heartbeat_ms(bootstrap: str, group: str, timeout: float) -> int:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
        configs = next(iter(futures.values())).result(timeout=timeout)
        return int(configs["share.heartbeat.interval.ms"].value)

    cc.share_check(rep, args, create_topic, set_group_configs, produce, consume, {
        "configs": "AdminClient.incremental_alter_configs",
        "consumers": "confluent_kafka.ShareConsumers (share.acknowledgement.mode=explicit, "
                     "acknowledge + commit_sync)",
        "describe": "confluent-kafka's AdminClient has no share-group describe"}, heartbeat_ms=heartbeat_ms)


def main() -> int:
    return cc.driver_main(__doc__, CLIENT, VERSION, cc.checks_in(globals()))


if __name__ == "__main__":
    raise SystemExit(main())
