"""Compatibility driver for Python aiokafka (asyncio client) - compat/README.md.

Runs one check per invocation against --bootstrap and prints its JSON result
line(s). Owns only the aiokafka calls; messages, verification and the group
scenario come from compat_common. aiokafka is asyncio: each check runs in
asyncio.run, and each group member runs its own event loop on its own thread
(aiokafka objects belong to the loop that created them). Every await that
talks to the broker is bounded by --stage-timeout.
"""

from __future__ import annotations

import asyncio
import threading
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


async def read_assigned(bootstrap: str, topic: str, partitions: int, n: int, timeout: float) -> list:
    c = consumer(bootstrap)
    await bounded(c.start(), timeout, "consumer start")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await bounded(c.seek_to_beginning(*tps), timeout, "seek_to_beginning")
        return await poll_records(c, lambda rs: len(rs) >= n, timeout)
    finally:
        await stop(c, timeout)


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    async def run() -> None:
        topic = cc.unique("compat-produce")
        await create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
        acks, errors = await produce(args.bootstrap, topic, topic, args.messages,
                                     args.stage_timeout)
        rep.verdict("produce", cc.verify_acks(args.messages, acks, errors),
                    f"{args.messages} acked (acks=all, client defaults), per partition "
                    f"{cc.partition_counts((p, o, None) for p, o in acks.values())}")
        records = await read_assigned(args.bootstrap, topic, cc.PRODUCE_PARTITIONS,
                                      args.messages, args.stage_timeout)
        rep.verdict("fetch", cc.verify_read_back(topic, args.messages, records, acks),
                    f"{len(records)} read back via assign(), order and offsets as acked")
    asyncio.run(run())


