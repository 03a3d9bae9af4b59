"""scripts/faults.py - a run's fault schedule (./run-all.sh --faults SPEC):
parsing it, injecting and undoing each fault on time, recording each one as
an event for meta.json, and watching the topic's leaders and ISRs meanwhile.

Owns (called by run-all.sh; confluent-kafka from the project's .venv only in
`run`, for the Metadata poller and `kill:leader`):
  parse SPEC [--broker chronik|kafka] [--nodes N] [--duration-s S]
                         validate SPEC, print one fault per line; exit 2 with
                         the reason when it is not valid for that run
  plan PLAN_FILE          print a load plan's "faults" schedule (load/plans/*.json),
                         or nothing when it has none
  for-broker KIND SPEC    print SPEC without the faults KIND cannot take here
                         (disk-full for kafka; scripts/fault-compare.sh)
  prepare --state DIR SPEC [--data-dir ID=PATH ...] [--tmpfs-size SIZE]
                         before the brokers start: a tmpfs mounted on the data
                         directory of every node a disk-full fault targets;
                         the cgroups of every node (network faults)
                         print what must be mounted or created; records it in DIR
  run --state DIR --events FILE --partitions-csv FILE --start EPOCH SPEC
      --bootstrap B --topic T --broker KIND --node ID=PID ... [--endpoint ID=HOST:PORT,PORT ...]
      [--data-dir ID=PATH ...] [--pid-file ID=PATH ...]
                         the scheduler: injects and undoes each fault at its time
                         (seconds after EPOCH, the load's start), polls Metadata
                         (leader, replicas and ISR of every partition of T; every
                         0.5 s, scripts/metadata_watch.py) into the CSV; once DIR/heal exists it undoes every
                         active fault, skips those not begun and writes DIR/healed;
                         SIGTERM ends it (undoing first)
  undo --state DIR [--final]
                         the run's trap: undo whatever DIR says is still in force
                         (SIGCONT, iptables cuts, filler files); --final also
                         unmounts the tmpfs and removes the cgroups (after the
                         brokers stopped)
  pids --state DIR       print the pids of nodes the scheduler restarted (the
                         run's trap stops them)

SPEC: faults separated by ';', each KIND:TARGET@AT[+FOR][,restart@+AFTER]
  kill:leader@20s,restart@+10s   SIGKILL the leader of the topic's partition 0
                                 at 20 s, start it again 10 s later
  stop:node2@20s+10s             SIGTERM (a controlled shutdown), restart after 10 s
  pause:node3@60s+3s             SIGSTOP, SIGCONT after 3 s
  partition:node2@40s+8s         node 2 cut from every other node (both ways,
                                 every port they listen on), clients still
                                 reaching it, for 8 s
  disk-full:node1@80s+10s        node 1's data directory (a tmpfs this run
                                 mounted) full for 10 s (Chronik only)
TARGET: leader (of partition 0 at that moment), follower (a replica of
partition 0 that is not its leader), nodeN or N. Times: 20s, 1.5m, 20 (s).
A kill or stop without FOR is restarted when the load ends.

Network cuts: every node runs in its own cgroup (v2) from its start
(scripts/in-cgroup.sh; only when SPEC has a partition), and a cut is an
iptables DROP on the loopback output of one node's cgroup towards another
node's listening ports: the same for Chronik's 127.0.0.1-3 and Kafka's
three ports on 127.0.0.1, where a network namespace per node would need
other addresses than the brokers are started on (docs/harness.md).

Beside it: fault_spec.py (the SPEC grammar, pure) and metadata_watch.py (the
Metadata poller).

Every fault is bounded (its FOR, at most the load's end) and every change is
written to DIR/state.json before it is made, so `undo` can reverse it after
a crash. Must not: start the run's processes (the shell does; a restarted
node is started from its own /proc command line, environment, working
directory and log files), or judge the run (reports/faults.py does).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

# the SPEC grammar (beside this file)
from fault_spec import CHRONIK_ONLY, PROCESS_KINDS, Fault, SpecError, for_broker, has_network_fault, parse

__all__ = ["CHRONIK_ONLY", "Fault", "SpecError", "for_broker", "has_network_fault", "parse"]

TICK_S = 0.05
STOP_TIMEOUT_S = 30.0
CGROUP2 = Path(os.environ.get("FAULT_CGROUP2", "/sys/fs/cgroup/unified"))
RULE_TAG = "chronik-fault"

# --- state: everything in force, written before it is done ---------------------------


class State:
    """DIR/state.json: what `undo` must reverse. Every change is written
    (atomically) before the action it records is taken."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.path = directory / "state.json"
        self.data = {"paused": {}, "rules": [], "fillers": {}, "mounts": {}, "cgroups": [], "restarted": {},
                     "killed": {}}
        if self.path.exists():
            self.data.update(json.loads(self.path.read_text()))

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)


