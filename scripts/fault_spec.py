"""scripts/fault_spec.py - the grammar of a fault schedule
(`./run-all.sh --faults SPEC`, a plan's "faults"): parsing and checking a
SPEC, and the subset a broker can take here. Pure: no I/O.

SPEC: faults separated by ';', each KIND:TARGET@AT[+FOR][,restart@+AFTER];
the kinds, targets and times are described in scripts/faults.py and
docs/harness.md ("Faults inside the load"). Must not: run anything
(scripts/faults.py injects and undoes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("kill", "stop", "pause", "partition", "disk-full")
NEEDS_DURATION = ("pause", "partition", "disk-full")
PROCESS_KINDS = ("kill", "stop")
CHRONIK_ONLY = ("disk-full",)

_FAULT = re.compile(
    r"^(?P<kind>[a-z-]+):(?P<target>leader|follower|node\d+|\d+)@(?P<at>[\d.]+[smh]?)"
    r"(?:\+(?P<for>[\d.]+[smh]?))?(?:,restart@\+(?P<restart>[\d.]+[smh]?))?$")


class SpecError(ValueError):
    """A fault schedule that cannot be run."""


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # "leader", "follower" or "nodeN"
    at_s: float
    duration_s: float | None  # None: a kill/stop restarted at the load's end

    def __str__(self) -> str:
        lasting = f" for {self.duration_s:g} s" if self.duration_s is not None else " (restarted at the load's end)"
        return f"{self.kind} {self.target} at {self.at_s:g} s{lasting}"


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


def parse(spec: str, broker: str = "chronik", nodes: int = 3, duration_s: float | None = None) -> list[Fault]:
    """The faults of SPEC in the order they start; SpecError says what is wrong."""
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
            raise SpecError(f"{part!r}: {kind} runs against Chronik only (the kafka-anchor wipes and owns "
                            "its data directories, so the run cannot mount a small filesystem under them)")
        if nodes < 2 and (target == "follower" or kind == "partition"):
            raise SpecError(f"{part!r}: needs a cluster (--nodes 3)")
        at = seconds(m["at"])
        if duration_s is not None and at + (duration or 0) > duration_s:
            raise SpecError(f"{part!r}: ends at {at + (duration or 0):g} s, after the load's {duration_s:g} s")
        faults.append(Fault(kind, target, at, duration))
    if not faults:
        raise SpecError("an empty fault schedule")
    return sorted(faults, key=lambda f: f.at_s)


def has_network_fault(faults: list[Fault]) -> bool:
    return any(f.kind == "partition" for f in faults)


def for_broker(spec: str, broker: str) -> str:
    """SPEC's faults that `broker` can take here, in SPEC's own words."""
    parts = [p.strip() for p in spec.split(";") if p.strip()]
    return ";".join(p for p in parts if broker == "chronik" or p.split(":", 1)[0] not in CHRONIK_ONLY)
