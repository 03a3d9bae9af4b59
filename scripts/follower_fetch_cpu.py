"""The leader's CPU per consumed message with its consumers reading from the
leader against reading from a follower in their rack (KIP-392), on a real
3-node cluster in racks a, b, c (docs/performance.md, "Consumers fetching
from the follower in their rack").

    .venv/bin/python scripts/follower_fetch_cpu.py [--messages N] [--rounds R]

Owns: the scenario — every partition of one topic led by node 1 (a manual
assignment 1:2:3), N records produced once, then read whole R times by a
consumer without client.rack (node 1 serves) and R times by one with
client.rack=b (node 2 serves), alternately; for each read, node 1's CPU time
(utime + stime from /proc) over the read, divided by N. Prints one line per
read and the medians. Must not: judge the figures — they go to the docs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
BIN = os.environ.get("CHRONIK_SERVER_BIN", str(REPO / "target/release/chronik-server"))
RACKS = ["a", "b", "c"]
PARTITIONS = 6
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start(work: Path, port: int) -> list[subprocess.Popen]:
    secret = work / "cluster.secret"
    secret.write_text(os.urandom(32).hex())
    peers = ",".join(f"{i}@127.0.0.{i}" for i in (1, 2, 3))
    procs = []
    for i in (1, 2, 3):
        data = work / f"node-{i}"
        data.mkdir()
        procs.append(subprocess.Popen(
            [BIN, "--node-id", str(i), "--peers", peers, "--listen", f"127.0.0.{i}:{port}",
             "--raft-listen", f"127.0.0.{i}:{port + 1}", "--metrics-listen", f"127.0.0.{i}:{port + 2}",
             "--data-dir", str(data), "--cluster-secret-file", str(secret),
             "--broker-rack", RACKS[i - 1], "--replica-selector-class", "RackAwareReplicaSelector",
             "--default-replication-factor", "3", "--min-insync-replicas", "2"],
            stdout=open(data / "stdout.log", "wb"), stderr=open(data / "stderr.log", "wb")))
    deadline = time.time() + 60
    for i in (1, 2, 3):
        log = work / f"node-{i}" / "stdout.log"
        while b"LISTENING" not in log.read_bytes():
            if time.time() > deadline:
                raise SystemExit(f"node {i} did not start: see {work}")
            time.sleep(0.2)
    return procs


def read_all(bootstrap: str, topic: str, n: int, rack: str | None) -> None:
    config = {"bootstrap.servers": bootstrap, "group.id": f"cpu-{time.time_ns()}",
              "enable.auto.commit": False, "fetch.max.bytes": 4 << 20}
    if rack:
        config["client.rack"] = rack
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, deadline = 0, time.time() + 300
    while got < n and time.time() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if not msg.error():
                got += 1
    consumer.close()
    if got < n:
        raise SystemExit(f"read {got} of {n}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--port", type=int, default=29092)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="follower-cpu-"))
    procs = start(work, args.port)
    try:
        bootstrap = f"127.0.0.1:{args.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = "follower-cpu"
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replica_assignment=[[1, 2, 3]] * PARTITIONS)])[topic].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
        value = b"x" * 256
        for i in range(args.messages):
            while True:
                try:
                    producer.produce(topic, value=value, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.flush(120)
        time.sleep(3)  # followers learn the high watermark
        results: dict[str, list[float]] = {"leader": [], "follower (client.rack=b)": []}
        for r in range(args.rounds):
            for label, rack in (("leader", None), ("follower (client.rack=b)", "b")):
                before = cpu_seconds(procs[0].pid)
                read_all(bootstrap, topic, args.messages, rack)
                spent = cpu_seconds(procs[0].pid) - before
                per = spent / args.messages * 1e6
                results[label].append(per)
                print(f"round {r + 1}: consumers on the {label}: node 1 (leader) {spent:.2f} s CPU, {per:.2f} µs/msg",
                      flush=True)
        for label, values in results.items():
            print(f"median, consumers on the {label}: leader CPU {statistics.median(values):.2f} µs/msg")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
