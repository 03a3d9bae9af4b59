"""k8s-perf/tests/secure_live.py - the secure overlay's broker settings and
ACLs against the real chronik-server (run by tests/test_secure.sh).

Owns: building what a broker pod of the built overlay would see (its
literal env, its Secret volumes filled from the Secrets secure-secrets.sh
applied, paths rewritten under a scratch root), starting chronik-server with
that env as a standalone node on 127.0.0.1, creating the ACLs the
chronik-acls Job's kafka-acls.sh lines grant (parsed from the Job's script,
created with confluent-kafka as the Secret's `admin` user), then checking
with the ingestor's and the consumer's own librdkafka properties (their
$(SASL_PASSWORD) expanded from their Secrets): the ingestor produces to a
run's topic, the consumer reads it all in a run's group; the consumer may
not produce, the ingestor may not join the group, a wrong password and a
plaintext client are refused. The brokers' certificate names the pods' DNS
names, not 127.0.0.1, so these clients skip hostname verification (the
names are verified by openssl in test_secure.sh). Prints "ok"/"FAIL" lines.
Must not: run more than the one broker it starts (killed on exit).
"""

from __future__ import annotations

import base64
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)

from checklib import check, counts

def secrets_of(applied: Path) -> dict[str, dict[str, bytes]]:
    return {d["metadata"]["name"]: {k: base64.b64decode(v) for k, v in d["data"].items()}
            for d in yaml.safe_load_all(applied.read_text()) if d and d["kind"] == "Secret"}


