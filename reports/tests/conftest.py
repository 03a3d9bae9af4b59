"""Shared fixtures: the fixture runs (see fixtures/make_fixtures.py), the report
built from them, and copies of a run that a test may damage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reports import build_report, load_runs

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RUNS_DIR = FIXTURES / "runs"
ACKS1 = "20261122T100000Z-chronik-acks1"
ACKSALL = "20261122T101000Z-chronik-acksall"
KAFKA = "20261122T102000Z-kafka-acksall"
RUN_IDS = [ACKS1, ACKSALL, KAFKA]
PLAN = "blocking-batch"
# one small run from before issue 33, as k6 wrote it (k6/runner-<i>/)
LEGACY_DIR = FIXTURES / "legacy"
LEGACY = "20261121T090000Z-chronik-k6"


@pytest.fixture(scope="session")
def runs():
    return load_runs(RUNS_DIR / r for r in RUN_IDS)


@pytest.fixture(scope="session")
def report(runs):
    return build_report(runs)


@pytest.fixture
def copy_run(tmp_path):
    """copy_run(run_id) -> a writable copy of that fixture run (the legacy one too)."""

    def copy(run_id: str) -> Path:
        target = tmp_path / run_id
        shutil.copytree((LEGACY_DIR if run_id == LEGACY else RUNS_DIR) / run_id, target)
        return target

    return copy


def row(frame, **where):
    """The one row of ``frame`` matching ``where`` (column=value)."""
    mask = None
    for column, value in where.items():
        m = frame[column] == value
        mask = m if mask is None else mask & m
    hits = frame[mask]
    assert len(hits) == 1, f"{len(hits)} rows match {where}"
    return hits.iloc[0]
