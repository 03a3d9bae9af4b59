"""The cluster-ops check's client-quota steps (compat/README.md): Kafka
4.3.1's kafka-configs (kafka.admin.ConfigCommand) sets, shows and removes
client quotas on a Chronik cluster as on Kafka's.

Owns the steps, each checked through the tool's output:
  1. --alter --add-config producer_byte_rate on a client id, through one
     broker; --describe through another shows it (the metadata quorum
     carries it to every broker).
  2. A producer with that client id, writing to a partition led by a third
     broker for a few seconds, is held near the quota: what it gets
     acknowledged stays under a bound far below what it sends unheld, and
     the brokers' chronik_client_quota_throttle_time_ms_total counts its
     throttle.
  3. Users (--entity-type users, one user and --entity-default), users with
     client ids, and IP addresses (--entity-type ips, connection_creation_rate)
     set and shown, each through its own --describe.
  4. --delete-config removes them: --describe no longer shows them.
"""

from __future__ import annotations

import re
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

import compat_common as cc
from kafka_tools import Steps

CONFIGS = "kafka.admin.ConfigCommand"
QUOTA = 50 * 1024  # bytes per second
SECONDS = 5.0


def throttle_ms(metrics: list[str], client_id: str) -> float:
    """Sum over the brokers of the throttle time given to `client_id`."""
    total = 0.0
    pattern = re.compile(
        r'^chronik_client_quota_throttle_time_ms_total\{[^}]*client_id="' + re.escape(client_id)
        + r'"[^}]*\} (\S+)$', re.M)
    for addr in metrics:
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
            total += sum(float(v) for v in pattern.findall(r.read().decode()))
    return total


def flood(bootstrap: str, topic: str, client_id: str) -> int:
    """Bytes acknowledged to a producer sending as fast as it can for SECONDS."""
    acked = [0]

    def delivered(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": "1",
                         "linger.ms": 5, "batch.size": 16384,
                         "queue.buffering.max.kbytes": 1024})
    value = b"q" * 1024
    end = time.time() + SECONDS
    while time.time() < end:
        try:
            producer.produce(topic, value=value, partition=0, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    counted = acked[0]  # what arrived after the window does not count
    producer.purge()  # the queue would drain at the quota's pace
    producer.flush(10)
    return counted


def shown(via: Steps, name: str, entity: list[str], expect, timeout: float) -> None:
    """--describe through `via` until `expect` holds of its output (the
    change reaches every broker through the metadata quorum)."""
    deadline, out = time.time() + timeout, ""
    while True:
        r = via.run(CONFIGS, *entity, "--describe")
        out = r.stdout + r.stderr
        if (r.returncode == 0 and expect(out)) or time.time() > deadline:
            break
        time.sleep(0.5)
    tail = " | ".join(out.strip().splitlines()[-4:])[:600]
    via.state(name, r.returncode == 0 and expect(out), f"exit {r.returncode}, output: {tail}")


def quota_steps(s_through, args, admin: AdminClient, brokers: list[int], metrics: list[str]) -> None:
    """`s_through(broker id)`: a Steps whose tools talk to that broker only."""
    timeout = args.stage_timeout
    a, b, c = brokers[:3]
    client = cc.unique("compat-quota-client")
    via_a, via_b = s_through(a), s_through(b)
    clients = ["--entity-type", "clients", "--entity-name", client]
    via_a.tool(f"configs --alter --add-config producer_byte_rate (clients, through broker {a})", CONFIGS,
               *clients, "--alter", "--add-config", f"producer_byte_rate={QUOTA}",
               expect=lambda o: "Completed updating" in o)
    shown(via_b, f"configs --describe (clients, through broker {b})", clients,
          lambda o: f"producer_byte_rate={QUOTA}.0" in o, timeout)

    topic = cc.unique("compat-quota")
    via_a.tool(f"topics --create --replica-assignment {c}", "org.apache.kafka.tools.TopicCommand",
               "--create", "--topic", topic, "--replica-assignment", str(c),
               expect=lambda o: f"Created topic {topic}." in o)
    before = throttle_ms(metrics, client)
    acked = flood(args.bootstrap, topic, client)
    bound = 1.5 * QUOTA * (SECONDS + 11) + 256 * 1024  # Kafka's 11 one-second windows
    via_a.state(f"producer held near its quota on broker {c} ({acked // 1024} KiB in {SECONDS:.0f} s, "
                f"quota {QUOTA // 1024} KiB/s)", acked <= bound, f"{acked} bytes acknowledged, bound {bound:.0f}")
    held = throttle_ms(metrics, client) - before
    via_a.state(f"throttle time counted ({held:.0f} ms)", held > 0,
                "chronik_client_quota_throttle_time_ms_total did not grow for the client")

    user = cc.unique("compat-quota-user")
    entities = [
        (["--entity-type", "users", "--entity-name", user], "consumer_byte_rate=2048000",
         f"user-principal '{user}' are consumer_byte_rate=2048000.0"),
        (["--entity-type", "users", "--entity-default"], "request_percentage=200",
         "the default user-principal are request_percentage=200.0"),
        (["--entity-type", "users", "--entity-name", user, *clients], "producer_byte_rate=4096000",
         f"user-principal '{user}', client-id '{client}' are producer_byte_rate=4096000.0"),
        (["--entity-type", "ips", "--entity-name", "127.0.0.77"], "connection_creation_rate=100",
         "ip '127.0.0.77' are connection_creation_rate=100.0"),
    ]
    for entity, config, _ in entities:
        via_a.tool(f"configs --alter --add-config {config} ({' '.join(entity[1::2])})", CONFIGS, *entity,
                   "--alter", "--add-config", config, expect=lambda o: "Completed updating" in o)
    for entity, config, line in entities:
        shown(via_b, f"configs --describe ({' '.join(entity[1::2])})", entity, lambda o, line=line: line in o,
              timeout)
    for entity, config, _ in entities + [(clients, "producer_byte_rate", "")]:
        key = config.split("=")[0]
        via_a.tool(f"configs --alter --delete-config {key} ({' '.join(entity[1::2])})", CONFIGS, *entity,
                   "--alter", "--delete-config", key, expect=lambda o: "Completed updating" in o)
    # With entity types and no names, Kafka's tool lists the named entities
    # of exactly those types (a strict filter).
    for entity in (["--entity-type", "users"], ["--entity-type", "users", "--entity-default"],
                   ["--entity-type", "users", "--entity-type", "clients"], ["--entity-type", "clients"],
                   ["--entity-type", "ips"]):
        shown(via_b, f"configs --describe {' '.join(entity)} after --delete-config", entity,
              lambda o: user not in o and client not in o and "127.0.0.77" not in o
              and "default user-principal" not in o, timeout)
