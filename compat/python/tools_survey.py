"""Runs every Kafka CLI tool and subcommand an operator uses for topics,
configs, groups, reassignment, elections, the quorum, features, log
directories, ACLs, records, transactions and the cluster against a running
cluster, and prints one Markdown row per run: the command, its exit status
and the output's telling line (docs/cluster.md, "Kafka's tools against
Chronik", is written from it).

    .venv/bin/python compat/python/tools_survey.py --bootstrap HOST:PORT[,...]

Owns: the list of runs and their setup (a topic with records, a group with
a committed offset, a committed transaction, made with confluent-kafka).
Must not: judge a run beyond its exit status — the table's reader does,
with the output line beside it. Every run is bounded (kafka_tools.java).
"""

from __future__ import annotations

import argparse
import json
import tempfile

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import compat_common as cc
from kafka_tools import java

T = "org.apache.kafka.tools."
CONFIGS = "kafka.admin.ConfigCommand"
GROUPS = T + "consumer.group.ConsumerGroupCommand"
REASSIGN = T + "reassign.ReassignPartitionsCommand"


def setup(bootstrap: str, topic: str, group: str, txn: str) -> None:
    """A 3-partition topic with 30 records, a group's commit, a transaction."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(topic, key=cc.message_key(i), value=cc.message_value(topic, i), partition=i % 3)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    consumer.close()
    txp = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn})
    txp.init_transactions(30)
    txp.begin_transaction()
    txp.produce(topic, key=b"k", value=b"txn", partition=0)
    txp.commit_transaction(30)


def runs(topic: str, group: str, txn: str, files: dict[str, str], brokers: list[int]) -> list[tuple]:
    """(tool, subcommand shown, main class, argv after --bootstrap-server B)."""
    b0 = str(brokers[0])
    other = "topic-survey-created"
    return [
        ("kafka-topics", "--create", T + "TopicCommand", ["--create", "--topic", other, "--partitions", "2", "--replication-factor", "2"]),
        ("kafka-topics", "--create --replica-assignment", T + "TopicCommand", ["--create", "--topic", other + "-placed", "--replica-assignment", ":".join(map(str, brokers[:2]))]),
        ("kafka-topics", "--list", T + "TopicCommand", ["--list"]),
        ("kafka-topics", "--describe", T + "TopicCommand", ["--describe", "--topic", topic]),
        ("kafka-topics", "--describe --under-replicated-partitions", T + "TopicCommand", ["--describe", "--under-replicated-partitions"]),
        ("kafka-topics", "--describe --unavailable-partitions", T + "TopicCommand", ["--describe", "--unavailable-partitions"]),
        ("kafka-topics", "--describe --at-min-isr-partitions", T + "TopicCommand", ["--describe", "--at-min-isr-partitions"]),
        ("kafka-topics", "--alter --partitions", T + "TopicCommand", ["--alter", "--topic", other, "--partitions", "3"]),
        ("kafka-topics", "--delete", T + "TopicCommand", ["--delete", "--topic", other]),
        ("kafka-configs", "--describe topic", CONFIGS, ["--entity-type", "topics", "--entity-name", topic, "--describe"]),
        ("kafka-configs", "--alter topic", CONFIGS, ["--entity-type", "topics", "--entity-name", topic, "--alter", "--add-config", "retention.ms=86400000"]),
        ("kafka-configs", "--alter __consumer_offsets", CONFIGS, ["--entity-type", "topics", "--entity-name", "__consumer_offsets", "--alter", "--add-config", "segment.bytes=104857600"]),
        ("kafka-configs", "--describe broker", CONFIGS, ["--entity-type", "brokers", "--entity-name", b0, "--describe"]),
        ("kafka-configs", "--describe broker --all", CONFIGS, ["--entity-type", "brokers", "--entity-name", b0, "--describe", "--all"]),
        ("kafka-configs", "--alter broker throttle", CONFIGS, ["--entity-type", "brokers", "--entity-name", b0, "--alter", "--add-config", "leader.replication.throttled.rate=1000000"]),
        ("kafka-configs", "--alter broker (static config)", CONFIGS, ["--entity-type", "brokers", "--entity-name", b0, "--alter", "--add-config", "log.cleaner.threads=2"]),
        ("kafka-configs", "--describe broker-loggers", CONFIGS, ["--entity-type", "broker-loggers", "--entity-name", b0, "--describe"]),
        ("kafka-configs", "--alter users (SCRAM)", CONFIGS, ["--entity-type", "users", "--entity-name", "survey", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]"]),
        ("kafka-configs", "--describe users", CONFIGS, ["--entity-type", "users", "--describe"]),
        ("kafka-configs", "--alter clients (quota)", CONFIGS, ["--entity-type", "clients", "--entity-name", "survey", "--alter", "--add-config", "producer_byte_rate=1048576"]),
        ("kafka-configs", "--describe client-metrics", CONFIGS, ["--entity-type", "client-metrics", "--describe"]),
        ("kafka-configs", "--describe groups", CONFIGS, ["--entity-type", "groups", "--entity-name", group, "--describe"]),
        ("kafka-consumer-groups", "--list", GROUPS, ["--list"]),
        ("kafka-consumer-groups", "--describe", GROUPS, ["--describe", "--group", group]),
        ("kafka-consumer-groups", "--describe --members", GROUPS, ["--describe", "--group", group, "--members"]),
        ("kafka-consumer-groups", "--describe --state", GROUPS, ["--describe", "--group", group, "--state"]),
        ("kafka-consumer-groups", "--reset-offsets --to-earliest --execute", GROUPS, ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"]),
        ("kafka-consumer-groups", "--delete-offsets", GROUPS, ["--delete-offsets", "--group", group, "--topic", topic]),
        ("kafka-consumer-groups", "--delete", GROUPS, ["--delete", "--group", group]),
        ("kafka-groups", "--list", T + "GroupsCommand", ["--list"]),
        ("kafka-share-groups", "--list", T + "consumer.group.ShareGroupCommand", ["--list"]),
        ("kafka-streams-groups", "--list", T + "streams.StreamsGroupCommand", ["--list"]),
        ("kafka-reassign-partitions", "--generate", REASSIGN, ["--generate", "--topics-to-move-json-file", files["move"], "--broker-list", ",".join(map(str, brokers))]),
        ("kafka-reassign-partitions", "--execute --throttle", REASSIGN, ["--execute", "--reassignment-json-file", files["plan"], "--throttle", "10000000"]),
        ("kafka-reassign-partitions", "--list", REASSIGN, ["--list"]),
        ("kafka-reassign-partitions", "--verify", REASSIGN, ["--verify", "--reassignment-json-file", files["plan"]]),
        ("kafka-reassign-partitions", "--cancel", REASSIGN, ["--cancel", "--reassignment-json-file", files["plan"]]),
        ("kafka-reassign-partitions", "--execute (log_dirs)", REASSIGN, ["--execute", "--reassignment-json-file", files["log_dirs"]]),
        ("kafka-leader-election", "--election-type preferred", T + "LeaderElectionCommand", ["--election-type", "preferred", "--all-topic-partitions"]),
        ("kafka-leader-election", "--election-type unclean", T + "LeaderElectionCommand", ["--election-type", "unclean", "--topic", topic, "--partition", "0"]),
        ("kafka-metadata-quorum", "describe --status", T + "MetadataQuorumCommand", ["describe", "--status"]),
        ("kafka-metadata-quorum", "describe --replication", T + "MetadataQuorumCommand", ["describe", "--replication"]),
        ("kafka-metadata-quorum", "describe --replication --human-readable", T + "MetadataQuorumCommand", ["describe", "--replication", "--human-readable"]),
        ("kafka-features", "describe", T + "FeatureCommand", ["describe"]),
        ("kafka-features", "version-mapping", T + "FeatureCommand", ["version-mapping"]),
        ("kafka-features", "upgrade --feature eligible.leader.replicas.version=1", T + "FeatureCommand", ["upgrade", "--feature", "eligible.leader.replicas.version=1"]),
        ("kafka-features", "downgrade --feature eligible.leader.replicas.version=0", T + "FeatureCommand", ["downgrade", "--feature", "eligible.leader.replicas.version=0"]),
        ("kafka-log-dirs", "--describe", T + "LogDirsCommand", ["--describe", "--topic-list", topic]),
        ("kafka-acls", "--list", T + "AclCommand", ["--list"]),
        ("kafka-delete-records", "--offset-json-file", T + "DeleteRecordsCommand", ["--offset-json-file", files["delete"]]),
        ("kafka-get-offsets", "--topic", T + "GetOffsetShell", ["--topic", topic]),
        ("kafka-transactions", "list", T + "TransactionsCommand", ["list"]),
        ("kafka-transactions", "describe", T + "TransactionsCommand", ["describe", "--transactional-id", txn]),
        ("kafka-transactions", "describe-producers", T + "TransactionsCommand", ["describe-producers", "--topic", topic, "--partition", "0"]),
        ("kafka-transactions", "find-hanging", T + "TransactionsCommand", ["find-hanging", "--broker-id", b0]),
        ("kafka-cluster", "cluster-id", T + "ClusterTool", ["cluster-id"]),
        ("kafka-cluster", "list-endpoints", T + "ClusterTool", ["list-endpoints"]),
        ("kafka-broker-api-versions", "", T + "BrokerApiVersionsCommand", []),
        ("kafka-client-metrics", "--list", T + "ClientMetricsCommand", ["--list"]),
        ("kafka-delegation-tokens", "--describe", T + "DelegationTokenCommand", ["--describe", "--owner-principal", "User:survey"]),
    ]


# tools that parse their subcommand before --bootstrap-server
SUBCOMMAND_FIRST = {T + "ClusterTool"}


def telling_line(out: str) -> str:
    """The first line naming an error, else the last non-empty line."""
    lines = [l.strip() for l in out.splitlines() if l.strip() and not l.startswith("SLF4J")]
    for l in lines:
        if "Exception" in l or "Error" in l or "error" in l:
            return l[:160]
    return lines[-1][:160] if lines else ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    args = p.parse_args()
    b = args.bootstrap
    topic, group, txn = cc.unique("survey"), cc.unique("survey-group"), cc.unique("survey-txn")
    setup(b, topic, group, txn)
    brokers = sorted(AdminClient({"bootstrap.servers": b}).list_topics(timeout=30).brokers)
    md = AdminClient({"bootstrap.servers": b}).list_topics(topic=topic, timeout=30)
    replicas = list(md.topics[topic].partitions[1].replicas)
    spare = [x for x in brokers if x not in replicas]
    target = replicas[:-1] + spare[:1] if spare else list(reversed(replicas))
    files = {}
    for name, doc in {
        "move": {"version": 1, "topics": [{"topic": topic}]},
        "plan": {"version": 1, "partitions": [{"topic": topic, "partition": 1, "replicas": target}]},
        "log_dirs": {"version": 1, "partitions": [{"topic": topic, "partition": 2, "replicas": list(md.topics[topic].partitions[2].replicas), "log_dirs": ["/elsewhere"] * len(md.topics[topic].partitions[2].replicas)}]},
        "delete": {"version": 1, "partitions": [{"topic": topic, "partition": 2, "offset": 3}]},
    }.items():
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        files[name] = f.name
    print("| tool | subcommand | exit | what it printed |")
    print("|---|---|---:|---|")
    for tool, shown, main_class, argv in runs(topic, group, txn, files, brokers):
        head = argv[:1] if main_class in SUBCOMMAND_FIRST and argv else []
        rest = argv[1:] if head else argv
        r = java(main_class, *head, "--bootstrap-server", b, *rest, timeout=120)
        line = telling_line(r.stdout + r.stderr).replace("|", "\\|")
        print(f"| {tool} | {shown} | {r.returncode} | {line} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