def pod_view(workload: dict, secrets, root: Path) -> tuple[dict, callable]:
    """The first container's literal env (secretKeyRefs resolved, $(VAR) expanded)
    and a function mapping an in-pod path to its file under root."""
    spec = workload["spec"]["template"]["spec"]
    c = spec["containers"][0]
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = {}
    for m in c.get("volumeMounts", []):
        sec = vols.get(m["name"], {}).get("secret")
        if sec and sec["secretName"] in secrets:
            d = root / m["mountPath"].lstrip("/")
            d.mkdir(parents=True, exist_ok=True)
            for key, data in secrets[sec["secretName"]].items():
                (d / key).write_bytes(data)
            mounts[m["mountPath"]] = d
    env: dict[str, str] = {}
    for e in c.get("env", []):
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            env[e["name"]] = secrets[ref["name"]][ref["key"]].decode()
        elif "value" in e:
            env[e["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])

    def local(path: str) -> str:
        for mp, d in mounts.items():
            if path.startswith(mp.rstrip("/") + "/"):
                return str(d / path[len(mp.rstrip("/")) + 1:])
        return path
    return env, local


def client_conf(text: str, local, bootstrap: str) -> dict:
    conf = dict(kv.split("=", 1) for kv in text.split(","))
    conf["ssl.ca.location"] = local(conf["ssl.ca.location"])
    conf.update({"bootstrap.servers": bootstrap, "ssl.endpoint.identification.algorithm": "none"})
    return conf


OPERATIONS = {"Write": AclOperation.WRITE, "Describe": AclOperation.DESCRIBE, "Create": AclOperation.CREATE,
              "Read": AclOperation.READ, "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE, "All": AclOperation.ALL}


def job_acls(job: dict) -> list[AclBinding]:
    """The bindings the Job's `acls --add ...` lines create (kafka-acls.sh's own options)."""
    c = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in c.get("env", [])}
    script = c["command"][-1].replace("\\\n", " ")
    script = script.replace('"${groups[@]}"', " ".join(f"--group {g}" for g in env["GROUP_PREFIXES"].split()))
    bindings = []
    for line in script.splitlines():
        line = line.strip()
        if not line.startswith("acls --add"):
            continue
        words = shlex.split(re.sub(r'"\$([A-Z_]+)"', lambda m: env[m.group(1)], line))
        principal, ops, resources, pattern = None, [], [], ResourcePatternType.LITERAL
        i = 2
        while i < len(words):
            w = words[i]
            if w == "--cluster":
                resources.append((ResourceType.BROKER, "kafka-cluster"))
                i += 1
                continue
            v = words[i + 1]
            if w == "--allow-principal":
                principal = v
            elif w == "--operation":
                ops.append(OPERATIONS[v])
            elif w == "--topic":
                resources.append((ResourceType.TOPIC, v))
            elif w == "--group":
                resources.append((ResourceType.GROUP, v))
            elif w == "--resource-pattern-type":
                pattern = {"prefixed": ResourcePatternType.PREFIXED, "literal": ResourcePatternType.LITERAL}[v]
            i += 2
        for rt, name in resources:
            pt = ResourcePatternType.LITERAL if rt == ResourceType.BROKER else pattern
            bindings += [AclBinding(rt, name, pt, principal, "*", op, AclPermissionType.ALLOW) for op in ops]
    return bindings


def main() -> int:
    built, applied, server_bin = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    docs = [d for d in yaml.safe_load_all(built.read_text()) if d]
    wl = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("StatefulSet", "Deployment", "Job")}
    secrets = secrets_of(applied)
    root = Path(tempfile.mkdtemp(prefix="secure-live-"))
    benv, blocal = pod_view(wl["chronik"], secrets, root)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = {k: blocal(v) for k, v in benv.items()
           if k.startswith("CHRONIK_") and k not in ("CHRONIK_CLUSTER_SECRET_FILE", "CHRONIK_RAFT_LISTEN")}
    names = [entry.split("://")[0] for entry in env["CHRONIK_LISTENERS"].split(",")]
    env["CHRONIK_LISTENERS"] = ",".join(f"{n}://127.0.0.1:{port}" for n in names)
    env["CHRONIK_ADVERTISED_LISTENERS"] = env["CHRONIK_LISTENERS"]
    env.update(CHRONIK_DATA_DIR=str(root / "data"), CHRONIK_METRICS_LISTEN="127.0.0.1:0",
               CHRONIK_DEFAULT_REPLICATION_FACTOR="1", CHRONIK_MIN_INSYNC_REPLICAS="1", PATH="/usr/bin:/bin")
    log = open(root / "broker.log", "w")
    broker = subprocess.Popen([server_bin], env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = ""
        deadline = time.time() + 60
        while time.time() < deadline and not line.startswith("LISTENING"):
            line = broker.stdout.readline() or ("" if broker.poll() is None else "EXIT")
            if line == "EXIT":
                break
        if not check(line.startswith("LISTENING"), "chronik-server starts with the secure overlay's broker env "
                     f"and Secret files ({benv['CHRONIK_LISTENERS']}, {benv['CHRONIK_SASL_ENABLED_MECHANISMS']}, "
                     "StandardAuthorizer)", (root / "broker.log").read_text()[-600:]):
            return 1
        bootstrap = f"127.0.0.1:{port}"
        admin_props = secrets["chronik-sasl-admin"]["client.properties"].decode()
        user, password = re.search(r'username="([^"]+)" password="([^"]+)"', admin_props).groups()
        ca = str(root / "ca.pem")
        Path(ca).write_bytes(secrets["chronik-tls-ca"]["ca.pem"])
        admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                             "ssl.ca.location": ca, "ssl.endpoint.identification.algorithm": "none"})
        bindings = job_acls(wl["chronik-acls"])
        try:
            for f in admin.create_acls(bindings).values():
                f.result(30)
            ok = True
        except Exception as e:  # noqa: BLE001 - reported as the check's detail
            ok, err = False, str(e)
        if not check(ok and len(bindings) >= 6, f"the Job's {len(bindings)} ACLs created as admin "
                     "(from its kafka-acls.sh lines)", "" if ok else err):
            return 1
        ienv, ilocal = pod_view(wl["chronik-ingestor"], secrets, root)
        cenv, clocal = pod_view(wl["chronik-consumer"], secrets, root)
        iconf = client_conf(ienv["CHRONIK_INGESTOR_PRODUCER_CONFIG"], ilocal, bootstrap)
        cconf = client_conf(cenv["CHRONIK_CONSUMER_PROPERTIES"], clocal, bootstrap)
        topic, group = f"{ienv['CHRONIK_INGESTOR_TOPIC']}-live", "verify-live"

        def produce(conf) -> list:
            errors: list = []
            p = Producer({**conf, "acks": "1", "message.timeout.ms": 10000})
            for i in range(100):
                p.produce(topic, f"m{i}".encode(), on_delivery=lambda e, m: errors.append(e) if e else None)
            p.flush(30)
            return errors

        errors = produce(iconf)
        check(not errors, f"the ingestor's properties (SASL_SSL as {iconf['sasl.username']}) produce to {topic}",
              str(errors[:1]))
        c = Consumer({**cconf, "group.id": group, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        n, first_error, deadline = 0, None, time.time() + 30
        while n < 100 and time.time() < deadline:
            m = c.poll(1)
            if m is not None and m.error():
                first_error = first_error or m.error()
            elif m is not None:
                n += 1
        c.close()
        check(n == 100, f"the consumer's properties (as {cconf['sasl.username']}) read all 100 in group {group}",
              f"read {n}, {first_error}")
        errors = produce(cconf)
        check(bool(errors) and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
              "the consumer user may not produce (TOPIC_AUTHORIZATION_FAILED)", str(errors[:1]))
        c = Consumer({**iconf, "group.id": group, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got, deadline = None, time.time() + 20
        while got is None and time.time() < deadline:
            m = c.poll(1)
            got = m.error() if m is not None and m.error() else ("a message" if m is not None else None)
        c.close()
        check(isinstance(got, KafkaError) and got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED,
              "the ingestor user may not join the consumers' group (GROUP_AUTHORIZATION_FAILED)", str(got))
        for what, conf in (("a wrong password", {**iconf, "sasl.password": "wrong"}),
                           ("a plaintext client", {"bootstrap.servers": bootstrap})):
            errors = []
            p = Producer({**conf, "message.timeout.ms": 5000, "error_cb": lambda e: errors.append(e)})
            delivered: list = []
            p.produce(topic, b"x", on_delivery=lambda e, m: delivered.append(e))
            p.flush(10)
            check(bool(delivered) and delivered[0] is not None, f"{what} is refused", str(delivered))
    finally:
        broker.kill()
        broker.wait()
        shutil.rmtree(root, ignore_errors=True)
    passed, failed = counts()
    print(f"secure-live: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
