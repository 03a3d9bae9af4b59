#!/usr/bin/env python3
"""smoke_roundtrip.py - produce N messages with confluent-kafka, read them all
back with assign(), verify each came back exactly once and in order, print
msg/s for both phases and write the figures as JSON.

  .venv/bin/python scripts/smoke_roundtrip.py --bootstrap 127.0.0.1:9092 \
      --messages 10000 --json-out results/RUN/smoke.json

Every value carries a run id, a sequence number and the send time (µs), so
the check needs nothing but the data read back: per partition the sequence
numbers must be exactly p, p+P, p+2P, ... (no loss, no duplicate, no
reordering), offsets contiguous from 0, and ListOffsets' high watermark equal
to the count sent. Exit status 1 on any mismatch or client error.

Needs: confluent-kafka (scripts/install-python-deps.sh). Consumer groups are
not used (the broker has none yet): assign() with explicit offsets only.
"""

import argparse
import json
import struct
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# run id (16 bytes) | sequence (u64) | send time µs (u64) | padding
HEADER = struct.Struct(">16sQQ")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=256, help="value bytes (>= %d)" % HEADER.size)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--topic", default=None, help="default: smoke-<run id>")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per phase")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args()
    if a.size < HEADER.size:
        ap.error(f"--size must be >= {HEADER.size}")
    if a.messages < 1:
        ap.error("--messages must be >= 1")
    return a


def create_topic(bootstrap, topic, partitions, timeout):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                              operation_timeout=timeout)[topic]
    fut.result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} not visible with {partitions} partitions")


def produce(a, run_id, topic):
    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "acks": a.acks,
        "compression.type": a.compression,
        "linger.ms": 5,
        "batch.size": 65536,
        "enable.idempotence": False,   # needs InitProducerId, not (yet) in the broker contract
        "message.timeout.ms": int(a.timeout * 1000),
    })
    errors, acked = [], [0]

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += 1

    pad = b"\x5a" * (a.size - HEADER.size)
    t0 = time.perf_counter()
    for seq in range(a.messages):
        value = HEADER.pack(run_id, seq, time.time_ns() // 1000) + pad
        while True:
            try:
                p.produce(topic, value=value, key=b"%d" % seq, partition=seq % a.partitions,
                          on_delivery=on_delivery)
                break
            except BufferError:      # local queue full: serve delivery reports, retry
                p.poll(0.05)
        p.poll(0)
    left = p.flush(a.timeout)
    elapsed = time.perf_counter() - t0
    return {"acked": acked[0], "errors": errors[:10], "error_count": len(errors),
            "unflushed": left, "seconds": elapsed, "msg_per_s": a.messages / elapsed}


def consume(a, run_id, topic):
    c = Consumer({
        "bootstrap.servers": a.bootstrap,
        "group.id": f"smoke-{run_id.hex()}",   # required by the client; no group is joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "error",
    })
    per_part = {p: len(range(p, a.messages, a.partitions)) for p in range(a.partitions)}
    next_seq = {p: p for p in range(a.partitions)}
    next_offset = {p: 0 for p in range(a.partitions)}
    seen = {p: 0 for p in range(a.partitions)}
    problems, latencies_us = [], []
    total = 0
    c.assign([TopicPartition(topic, p, 0) for p in range(a.partitions)])
    t0 = time.perf_counter()
    deadline = time.monotonic() + a.timeout
    try:
        while total < a.messages and time.monotonic() < deadline and len(problems) < 20:
            for m in c.consume(num_messages=5000, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() in (KafkaError._UNSUPPORTED_FEATURE,
                                            KafkaError.COORDINATOR_NOT_AVAILABLE):
                        continue   # group coordinator lookups: no groups yet, assign() needs none
                    problems.append(f"consumer error: {m.error()}")
                    continue
                p, v = m.partition(), m.value() or b""
                total += 1
                seen[p] = seen.get(p, 0) + 1
                if len(v) != a.size:
                    problems.append(f"p{p} offset {m.offset()}: {len(v)} bytes, want {a.size}")
                    continue
                rid, seq, sent_us = HEADER.unpack_from(v)
                if rid != run_id:
                    problems.append(f"p{p} offset {m.offset()}: foreign run id")
                if m.offset() != next_offset.get(p):
                    problems.append(f"p{p}: offset {m.offset()}, want {next_offset.get(p)}")
                if seq != next_seq.get(p):
                    problems.append(f"p{p} offset {m.offset()}: seq {seq}, want {next_seq.get(p)}"
                                    " (loss, duplicate or reordering)")
                if m.key() != b"%d" % seq:
                    problems.append(f"p{p} offset {m.offset()}: key {m.key()!r} for seq {seq}")
                next_offset[p] = m.offset() + 1
                next_seq[p] = seq + a.partitions
                latencies_us.append(time.time_ns() // 1000 - sent_us)
        elapsed = time.perf_counter() - t0
        watermarks = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                      for p in range(a.partitions)}
    finally:
        c.close()
    for p, n in per_part.items():
        if seen.get(p, 0) != n:
            problems.append(f"p{p}: read {seen.get(p, 0)} messages, want {n}")
        if tuple(watermarks[p]) != (0, n):
            problems.append(f"p{p}: watermarks {watermarks[p]}, want (0, {n})")
    latencies_us.sort()
    return {
        "read": total, "seconds": elapsed, "msg_per_s": total / elapsed if elapsed > 0 else 0.0,
        "problems": problems[:20],
        "watermarks": {str(p): list(w) for p, w in watermarks.items()},
        "end_to_end_ms_p50": latencies_us[len(latencies_us) // 2] / 1000 if latencies_us else None,
        "end_to_end_ms_max": latencies_us[-1] / 1000 if latencies_us else None,
    }


def main():
    a = parse_args()
    run_id = uuid.uuid4().bytes
    topic = a.topic or f"smoke-{run_id.hex()[:12]}"
    create_topic(a.bootstrap, topic, a.partitions, a.timeout)
    prod = produce(a, run_id, topic)
    print(f"smoke: produced {prod['acked']}/{a.messages} x {a.size} B acks={a.acks} "
          f"compression={a.compression} in {prod['seconds']:.2f} s = {prod['msg_per_s']:,.0f} msg/s")
    cons = consume(a, run_id, topic)
    print(f"smoke: consumed {cons['read']}/{a.messages} in {cons['seconds']:.2f} s = "
          f"{cons['msg_per_s']:,.0f} msg/s (end-to-end p50 {cons['end_to_end_ms_p50']} ms, "
          "includes produce-phase queueing)")
    ok = (prod["acked"] == a.messages and prod["error_count"] == 0 and prod["unflushed"] == 0
          and cons["read"] == a.messages and not cons["problems"])
    result = {
        "ok": ok, "topic": topic, "messages": a.messages, "size_bytes": a.size,
        "partitions": a.partitions, "acks": a.acks, "compression": a.compression,
        "linger_ms": 5, "batch_size": 65536,
        "client": {"confluent_kafka": __import__("confluent_kafka").__version__,
                   "librdkafka": __import__("confluent_kafka").libversion()[0]},
        "produce": prod, "consume": cons,
    }
    if a.json_out:
        with open(a.json_out, "w") as fh:
            json.dump(result, fh, indent=2)
    if not ok:
        for e in prod["errors"]:
            print(f"smoke: delivery error: {e}", file=sys.stderr)
        for pr in cons["problems"]:
            print(f"smoke: {pr}", file=sys.stderr)
        print("smoke: FAILED", file=sys.stderr)
        return 1
    print(f"smoke: OK - all {a.messages} messages read back exactly once, in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
