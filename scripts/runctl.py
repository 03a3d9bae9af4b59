"""scripts/runctl.py - the steps of a pipeline run that are program logic, not
process plumbing, shared by run-all.sh and k8s-perf/run.sh.

Owns (standard library only, except `create-topic`, `acl` and the ISR check
of `settle`, which import confluent-kafka from the project's .venv):
  create-topic BOOTSTRAP TOPIC PARTITIONS RF MIN_INSYNC
                         create the run's topic with the admin client
  acl BOOTSTRAP PRINCIPAL:TYPE:NAME:OP[,OP...]...
                         create ALLOW ACLs (LITERAL, any host), e.g.
                         User:ingestor:topic:t:WRITE,DESCRIBE
  settle --partitions P [--bootstrap B --topic T --rf R] [--timeout S] URL...
                         wait until the verifying consumers' group is stable
                         (every partition assigned to exactly one consumer,
                         every consumer holding at least one when there are
                         enough partitions, no rebalance for --stable
                         seconds) and, with
                         --bootstrap, every partition of the topic has its
                         full ISR; logs what it waits for; exit 1 on timeout
  verified SOURCE...     print the messages the consumers verified so far
  drained --acked N --partitions P SOURCE...
                         exit 0 when every partition is assigned with zero
                         lag and the consumers verified at least N messages
                         (one line of state on stderr either way)
  plan-consumers PLAN    print the plan's "consumers" block (load/SPEC.md) as
                         one line: MODE COUNT KILL_AT SHARE_CONFIGS ("-" for
                         an unset field; SHARE_CONFIGS comma-separated);
                         exit 2 on a bad mode
  share-settle --partitions P URL...
                         share-group members (chronik-consumer --share-group):
                         exit 0 when every one joined (member epoch > 0) and
                         together they hold all P partitions
  share-drained --acked N --lock-s S [--killed-report F --killed-at T] URL...
                         exit 0 when the members' accepted records (plus what
                         a killed member had accepted or was accepting in its
                         last checkpoint F) reach N, no member had a delivery
                         for 3 s, and, with a member killed at T (epoch s),
                         45 s (the group's session timeout) + S (a lock) + 5 s
                         have passed since
  ledger-total LEDGER... print the sum of the ledgers' acknowledged counts
  in-flight SOURCE       print an ingestor's in-flight message count (its
                         /ledger), or 1 when it does not answer
  meta OUT [--field value ...] [--setting k=v ...] [--version k=v ...]
          [--host k=v ...] [--load-dir DIR]
                         write a run's meta.json: every value arrives as an
                         argument (never spliced into code); setting values
                         that parse as JSON numbers, booleans, null or
                         strings ("\"1\"" is the string 1) are stored as such,
                         the rest as text. --host replaces this machine's
                         description (a Kubernetes run's context, namespace,
                         nodes); --load-dir fills batch_size, message_size and
                         duration_s from the load generators' merged summary
                         (chronik-loadgen's DIR/merged-*.json)
  manifest-env RENDERED WORKLOAD NAME
                         print the literal value of env NAME of WORKLOAD in a
                         rendered manifest (k8s-perf), or nothing
  first-delivery MERGED   exit 0 when a merged consumer report timed every
                         verified message once and counted no redelivery
                         (scripts/e2e-check.sh)
  json-field KEY...      print the value at KEY/KEY/... of the JSON on stdin
                         (e.g. `chronik-loadgen describe`'s plan batch_size)

And the small host facts the shell scripts need (scripts/lib.sh wraps the
first two as free_port and port_free; keep them here, never inline):
  free-port [N]          print N (default 1) distinct TCP ports, in
                         20000-31999, that 127.0.0.1-3 can all bind now
  port-free PORT         exit 0 when 127.0.0.1:PORT can be bound
  has-modules [--python X.Y] [MODULE...]
                         exit 0 when this interpreter runs (is at least
                         Python X.Y) and imports each MODULE
  module-versions LABEL[=MODULE[:ATTR]]...
                         print "LABEL VERSION ..." of the imported modules:
                         MODULE.__version__, or MODULE.ATTR (called if a
                         function, its first item if a tuple)
  urlencode TEXT         print TEXT percent-encoded (no character kept)
  first-host CIDR        print the first host address of network CIDR

Secured runs (./run-all.sh --secure, scripts/secure.sh) set KAFKA_CLIENT_CONFIG
(a librdkafka properties file every admin client here adds to its config),
and INGESTOR_CA_FILE / INGESTOR_AUTH_TOKEN_FILE (the CA https:// URLs are
verified against and the bearer token sent to them; never to http:// ones).

SOURCE / URL: a verifying consumer's (or for in-flight, an ingestor's) base
URL, whose /summary (/ledger) is read; a SOURCE may also be "-" (that JSON
on stdin) or a file holding it (how k8s-perf passes what kubectl fetched).
Must not: start or stop processes (the shell scripts do), or decide the
run's verdict (chronik-consumer merge does).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import ssl
import sys
import time
import urllib.request
from pathlib import Path

SUMMARY_TIMEOUT_S = 2.0


def kafka_config(bootstrap: str) -> dict[str, str]:
    """An admin client's config: BOOTSTRAP plus KAFKA_CLIENT_CONFIG's
    key=value lines (security.protocol, sasl.*, ssl.*), if set."""
    config = {"bootstrap.servers": bootstrap}
    path = os.environ.get("KAFKA_CLIENT_CONFIG")
    if path:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    key, sep, value = line.partition("=")
                    if not sep:
                        raise SystemExit(f"KAFKA_CLIENT_CONFIG {path}: '{key}' is not key=value")
                    config[key.strip()] = value.strip()
    return config


def open_url(url: str):
    """urlopen, with the ingestors' CA and bearer token for https:// URLs."""
    request = urllib.request.Request(url)
    context = None
    if url.startswith("https://"):
        context = ssl.create_default_context(cafile=os.environ.get("INGESTOR_CA_FILE") or None)
        token_file = os.environ.get("INGESTOR_AUTH_TOKEN_FILE")
        if token_file:
            with open(token_file, encoding="utf-8") as f:
                request.add_header("Authorization", f"Bearer {f.read().strip()}")
    return urllib.request.urlopen(request, timeout=SUMMARY_TIMEOUT_S, context=context)


