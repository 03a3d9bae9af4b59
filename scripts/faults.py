"""scripts/faults.py - a run's fault schedule (./run-all.sh --faults SPEC):
parsing it, injecting and undoing each fault on time, recording each one as
an event for meta.json, and watching the topic's leaders and ISRs meanwhile.

Owns (called by run-all.sh; confluent-kafka from the project's .venv only in
`run`, for the Metadata poller and `kill:leader`):
  parse SPEC [--broker chronik|kafka] [--nodes N] [--duration-s S]
                         validate SPEC, print one fault per line; exit 2 with
                         the reason when it is not valid for that run
                         (a slow-disk fault: also that this kernel can throttle
                         a cgroup's writes, else exit 2 saying why)
  plan PLAN_FILE          print a load plan's "faults" schedule (load/plans/*.json),
                         or nothing when it has none
  for-broker KIND SPEC    print SPEC without the faults KIND cannot take here
                         (none at present; scripts/fault-compare.sh)
  prepare --state DIR SPEC [--data-dir ID=PATH ...] [--tmpfs-size SIZE]
                         before the brokers start: a tmpfs mounted on the data
                         directory of every node a disk-full fault targets;
                         the cgroups of every node (network faults: cgroup v2;
                         slow-disk: the io controller's, v2 or v1 blkio), and
                         the block device under each slow-disk node's data
                         directory (refused when there is none: tmpfs, overlay)
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
                         (SIGCONT, iptables cuts, filler files, disk throttles); --final also
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
                                 mounted) full for 10 s
  slow-disk:node2@60s+20s        node 2's writes to the disk under its data
                                 directory throttled (cgroup io.max wbps/wiops,
                                 or the v1 blkio.throttle files) for 20 s;
                                 the limit: FAULT_SLOW_DISK (default
                                 "wbps=1m wiops=50") or the fault's own
                                 ,wbps=512k,wiops=20
TARGET: leader (of partition 0 at that moment), follower (a replica of
partition 0 that is not its leader), nodeN or N. Times: 20s, 1.5m, 20 (s).
A kill or stop without FOR is restarted when the load ends.

Network cuts and slow disks: every node runs in its own cgroups from its
start (scripts/in-cgroup.sh; only when SPEC has a partition or a slow-disk:
a v2 cgroup for the iptables match, the io controller's cgroup for the
throttle - the v2 one when cgroup2 has io, else v1 blkio's, as on this
project's hybrid-hierarchy machines), and a cut is an
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
from fault_spec import (CHRONIK_ONLY, PROCESS_KINDS, SLOW_DISK_DEFAULT, Fault, SpecError, for_broker,
                        has_disk_throttle, has_network_fault, io_limit, limit_text, parse)

__all__ = ["CHRONIK_ONLY", "Fault", "SpecError", "for_broker", "has_network_fault", "parse"]

TICK_S = 0.05
STOP_TIMEOUT_S = 30.0


def _cgroup2_root() -> Path:
    """The cgroup2 hierarchy: /sys/fs/cgroup on a unified machine,
    /sys/fs/cgroup/unified on a hybrid one (systemd's layout)."""
    if os.environ.get("FAULT_CGROUP2"):
        return Path(os.environ["FAULT_CGROUP2"])
    unified = Path("/sys/fs/cgroup")
    return unified if (unified / "cgroup.controllers").exists() else unified / "unified"


CGROUP2 = _cgroup2_root()
BLKIO_V1 = Path(os.environ.get("FAULT_BLKIO_V1", "/sys/fs/cgroup/blkio"))
RULE_TAG = "chronik-fault"


def slow_disk_default() -> str:
    return os.environ.get("FAULT_SLOW_DISK") or SLOW_DISK_DEFAULT

# --- state: everything in force, written before it is done ---------------------------


class State:
    """DIR/state.json: what `undo` must reverse. Every change is written
    (atomically) before the action it records is taken."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.path = directory / "state.json"
        self.data = {"paused": {}, "rules": [], "fillers": {}, "mounts": {}, "cgroups": [], "restarted": {},
                     "killed": {}, "io": {}, "throttles": {}, "images": {}}
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
    for node in list(d["throttles"]):
        lift_throttle(state, node)
        done.append(f"lifted {node}'s disk throttle")
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


# --- slow disks: the block-I/O throttle ------------------------------------------------


class Refused(Exception):
    """A fault this machine cannot inject (said at parse/prepare, never a silent no-op)."""


def io_backend() -> tuple[str, Path]:
    """Where this kernel throttles a cgroup's writes: ("v2", cgroup2 root)
    when the cgroup2 hierarchy offers the io controller (io.max), else
    ("v1", blkio root) when the v1 blkio hierarchy is mounted with its
    throttle files (a hybrid hierarchy: blkio bound to v1 cannot be enabled
    in cgroup2). Refused otherwise, saying what is missing."""
    controllers = CGROUP2 / "cgroup.controllers"
    v2 = controllers.read_text().split() if controllers.exists() else []
    if "io" in v2:
        return "v2", CGROUP2
    if (BLKIO_V1 / "blkio.throttle.write_bps_device").exists():
        return "v1", BLKIO_V1
    where = f"{controllers} lists {' '.join(v2) or 'nothing'}" if controllers.exists() else f"no {controllers}"
    raise Refused(f"slow-disk needs the kernel's block-I/O throttle: the io controller in cgroup v2 or v1 blkio "
                  f"with blkio.throttle.*; {where} and there is no {BLKIO_V1}/blkio.throttle.write_bps_device "
                  "(CONFIG_BLK_DEV_THROTTLING, or a cgroup namespace without io)")


def _mount_of(path: Path) -> tuple[str, str, str]:
    """(mount point, filesystem type, source) of the mount holding path."""
    best = ("/", "?", "?")
    real = str(path.resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        point = left.split()[4].replace("\\040", " ")
        fstype, source = (right.split() + ["?", "?"])[:2]
        if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, fstype, source)
    return best


def block_device(path: str) -> tuple[str, str]:
    """("MAJ:MIN", name) of the whole disk under ``path`` (its nearest
    existing ancestor: a data directory the broker creates later), as the
    throttle files take it: a partition's disk, since blk-throttle limits
    whole devices. Refused for a filesystem without a block device (tmpfs,
    overlay, a btrfs subvolume's anonymous device)."""
    p = Path(path)
    while not p.exists():
        p = p.parent
    st = os.stat(p)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    sysfs = Path(f"/sys/dev/block/{major}:{minor}")
    if major == 0 or not sysfs.exists():
        point, fstype, source = _mount_of(p)
        raise Refused(f"{path} is on {fstype} ({source} on {point}), a filesystem without a block device: "
                      "there is no disk whose writes a throttle could slow")
    disk = sysfs.resolve()
    if (disk / "partition").exists():
        disk = disk.parent
    return (disk / "dev").read_text().strip(), disk.name


def _io_files(backend: str) -> dict[str, str]:
    if backend == "v2":
        return {"max": "io.max"}
    return {"wbps": "blkio.throttle.write_bps_device", "wiops": "blkio.throttle.write_iops_device"}


def _written(backend: str, cgroup: Path, dev: str) -> tuple[int, int]:
    """(bytes, IOs) the cgroup has written to ``dev`` so far."""
    if backend == "v2":
        for line in (cgroup / "io.stat").read_text().splitlines():
            if line.startswith(dev + " "):
                kv = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
                return int(kv.get("wbytes", 0)), int(kv.get("wios", 0))
        return 0, 0
    counts = []
    for name in ("blkio.throttle.io_service_bytes", "blkio.throttle.io_serviced"):
        lines = (cgroup / name).read_text().splitlines()
        counts.append(sum(int(x.split()[2]) for x in lines if x.startswith(dev + " Write ")))
    return counts[0], counts[1]


def apply_throttle(state: State, node: str, pid: int, limit: dict[str, int]) -> str:
    """Limit ``node``'s cgroup's writes to its disk, read the limit back,
    and check the node's process is in that cgroup: a throttle that cannot
    slow anything raises instead of passing for a fault."""
    io = state.data["io"]
    dev = io["devices"][node]
    cgroup = Path(io["root"]) / node
    procs = (cgroup / "cgroup.procs").read_text().split()
    if str(pid) not in procs:
        raise RuntimeError(f"pid {pid} is not in {cgroup} (started outside it): the throttle would slow nothing")
    state.data["throttles"][node] = {"backend": io["backend"], "cgroup": str(cgroup), "dev": dev,
                                     "written": _written(io["backend"], cgroup, dev)}
    state.save()
    if io["backend"] == "v2":
        want = {"max": f"{dev} " + " ".join(f"{k}={v}" for k, v in limit.items())}
    else:
        want = {k: f"{dev} {v}" for k, v in limit.items()}
    for key, line in want.items():
        path = cgroup / _io_files(io["backend"])[key]
        path.write_text(line + "\n")
        back = path.read_text().splitlines()
        if io["backend"] == "v2":
            row = next((x for x in back if x.startswith(dev + " ")), "")
            ok = all(f"{k}={v}" in row.split() for k, v in limit.items())
        else:
            ok = line in back
        if not ok:
            raise RuntimeError(f"{path} reads back {back!r} after writing {line!r}")
    files = ", ".join(_io_files(io["backend"])[k] for k in want)
    return f"writes to /dev/{io['names'][node]} ({dev}) limited to {limit_text(limit)} ({cgroup}/{files}, read back)"


def lift_throttle(state: State, node: str) -> str:
    t = state.data["throttles"].get(node)
    if not t:
        return "no throttle in force"
    cgroup, dev = Path(t["cgroup"]), t["dev"]
    detail = "limit lifted"
    try:
        if t["backend"] == "v2":
            (cgroup / "io.max").write_text(f"{dev} rbps=max wbps=max riops=max wiops=max\n")
        else:
            for name in _io_files("v1").values():
                (cgroup / name).write_text(f"{dev} 0\n")  # 0 removes the rule
        written, ios = (a - b for a, b in zip(_written(t["backend"], cgroup, dev), t["written"]))
        detail = (f"limit lifted; {written / (1 << 20):.1f} MiB in {ios} write IOs reached the disk under it"
                  if ios else "limit lifted; the node wrote nothing to the disk under it (nothing was slowed)")
    except FileNotFoundError:
        detail = "its cgroup is gone (the node stopped)"
    state.data["throttles"].pop(node, None)
    state.save()
    return detail


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
            # a broker may shut itself down on a full disk (Kafka does, its one
            # log dir offline): the undo starts it again from this image
            self.state.data["images"][node] = _process_image(pid)
            self.state.save()
            return self.fill(node)
        if fault.kind == "slow-disk":
            if node not in self.state.data["io"].get("devices", {}):
                raise RuntimeError(f"{node} has no throttle cgroup of this run (prepare was not run for it)")
            return apply_throttle(self.state, node, pid, dict(fault.limit))
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
            return f"restarted as pid {self.start_again(node, image)}"
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
            image = self.state.data["images"].pop(node, None)
            self.state.save()
            old = self.cluster.pids[node]
            if image is None or _alive(old):
                return "space back"
            return (f"space back; pid {old} had exited during the fault (its log: {image['stderr']}), "
                    f"started again as pid {self.start_again(node, image)}")
        if fault.kind == "slow-disk":
            return lift_throttle(self.state, node)
        raise AssertionError(fault.kind)

    def start_again(self, node: str, image: dict) -> int:
        """``node`` started again from its /proc image, in its cgroups; its pid."""
        pid = _restart(image, self.cgroup_of(node))
        self.cluster.pids[node] = pid
        self.state.data["restarted"][node] = pid
        self.state.save()
        if node in self.cluster.pid_files:
            Path(self.cluster.pid_files[node]).write_text(f"{pid}\n")
        _register(pid, f"{self.args.broker}-{node}-restarted")
        return pid

    def cgroup_of(self, node: str) -> list[Path]:
        """Every cgroup of this run the node belongs in (network, io)."""
        roots = [CGROUP2 / f"{RULE_TAG}-{run_tag(self.state.dir)}"]
        if self.state.data["io"].get("root"):
            roots.append(Path(self.state.data["io"]["root"]))
        return [r / node for r in dict.fromkeys(roots) if (r / node).is_dir()]

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


def _restart(image: dict, cgroups: list[Path] | Path | None) -> int:
    joined = [cgroups] if isinstance(cgroups, Path) else list(cgroups or [])

    def join_cgroup() -> None:
        for cgroup in joined:
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
        faults = parse(args.spec, args.broker, args.nodes, args.duration_s, slow_disk_default())
        if has_disk_throttle(faults):
            io_backend()
    except (SpecError, Refused) as e:
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
    try:
        return _prepare(args)
    except (SpecError, Refused) as e:
        print(f"faults prepare: refused: {e}", file=sys.stderr)
        return 2


def _prepare(args: argparse.Namespace) -> int:
    faults = parse(args.spec, args.broker, args.nodes, slow_disk=slow_disk_default())
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
    roots = []
    if has_disk_throttle(faults):
        backend, hierarchy = io_backend()
        devices, names = {}, {}
        for f in faults:
            if f.kind != "slow-disk":
                continue
            for node in [f.target] if f.target.startswith("node") else [f"node{i}" for i in range(1, args.nodes + 1)]:
                path = data_dirs.get(node)
                if not path:
                    raise SystemExit(f"faults prepare: no --data-dir for {node} (slow-disk throttles its disk)")
                if node in state.data["mounts"]:
                    raise Refused(f"{f}: {node}'s data directory is the tmpfs of this run's disk-full fault, "
                                  "which has no disk to slow")
                devices[node], names[node] = block_device(path)
        root = hierarchy / f"{RULE_TAG}-{run_tag(state_dir)}"
        if backend == "v2":
            # io must be on in the subtree_control of every ancestor of the nodes' cgroups
            root.mkdir(exist_ok=True)
            for parent in (hierarchy, root):
                if "io" not in (parent / "cgroup.subtree_control").read_text().split():
                    try:
                        (parent / "cgroup.subtree_control").write_text("+io\n")
                    except OSError as e:
                        raise Refused(f"the io controller cannot be enabled in {parent}/cgroup.subtree_control "
                                      f"({e.strerror})") from e
        state.data["io"] = {"backend": backend, "root": str(root), "devices": devices, "names": names}
        state.save()
        roots.append(root)
        for node in devices:
            print(f"{node}: slow-disk throttles /dev/{names[node]} ({devices[node]}) through {backend} "
                  f"{'io.max' if backend == 'v2' else 'blkio.throttle.write_*_device'}")
    if has_network_fault(faults):
        roots.append(CGROUP2 / f"{RULE_TAG}-{run_tag(state_dir)}")
    for root in dict.fromkeys(roots):
        for i in range(1, args.nodes + 1):
            path = root / f"node{i}"
            path.mkdir(parents=True, exist_ok=True)
            for p in (str(path), str(root)):
                if p not in state.data["cgroups"]:
                    state.data["cgroups"].append(p)
            state.save()
    if roots:
        print(f"cgroup-root {':'.join(str(r) for r in dict.fromkeys(roots))}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    faults = parse(args.spec, args.broker, len(args.node), slow_disk=slow_disk_default())
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