def iptables(action: str, rule: list[str]) -> bool:
    done = subprocess.run(["iptables", "-w", action, "OUTPUT", *rule], capture_output=True, text=True)
    return done.returncode == 0


def cut_rules(state_dir: Path, src_node: str, dst_host: str, dst_ports: list[str]) -> list[str]:
    """One node's packets to another node's listening ports, dropped."""
    return ["-o", "lo", "-m", "cgroup", "--path", cgroup_rel(state_dir, src_node), "-p", "tcp", "-d", dst_host,
            "-m", "multiport", "--dports", ",".join(dst_ports), "-m", "comment", "--comment",
            f"{RULE_TAG} {run_tag(state_dir)}", "-j", "DROP"]


def cgroup_rel(state_dir: Path, node: str) -> str:
    """A node's cgroup, relative to the cgroup2 root (as iptables names it)."""
    return f"{RULE_TAG}-{run_tag(state_dir)}/{node}"


def run_tag(state_dir: Path) -> str:
    """The run's name for its cgroups and iptables comments: the state
    directory's parent (.run/<run-id>/faults -> <run-id>)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", state_dir.resolve().parent.name)[:60]


def undo_all(state: State, final: bool) -> list[str]:
    """Reverse what `state` holds in force; with ``final`` also unmount and
    remove cgroups. Returns what it did."""
    done = []
    d = state.data
    for node, pid in list(d["paused"].items()):
        try:
            os.kill(int(pid), signal.SIGCONT)
        except ProcessLookupError:
            pass
        d["paused"].pop(node)
        done.append(f"SIGCONT {node} pid {pid}")
    for cut in list(d["rules"]):
        iptables("-D", cut["rule"])
        d["rules"].remove(cut)
        done.append(f"removed a cut of {cut['node']}")
    # leftovers of a crash between the rule and the state (same tag)
    listing = subprocess.run(["iptables", "-w", "-S", "OUTPUT"], capture_output=True, text=True).stdout
    tag = f'"{RULE_TAG} {run_tag(state.dir)}"'  # quoted whole: another run's id may extend this one's
    for line in listing.splitlines():
        if tag in line and line.startswith("-A OUTPUT "):
            rule = _split_rule(line[len("-A OUTPUT "):])
            if iptables("-D", rule):
                done.append("removed a leftover cut")
    for node, path in list(d["fillers"].items()):
        _unfill(state, node, path)
        done.append(f"freed {node}'s disk")
    if final:
        for node, mount in list(d["mounts"].items()):
            if subprocess.run(["umount", mount["path"]], capture_output=True).returncode == 0 \
                    or not os.path.ismount(mount["path"]):
                d["mounts"].pop(node)
                done.append(f"unmounted {mount['path']}")
        for path in sorted(d["cgroups"], key=len, reverse=True):
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                continue  # still has processes: left for the next undo
            d["cgroups"].remove(path)
    state.save()
    return done


def _split_rule(text: str) -> list[str]:
    import shlex

    # iptables -S quotes the comment; the cgroup match prints as "--path P"
    return shlex.split(text)


def _unfill(state: State, node: str, path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    mount = state.data["mounts"].get(node)
    if mount:
        subprocess.run(["mount", "-o", f"remount,size={mount['size']}", mount["path"]], capture_output=True)
    state.data["fillers"].pop(node, None)
    state.save()


# --- the scheduler --------------------------------------------------------------------


def now_iso(t: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if t is None else t, tz=timezone.utc).isoformat(timespec="milliseconds")


class Cluster:
    """The run's nodes: id -> current pid, listening endpoints, data dir, pid file."""

    def __init__(self, args: argparse.Namespace, state: State):
        self.state = state
        self.broker = args.broker
        self.pids = {f"node{k}": int(v) for k, v in _pairs(args.node).items()}
        self.endpoints = {}
        for k, v in _pairs(args.endpoint).items():
            host, _, ports = v.partition(":")
            self.endpoints[f"node{k}"] = (host, ports.split(","))
        self.data_dirs = {f"node{k}": v for k, v in _pairs(args.data_dir).items()}
        self.pid_files = {f"node{k}": v for k, v in _pairs(args.pid_file).items()}
        for node, pid in state.data["restarted"].items():
            self.pids[node] = int(pid)