def read_source(source: str, path: str) -> dict | None:
    """The JSON of SOURCE: an http(s) URL (PATH appended), "-" (stdin) or a
    file that holds a saved answer (a Kubernetes pod's, fetched by kubectl);
    None when it cannot be read or parsed."""
    try:
        if source.startswith(("http://", "https://")):
            with open_url(source.rstrip("/") + path) as r:
                return json.load(r)
        if source == "-":
            return json.load(sys.stdin)
        with open(source, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def summary(source: str) -> dict | None:
    """A verifying consumer's /summary."""
    return read_source(source, "/summary")


def group_state(urls: list[str]) -> tuple[dict[tuple[str, int], list[str]], int, list[str]]:
    """(owners of each assigned partition, total rebalances, unreachable URLs)."""
    owners: dict[tuple[str, int], list[str]] = {}
    rebalances, down = 0, []
    for url in urls:
        s = summary(url)
        if s is None:
            down.append(url)
            continue
        rebalances += int(s.get("rebalances", 0))
        for a in s.get("assigned", []):
            owners.setdefault((a["topic"], int(a["partition"])), []).append(url)
    return owners, rebalances, down


def isr_short(bootstrap: str, topic: str, rf: int) -> list[str]:
    """Partitions of `topic` whose ISR is smaller than `rf` (or unreadable)."""
    from confluent_kafka.admin import AdminClient  # the .venv's; only here

    admin = AdminClient(kafka_config(bootstrap))
    md = admin.list_topics(topic=topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return [f"{topic}: {getattr(t, 'error', None) or 'no metadata'}"]
    return [f"{topic}-{p.id} isr {len(p.isrs)}/{rf}" for p in t.partitions.values()
            if p.error is not None or len(p.isrs) < rf]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] settle: {msg}", file=sys.stderr, flush=True)


def settle(args: argparse.Namespace) -> int:
    """Polls once a second; settled when the assignment is complete and
    exclusive and the rebalance count has not moved for `stable` seconds."""
    deadline = time.monotonic() + args.timeout
    started = time.monotonic()
    last_rebalances, stable_since, last_why = None, None, None
    while True:
        owners, rebalances, down = group_state(args.urls)
        why = []
        if down:
            why.append(f"no /summary from {', '.join(down)}")
        doubled = sorted(f"{t}-{p}" for (t, p), o in owners.items() if len(o) > 1)
        if len(owners) < args.partitions:
            why.append(f"{len(owners)}/{args.partitions} partitions assigned")
        # Every verifying consumer must be in the group: one that has not
        # joined yet would rebalance the group as soon as the load starts.
        holding = {u for o in owners.values() for u in o}
        idle = [u for u in args.urls if u not in holding and u not in down]
        if idle and len(args.urls) <= args.partitions:
            why.append(f"no partition yet for {', '.join(idle)} (not in the group)")
        if doubled:
            why.append(f"assigned twice: {', '.join(doubled)}")
        if args.bootstrap:
            try:
                short = isr_short(args.bootstrap, args.topic, args.rf)
            except Exception as e:  # noqa: BLE001 - the admin client raises KafkaException and others
                short = [f"describe failed: {e}"]
            if short:
                why.append("ISR short: " + ", ".join(short))
        now = time.monotonic()
        if why:
            stable_since = None
        elif rebalances != last_rebalances or stable_since is None:
            stable_since = now
        last_rebalances = rebalances
        if stable_since is not None and now - stable_since >= args.stable:
            log(f"stable after {now - started:.1f} s: {len(owners)} partitions over "
                f"{len(args.urls)} consumers, {rebalances} rebalances"
                + (f", full ISR of {args.rf}" if args.bootstrap else ""))
            return 0
        state = "; ".join(why) or f"assigned, waiting {args.stable:g} s without a rebalance"
        if state != last_why:
            log(state)
            last_why = state
        if now >= deadline:
            log(f"not settled within {args.timeout:g} s: {state}")
            return 1
        time.sleep(args.poll)


def verified(args: argparse.Namespace) -> int:
    total = 0
    for source in args.urls:
        s = summary(source)
        total += int(s["counts"]["verified"]) if s else 0
    print(total)
    return 0


def drained(args: argparse.Namespace) -> int:
    owners, total, lag, down = {}, 0, 0, []
    for url in args.urls:
        s = summary(url)
        if s is None:
            down.append(url)
            continue
        total += int(s["counts"]["verified"])
        for a in s.get("assigned", []):
            owners[(a["topic"], int(a["partition"]))] = url
            lag += max(0, a.get("lag") or 0)
    print(f"{total} verified, {len(owners)}/{args.partitions} partitions assigned, lag {lag}"
          + (f", no /summary from {', '.join(down)}" if down else ""), file=sys.stderr)
    return 0 if not down and total >= args.acked and len(owners) >= args.partitions and lag == 0 else 1


CONSUMER_MODES = ("group", "share")
# Kafka 4.3's least share.session.timeout.ms: a killed member is evicted by then
SHARE_SESSION_TIMEOUT_S = 45.0


def plan_consumers(args: argparse.Namespace) -> int:
    with open(args.plan, encoding="utf-8") as f:
        block = json.load(f).get("consumers") or {}
    mode = block.get("mode", "group")
    if mode not in CONSUMER_MODES:
        print(f"consumers.mode must be one of {', '.join(CONSUMER_MODES)}, not {mode!r}", file=sys.stderr)
        return 2
    configs = ",".join(block.get("share_configs") or []) or "-"
    print(mode, block.get("count", "-"), block.get("kill_consumer_at", "-"), configs)
    return 0


def share_settle(args: argparse.Namespace) -> int:
    held, why = set(), []
    for url in args.urls:
        s = summary(url)
        if s is None or not s.get("share"):
            why.append(f"no share /summary from {url}")
            continue
        if int(s["share"].get("memberEpoch") or 0) <= 0:
            why.append(f"{url} not in the share group yet")
        held |= {(a["topic"], int(a["partition"])) for a in s.get("assigned", [])}
    if len(held) < args.partitions:
        why.append(f"{len(held)}/{args.partitions} partitions held")
    print("; ".join(why) or f"{len(args.urls)} members hold all {args.partitions} partitions", file=sys.stderr)
    return 1 if why else 0


def share_drained(args: argparse.Namespace) -> int:
    accepted, quiet, down = 0, True, []
    for url in args.urls:
        s = summary(url)
        if s is None or not s.get("share"):
            down.append(url)
            continue
        accepted += int(s["share"].get("accepted") or 0)
        ago = s["share"].get("lastDeliveryAgoSecs")
        if ago is not None and ago < 3:
            quiet = False
    dead = 0
    if args.killed_report:
        try:
            with open(args.killed_report, encoding="utf-8") as f:
                share = json.load(f)["share"]
            dead = int(share.get("recordsAccepted", 0)) + int(share.get("acceptOutcomeUnknown", 0))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    waited = args.killed_at is None or time.time() - args.killed_at >= SHARE_SESSION_TIMEOUT_S + args.lock_s + 5
    print(f"{accepted} accepted by the members + {dead} by the killed one, of {args.acked} acknowledged; "
          + ("quiet" if quiet else "still delivering")
          + ("" if waited else "; waiting out the killed member's session and locks")
          + (f"; no /summary from {', '.join(down)}" if down else ""), file=sys.stderr)
    return 0 if accepted + dead >= args.acked and quiet and waited and not down else 1


def ledger_total(args: argparse.Namespace) -> int:
    print(sum(int(json.load(open(f))["acknowledged_count"]) for f in args.ledgers))
    return 0


def in_flight(args: argparse.Namespace) -> int:
    ledger = read_source(args.url, "/ledger")
    try:
        print(int(ledger["in_flight"]))  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        print(1)
    return 0


def _pairs(items: list[str], typed: bool) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"runctl meta: {item!r} is not key=value")
        if typed:
            try:
                parsed = json.loads(value)
                # "\"1\"" is the string "1"; objects and lists stay text
                value = parsed if parsed is None or isinstance(parsed, (int, float, bool, str)) else value
            except ValueError:
                pass
        out[key] = value
    return out


