"""The kafka-cli row's cluster-ops check (compat/README.md): Kafka's own tools
operating a split cluster as an operator moving over from Kafka would — 3
controllers and 5 brokers in racks (compat/run.sh starts it).

Owns the steps, each checked through the tool's output and, where it changes
state, with confluent-kafka:
  1. kafka-topics --create --replica-assignment: the replicas land exactly
     where named; --alter --partitions --replica-assignment places the new
     partitions the same way.
  2. Draining a broker that holds replicas of the internal topics: every
     replica on it moves (kafka-reassign-partitions --execute --throttle)
     while an idempotent acks=all producer writes and a group commits
     offsets; --verify is run until the moves are complete and it has
     cleared the throttles (an IncrementalAlterConfigs on every moved topic,
     __consumer_offsets and __transaction_state included); nothing on the
     drained broker is left, and every acknowledged record is read back
     exactly once.
  3. KIP-392: a consumer with client.rack set to a follower's rack reads a
     topic whose leader is in another rack; the brokers' own counter
     (chronik_consumer_fetch_bytes_total{replica="follower"}) shows the
     bytes served by the follower.
  4. KIP-853, replacing the active controller under an acks=all load as
     docs/cluster.md says: a new controller joins with no --peers entry,
     kafka-metadata-quorum add-controller (its controller.properties naming
     its metadata.log.dir) adds it, remove-controller removes the active
     one, describe shows the new voters with their directory ids and
     another leader, topics can still be created, and every acknowledged
     record is read back.
  5. Client quotas with kafka-configs (client_quotas.py): set through one
     broker, shown through another, a producer held near its quota on a
     third; users, defaults, user and client id, IPs; removed.
Needs: the brokers' metrics endpoints in $COMPAT_BROKER_METRICS (host:port,
comma-separated); for step 4 the cluster's directory ($COMPAT_CLUSTER_DIR,
node N's data in node-N/data), its raft port ($COMPAT_RAFT_PORT), the
controllers' count ($COMPAT_CONTROLLERS) and the server binary
($CHRONIK_SERVER_BIN). The new controller is node 9 on 127.0.0.9, stopped
when the check ends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import client_quotas
import compat_common as cc
from kafka_tools import StepFailed, Steps
from pathlib import Path

TOOLS = "org.apache.kafka.tools."
REASSIGN = TOOLS + "reassign.ReassignPartitionsCommand"
INTERNAL = ("__consumer_offsets", "__transaction_state")


def placements(admin: AdminClient, timeout: float) -> dict[tuple[str, int], list[int]]:
    """Every partition's replica list, internal topics included."""
    md = admin.list_topics(timeout=timeout)
    return {(t, p.id): list(p.replicas) for t, tm in md.topics.items() for p in tm.partitions.values()}


def racks(admin: AdminClient, timeout: float) -> dict[int, str | None]:
    cluster = admin.describe_cluster(request_timeout=timeout).result(timeout)
    return {n.id: n.rack for n in cluster.nodes}


def follower_bytes(metrics: list[str]) -> int:
    """Sum over the brokers of the record bytes followers served to consumers."""
    total = 0
    pattern = re.compile(r'^chronik_consumer_fetch_bytes_total\{replica="follower"\} (\S+)$', re.M)
    for addr in metrics:
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
            m = pattern.search(r.read().decode())
        total += int(float(m.group(1))) if m else 0
    return total


