"""Compatibility driver for Python aiokafka (asyncio client) - compat/README.md.

Runs one check per invocation against --bootstrap and prints its JSON result
line(s). Owns only the aiokafka calls; messages, verification and the checks'
steps come from compat_common (each aiokafka call it hands them runs in an
asyncio.run of its own). aiokafka is asyncio: each check runs in
asyncio.run, and each group member runs its own event loop on its own thread
(aiokafka objects belong to the loop that created them). Every await that
talks to the broker is bounded by --stage-timeout.
"""

from __future__ import annotations

import asyncio
import time

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

import compat_common as cc

CLIENT = "aiokafka"
VERSION = aiokafka.__version__
# "default" leaves aiokafka's own choice (RoundRobinPartitionAssignor)
ASSIGNORS = {"range": (RangePartitionAssignor,), "roundrobin": (RoundRobinPartitionAssignor,)}
NO_ASSIGNOR = {"cooperative-sticky": "aiokafka has no cooperative assignor and only the eager "
               "rebalance protocol (it ships range, roundrobin and sticky)"}


async def bounded(aw, timeout: float, what: str):
    """await aw, or fail the check with what was being waited for."""
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError:
        raise RuntimeError(f"{what}: no answer within {timeout:.0f}s") from None


async def stop(obj, timeout: float) -> None:
    """Close a producer/consumer (leaves the group); a hang is logged, not fatal."""
    try:
        await asyncio.wait_for(obj.stop(), timeout)
    except Exception as e:
        cc.log(f"stopping {type(obj).__name__}: {e!r}")


def causes(e: BaseException) -> str:
    """e and what caused it (aiokafka wraps a broker's error code in its own)."""
    chain = []
    while e is not None and len(chain) < 4:
        chain.append(repr(e))
        e = e.__cause__ or e.__context__
    return " <- ".join(chain)


async def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    await bounded(admin.start(), timeout, "admin client start")
    try:
        resp = await bounded(admin.create_topics([NewTopic(topic, partitions, 1)],
                                                 timeout_ms=int(timeout * 1000)),
                             timeout, f"CreateTopics {topic}")
        errors = [t for t in resp.topic_errors if t[1] != 0]
        if errors:
            raise RuntimeError(f"CreateTopics {topic}: {errors}")

        async def visible() -> bool:
            for t in await admin.describe_topics([topic]):
                if t["topic"] == topic and t["error_code"] == 0:
                    return len(t["partitions"]) == partitions
            return False

        deadline = time.monotonic() + timeout
        while not await bounded(visible(), timeout, f"Metadata {topic}"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} not visible with {partitions} partitions")
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, tag: str, n: int, timeout: float,
                  **extra) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """Produce n keyed messages; returns (acks i -> (partition, offset), errors)."""
    acks: dict[int, tuple[int, int]] = {}
    errors: list[str] = []
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **extra)
    await bounded(producer.start(), timeout, "producer start")
    futures: list[asyncio.Future] = []
    try:
        async def send_all() -> None:
            for i in range(n):  # send() waits only for room in the accumulator
                futures.append(await producer.send(topic, key=cc.message_key(i),
                                                   value=cc.message_value(tag, i)))

        await bounded(send_all(), timeout, f"send() of {n}")
        if futures:
            await asyncio.wait(futures, timeout=timeout)
        for i, fut in enumerate(futures):
            if not fut.done() or fut.cancelled():
                errors.append(f"i={i}: no delivery report within {timeout:.0f}s")
            elif fut.exception() is not None:
                errors.append(f"i={i}: {fut.exception()!r}")
            else:
                md = fut.result()
                acks[i] = (md.partition, md.offset)
    finally:
        await stop(producer, timeout)
    return acks, errors


def consumer(bootstrap: str, *topics: str, **conf) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, enable_auto_commit=False,
                            auto_offset_reset="earliest", **conf)


async def poll_records(c: AIOKafkaConsumer, until, timeout: float, on_record=None) -> list:
    """getmany() until until(records) or timeout; returns (partition, offset, value)."""
    records = []
    deadline = time.monotonic() + timeout
    while not until(records) and time.monotonic() < deadline:
        window = max(0.0, min(0.5, deadline - time.monotonic()))
        # getmany() only waits on the buffer the background fetcher fills
        polled = await bounded(c.getmany(timeout_ms=int(window * 1000)), window + 10, "getmany")
        for tp, batch in polled.items():
            for r in batch:
                records.append((tp.partition, r.offset, r.value))
                if on_record is not None and on_record(records):
                    return records
    return records


