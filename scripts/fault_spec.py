"""scripts/fault_spec.py - the grammar of a fault schedule
(`./run-all.sh --faults SPEC`, a plan's "faults"): parsing and checking a
SPEC, and the subset a broker can take here. Pure: no I/O.

SPEC: faults separated by ';', each KIND:TARGET@AT[+FOR][,restart@+AFTER]
(slow-disk also [,wbps=BYTES][,wiops=N]); the kinds, targets and times are
described in scripts/faults.py and docs/harness.md ("Faults inside the
load"). Must not: run anything or look at the machine (scripts/faults.py
checks the kernel and the disks, injects and undoes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("kill", "stop", "pause", "partition", "disk-full", "slow-disk")
NEEDS_DURATION = ("pause", "partition", "disk-full", "slow-disk")
PROCESS_KINDS = ("kill", "stop")
# kinds one broker cannot take here (for_broker leaves them out of its run);
# none since the Kafka run puts log.dirs where a disk fault can reach it
CHRONIK_ONLY: tuple[str, ...] = ()
# slow-disk's write limit (cgroup io.max / blkio.throttle): 1 MiB/s and 50
# write IOPS, i.e. a dozen or two fsyncs a second; FAULT_SLOW_DISK or a
# fault's own ,wbps=/,wiops= override it
SLOW_DISK_DEFAULT = "wbps=1m wiops=50"

_FAULT = re.compile(
    r"^(?P<kind>[a-z-]+):(?P<target>leader|follower|node\d+|\d+)@(?P<at>[\d.]+[smh]?)"
    r"(?:\+(?P<for>[\d.]+[smh]?))?(?:,restart@\+(?P<restart>[\d.]+[smh]?))?"
    r"(?P<limit>(?:,w(?:bps|iops)=[\w.]+)*)$")


class SpecError(ValueError):
    """A fault schedule that cannot be run."""


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # "leader", "follower" or "nodeN"
    at_s: float
    duration_s: float | None  # None: a kill/stop restarted at the load's end
    limit: tuple[tuple[str, int], ...] = ()  # slow-disk: (("wbps", B/s), ("wiops", N)); () for other kinds

    def __str__(self) -> str:
        lasting = f" for {self.duration_s:g} s" if self.duration_s is not None else " (restarted at the load's end)"
        limited = f" ({limit_text(self.limit)})" if self.limit else ""
        return f"{self.kind} {self.target} at {self.at_s:g} s{lasting}{limited}"


def seconds(text: str) -> float:
    """"20s", "1.5m", "1h" or "20" as seconds."""
    m = re.fullmatch(r"([\d.]+)([smh]?)", text.strip())
    if not m:
        raise SpecError(f"{text!r} is not a duration (20s, 1.5m, 20)")
    try:
        value = float(m[1])
    except ValueError as e:
        raise SpecError(f"{text!r} is not a duration") from e
    return value * {"": 1, "s": 1, "m": 60, "h": 3600}[m[2]]


def io_limit(text: str) -> dict[str, int]:
    """"wbps=1m wiops=50" (spaces or commas; wbps in bytes a second, k/m/g
    suffixes of 1024) as {"wbps": 1048576, "wiops": 50}; SpecError when
    malformed. At least one of the two, each positive."""
    out: dict[str, int] = {}
    for item in [i for i in re.split(r"[\s,]+", text.strip()) if i]:
        m = re.fullmatch(r"(wbps|wiops)=(\d+)([kmg]?)", item.lower())
        if not m:
            raise SpecError(f"{item!r}: a slow-disk limit is wbps=BYTES[k|m|g] or wiops=N (e.g. wbps=1m,wiops=50)")
        value = int(m[2]) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m[3]]
        if m[1] == "wiops" and m[3]:
            raise SpecError(f"{item!r}: wiops is a plain number of write operations a second")
        if value <= 0:
            raise SpecError(f"{item!r}: a limit must be positive (no limit is no fault)")
        out[m[1]] = value
    if not out:
        raise SpecError("an empty slow-disk limit (wbps=BYTES and/or wiops=N)")
    return out


def limit_text(limit) -> str:
    return " ".join(f"{k}={v}" for k, v in (limit.items() if isinstance(limit, dict) else limit))


def parse(spec: str, broker: str = "chronik", nodes: int = 3, duration_s: float | None = None,
          slow_disk: str = SLOW_DISK_DEFAULT) -> list[Fault]:
    """The faults of SPEC in the order they start; SpecError says what is wrong.
    ``slow_disk``: the write limit of a slow-disk fault that gives none of
    its own (FAULT_SLOW_DISK)."""
    faults = []
    for part in [p.strip() for p in spec.split(";") if p.strip()]:
        m = _FAULT.match(part)
        if not m:
            raise SpecError(f"{part!r}: not KIND:TARGET@AT[+FOR][,restart@+AFTER] "
                            "(e.g. kill:leader@20s,restart@+10s or partition:node2@40s+8s)")
        kind = m["kind"]
        if kind not in KINDS:
            raise SpecError(f"{part!r}: unknown fault {kind!r} (one of {', '.join(KINDS)})")
        if m["for"] and m["restart"]:
            raise SpecError(f"{part!r}: give +FOR or ,restart@+AFTER, not both")
        if m["restart"] and kind not in PROCESS_KINDS:
            raise SpecError(f"{part!r}: only kill and stop take ,restart@+AFTER")
        duration = seconds(m["for"] or m["restart"]) if (m["for"] or m["restart"]) else None
        if duration is None and kind in NEEDS_DURATION:
            raise SpecError(f"{part!r}: {kind} needs a duration (+8s): every fault is bounded")
        if duration is not None and duration <= 0:
            raise SpecError(f"{part!r}: the duration must be positive")
        target = m["target"]
        if target.isdigit():
            target = f"node{target}"
        if target.startswith("node") and not 1 <= int(target[4:]) <= nodes:
            raise SpecError(f"{part!r}: no {target} in a {nodes}-node cluster")
        if kind in CHRONIK_ONLY and broker != "chronik":
            raise SpecError(f"{part!r}: {kind} runs against Chronik only")
        limit: tuple[tuple[str, int], ...] = ()
        if m["limit"] and kind != "slow-disk":
            raise SpecError(f"{part!r}: only slow-disk takes ,wbps= and ,wiops=")
        if kind == "slow-disk":
            given = io_limit(m["limit"]) if m["limit"] else {}
            limit = tuple(sorted({**io_limit(slow_disk), **given}.items()))
        if nodes < 2 and (target == "follower" or kind == "partition"):
            raise SpecError(f"{part!r}: needs a cluster (--nodes 3)")
        at = seconds(m["at"])
        if duration_s is not None and at + (duration or 0) > duration_s:
            raise SpecError(f"{part!r}: ends at {at + (duration or 0):g} s, after the load's {duration_s:g} s")
        faults.append(Fault(kind, target, at, duration, limit))
    if not faults:
        raise SpecError("an empty fault schedule")
    return sorted(faults, key=lambda f: f.at_s)


def has_network_fault(faults: list[Fault]) -> bool:
    return any(f.kind == "partition" for f in faults)


def has_disk_throttle(faults: list[Fault]) -> bool:
    return any(f.kind == "slow-disk" for f in faults)


def for_broker(spec: str, broker: str) -> str:
    """SPEC's faults that `broker` can take here, in SPEC's own words."""
    parts = [p.strip() for p in spec.split(";") if p.strip()]
    return ";".join(p for p in parts if broker == "chronik" or p.split(":", 1)[0] not in CHRONIK_ONLY)