def meta(args: argparse.Namespace) -> int:
    import os
    import platform

    host = _pairs(args.host, typed=True) if args.host else {
        "cores": os.cpu_count(), "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "hostname": platform.node(), "kernel": platform.release()}
    settings = _pairs(args.setting, typed=True)
    if args.load_dir:
        settings.update(_from_load(args.load_dir))
    doc = {
        "run_id": args.run_id, "started_at": args.started_at, "finished_at": args.finished_at or "",
        "git_commit": args.git_commit,
        "host": host,
        "broker": {"kind": args.broker, "version": args.broker_version, "bootstrap": args.bootstrap,
                   "flags": args.broker_flag},
        "settings": settings,
        "versions": {**_pairs(args.version, typed=False), "python": platform.python_version()},
    }
    if args.events and args.events.exists():
        # one JSON object per line: at, kind, target, detail (k8s-perf/run.sh --delete-pod)
        doc["events"] = [json.loads(line) for line in args.events.read_text().splitlines() if line.strip()]
    tmp = args.out.with_name(args.out.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, args.out)
    return 0


def _from_load(load_dir: Path) -> dict:
    """batch_size, message_size (the plan as run) and duration_s (the pooled
    run's length) from chronik-loadgen's merged summary under `load_dir`."""
    found: dict = {}
    for f in sorted(load_dir.glob("merged-*.json")):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        plan = d.get("plan") or {}
        for key in ("batch_size", "message_size"):
            if found.get(key) is None:
                found[key] = plan.get(key)
        ms = (d.get("state") or {}).get("testRunDurationMs")
        if isinstance(ms, (int, float)) and ms > 0:
            found["duration_s"] = max(found.get("duration_s") or 0, round(ms / 1000, 1))
    return {k: v for k, v in found.items() if v is not None}

def manifest_env(args: argparse.Namespace) -> int:
    import re

    text = args.rendered.read_text()
    for doc in text.split("\n---\n"):
        if re.search(rf"^  name: {re.escape(args.workload)}$", doc, re.M):
            m = re.search(rf"- name: {re.escape(args.name)}\n\s+value: \"?([^\"\n]*)\"?", doc)
            if m:
                print(m.group(1))
                break
    return 0


def create_topic(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic  # the .venv's; only here

    admin = AdminClient(kafka_config(args.bootstrap))
    new = NewTopic(args.topic, args.partitions, args.rf, config={"min.insync.replicas": str(args.min_insync)})
    for f in admin.create_topics([new], operation_timeout=30).values():
        f.result(timeout=60)
    print(f"created {args.topic} with {args.partitions} partitions, replication factor {args.rf}, "
          f"min.insync.replicas {args.min_insync}", file=sys.stderr)
    return 0


def acl(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,  # the .venv's
                                       AdminClient, ResourcePatternType, ResourceType)

    bindings = []
    for spec in args.specs:
        try:
            kind, user, rtype, name, ops = spec.split(":", 4)
            # confluent-kafka names the cluster resource BROKER
            resource = ResourceType["BROKER" if rtype.lower() == "cluster" else rtype.upper()]
            operations = [AclOperation[op.strip().upper()] for op in ops.split(",")]
        except (ValueError, KeyError) as e:
            raise SystemExit(f"acl: bad spec '{spec}' ({e}); expected User:NAME:TYPE:NAME:OP[,OP...]")
        for op in operations:
            bindings.append(AclBinding(resource, name, ResourcePatternType.LITERAL, f"{kind}:{user}", "*",
                                       op, AclPermissionType.ALLOW))
    admin = AdminClient(kafka_config(args.bootstrap))
    for f in admin.create_acls(bindings, request_timeout=30).values():
        f.result(timeout=60)
    print(f"created {len(bindings)} ACLs: {', '.join(args.specs)}", file=sys.stderr)
    return 0


def first_delivery(args: argparse.Namespace) -> int:
    with open(args.merged, encoding="utf-8") as f:
        m = json.load(f)
    verified, timed, again = m["counts"]["verified"], m["latency"]["e2e"]["count"], m["counts"]["redeliveries"]
    print(f"e2e: {verified} verified, {timed} end-to-end samples, {again} redeliveries", file=sys.stderr)
    return 0 if timed == verified and again == 0 else 1


def json_field(args: argparse.Namespace) -> int:
    value = json.load(sys.stdin)
    for key in args.keys:
        value = value[key]
    print(value)
    return 0


# -- host facts ---------------------------------------------------------------------------------

# Below the ephemeral range (32768-60999): cluster nodes connect from their own
# address, so an ephemeral port could be taken by an outgoing connection before
# the node given it binds its listener.
FREE_PORT_RANGE = (20000, 32000)
FREE_PORT_HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


def free_port(args: argparse.Namespace) -> int:
    ports: list[int] = []
    for _ in range(1000 * args.count):
        port = random.randrange(*FREE_PORT_RANGE)
        if port in ports:
            continue
        try:
            for host in FREE_PORT_HOSTS:
                s = socket.socket()
                s.bind((host, port))
                s.close()
        except OSError:
            continue
        ports.append(port)
        if len(ports) == args.count:
            print(*ports)
            return 0
    raise SystemExit(f"no {args.count} free port(s) in {FREE_PORT_RANGE[0]}-{FREE_PORT_RANGE[1] - 1} "
                     f"on 127.0.0.1-3")


def port_free(args: argparse.Namespace) -> int:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", args.port))
    except OSError:
        return 1
    return 0


def has_modules(args: argparse.Namespace) -> int:
    import importlib

    if args.python:
        major, _, minor = args.python.partition(".")
        if sys.version_info < (int(major), int(minor or 0)):
            return 1
    for name in args.modules:
        try:
            importlib.import_module(name)
        except Exception:  # what a probe is for: any import failure means "not usable"
            return 1
    return 0


def module_versions(args: argparse.Namespace) -> int:
    import importlib

    out = []
    for spec in args.specs:
        label, _, target = spec.partition("=")
        name, _, attr = (target or label).partition(":")
        version = getattr(importlib.import_module(name), attr or "__version__")
        version = version() if callable(version) else version
        out += [label, version[0] if isinstance(version, tuple) else version]
    print(*out)
    return 0


def urlencode(args: argparse.Namespace) -> int:
    import urllib.parse

    print(urllib.parse.quote(args.text, safe=""))
    return 0


def first_host(args: argparse.Namespace) -> int:
    import ipaddress

    print(next(ipaddress.ip_network(args.cidr).hosts()))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/runctl.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("create-topic")
    c.add_argument("bootstrap")
    c.add_argument("topic")
    c.add_argument("partitions", type=int)
    c.add_argument("rf", type=int)
    c.add_argument("min_insync", type=int)
    c.set_defaults(run=create_topic)
    a = sub.add_parser("acl")
    a.add_argument("bootstrap")
    a.add_argument("specs", nargs="+", metavar="PRINCIPAL:TYPE:NAME:OPS")
    a.set_defaults(run=acl)
    s = sub.add_parser("settle")
    s.add_argument("--partitions", type=int, required=True)
    s.add_argument("--bootstrap")
    s.add_argument("--topic")
    s.add_argument("--rf", type=int, default=1)
    s.add_argument("--timeout", type=float, default=60.0)
    s.add_argument("--stable", type=float, default=2.0, help="seconds without a rebalance (default 2)")
    s.add_argument("--poll", type=float, default=0.5, help=argparse.SUPPRESS)
    s.add_argument("urls", nargs="+", metavar="URL")
    s.set_defaults(run=settle)
    v = sub.add_parser("verified")
    v.add_argument("urls", nargs="*", metavar="SOURCE")
    v.set_defaults(run=verified)
    d = sub.add_parser("drained")
    d.add_argument("--acked", type=int, required=True)
    d.add_argument("--partitions", type=int, required=True)
    d.add_argument("urls", nargs="+", metavar="SOURCE")
    d.set_defaults(run=drained)
    pc = sub.add_parser("plan-consumers")
    pc.add_argument("plan")
    pc.set_defaults(run=plan_consumers)
    ss = sub.add_parser("share-settle")
    ss.add_argument("--partitions", type=int, required=True)
    ss.add_argument("urls", nargs="+")
    ss.set_defaults(run=share_settle)
    sd = sub.add_parser("share-drained")
    sd.add_argument("--acked", type=int, required=True)
    sd.add_argument("--lock-s", type=float, default=30.0)
    sd.add_argument("--killed-report")
    sd.add_argument("--killed-at", type=float)
    sd.add_argument("urls", nargs="+")
    sd.set_defaults(run=share_drained)
    lt = sub.add_parser("ledger-total")
    lt.add_argument("ledgers", nargs="+", metavar="LEDGER")
    lt.set_defaults(run=ledger_total)
    f = sub.add_parser("in-flight")
    f.add_argument("url", metavar="SOURCE")
    f.set_defaults(run=in_flight)
    m = sub.add_parser("meta")
    m.add_argument("out", type=Path)
    m.add_argument("--run-id", required=True)
    m.add_argument("--started-at", required=True)
    m.add_argument("--finished-at", default="")
    m.add_argument("--git-commit", default="unknown")
    m.add_argument("--broker", required=True)
    m.add_argument("--broker-version", default="")
    m.add_argument("--bootstrap", default="")
    m.add_argument("--broker-flag", action="append", default=[])
    m.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE")
    m.add_argument("--version", action="append", default=[], metavar="KEY=VALUE")
    m.add_argument("--host", action="append", default=[], metavar="KEY=VALUE")
    m.add_argument("--load-dir", type=Path)
    m.add_argument("--events", type=Path, help="JSON lines of events the run caused (at, kind, target, detail)")
    m.set_defaults(run=meta)
    e = sub.add_parser("manifest-env")
    e.add_argument("rendered", type=Path)
    e.add_argument("workload")
    e.add_argument("name")
    e.set_defaults(run=manifest_env)
    fd = sub.add_parser("first-delivery")
    fd.add_argument("merged", type=Path)
    fd.set_defaults(run=first_delivery)
    jf = sub.add_parser("json-field")
    jf.add_argument("keys", nargs="+", metavar="KEY")
    jf.set_defaults(run=json_field)
    fp = sub.add_parser("free-port")
    fp.add_argument("count", type=int, nargs="?", default=1)
    fp.set_defaults(run=free_port)
    pt = sub.add_parser("port-free")
    pt.add_argument("port", type=int)
    pt.set_defaults(run=port_free)
    hm = sub.add_parser("has-modules")
    hm.add_argument("--python", metavar="X.Y")
    hm.add_argument("modules", nargs="*", metavar="MODULE")
    hm.set_defaults(run=has_modules)
    mv = sub.add_parser("module-versions")
    mv.add_argument("specs", nargs="+", metavar="LABEL=MODULE[:ATTR]")
    mv.set_defaults(run=module_versions)
    ue = sub.add_parser("urlencode")
    ue.add_argument("text")
    ue.set_defaults(run=urlencode)
    fh = sub.add_parser("first-host")
    fh.add_argument("cidr")
    fh.set_defaults(run=first_host)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "settle" and args.bootstrap and not args.topic:
        parser().error("settle --bootstrap needs --topic")
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