async def assign_from(c: AIOKafkaConsumer, topic: str, partitions: int, timeout: float,
                      starts: dict[int, int] | None = None) -> list:
    """assign() partitions 0..partitions-1 of topic and return them: each at
    starts[p] where that is an offset (>= 0), else at the beginning (looked
    up within `timeout`)."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    await bounded(c.seek_to_beginning(*tps), timeout, "seek_to_beginning")
    for p, o in (starts or {}).items():
        if o >= 0:
            c.seek(tps[p], o)
    return tps


async def read_assigned(bootstrap: str, topic: str, partitions: int, n: int, timeout: float) -> list:
    c = consumer(bootstrap)
    await bounded(c.start(), timeout, "consumer start")
    try:
        await assign_from(c, topic, partitions, timeout)
        return await poll_records(c, lambda rs: len(rs) >= n, timeout)
    finally:
        await stop(c, timeout)


def in_loop(coroutine_function):
    """A plain function running coroutine_function in an event loop of its own."""
    return lambda *args, **kwargs: asyncio.run(coroutine_function(*args, **kwargs))


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    cc.produce_fetch_check(rep, args, in_loop(create_topic), in_loop(produce), in_loop(read_assigned),
                           "acks=all, client defaults")


class Member(cc.ThreadMember):
    """One group member: its consumer is created, polled and stopped by an
    event loop of its own, on a thread of its own."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str, timeout: float):
        self.conf = {"group_id": group}
        if assignor in ASSIGNORS:
            self.conf["partition_assignment_strategy"] = ASSIGNORS[assignor]
        self.bootstrap, self.topic, self.timeout = bootstrap, topic, timeout
        super().__init__()

    def run(self) -> None:
        asyncio.run(self._poll())

    async def _poll(self) -> None:
        c = consumer(self.bootstrap, self.topic, **self.conf)
        try:
            await bounded(c.start(), self.timeout, "consumer start")
            while not self.stopping():
                await bounded(c.getmany(timeout_ms=200), self.timeout, "getmany")
                self._assigned = {tp.partition for tp in c.assignment()}
        finally:
            await stop(c, self.timeout)


def check_group(rep: cc.Reporter, args) -> None:
    if args.assignor in NO_ASSIGNOR:
        rep.emit(cc.group_check_name(args.assignor), "n/a", NO_ASSIGNOR[args.assignor])
        return
    cc.group_check(rep, args, in_loop(create_topic),
                   lambda group, topic: Member(args.bootstrap, group, topic, args.assignor,
                                               args.stage_timeout))


def check_commit_resume(rep: cc.Reporter, args) -> None:
    timeout = args.stage_timeout

    async def consume_commit(topic: str, group: str, half: int) -> tuple[list, dict]:
        c = consumer(args.bootstrap, topic, group_id=group)
        await bounded(c.start(), timeout, "consumer start")
        try:
            # stop exactly at `half` records even if a getmany returned more
            records = await poll_records(c, lambda rs: len(rs) >= half, timeout,
                                         on_record=lambda rs: len(rs) >= half)
            if len(records) < half:
                return records, {}
            offsets = {TopicPartition(topic, p): o for p, o in cc.next_offsets(records).items()}
            await bounded(c.commit(offsets), timeout, "commit")
            return records, {tp.partition: await bounded(c.committed(tp), timeout, "committed")
                             for tp in offsets}
        finally:
            await stop(c, timeout)

    async def read_group(group: str, topic: str, done) -> list:
        c = consumer(args.bootstrap, topic, group_id=group)
        await bounded(c.start(), timeout, "consumer start")
        try:
            return await poll_records(c, done, timeout)
        finally:
            await stop(c, timeout)

    cc.commit_resume_check(rep, args, in_loop(create_topic), in_loop(produce), in_loop(consume_commit),
                           in_loop(read_group))


def check_idempotent(rep: cc.Reporter, args) -> None:
    cc.idempotent_check(rep, args, in_loop(create_topic),
                        lambda *a: asyncio.run(produce(*a, enable_idempotence=True)),
                        in_loop(read_assigned), "enable_idempotence=True")


async def read_values(bootstrap: str, topic: str, want: int, timeout: float, isolation: str,
                      starts: dict[int, int] | None = None) -> list[bytes]:
    """Values of every partition of topic (from `starts` or the beginning):
    until `want` records and the position of every partition has reached the
    end offset (the last stable offset under read_committed) seen at the
    start, then one more quiet second for any extra."""
    c = consumer(bootstrap, isolation_level=isolation)
    await bounded(c.start(), timeout, "consumer start")
    try:
        tps = await assign_from(c, topic, cc.PRODUCE_PARTITIONS, timeout, starts)
        ends = await bounded(c.end_offsets(tps), timeout, "end_offsets")
        records: list = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            records += await poll_records(c, lambda rs: False, 0.5)
            positions = {tp: await bounded(c.position(tp), timeout, "position") for tp in tps}
            if len(records) >= want and all(positions[tp] >= ends[tp] for tp in tps):
                break
        records += await poll_records(c, lambda rs: False, 1.0)
        return [v for _, _, v in records]
    finally:
        await stop(c, timeout)


