"""scripts/module_cycles.py (make lint): the room ranks. An import of a higher
room is reported with its edge, imports within a room or down the ranks are
not, and the server as it is has none. Runs on import graphs made here and on
the real source, without a broker."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("module_cycles", ROOT / "scripts" / "module_cycles.py")
assert SPEC is not None and SPEC.loader is not None
module_cycles = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(module_cycles)


def test_an_import_of_a_higher_room_is_reported() -> None:
    graph = {
        "infra::metrics": {"replica"},
        "requests::handlers": {"broker", "replica::write", "requests::topics"},
        "startup::server": {"broker", "infra::metrics"},
    }
    assert module_cycles.upward(graph) == [
        "infra::metrics -> replica",
        "requests::handlers -> broker",
    ]


def test_the_ranks_name_every_room_once() -> None:
    assert len(module_cycles.RANKS) == len(set(module_cycles.RANKS))
    rooms = {p.name for p in (ROOT / "broker/server/src").iterdir() if p.is_dir()}
    assert rooms == set(module_cycles.RANKS)


def test_the_server_imports_no_higher_room() -> None:
    assert module_cycles.upward(module_cycles.edges()) == []
