"""Compatibility driver for Python confluent-kafka (librdkafka) - compat/README.md.

Runs one check per invocation against --bootstrap and prints its JSON result
line(s). Owns only the confluent-kafka calls; messages, verification and the
group scenario come from compat_common.
"""

from __future__ import annotations

import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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


def poll_records(consumer: Consumer, n: int, timeout: float) -> list:
    """Poll until n records (or timeout), then close the consumer; an error record raises."""
    records = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            records.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return records


def read_assigned(bootstrap: str, topic: str, partitions: int, n: int, timeout: float) -> list:
    """Read partitions 0..partitions-1 from the beginning until n records (or timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": cc.unique("compat-reader"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    return poll_records(consumer, n, timeout)


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    topic = cc.unique("compat-produce")
    create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
    acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
    rep.verdict("produce", cc.verify_acks(args.messages, acks, errors),
                f"{args.messages} acked (acks=all), per partition "
                f"{cc.partition_counts((p, o, None) for p, o in acks.values())}")
    records = read_assigned(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.messages,
                            args.stage_timeout)
    rep.verdict("fetch", cc.verify_read_back(topic, args.messages, records, acks),
                f"{len(records)} read back via assign(), order and offsets as acked")


class Member:
    """One group member polling on its own thread; assigned() is what
    consumer.assignment() said after the latest poll."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str):
        conf = {"bootstrap.servers": bootstrap, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if assignor in ASSIGNOR_CONFIG:
            conf["partition.assignment.strategy"] = ASSIGNOR_CONFIG[assignor]
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])
        self._assigned: set[int] = set()
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is not None and msg.error() and self.error is None:
                    self.error = str(msg.error())
                self._assigned = {tp.partition for tp in self.consumer.assignment()}
        except Exception as e:  # surfaced through .error in the check's detail
            self.error = repr(e)
        finally:
            self._assigned = set()
            self.consumer.close()

    def assigned(self) -> set[int]:
        return set(self._assigned)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def check_group(rep: cc.Reporter, args) -> None:
    topic, group = cc.unique("compat-group"), cc.unique("compat-group")
    create_topic(args.bootstrap, topic, cc.GROUP_PARTITIONS, args.stage_timeout)
    problems, detail = cc.group_scenario(
        lambda k: Member(args.bootstrap, group, topic, args.assignor), args.stage_timeout)
    rep.verdict(cc.group_check_name(args.assignor), problems, detail)


def check_commit_resume(rep: cc.Reporter, args) -> None:
    if args.phase == "a":
        topic, group = cc.unique("compat-resume"), cc.unique("compat-resume")
        create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
        acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
        problems = cc.verify_acks(args.messages, acks, errors)
        if problems:
            rep.emit("commit-resume", "fail", "phase a produce: " + "; ".join(problems))
            return
        half = args.messages // 2
        consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        consumed, last = [], {}
        deadline = time.monotonic() + args.stage_timeout
        while len(consumed) < half and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            consumed.append((msg.partition(), msg.offset()))
            last[msg.partition()] = msg.offset()
        if len(consumed) < half:
            consumer.close()
            rep.emit("commit-resume", "fail", f"phase a consumed {len(consumed)} of {half}")
            return
        offsets = [TopicPartition(topic, p, o + 1) for p, o in sorted(last.items())]
        consumer.commit(offsets=offsets, asynchronous=False)
        committed = {tp.partition: tp.offset
                     for tp in consumer.committed(offsets, timeout=args.stage_timeout)}
        consumer.close()
        want = {tp.partition: tp.offset for tp in offsets}
        if committed != want:
            rep.emit("commit-resume", "fail", f"committed {want}, OffsetFetch says {committed}")
            return
        end = {}
        for p, o in acks.values():
            end[p] = max(end.get(p, 0), o + 1)
        cc.save_state(args.state, {"topic": topic, "group": group, "committed": committed,
                                   "consumed": consumed, "end_offsets": end})
        cc.log(f"phase a: consumed {len(consumed)}, committed {committed}")
        return
    state = cc.load_state(args.state)
    end = {int(p): o for p, o in state["end_offsets"].items()}
    committed = {int(p): o for p, o in state["committed"].items()}
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": state["group"],
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([state["topic"]])
    records, high = [], {}
    deadline = time.monotonic() + args.stage_timeout

    def done() -> bool:
        return all(high.get(p, committed.get(p, 0) - 1) + 1 >= e for p, e in end.items())

    try:
        while not done() and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            records.append((msg.partition(), msg.offset(), msg.value()))
            high[msg.partition()] = max(high.get(msg.partition(), -1), msg.offset())
    finally:
        consumer.close()
    rep.verdict("commit-resume", cc.verify_resume(state, records),
                f"resumed after broker restart at {committed}, read the other {len(records)}")