async def run_transactions(args, src: str, dst: str) -> tuple[dict, int, int, list[str], str]:
    """The transactions of the `transactions` check, then the offsets they
    committed: (committed, processed, transactions, problems, how the
    offsets were sent) for cc.transactions_verdict."""
    n, timeout, b = args.messages, args.stage_timeout, args.bootstrap
    for topic in (src, dst):
        await create_topic(b, topic, cc.PRODUCE_PARTITIONS, timeout)
    aborted_tag, aborted = cc.aborted_batch(src, n)
    producer = AIOKafkaProducer(bootstrap_servers=b, transactional_id=cc.unique("compat-txn"),
                                linger_ms=5)
    await bounded(producer.start(), timeout, "transactional producer start")
    try:
        await bounded(producer.begin_transaction(), timeout, "begin_transaction (InitProducerId)")
        for i in range(n):
            await bounded(producer.send(src, key=cc.message_key(i),
                                        value=cc.message_value(src, i)), timeout, "send")
        await bounded(producer.commit_transaction(), timeout, "commit_transaction")
        await bounded(producer.begin_transaction(), timeout, "begin_transaction")
        for i in range(aborted):
            await bounded(producer.send(src, key=cc.message_key(i),
                                        value=cc.message_value(aborted_tag, i)), timeout, "send")
        await bounded(producer.flush(), timeout, "flush")
        await bounded(producer.abort_transaction(), timeout, "abort_transaction")
    finally:
        await stop(producer, timeout)

    group = cc.unique("compat-txn-group")
    # at most 100 records a getmany (aiokafka's default is no limit): several transactions
    c = consumer(b, src, group_id=group, isolation_level="read_committed", max_poll_records=100)
    ctp = AIOKafkaProducer(bootstrap_servers=b, transactional_id=cc.unique("compat-ctp"),
                           linger_ms=5)
    await bounded(c.start(), timeout, "consumer start")
    processed, transactions, ctp_error = 0, 0, None
    sent: dict[int, int] = {}  # partition -> offset the latest committed transaction sent
    try:
        await bounded(ctp.start(), timeout, "transactional producer start")
        deadline = time.monotonic() + timeout
        while processed < n and time.monotonic() < deadline:
            polled = await bounded(c.getmany(timeout_ms=500), timeout, "getmany")
            if not polled:
                continue

            step = ["begin_transaction"]

            async def transform() -> tuple[int, dict]:
                done = 0
                async with ctp.transaction():  # commits, or aborts on an exception
                    offsets = {}
                    step[0] = "send"
                    for tp, batch in polled.items():
                        for r in batch:
                            await ctp.send(dst, key=r.key, value=b"out-" + r.value)
                            done += 1
                        offsets[tp] = batch[-1].offset + 1
                    step[0] = ("send_offsets_to_transaction (TxnOffsetCommit v0, "
                               "which has no member id or generation)")
                    await ctp.send_offsets_to_transaction(offsets, group)
                    step[0] = "commit_transaction"
                return done, offsets

            try:
                done, offsets = await bounded(transform(), timeout,
                                              "consume-transform-produce transaction")
                processed += done
                sent.update({tp.partition: o for tp, o in offsets.items()})
            except Exception as e:  # the verdict says which transaction and why
                ctp_error = (f"consume-transform-produce transaction {transactions + 1}, "
                             f"{step[0]}: {causes(e)}")
                cc.log(ctp_error)
                break
            transactions += 1

        async def fetch_committed() -> dict[int, int | None]:
            return {p: await bounded(c.committed(TopicPartition(src, p)), timeout, "committed")
                    for p in range(cc.PRODUCE_PARTITIONS)}

        # aiokafka's OffsetFetch is v1, without require_stable: a transaction's
        # offsets show once its markers are written, which may come after EndTxn
        # answered (as in Kafka). Wait (bounded) for the offsets the last
        # transactions sent; the lag check below judges what was committed.
        t0 = time.monotonic()
        committed = await fetch_committed()
        while (not ctp_error and any(committed.get(p) != o for p, o in sent.items())
               and time.monotonic() - t0 < timeout):
            await asyncio.sleep(0.1)
            committed = await fetch_committed()
        visible_after = time.monotonic() - t0
    finally:
        await stop(c, timeout)
        await stop(ctp, timeout)
    return (committed, processed, transactions, [ctp_error] if ctp_error else [],
            f"send_offsets_to_transaction(offsets, group_id) (TxnOffsetCommit v0: no generation/member); "
            f"committed offsets {committed} seen by OffsetFetch v1 after {visible_after:.1f}s")


def check_transactions(rep: cc.Reporter, args) -> None:
    """Committed and aborted transactions, then consume-transform-produce
    with the consumer's offsets committed in the producer's transactions
    (send_offsets_to_transaction): every committed input exactly once."""
    src, dst = cc.unique("compat-txn-in"), cc.unique("compat-txn-out")
    committed, processed, transactions, problems, how = asyncio.run(run_transactions(args, src, dst))
    cc.transactions_verdict(rep, args, src, dst, in_loop(read_values), committed, processed, transactions,
                            how, problems)


def main() -> int:
    return cc.driver_main(__doc__, CLIENT, VERSION, cc.checks_in(globals()))


if __name__ == "__main__":
    raise SystemExit(main())