def _pairs(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"faults: {item!r} is not ID=VALUE")
        out[key] = value
    return out


class Scheduler:
    def __init__(self, args: argparse.Namespace, faults: list[Fault]):
        self.args = args
        self.faults = faults
        self.state = State(Path(args.state))
        self.cluster = Cluster(args, self.state)
        self.events_path = Path(args.events)
        self.events: list[dict] = []
        from metadata_watch import Watcher  # beside this file; confluent-kafka, only for `run`

        self.watcher = Watcher(args.bootstrap, args.topic, Path(args.partitions_csv))
        self.active: list[tuple[float, int, str]] = []  # (end time, event index, node)

    def log(self, msg: str) -> None:
        try:
            print(f"[{time.strftime('%H:%M:%S')}] faults: {msg}", file=sys.stderr, flush=True)
        except OSError:
            pass  # the log's reader (tee) died with a Ctrl-C: undoing the faults matters more

    def write_events(self) -> None:
        tmp = self.events_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(e) + "\n" for e in self.events))
        os.replace(tmp, self.events_path)

    def resolve(self, target: str) -> tuple[str | None, str]:
        if target.startswith("node"):
            return target, ""
        view = self.watcher.latest if time.time() - self.watcher.latest_at < 2 else {}
        if not view:
            try:
                view = self.watcher.describe()
            except Exception:  # noqa: BLE001
                view = {}
        if 0 not in view:
            return None, "no metadata for partition 0"
        leader, replicas, _ = view[0]
        if target == "leader":
            return (f"node{leader}", f"leader of {self.args.topic}-0") if leader >= 0 else (None, "no leader")
        followers = [r for r in replicas if r != leader]
        if not followers:
            return None, "partition 0 has no follower"
        return f"node{followers[0]}", f"follower of {self.args.topic}-0 (leader node{leader})"

    # each inject returns (detail, node); each undo returns its detail
    def inject(self, fault: Fault, node: str) -> str:
        pid = self.cluster.pids[node]
        if fault.kind in PROCESS_KINDS:
            self.state.data["killed"][node] = _process_image(pid)
            self.state.save()
            if fault.kind == "kill":
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 10)
                return f"SIGKILL pid {pid}"
            os.kill(pid, signal.SIGTERM)
            if not _wait_gone(pid, STOP_TIMEOUT_S):
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 10)
                return f"SIGTERM pid {pid}, SIGKILL after {STOP_TIMEOUT_S:g} s"
            return f"SIGTERM pid {pid} (controlled shutdown)"
        if fault.kind == "pause":
            self.state.data["paused"][node] = pid
            self.state.save()
            os.kill(pid, signal.SIGSTOP)
            return f"SIGSTOP pid {pid}"
        if fault.kind == "partition":
            rules = []
            host, ports = self.cluster.endpoints[node]
            for peer, (phost, pports) in self.cluster.endpoints.items():
                if peer != node:
                    rules += [cut_rules(self.state.dir, node, phost, pports), cut_rules(self.state.dir, peer, host, ports)]
            for rule in rules:
                self.state.data["rules"].append({"node": node, "rule": rule})
                self.state.save()
                if not iptables("-I", rule):
                    raise RuntimeError(f"iptables refused {' '.join(rule)}")
            return f"cut from {len(self.cluster.endpoints) - 1} peers (both ways), clients still reach it"
        if fault.kind == "disk-full":
            return self.fill(node)
        raise AssertionError(fault.kind)

    def fill(self, node: str) -> str:
        mount = self.state.data["mounts"].get(node)
        if not mount:
            raise RuntimeError(f"{node} has no tmpfs of this run (prepare was not run for it)")
        path = os.path.join(mount["path"], ".chronik-fault-filler")
        self.state.data["fillers"][node] = path
        self.state.save()
        # shrink the tmpfs to what it holds plus a little, then fill that little
        for margin in (1 << 20, 8 << 20, 64 << 20):
            st = os.statvfs(mount["path"])
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            if subprocess.run(["mount", "-o", f"remount,size={used + margin}", mount["path"]],
                              capture_output=True).returncode == 0:
                break
        with open(path, "wb", buffering=0) as f:
            chunk = b"\0" * (64 << 10)
            try:
                while f.write(chunk):
                    pass
            except OSError:
                pass
        st = os.statvfs(mount["path"])
        return (f"{mount['path']} full ({st.f_bavail * st.f_frsize} bytes free; tmpfs shrunk to what it held "
                f"plus a {os.path.getsize(path)}-byte filler)")

    def undo(self, fault: Fault, node: str) -> str:
        if fault.kind in PROCESS_KINDS:
            image = self.state.data["killed"].pop(node, None)
            if image is None:
                return "nothing to restart"
            pid = _restart(image, self.cgroup_of(node))
            self.cluster.pids[node] = pid
            self.state.data["restarted"][node] = pid
            self.state.save()
            if node in self.cluster.pid_files:
                Path(self.cluster.pid_files[node]).write_text(f"{pid}\n")
            _register(pid, f"{self.args.broker}-{node}-restarted")
            return f"restarted as pid {pid}"
        if fault.kind == "pause":
            pid = self.state.data["paused"].pop(node, None)
            self.state.save()
            if pid:
                try:
                    os.kill(int(pid), signal.SIGCONT)
                except ProcessLookupError:
                    return "gone before SIGCONT"
            return "SIGCONT"
        if fault.kind == "partition":
            for cut in [c for c in self.state.data["rules"] if c["node"] == node]:
                iptables("-D", cut["rule"])
                self.state.data["rules"].remove(cut)
            self.state.save()
            return "healed"
        if fault.kind == "disk-full":
            path = self.state.data["fillers"].get(node)
            if path:
                _unfill(self.state, node, path)
            return "space back"
        raise AssertionError(fault.kind)

    def cgroup_of(self, node: str) -> Path | None:
        path = CGROUP2 / cgroup_rel(self.state.dir, node)
        return path if path.is_dir() else None

    def start(self, fault: Fault, start: float) -> None:
        node, why = self.resolve(fault.target)
        at = time.time()
        event = {"at": now_iso(at), "kind": fault.kind, "target": node or fault.target, "detail": "",
                 "scheduled_s": fault.at_s, "planned_s": fault.duration_s, "spec": str(fault), "end": None}
        if node is None or node not in self.cluster.pids:
            event["detail"] = f"not run: {why or 'unknown node'}"
            event["end"] = event["at"]
            self.events.append(event)
            self.write_events()
            self.log(f"{fault}: {event['detail']}")
            return
        try:
            detail = self.inject(fault, node)
        except Exception as e:  # noqa: BLE001 - recorded in the event, the run goes on
            detail = f"failed: {e}"
        event["detail"] = ", ".join(x for x in (why, detail) if x)
        self.events.append(event)
        self.write_events()
        self.log(f"{fault} -> {node}: {event['detail']}")
        if detail.startswith("failed"):
            event["end"] = event["at"]
            self.write_events()
            return
        end = start + fault.at_s + fault.duration_s if fault.duration_s is not None else float("inf")
        self.active.append((end, len(self.events) - 1, node))

    def finish(self, event_index: int, node: str) -> None:
        event = self.events[event_index]
        fault = next(f for f in self.faults if str(f) == event["spec"])
        try:
            detail = self.undo(fault, node)
        except Exception as e:  # noqa: BLE001
            detail = f"undo failed: {e}"
        event["end"] = now_iso()
        event["end_detail"] = detail
        self.write_events()
        self.log(f"{fault} -> {node}: ended, {detail}")

    def heal(self, reason: str) -> None:
        for _, index, node in sorted(self.active):
            self.finish(index, node)
        self.active = []
        self.log(f"every fault undone ({reason})")

    def run(self) -> int:
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        self.watcher.start()
        start = self.args.start
        pending = list(enumerate(self.faults))
        heal_flag, healed_flag = self.state.dir / "heal", self.state.dir / "healed"
        self.write_events()
        healed = False
        while not stop.is_set():
            now = time.time()
            if not healed and heal_flag.exists():
                for _, fault in pending:
                    self.events.append({"at": now_iso(), "kind": fault.kind, "target": fault.target,
                                        "detail": "not run: the load ended first", "scheduled_s": fault.at_s,
                                        "planned_s": fault.duration_s, "spec": str(fault), "end": now_iso()})
                pending = []
                self.heal("the load ended")
                self.write_events()
                healed_flag.touch()
                healed = True
            for _, fault in [p for p in pending if start + p[1].at_s <= now]:
                self.start(fault, start)
            pending = [p for p in pending if start + p[1].at_s > now]
            for item in [a for a in self.active if a[0] <= now]:
                self.active.remove(item)
                self.finish(item[1], item[2])
            stop.wait(TICK_S)
        self.heal("stopped")
        self.watcher.stop.set()
        self.watcher.join(timeout=5)
        return 0