class Member:
    """One group member: its consumer is created, polled and stopped by an
    event loop of its own, on a thread of its own."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str, timeout: float):
        self.conf = {"group_id": group}
        if assignor in ASSIGNORS:
            self.conf["partition_assignment_strategy"] = ASSIGNORS[assignor]
        self.bootstrap, self.topic, self.timeout = bootstrap, topic, timeout
        self._assigned: set[int] = set()
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        c = None
        try:
            c = consumer(self.bootstrap, self.topic, **self.conf)
            await bounded(c.start(), self.timeout, "consumer start")
            while not self._stop.is_set():
                await bounded(c.getmany(timeout_ms=200), self.timeout, "getmany")
                self._assigned = {tp.partition for tp in c.assignment()}
        except Exception as e:  # surfaced through .error in the check's detail
            self.error = repr(e)
        finally:
            self._assigned = set()
            if c is not None:
                await stop(c, self.timeout)

    def assigned(self) -> set[int]:
        return set(self._assigned)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def check_group(rep: cc.Reporter, args) -> None:
    name = cc.group_check_name(args.assignor)
    if args.assignor in NO_ASSIGNOR:
        rep.emit(name, "n/a", NO_ASSIGNOR[args.assignor])
        return
    topic, group = cc.unique("compat-group"), cc.unique("compat-group")
    asyncio.run(create_topic(args.bootstrap, topic, cc.GROUP_PARTITIONS, args.stage_timeout))
    problems, detail = cc.group_scenario(
        lambda k: Member(args.bootstrap, group, topic, args.assignor, args.stage_timeout),
        args.stage_timeout)
    rep.verdict(name, problems, detail)


async def commit_resume_a(rep: cc.Reporter, args) -> None:
    timeout = args.stage_timeout
    topic, group = cc.unique("compat-resume"), cc.unique("compat-resume")
    await create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, timeout)
    acks, errors = await produce(args.bootstrap, topic, topic, args.messages, timeout)
    problems = cc.verify_acks(args.messages, acks, errors)
    if problems:
        rep.emit("commit-resume", "fail", "phase a produce: " + "; ".join(problems))
        return
    half = args.messages // 2
    c = consumer(args.bootstrap, topic, group_id=group)
    await bounded(c.start(), timeout, "consumer start")
    try:
        # stop exactly at `half` records even if a getmany returned more
        records = await poll_records(c, lambda rs: len(rs) >= half, timeout,
                                     on_record=lambda rs: len(rs) >= half)
        if len(records) < half:
            rep.emit("commit-resume", "fail", f"phase a consumed {len(records)} of {half}")
            return
        last: dict[int, int] = {}
        for p, o, _ in records:
            last[p] = o
        offsets = {TopicPartition(topic, p): o + 1 for p, o in last.items()}
        await bounded(c.commit(offsets), timeout, "commit")
        committed = {tp.partition: await bounded(c.committed(tp), timeout, "committed")
                     for tp in offsets}
    finally:
        await stop(c, timeout)
    want = {tp.partition: o for tp, o in offsets.items()}
    if committed != want:
        rep.emit("commit-resume", "fail", f"committed {want}, OffsetFetch says {committed}")
        return
    end: dict[int, int] = {}
    for p, o in acks.values():
        end[p] = max(end.get(p, 0), o + 1)
    cc.save_state(args.state, {"topic": topic, "group": group, "committed": committed,
                               "consumed": [(p, o) for p, o, _ in records],
                               "end_offsets": end})
    cc.log(f"phase a: consumed {len(records)}, committed {committed}")


async def commit_resume_b(rep: cc.Reporter, args) -> None:
    state = cc.load_state(args.state)
    end = {int(p): o for p, o in state["end_offsets"].items()}
    committed = {int(p): o for p, o in state["committed"].items()}

    def done(records) -> bool:
        high: dict[int, int] = {}
        for p, o, _ in records:
            high[p] = max(high.get(p, -1), o)
        return all(high.get(p, committed.get(p, 0) - 1) + 1 >= e for p, e in end.items())

    c = consumer(args.bootstrap, state["topic"], group_id=state["group"])
    await bounded(c.start(), args.stage_timeout, "consumer start")
    try:
        records = await poll_records(c, done, args.stage_timeout)
    finally:
        await stop(c, args.stage_timeout)
    rep.verdict("commit-resume", cc.verify_resume(state, records),
                f"resumed after broker restart at {committed}, read the other {len(records)}")


def check_commit_resume(rep: cc.Reporter, args) -> None:
    asyncio.run((commit_resume_a if args.phase == "a" else commit_resume_b)(rep, args))


def check_idempotent(rep: cc.Reporter, args) -> None:
    async def run() -> list[str]:
        topic = cc.unique("compat-idempotent")
        await create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
        acks, errors = await produce(args.bootstrap, topic, topic, args.messages,
                                     args.stage_timeout, enable_idempotence=True)
        problems = cc.verify_acks(args.messages, acks, errors)
        if not problems:
            records = await read_assigned(args.bootstrap, topic, cc.PRODUCE_PARTITIONS,
                                          args.messages, args.stage_timeout)
            problems = cc.verify_read_back(topic, args.messages, records, acks)
        return problems
    rep.verdict("idempotent", asyncio.run(run()),
                f"enable_idempotence=True: {args.messages} acked and read back once, in order")


async def read_values(bootstrap: str, topic: str, want: int, timeout: float, isolation: str,
                      starts: dict[int, int] | None = None) -> list[bytes]:
    """Values of every partition of topic (from `starts` or the beginning):
    until `want` records and the position of every partition has reached the
    end offset (the last stable offset under read_committed) seen at the
    start, then one more quiet second for any extra."""
    c = consumer(bootstrap, isolation_level=isolation)
    await bounded(c.start(), timeout, "consumer start")
    try:
        tps = [TopicPartition(topic, p) for p in range(cc.PRODUCE_PARTITIONS)]
        c.assign(tps)
        for tp in tps:
            if starts and starts.get(tp.partition, -1) >= 0:
                c.seek(tp, starts[tp.partition])
            else:
                await bounded(c.seek_to_beginning(tp), timeout, "seek_to_beginning")
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


async def run_transactions(rep: cc.Reporter, args) -> None:
    n, timeout, b = args.messages, args.stage_timeout, args.bootstrap
    src, dst = cc.unique("compat-txn-in"), cc.unique("compat-txn-out")
    for topic in (src, dst):
        await create_topic(b, topic, cc.PRODUCE_PARTITIONS, timeout)
    aborted_tag, aborted = src + "-aborted", max(n // 2, 1)
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
    input_committed = await read_values(b, src, n, timeout, "read_committed")
    input_all = await read_values(b, src, n + aborted, timeout, "read_uncommitted")
    out = await read_values(b, dst, n, timeout, "read_committed")
    starts = {p: (o if o is not None else -1) for p, o in committed.items()}
    lag = len(await read_values(b, src, 0, timeout, "read_committed", starts))
    expected = {b"out-" + cc.message_value(src, i) for i in range(n)}
    seen_aborted = sum(1 for v in input_all if v.startswith(aborted_tag.encode()))
    problems = cc.verify_transactions(n, input_committed, aborted_tag, out, expected,
                                      seen_aborted, lag)
    if processed != n:
        problems.insert(0, f"consume-transform-produce processed {processed} of {n}")
    if ctp_error:
        problems.insert(0, ctp_error)
    rep.verdict("transactions", problems,
                f"{n} committed + {aborted} aborted; read_committed saw {len(input_committed)}, "
                f"read_uncommitted {len(input_all)}; {n} transformed once in {transactions} "
                f"transactions with send_offsets_to_transaction(offsets, group_id) "
                f"(TxnOffsetCommit v0: no generation/member); committed offsets {committed} "
                f"seen by OffsetFetch v1 after {visible_after:.1f}s; lag after {lag}")


def check_transactions(rep: cc.Reporter, args) -> None:
    """Committed and aborted transactions, then consume-transform-produce
    with the consumer's offsets committed in the producer's transactions
    (send_offsets_to_transaction): every committed input exactly once."""
    asyncio.run(run_transactions(rep, args))


def main() -> int:
    args = cc.parse_args(__doc__.splitlines()[0])
    rep = cc.Reporter(CLIENT, VERSION)
    return cc.run_main(rep, args, {"produce-fetch": check_produce_fetch, "group": check_group,
                                   "commit-resume": check_commit_resume,
                                   "idempotent": check_idempotent,
                                   "transactions": check_transactions})


if __name__ == "__main__":
    raise SystemExit(main())
