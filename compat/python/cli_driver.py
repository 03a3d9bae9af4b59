"""Compatibility driver for Kafka's own admin command-line tools - compat/README.md.

Runs the tools behind kafka-topics.sh, kafka-configs.sh,
kafka-consumer-groups.sh, kafka-delete-records.sh, kafka-transactions.sh,
kafka-log-dirs.sh, kafka-cluster.sh, kafka-metadata-quorum.sh, kafka-acls.sh,
kafka-reassign-partitions.sh and kafka-leader-election.sh
with `java -cp` (kafka_tools.py), as
a user of a Kafka cluster runs them, and prints the JSON result line:
  admin  every step below does what the tool says, checked through the
         tool's own output and, where it changes state, with confluent-kafka:
         topics create / alter --partitions / describe; configs --alter
         (--add-config, --delete-config) / --describe; consumer-groups
         --describe / --reset-offsets --execute / --delete-offsets;
         delete-records; transactions list / describe; log-dirs --describe;
         cluster cluster-id; metadata-quorum describe --status / --replication
         (a quorum of one: this broker leads); cluster unregister of an id
         never registered (BrokerIdNotRegisteredException, exit 1);
         reassign-partitions --execute --throttle / --verify (a move onto
         the replica it has; throttles set, then cleared); configs --alter /
         --describe of a broker-default throttle; leader-election preferred
         (not needed);
         acls --add / --list / --remove (the broker runs
         the StandardAuthorizer with allow.everyone.if.no.acl.found; the
         ACL's topic is then refused to this client, User:ANONYMOUS, with
         TOPIC_AUTHORIZATION_FAILED)
  cluster-ops  the same tools operating a split cluster in racks: manual
         placement, draining a broker under load, follower fetching
         (cluster_ops.py)
  share  share groups (KIP-932) through Kafka's share tools: verifiable
         share consumers, redelivery after the acquisition lock and after a
         SIGKILL, rejected and archived records, kafka-share-groups
         (share_groups.py; standard library only)
  the rest n/a: these tools neither produce nor consume.
Setup (messages, a group's commits, a transaction) uses confluent-kafka.
"""

from __future__ import annotations

import json
import re
import tempfile
from typing import Callable

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import compat_common as cc
import cluster_ops
import share_groups
from kafka_tools import StepFailed, Steps, tools_version

CLIENT = "kafka-cli"
TOOLS = "org.apache.kafka.tools."


