"""Compatibility driver for Kafka's own perf tools (kafka-tools ProducerPerformance
and ConsumerPerformance) - compat/README.md.

Runs the tools with `java -cp` (kafka_tools.py) and prints the JSON result line(s):
  produce  ProducerPerformance --num-records N --record-size 256 --throughput -1
           acks=all (idempotence on: the Java client's default); passes when it
           reports N records sent, logs no exception and the partitions' log end
           offsets add up to exactly N
  fetch    ConsumerPerformance --num-records N (a consumer group of one) reads
           all N back
  the rest n/a: the tools neither verify content nor run several members.
The topic is created (3 partitions) with confluent-kafka's AdminClient, setup only.
"""

from __future__ import annotations

import re

from confluent_kafka import Consumer, TopicPartition

import compat_common as cc
from confluent_driver import create_topic
from kafka_tools import java, tools_version

CLIENT = "kafka-tools (perf)"
RECORD_SIZE = 256
SENT = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec .*?([\d.]+) ms avg latency", re.M)


def log_end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": cc.unique("compat-offsets")})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    n = args.messages
    topic = cc.unique("compat-perf")
    create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
    r = java("org.apache.kafka.tools.ProducerPerformance", "--bootstrap-server", args.bootstrap,
             "--topic", topic, "--num-records", str(n), "--record-size", str(RECORD_SIZE),
             "--throughput", "-1", "--command-property", "acks=all",
             timeout=args.stage_timeout * 3)
    problems = []
    sent = SENT.findall(r.stdout)
    if r.returncode != 0:
        problems.append(f"exit status {r.returncode}: {r.stderr.strip()[-300:]}")
    if not sent or int(sent[-1][0]) != n:
        problems.append(f"summary says {sent[-1][0] if sent else 'nothing'} records sent, want {n}")
    if "Exception" in r.stdout + r.stderr:
        line = next(ln for ln in (r.stdout + r.stderr).splitlines() if "Exception" in ln)
        problems.append(f"exception logged: {line.strip()[:300]}")
    ends = log_end_offsets(args.bootstrap, topic, cc.PRODUCE_PARTITIONS)
    if sum(ends.values()) != n:
        problems.append(f"log end offsets {ends} add up to {sum(ends.values())}, want {n}")
    rate = f"{float(sent[-1][1]):.0f} records/s, {sent[-1][2]} ms avg latency" if sent else ""
    rep.verdict("produce", problems,
                f"ProducerPerformance: {n} x {RECORD_SIZE} B acks=all (idempotent default), "
                f"{rate}; log end offsets {ends}")
    r = java("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", args.bootstrap,
             "--topic", topic, "--num-records", str(n), "--timeout", str(int(args.stage_timeout * 1000)),
             "--group", cc.unique("compat-perf"), timeout=args.stage_timeout * 3)
    problems = []
    lines = r.stdout.splitlines()
    at = next((k for k, ln in enumerate(lines) if ln.startswith("start.time")), None)
    row = {}
    if at is not None and at + 1 < len(lines):
        row = dict(zip([h.strip() for h in lines[at].split(",")],
                       [v.strip() for v in lines[at + 1].split(",")]))
    consumed = row.get("data.consumed.in.nMsg")
    if r.returncode != 0:
        problems.append(f"exit status {r.returncode}: {r.stderr.strip()[-300:]}")
    if consumed != str(n):
        problems.append(f"data.consumed.in.nMsg = {consumed}, want {n}")
    if "Exception" in r.stderr:
        problems.append(f"logged: {r.stderr.strip()[-300:]}")
    rep.verdict("fetch", problems,
                f"ConsumerPerformance (group of one) read {consumed} records, "
                f"{row.get('nMsg.sec', '?')} msg/s, rebalance {row.get('rebalance.time.ms', '?')} ms")


def not_applicable(check: str, reason: str):
    """A check the tools cannot do (commit-resume: phase a's n/a ends it, no restart)."""
    return lambda rep, args: rep.emit(check, "n/a", reason)


def check_group(rep: cc.Reporter, args) -> None:
    rep.emit(cc.group_check_name(args.assignor), "n/a",
             "ConsumerPerformance runs one member; group splits are the Java client row's checks")


def main() -> int:
    args = cc.parse_args(__doc__.splitlines()[0])
    rep = cc.Reporter(CLIENT, tools_version())
    return cc.run_main(rep, args, {
        "produce-fetch": check_produce_fetch,
        "group": check_group,
        "commit-resume": not_applicable(
            "commit-resume", "the perf tools never resume a group; see the Java client row"),
        "idempotent": not_applicable(
            "idempotent", "ProducerPerformance produces idempotently by default (the produce "
                          "check) but cannot verify exactly-once order; see the Java client row"),
        "transactions": not_applicable(
            "transactions", "ProducerPerformance's --transactional-id only times transactions; "
                            "the Java client row verifies them"),
    })


if __name__ == "__main__":
    raise SystemExit(main())
