#!/usr/bin/env python3
"""Import cycles between chronik-server's modules, an import of a higher
room, and `Broker` past the request dispatcher, refused (`make lint`).

A module is a room's direct child (`requests::handlers`, `coordinators::txn`,
`config::limits`); a directory module and everything beneath it count as one.
An edge A -> B is any `crate::B` path in A's source outside `#[cfg(test)]`
items. Prints every cycle (strongly connected component of more than one
module) and exits 1 if there is one.

Rooms are ranked (`RANKS`, top first, as lib.rs lists them): a module may
import its own room and rooms below it, never one above; every edge that runs
back up is printed and exits 1.

Also exits 1 when a file other than those of `startup/`, `network/` and
`broker/` (the `Broker` struct and the request dispatcher) names `Broker` or
`crate::broker` outside comments and `#[cfg(test)]` items: `Broker` is what a
request may reach; the dispatcher takes it apart, and handlers and the layers
beneath take the managers they use (the quorum as `Cluster`, the replicas, the
offset store, ...), never all of them.

Owns: those three rules. Must not: judge anything but the server crate's `src/`.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "broker/server/src"
# Top first: each room depends only on those after it.
RANKS = [
    "startup",
    "network",
    "broker",
    "requests",
    "config",
    "coordinators",
    "quotas",
    "replica",
    "security",
    "infra",
]
ROOMS = set(RANKS)
PATH = re.compile(r"\bcrate::([a-z_]+)(?:::([a-z_]+)\b(?!!))?")


def module_of(path: Path) -> str | None:
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts[0] in ("main", "lib"):
        return None
    if parts[0] in ROOMS:
        if len(parts) == 1 or parts[1] == "mod":
            return parts[0]  # the room's mod.rs: its own items (children are apart)
        return f"{parts[0]}::{parts[1]}"
    return parts[0]


def without_tests(text: str) -> str:
    """The source without `#[cfg(test)]` items (a module or fn, by brace matching)."""
    out, i = [], 0
    while True:
        j = text.find("#[cfg(test)]", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = text.find("{", j)
        semi = text.find(";", j)
        if semi >= 0 and (k < 0 or semi < k):
            i = semi + 1  # `#[cfg(test)] mod tests;` or a `use`
            continue
        depth, p = 0, k
        while p < len(text):
            depth += {"{": 1, "}": -1}.get(text[p], 0)
            p += 1
            if depth == 0:
                break
        i = p


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.rs")):
        if path.name.endswith("_tests.rs"):
            continue
        source = module_of(path)
        if source is None:
            continue
        targets = graph.setdefault(source, set())
        text = without_tests(path.read_text())
        if path.name == "mod.rs" and source in ROOMS:
            # a room's `pub use child::Item` makes `crate::room::Item` reach that child
            targets.update(f"{source}::{c}" for c in re.findall(r"^pub use ([a-z_]+)::", text, re.M))
        for room, child in PATH.findall(text):
            # `crate::room::Item` names what the room's mod.rs holds or re-exports
            target = f"{room}::{child}" if room in ROOMS and child else room
            if target != source:
                targets.add(target)
    return graph


BROKER_NAMED_BY = ("startup/", "network/", "broker/")
BROKER_FILES = ("lib.rs", "main.rs")
NAMES_BROKER = re.compile(r"\bcrate::broker\b|\bBroker\b")


def naming_broker() -> list[str]:
    """Files outside the allowed ones whose code names `Broker` or `crate::broker`."""
    found = []
    for path in sorted(SRC.rglob("*.rs")):
        rel = path.relative_to(SRC).as_posix()
        if path.name.endswith("_tests.rs") or rel in BROKER_FILES or rel.startswith(BROKER_NAMED_BY):
            continue
        code = re.sub(r"//.*", "", without_tests(path.read_text()))
        if NAMES_BROKER.search(code):
            found.append(rel)
    return found


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Edges from a room to a room ranked above it."""
    rank = {room: i for i, room in enumerate(RANKS)}
    found = []
    for source, targets in sorted(graph.items()):
        low = rank.get(source.split("::")[0])
        for target in sorted(targets):
            high = rank.get(target.split("::")[0])
            if low is not None and high is not None and high < low:
                found.append(f"{source} -> {target}")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    graph = edges()
    found = cycles(graph)
    for component in found:
        members = set(component)
        print("import cycle between: " + ", ".join(component))
        for v in component:
            inner = sorted(graph[v] & members)
            print(f"  {v} -> {', '.join(inner)}")
    for edge in upward(graph):
        print(f"import of a higher room: {edge} (the order is {' > '.join(RANKS)})")
    back_up = upward(graph)
    reaching = naming_broker()
    for rel in reaching:
        print(f"{rel} names Broker: take the managers it uses instead (the dispatcher lends them)")
    if found or reaching or back_up:
        return 1
    print(
        f"module_cycles: {len(graph)} modules of chronik-server, no import cycle, "
        f"no import of a higher room ({' > '.join(RANKS)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