def check_idempotent(rep: cc.Reporter, args) -> None:
    topic = cc.unique("compat-idempotent")
    create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
    acks, errors = produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout,
                           {"enable.idempotence": True})
    problems = cc.verify_acks(args.messages, acks, errors)
    if not problems:
        records = read_assigned(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.messages,
                                args.stage_timeout)
        problems = cc.verify_read_back(topic, args.messages, records, acks)
    rep.verdict("idempotent", problems,
                f"enable.idempotence=true: {args.messages} acked and read back once, in order")


def read_for(bootstrap: str, assignment: list, want: int, timeout: float,
             isolation: str) -> list[bytes]:
    """Values read from `assignment` (TopicPartitions with start offsets):
    until `want` records, then one more quiet second for any extra."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": cc.unique("compat-reader"),
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign(assignment)
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
    aborted_tag, aborted = src + "-aborted", max(n // 2, 1)
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
    everything = [TopicPartition(src, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in range(cc.PRODUCE_PARTITIONS)]
    input_committed = read_for(b, everything, n, timeout, "read_committed")
    input_all = read_for(b, everything, n + aborted, timeout, "read_uncommitted")
    out = read_for(b, [TopicPartition(dst, p, confluent_kafka.OFFSET_BEGINNING)
                       for p in range(cc.PRODUCE_PARTITIONS)], n, timeout, "read_committed")
    resume = [TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0
                             else confluent_kafka.OFFSET_BEGINNING) for tp in committed]
    lag = len(read_for(b, resume, 0, 2.0, "read_committed"))
    expected = {b"out-" + cc.message_value(src, i) for i in range(n)}
    seen_aborted = sum(1 for v in input_all if v.startswith(aborted_tag.encode()))
    problems = cc.verify_transactions(n, input_committed, aborted_tag, out, expected,
                                      seen_aborted, lag)
    if processed != n:
        problems.append(f"consume-transform-produce processed {processed} of {n}")
    rep.verdict("transactions", problems,
                f"{n} committed + {aborted} aborted; read_committed saw {len(input_committed)}, "
                f"read_uncommitted {len(input_all)}; {n} transformed once in {transactions} "
                f"transactions with send_offsets_to_transaction; lag after {lag}")


def read_group(bootstrap: str, conf: dict, topic: str, group: str, n: int, timeout: float) -> list:
    """A member of `group` subscribed to `topic` reads from the start until n records (or timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **conf})
    consumer.subscribe([topic])
    return poll_records(consumer, n, timeout)


def check_security(rep: cc.Reporter, args) -> None:
    """The four steps of compat_common.security_check through confluent-kafka."""
    n, timeout = args.messages, args.stage_timeout

    def produce_consume(listener: str, topic: str, group: str) -> cc.StepResult:
        bootstrap, conf = cc.security_endpoint(args, listener)
        create_topic(bootstrap, topic, cc.PRODUCE_PARTITIONS, timeout, conf)
        acks, errors = produce(bootstrap, topic, topic, n, timeout, conf)
        problems = cc.verify_acks(n, acks, errors)
        if problems:
            return problems, ""
        records = read_group(bootstrap, conf, topic, group, n, timeout)
        return (cc.verify_read_back(topic, n, records, acks),
                f"{n} produced to {topic} (acks=all), read back by group {group}")

    def refused_login() -> cc.StepResult:
        bootstrap, conf = cc.security_endpoint(args, "SASL_SSL", cc.wrong_password(args))
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

    def denied_produce(listener: str) -> cc.StepResult:
        bootstrap, conf = cc.security_endpoint(args, listener)
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


def main() -> int:
    args = cc.parse_args(__doc__.splitlines()[0])
    rep = cc.Reporter(CLIENT, VERSION)
    return cc.run_main(rep, args, {"produce-fetch": check_produce_fetch, "group": check_group,
                                   "commit-resume": check_commit_resume,
                                   "idempotent": check_idempotent,
                                   "transactions": check_transactions,
                                   "security": check_security})


if __name__ == "__main__":
    raise SystemExit(main())