def _process_image(pid: int) -> dict:
    """What restarting `pid` needs, read before it is stopped."""
    proc = Path(f"/proc/{pid}")
    cmd = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
    env = dict(kv.decode().split("=", 1) for kv in (proc / "environ").read_bytes().split(b"\0") if b"=" in kv)
    return {"cmd": cmd, "env": env, "cwd": os.readlink(proc / "cwd"),
            "stdout": os.readlink(proc / "fd" / "1"), "stderr": os.readlink(proc / "fd" / "2")}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def _restart(image: dict, cgroup: Path | None) -> int:
    def join_cgroup() -> None:
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    out = open(image["stdout"], "ab") if image["stdout"].startswith("/") else subprocess.DEVNULL
    err = open(image["stderr"], "ab") if image["stderr"].startswith("/") else subprocess.DEVNULL
    p = subprocess.Popen(image["cmd"], cwd=image["cwd"], env=image["env"], stdin=subprocess.DEVNULL, stdout=out,
                         stderr=err, preexec_fn=join_cgroup, start_new_session=True)
    return p.pid


def _register(pid: int, name: str) -> None:
    """The pid in the run's registry (.run/pids, scripts/lib.sh's format), so
    ./cleanup.sh stops it after a killed run."""
    pids = os.environ.get("PIDS_FILE")
    if not pids:
        return
    import fcntl

    def start_time(p: int) -> str:
        try:
            return Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[19]
        except (OSError, IndexError):
            return ""

    owner = os.environ.get("FAULT_OWNER_PID", str(os.getppid()))
    with open(pids + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(pids, "a") as f:
            f.write(f"{pid} {start_time(pid)} {name} {owner} {start_time(int(owner))}\n")


# --- subcommands ----------------------------------------------------------------------


def cmd_parse(args: argparse.Namespace) -> int:
    try:
        faults = parse(args.spec, args.broker, args.nodes, args.duration_s)
    except SpecError as e:
        print(f"--faults: {e}", file=sys.stderr)
        return 2
    for f in faults:
        print(f)
    if args.network:
        return 0 if has_network_fault(faults) else 1
    return 0


def cmd_for_broker(args: argparse.Namespace) -> int:
    print(for_broker(args.spec, args.broker))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    plan = json.loads(Path(args.plan).read_text())
    print(plan.get("faults") or "")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    faults = parse(args.spec, args.broker, args.nodes)
    state_dir = Path(args.state)
    state_dir.mkdir(parents=True, exist_ok=True)
    state = State(state_dir)
    data_dirs = {f"node{k}": v for k, v in _pairs(args.data_dir).items()}
    for f in faults:
        if f.kind != "disk-full":
            continue
        targets = [f.target] if f.target.startswith("node") else list(data_dirs)
        for node in targets:
            if node in state.data["mounts"]:
                continue
            path = data_dirs.get(node)
            if not path:
                raise SystemExit(f"faults prepare: no --data-dir for {node}")
            os.makedirs(path, exist_ok=True)
            state.data["mounts"][node] = {"path": path, "size": args.tmpfs_size}
            state.save()
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.tmpfs_size},mode=0755", "tmpfs", path],
                           check=True)
            print(f"{node}: tmpfs of {args.tmpfs_size} on {path}")
    if has_network_fault(faults):
        root = CGROUP2 / f"{RULE_TAG}-{run_tag(state_dir)}"
        for i in range(1, args.nodes + 1):
            path = root / f"node{i}"
            path.mkdir(parents=True, exist_ok=True)
            for p in (str(path), str(root)):
                if p not in state.data["cgroups"]:
                    state.data["cgroups"].append(p)
            state.save()
        print(f"cgroup-root {root}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    faults = parse(args.spec, args.broker, len(args.node))
    return Scheduler(args, faults).run()


def cmd_undo(args: argparse.Namespace) -> int:
    state_dir = Path(args.state)
    if not (state_dir / "state.json").exists():
        return 0
    for line in undo_all(State(state_dir), args.final):
        print(f"faults undo: {line}", file=sys.stderr)
    return 0


def cmd_pids(args: argparse.Namespace) -> int:
    state_dir = Path(args.state)
    if (state_dir / "state.json").exists():
        for pid in State(state_dir).data["restarted"].values():
            print(pid)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="faults.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("parse")
    p.add_argument("spec")
    p.add_argument("--broker", default="chronik")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--duration-s", type=float)
    p.add_argument("--network", action="store_true", help="exit 1 when SPEC has no network fault")
    p.set_defaults(func=cmd_parse)
    p = sub.add_parser("plan")
    p.add_argument("plan")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("for-broker")
    p.add_argument("broker", choices=("chronik", "kafka"))
    p.add_argument("spec")
    p.set_defaults(func=cmd_for_broker)
    p = sub.add_parser("prepare")
    p.add_argument("spec")
    p.add_argument("--state", required=True)
    p.add_argument("--broker", default="chronik")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--data-dir", action="append")
    p.add_argument("--tmpfs-size", default=os.environ.get("FAULT_TMPFS_SIZE", "2g"))
    p.set_defaults(func=cmd_prepare)
    p = sub.add_parser("run")
    p.add_argument("spec")
    p.add_argument("--state", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--partitions-csv", required=True)
    p.add_argument("--start", type=float, required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--broker", default="chronik")
    p.add_argument("--node", action="append", required=True)
    p.add_argument("--endpoint", action="append")
    p.add_argument("--data-dir", action="append")
    p.add_argument("--pid-file", action="append")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("undo")
    p.add_argument("--state", required=True)
    p.add_argument("--final", action="store_true")
    p.set_defaults(func=cmd_undo)
    p = sub.add_parser("pids")
    p.add_argument("--state", required=True)
    p.set_defaults(func=cmd_pids)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