class LoadWhile:
    """An idempotent acks=all producer writing to `topic`, and a group
    committing offsets, on a thread until stopped; remembers every ack."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.acked: dict[int, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.commits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "LoadWhile":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})
        committer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group})

        def delivered(err, msg):
            i = cc.value_index(self.topic, msg.value())
            if err is not None:
                self.errors.append(f"record {i}: {err}")
            elif i is not None:
                self.acked[i] = (msg.partition(), msg.offset())

        while not self._stop.is_set():
            for _ in range(20):
                producer.produce(self.topic, key=cc.message_key(self.sent),
                                 value=cc.message_value(self.topic, self.sent), on_delivery=delivered)
                self.sent += 1
            producer.poll(0.05)
            try:
                committer.commit(offsets=[TopicPartition(self.topic, 0, self.sent)], asynchronous=False)
                self.commits += 1
            except Exception as e:  # a commit refused while a coordinator moves is retried
                cc.log(f"commit during the drain: {e}")
            time.sleep(0.05)
        if producer.flush(60):
            self.errors.append("records still in flight 60 s after the drain")
        committer.close()


def read_back(bootstrap: str, topic: str, partitions: int, timeout: float) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": cc.unique("compat-ops-read"),
                         "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records, deadline = [], time.time() + timeout
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < partitions and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            records.append((msg.partition(), msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        return records
    finally:
        consumer.close()


def assignment_steps(s, admin: AdminClient, brokers: list[int], timeout: float) -> None:
    """--replica-assignment on create and on --alter --partitions."""
    topic = cc.unique("compat-ops-placed")
    a, b, c, d, e = brokers[:5]
    first = [[a, b, c], [b, c, d]]
    spec = ",".join(":".join(map(str, r)) for r in first)
    s.tool("topics --create --replica-assignment", TOOLS + "TopicCommand", "--create", "--topic", topic,
           "--replica-assignment", spec, expect=lambda o: f"Created topic {topic}." in o)
    got = placements(admin, timeout)
    s.state("replicas as assigned", [got.get((topic, p)) for p in range(2)] == first,
            f"{topic} replicas {[got.get((topic, p)) for p in range(2)]}, assigned {first}")
    grown = first + [[c, d, e], [d, e, a]]
    spec = ",".join(":".join(map(str, r)) for r in grown)
    s.tool("topics --alter --partitions --replica-assignment", TOOLS + "TopicCommand", "--alter",
           "--topic", topic, "--partitions", "4", "--replica-assignment", spec,
           expect=lambda o: "Error" not in o and "Exception" not in o)
    got = placements(admin, timeout)
    s.state("new partitions as assigned", [got.get((topic, p)) for p in range(4)] == grown,
            f"{topic} replicas {[got.get((topic, p)) for p in range(4)]}, assigned {grown}")
    s.tool("topics --create --replica-assignment naming an unknown broker", TOOLS + "TopicCommand",
           "--create", "--topic", cc.unique("compat-ops-bad"), "--replica-assignment", f"{a}:4242",
           exit_code=1, expect=lambda o: "InvalidReplicaAssignmentException" in o)


def drain_steps(s, args, admin: AdminClient, brokers: list[int]) -> None:
    """Every replica off a broker holding replicas of both internal topics,
    under load, with Kafka's documented --execute / --verify steps."""
    b, timeout = args.bootstrap, args.stage_timeout
    topic, group = cc.unique("compat-ops-drain"), cc.unique("compat-ops-group")
    s.tool("topics --create (RF 3) for the load", TOOLS + "TopicCommand", "--create", "--topic", topic,
           "--partitions", "3", "--replication-factor", "3",
           expect=lambda o: f"Created topic {topic}." in o)
    with LoadWhile(b, topic, group) as load:
        s.state("load running", cc.wait_until(lambda: len(load.acked) >= 200 and load.commits > 0, timeout),
                f"{len(load.acked)} acked, {load.commits} commits before the drain")
        before = placements(admin, timeout)
        # one that holds replicas of both (3 of 5 brokers each: one does)
        both = [x for x in before[(INTERNAL[0], 0)] if x in before[(INTERNAL[1], 0)]]
        drained = both[-1] if both else before[(INTERNAL[0], 0)][-1]
        plan = []
        for (t, p), replicas in sorted(before.items()):
            if drained in replicas:
                spare = [x for x in brokers if x not in replicas]
                plan.append({"topic": t, "partition": p,
                             "replicas": [spare[0] if r == drained else r for r in replicas]})
        moved = {e["topic"] for e in plan}
        s.state("the drained broker holds internal replicas", set(INTERNAL) & moved == set(INTERNAL),
                f"broker {drained} holds replicas of {sorted(moved)}")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"version": 1, "partitions": plan}, f)
        s.tool(f"reassign-partitions --execute --throttle (drain broker {drained}, {len(plan)} partitions)",
               REASSIGN, "--execute", "--reassignment-json-file", f.name, "--throttle", "50000000",
               expect=lambda o: "Successfully started partition reassignment" in o)
        deadline, out = time.time() + timeout * 2, ""
        while time.time() < deadline:
            r = s.run(REASSIGN, "--verify", "--reassignment-json-file", f.name)
            out = r.stdout + r.stderr
            if r.returncode == 0 and "still in progress" not in out and "Clearing topic-level throttles" in out:
                break
            time.sleep(1)
        s.state("reassign-partitions --verify: complete, throttles cleared",
                "Clearing topic-level throttles" in out and "still in progress" not in out
                and out.count("is completed") == len(plan),
                " | ".join(out.strip().splitlines()[-4:])[:600])
        time.sleep(1)
    after = placements(admin, timeout)
    left = sorted(f"{t}-{p}" for (t, p), r in after.items() if drained in r)
    s.state(f"nothing left on broker {drained}", not left, f"still holds {left}")
    problems = cc.verify_acks(load.sent, load.acked, load.errors)
    problems += cc.verify_read_back(topic, load.sent, read_back(b, topic, 3, timeout), load.acked)
    s.state(f"{load.sent} acknowledged records read back exactly once, in order", not problems,
            "; ".join(problems)[:600])
    s.state(f"group offsets committed through the drain ({load.commits})", load.commits > 0, "none")


