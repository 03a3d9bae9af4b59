"""scripts/tenants.py: the plan each tenant of a plan runs (the
noisy-neighbour plan and hand-made ones), every one of them accepted by
chronik-loadgen itself when it is built, and a tenant list it must refuse;
the reading of kafka-configs --describe that decides whether a quota was set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TENANTS = ROOT / "scripts" / "tenants.py"
PLAN = ROOT / "load" / "plans" / "noisy-neighbour.json"
sys.path.insert(0, str(ROOT / "scripts"))
import tenants  # noqa: E402 (scripts/ is not a package)


def test_noisy_neighbour_gives_a_calm_and_a_noisy_plan(tmp_path):
    out = subprocess.run([sys.executable, str(TENANTS), "plans", str(PLAN), str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == [f"calm {tmp_path}/noisy-neighbour-calm.json", f"noisy {tmp_path}/noisy-neighbour-noisy.json"]
    calm = json.loads((tmp_path / "noisy-neighbour-calm.json").read_text())
    noisy = json.loads((tmp_path / "noisy-neighbour-noisy.json").read_text())
    assert calm["name"] == "noisy-neighbour-calm" and noisy["name"] == "noisy-neighbour-noisy"
    assert "tenants" not in calm and "tenants" not in noisy
    # calm keeps the plan's constant shape; noisy's stages replace it
    assert calm["constant"] == {"rate": 20, "duration": "90s"} and "stages" not in calm
    assert "constant" not in noisy and noisy["stages"][0] == {"duration": "30s", "rate": 0}
    # the flood offers far more than the calm tenant, from a third of the run in
    assert max(s["rate"] for s in noisy["stages"]) >= 10 * calm["constant"]["rate"]
    loadgen = ROOT / ".tools" / "bin" / "chronik-loadgen"
    if os.access(loadgen, os.X_OK):
        for plan in (calm, noisy):
            path = tmp_path / f"{plan['name']}.json"
            r = subprocess.run([str(loadgen), "validate", str(path)], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr


def test_a_plan_without_tenants_gives_none(tmp_path):
    r = subprocess.run([sys.executable, str(TENANTS), "plans", str(ROOT / "load" / "plans" / "smoke.json"),
                        str(tmp_path)], capture_output=True, text=True, check=True)
    assert r.stdout == "" and not list(tmp_path.iterdir())


@pytest.mark.parametrize("bad", [[{"name": "calm"}, {"name": "calm"}], [{"name": "Calm!"}], [{}]])
def test_tenant_names_must_be_unique_and_simple(bad):
    with pytest.raises(ValueError):
        tenants.tenant_plans({"name": "p", "constant": {"rate": 1, "duration": "1s"}, "tenants": bad})


def test_a_quota_counts_only_when_describe_shows_its_value():
    out = "Quota configs for client-id 'chronik-ingestor-noisy' are producer_byte_rate=1000000.0"
    assert tenants.described(out, "producer_byte_rate", "1000000")
    assert not tenants.described(out, "producer_byte_rate", "2000000")
    assert not tenants.described(out, "consumer_byte_rate", "1000000")
    assert tenants.quota_pairs("producer_byte_rate=1000000,consumer_byte_rate=5e5") == [
        ("producer_byte_rate", "1000000"), ("consumer_byte_rate", "5e5")]
    with pytest.raises(ValueError):
        tenants.quota_pairs("producer_byte_rate")