def produce(bootstrap: str, topic: str, n: int, timeout: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        producer.produce(topic, key=cc.message_key(i), value=cc.message_value(topic, i),
                         partition=0)
    if producer.flush(timeout):
        raise StepFailed("setup: messages still in flight")


def commit_group(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        consumer.close()


def low_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": cc.unique("compat-lw")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]
    finally:
        consumer.close()


def committed_transaction(bootstrap: str, topic: str, txn_id: str, timeout: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(timeout)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"in a transaction", partition=0)
    producer.commit_transaction(timeout)


def topic_error(bootstrap: str, topic: str, timeout: float) -> int:
    """The error code Metadata answers for `topic` (0: none)."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=timeout)
    err = md.topics[topic].error if topic in md.topics else None
    return err.code() if err is not None else 0


def acl_steps(s: Steps, b: str, timeout: float) -> None:
    """kafka-acls.sh: add, list, see it enforced, remove."""
    acls = TOOLS + "AclCommand"
    topic, prefix = cc.unique("compat-cli-acl"), cc.unique("compat-cli-team") + "-"
    s.tool("acls --add --topic", acls, "--add", "--allow-principal", "User:alice", "--operation", "Read",
           "--operation", "Describe", "--topic", topic,
           expect=lambda o: f"name={topic}, patternType=LITERAL" in o and "principal=User:alice" in o)
    s.tool("acls --add --group --resource-pattern-type prefixed", acls, "--add", "--deny-principal",
           "User:mallory", "--operation", "Read", "--group", prefix, "--resource-pattern-type", "prefixed",
           expect=lambda o: f"name={prefix}, patternType=PREFIXED" in o)
    s.tool("acls --list", acls, "--list",
           expect=lambda o: f"name={topic}," in o and f"name={prefix}," in o
           and "operation=READ, permissionType=ALLOW" in o and "permissionType=DENY" in o)
    code = topic_error(b, topic, timeout)
    s.state("acl enforced", code == KafkaError.TOPIC_AUTHORIZATION_FAILED,
            f"Metadata for {topic} (ACL for User:alice only) answered error {code} to User:ANONYMOUS")
    s.tool("acls --remove --force", acls, "--remove", "--force", "--topic", topic,
           expect=lambda o: "Error" not in o)
    s.tool("acls --remove --force --group", acls, "--remove", "--force", "--group", prefix,
           "--resource-pattern-type", "prefixed", expect=lambda o: "Error" not in o)
    s.tool("acls --list after remove", acls, "--list", expect=lambda o: f"name={topic}," not in o)


def reassign_steps(s: Steps, b: str, topic: str) -> None:
    """kafka-reassign-partitions.sh and kafka-leader-election.sh on one broker:
    a move of partition 0 onto the replica it has, under a throttle (set by
    --execute, cleared by --verify), broker-default throttle configs, and a
    preferred election that is not needed."""
    broker_id = next(iter(AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).brokers))
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [broker_id]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan, f)
    reassign = TOOLS + "reassign.ReassignPartitionsCommand"
    s.tool("reassign-partitions --execute --throttle", reassign, "--execute",
           "--reassignment-json-file", f.name, "--throttle", "1000000",
           expect=lambda o: f"Successfully started partition reassignment for {topic}-0" in o
           and "throttle limit was set to 1000000 B/s" in o)
    s.tool("reassign-partitions --verify", reassign, "--verify", "--reassignment-json-file", f.name,
           expect=lambda o: f"Reassignment of partition {topic}-0 is completed" in o
           and "Clearing broker-level throttles" in o)
    configs = "kafka.admin.ConfigCommand"
    s.tool("configs --alter brokers --entity-default", configs, "--entity-type", "brokers",
           "--entity-default", "--alter", "--add-config", "follower.replication.throttled.rate=5000",
           expect=lambda o: "Completed updating default config for brokers" in o)
    s.tool("configs --describe brokers --entity-default", configs, "--entity-type", "brokers",
           "--entity-default", "--describe",
           expect=lambda o: "follower.replication.throttled.rate=5000" in o)
    s.tool("configs --alter brokers --delete-config", configs, "--entity-type", "brokers",
           "--entity-default", "--alter", "--delete-config", "follower.replication.throttled.rate",
           expect=lambda o: "Completed updating default config for brokers" in o)
    s.tool("leader-election --election-type preferred (not needed)",
           TOOLS + "LeaderElectionCommand", "--election-type", "preferred", "--topic", topic,
           "--partition", "0", expect=lambda o: "Valid replica already elected" in o)


def check_admin(rep: cc.Reporter, args) -> None:
    b, timeout = args.bootstrap, args.stage_timeout
    s = Steps(b, timeout)
    topic, group, txn_id = cc.unique("compat-cli"), cc.unique("compat-cli-group"), cc.unique("compat-cli-txn")
    try:
        s.tool("topics --create", TOOLS + "TopicCommand", "--create", "--topic", topic,
               "--partitions", "2", "--replication-factor", "1",
               expect=lambda o: f"Created topic {topic}." in o)
        s.tool("topics --alter --partitions", TOOLS + "TopicCommand", "--alter", "--topic", topic,
               "--partitions", "4", expect=lambda o: "Error" not in o)
        s.tool("topics --describe", TOOLS + "TopicCommand", "--describe", "--topic", topic,
               expect=lambda o: "PartitionCount: 4" in o and o.count("Leader: ") == 4)
        s.tool("configs --alter --add-config", "kafka.admin.ConfigCommand", "--entity-type", "topics",
               "--entity-name", topic, "--alter",
               "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]",
               expect=lambda o: f"Completed updating config for topic {topic}." in o)
        s.tool("configs --describe", "kafka.admin.ConfigCommand", "--entity-type", "topics",
               "--entity-name", topic, "--describe",
               expect=lambda o: "retention.ms=3600000" in o and "cleanup.policy=compact,delete" in o)
        s.tool("configs --alter --delete-config", "kafka.admin.ConfigCommand", "--entity-type",
               "topics", "--entity-name", topic, "--alter", "--delete-config", "retention.ms",
               expect=lambda o: "Completed updating config" in o)
        s.tool("configs --describe after delete", "kafka.admin.ConfigCommand", "--entity-type",
               "topics", "--entity-name", topic, "--describe",
               expect=lambda o: "retention.ms=" not in o and "cleanup.policy=" in o)

        produce(b, topic, 10, timeout)
        commit_group(b, group, topic, 7)
        groups = TOOLS + "consumer.group.ConsumerGroupCommand"
        row = re.compile(rf"^{re.escape(group)}\s+{re.escape(topic)}\s+0\s+7\s+10\s+3\b", re.M)
        s.tool("consumer-groups --describe", groups, "--describe", "--group", group,
               expect=lambda o: row.search(o) is not None)
        s.tool("consumer-groups --reset-offsets --to-earliest --execute", groups, "--reset-offsets",
               "--group", group, "--topic", f"{topic}:0", "--to-earliest", "--execute",
               expect=lambda o: re.search(rf"{re.escape(topic)}\s+0\s+0\b", o) is not None)
        s.state("reset offset committed", committed(b, group, topic) == 0,
                f"committed offset {committed(b, group, topic)}, want 0")
        s.tool("consumer-groups --delete-offsets", groups, "--delete-offsets", "--group", group,
               "--topic", topic, expect=lambda o: "Successful" in o or "successful" in o)
        after = committed(b, group, topic)
        s.state("offsets deleted", after < 0, f"committed offset {after} survived --delete-offsets")

        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"partitions": [{"topic": topic, "partition": 0, "offset": 4}], "version": 1}, f)
        s.tool("delete-records", TOOLS + "DeleteRecordsCommand", "--offset-json-file", f.name,
               expect=lambda o: "low_watermark: 4" in o)
        lw = low_watermark(b, topic)
        s.state("low watermark moved", lw == 4, f"low watermark {lw}, want 4")

        committed_transaction(b, topic, txn_id, timeout)
        s.tool("transactions list", TOOLS + "TransactionsCommand", "list",
               expect=lambda o: txn_id in o)
        s.tool("transactions describe", TOOLS + "TransactionsCommand", "describe",
               "--transactional-id", txn_id,
               expect=lambda o: txn_id in o and "CompleteCommit" in o)
        s.tool("log-dirs --describe", TOOLS + "LogDirsCommand", "--describe", "--topic-list", topic,
               expect=lambda o: f'"partition":"{topic}-3"' in o.replace(" ", ""))
        s.tool("cluster cluster-id", TOOLS + "ClusterTool", subcommand="cluster-id",
               expect=lambda o: re.search(r"Cluster ID: \S+", o) is not None)
        quorum = TOOLS + "MetadataQuorumCommand"
        s.tool("metadata-quorum describe --status", quorum, "describe", "--status",
               expect=lambda o: re.search(r"^LeaderId:\s+\d+$", o, re.M) is not None
               and re.search(r"^HighWatermark:\s+[1-9]\d*$", o, re.M) is not None
               and "CONTROLLER://" in o)
        s.tool("metadata-quorum describe --replication", quorum, "describe", "--replication",
               expect=lambda o: re.search(r"^\d+\s+\S+\s+[1-9]\d*\s+0\s+\d+\s+\d+\s+Leader\b",
                                          o, re.M) is not None)
        s.tool("cluster unregister (never registered)", TOOLS + "ClusterTool", "--id", "4242",
               subcommand="unregister", exit_code=1,
               expect=lambda o: "BrokerIdNotRegisteredException" in o)
        reassign_steps(s, b, topic)
        acl_steps(s, b, timeout)
    except StepFailed as e:
        rep.emit("admin", "fail", f"after {len(s.done)} steps ok: {e}")
        return
    rep.emit("admin", "pass", f"{len(s.done)} steps: " + "; ".join(s.done))


def not_applicable(check: str, reason: str):
    return lambda rep, args: rep.emit(check, "n/a", reason)


def check_group(rep: cc.Reporter, args) -> None:
    rep.emit(cc.group_check_name(args.assignor), "n/a", "the admin tools join no group")


def main() -> int:
    args = cc.parse_args(__doc__.splitlines()[0])
    rep = cc.Reporter(CLIENT, tools_version())
    why = "Kafka's admin tools neither produce nor consume"

    def produce_fetch(rep: cc.Reporter, args) -> None:
        rep.emit("produce", "n/a", why)
        rep.emit("fetch", "n/a", why)

    return cc.run_main(rep, args, {
        "produce-fetch": produce_fetch,
        "group": check_group,
        "commit-resume": not_applicable("commit-resume", why),
        "idempotent": not_applicable("idempotent", why),
        "transactions": not_applicable(
            "transactions", "kafka-transactions.sh list/describe is part of the admin check"),
        "admin": check_admin,
        "cluster-ops": cluster_ops.check_cluster_ops,
        "share": share_groups.check_share,
    })


if __name__ == "__main__":
    raise SystemExit(main())