def follower_fetch_steps(s, args, admin: AdminClient, metrics: list[str]) -> None:
    """A consumer in a follower's rack reads from that follower (KIP-392)."""
    b, timeout = args.bootstrap, args.stage_timeout
    rack_of = racks(admin, timeout)
    leader = next(i for i, r in sorted(rack_of.items()) if r)
    follower = next(i for i, r in sorted(rack_of.items()) if r and r != rack_of[leader])
    topic = cc.unique("compat-ops-rack")
    s.tool(f"topics --create --replica-assignment {leader}:{follower} (racks "
           f"{rack_of[leader]}, {rack_of[follower]})", TOOLS + "TopicCommand", "--create",
           "--topic", topic, "--replica-assignment", f"{leader}:{follower}",
           expect=lambda o: f"Created topic {topic}." in o)
    n = 2000
    producer = Producer({"bootstrap.servers": b, "acks": "all"})
    for i in range(n):
        producer.produce(topic, key=cc.message_key(i), value=cc.message_value(topic, i), partition=0)
    if producer.flush(timeout):
        raise StepFailed("setup: records still in flight")
    before = follower_bytes(metrics)
    consumer = Consumer({"bootstrap.servers": b, "group.id": cc.unique("compat-ops-rack"),
                         "client.rack": rack_of[follower], "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got, deadline = set(), time.time() + timeout
        while len(got) < n and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.add(cc.value_index(topic, msg.value()))
    finally:
        consumer.close()
    s.state(f"client.rack={rack_of[follower]} consumer read all {n}", len(got) == n, f"read {len(got)} of {n}")
    served = follower_bytes(metrics) - before
    s.state(f"follower {follower} served the consumer ({served} bytes)", served > 0,
            "chronik_consumer_fetch_bytes_total{replica=\"follower\"} did not grow: the leader served it")


QUORUM = TOOLS + "MetadataQuorumCommand"
NEW_CONTROLLER = 9


def directory_id(data_dir: Path) -> str:
    text = (data_dir / "meta.properties").read_text() if (data_dir / "meta.properties").exists() else ""
    m = re.search(r"^directory.id=(\S+)$", text, re.M)
    return m.group(1) if m else ""


def leader_id(s) -> int:
    out = s.run(QUORUM, "describe", "--status")
    m = re.search(r"^LeaderId:\s+(\d+)$", out.stdout, re.M)
    return int(m.group(1)) if m else -1


def start_controller(cluster: Path, raft_port: int, controllers: int) -> subprocess.Popen:
    """Node NEW_CONTROLLER as a controller that knows the quorum only through
    its bootstrap servers: it follows the log as an observer until added."""
    data = cluster / f"node-{NEW_CONTROLLER}" / "data"
    data.mkdir(parents=True, exist_ok=True)
    host = f"127.0.0.{NEW_CONTROLLER}"
    bootstrap = ",".join(f"127.0.0.{i}:{raft_port}" for i in range(1, controllers + 1))
    log = open(cluster / f"node-{NEW_CONTROLLER}" / "stderr.log", "wb")
    return subprocess.Popen(
        [os.environ["CHRONIK_SERVER_BIN"], "--node-id", str(NEW_CONTROLLER), "--process-roles", "controller",
         "--controller-quorum-bootstrap-servers", bootstrap, "--raft-listen", f"{host}:{raft_port}",
         "--listen", f"{host}:0", "--metrics-listen", f"{host}:0", "--data-dir", str(data),
         "--cluster-secret-file", str(cluster / "cluster.secret"), "--broker-session-timeout-ms", "3000"],
        stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)


def quorum_steps(s, args, brokers: list[int]) -> None:
    """Replace the active controller with Kafka's tool, under load."""
    b, timeout = args.bootstrap, args.stage_timeout
    cluster = Path(os.environ["COMPAT_CLUSTER_DIR"])
    raft_port = int(os.environ["COMPAT_RAFT_PORT"])
    controllers = int(os.environ["COMPAT_CONTROLLERS"])
    topic, group = cc.unique("compat-ops-quorum"), cc.unique("compat-ops-quorum-group")
    s.tool("topics --create for the load", TOOLS + "TopicCommand", "--create", "--topic", topic,
           "--partitions", "3", "--replication-factor", "3", expect=lambda o: f"Created topic {topic}." in o)
    new = start_controller(cluster, raft_port, controllers)
    try:
        with LoadWhile(b, topic, group) as load:
            s.state("load running", cc.wait_until(lambda: len(load.acked) >= 200, timeout),
                    f"{len(load.acked)} acked")
            data = cluster / f"node-{NEW_CONTROLLER}" / "data"
            s.state(f"controller {NEW_CONTROLLER} started with a directory id",
                    cc.wait_until(lambda: bool(directory_id(data)), timeout), f"no directory.id in {data}")
            props = cluster / f"controller-{NEW_CONTROLLER}.properties"
            props.write_text(f"node.id={NEW_CONTROLLER}\nprocess.roles=controller\n"
                             f"controller.listener.names=CONTROLLER\n"
                             f"listeners=CONTROLLER://127.0.0.{NEW_CONTROLLER}:{raft_port}\n"
                             f"metadata.log.dir={data}\n")
            out, deadline = "", time.time() + timeout
            while time.time() < deadline:  # REQUEST_TIMED_OUT while it catches up
                r = s.run(QUORUM, "--command-config", str(props), "add-controller")
                out = r.stdout + r.stderr
                if r.returncode == 0:
                    break
                time.sleep(1)
            s.state("metadata-quorum add-controller", f"Added controller {NEW_CONTROLLER}" in out,
                    " | ".join(out.strip().splitlines()[-3:])[:600])
            old = leader_id(s)
            old_dir = directory_id(cluster / f"node-{old}" / "data")
            s.tool(f"metadata-quorum remove-controller (the active one, {old})", QUORUM, "remove-controller",
                   "--controller-id", str(old), "--controller-directory-id", old_dir,
                   expect=lambda o: "Exception" not in o and "Error" not in o)
            s.state("another controller leads", cc.wait_until(lambda: leader_id(s) not in (old, -1), timeout),
                    f"leader still {leader_id(s)}")
            new_dir = directory_id(data)
            s.tool("metadata-quorum describe --replication: the new voters", QUORUM, "describe", "--replication",
                   expect=lambda o: re.search(rf"^{NEW_CONTROLLER}\s+{re.escape(new_dir)}\s", o, re.M) is not None
                   and re.search(rf"^{old}\s+{re.escape(old_dir)}\s+\S+\s+\S+\s+\S+\s+\S+\s+(Leader|Follower)",
                                 o, re.M) is None)
            s.tool("topics --create after the change", TOOLS + "TopicCommand", "--create",
                   "--topic", cc.unique("compat-ops-after"), "--partitions", "1", "--replication-factor", "3",
                   expect=lambda o: "Created topic" in o)
        problems = cc.verify_acks(load.sent, load.acked, load.errors)
        problems += cc.verify_read_back(topic, load.sent, read_back(b, topic, 3, timeout), load.acked)
        s.state(f"{load.sent} acknowledged records read back exactly once, in order", not problems,
                "; ".join(problems)[:600])
    finally:
        new.terminate()
        try:
            new.wait(30)
        except subprocess.TimeoutExpired:
            new.kill()


def check_cluster_ops(rep: cc.Reporter, args) -> None:
    s = Steps(args.bootstrap, args.stage_timeout)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    metrics = [m for m in os.environ.get("COMPAT_BROKER_METRICS", "").split(",") if m]
    try:
        brokers = sorted(admin.list_topics(timeout=args.stage_timeout).brokers)
        s.state("5 brokers", len(brokers) >= 5 and bool(metrics), f"brokers {brokers}, metrics {metrics}")
        assignment_steps(s, admin, brokers, args.stage_timeout)
        drain_steps(s, args, admin, brokers)
        follower_fetch_steps(s, args, admin, metrics)
        quorum_steps(s, args, brokers)
        addresses = {b.id: f"{b.host}:{b.port}" for b in admin.list_topics(timeout=args.stage_timeout).brokers.values()}

        def through(broker: int) -> Steps:
            via = Steps(addresses[broker], args.stage_timeout)
            via.done = s.done  # one list of the steps done
            return via

        client_quotas.quota_steps(through, args, admin, brokers, metrics)
    except StepFailed as e:
        rep.emit("cluster-ops", "fail", f"after {len(s.done)} steps ok: {e}")
        return
    rep.emit("cluster-ops", "pass", f"{len(s.done)} steps: " + "; ".join(s.done))
