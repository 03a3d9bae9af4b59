"""``python -m reports render``: writes report.md and charts/*.png beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import RUN_IDS, RUNS_DIR

REPO = Path(__file__).resolve().parents[2]


def render(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "reports", "render", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_render_writes_markdown_and_charts(tmp_path):
    out = tmp_path / "out" / "report.md"
    done = render(*(RUNS_DIR / r for r in RUN_IDS), "-o", out)
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout
    md = out.read_text()
    assert md.startswith("# Chronik load-test report")
    for section in ("## Verification", "## Results per test", "## Throughput progression", "## acks=1 vs acks=all",
                    "## chronik vs Apache Kafka", "## End-to-end latency", "## Resource utilisation",
                    "## Conclusions"):
        assert section in md
    assert "**Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt across 239,400 messages**" in md
    assert "| 239,400 | 11,970 | 3.06 |" in md
    assert "### Per load generator" in md and "k6" not in md
    charts = sorted(p.name for p in (out.parent / "charts").glob("*.png"))
    assert charts == ["batch_latency.png", "cpu.png", "e2e_latency.png", "throughput.png"]
    for name in charts:
        assert (out.parent / "charts" / name).read_bytes().startswith(b"\x89PNG")
        assert f"](charts/{name})" in md


def test_render_is_deterministic(tmp_path):
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / name / "report.md"
        assert render(*(RUNS_DIR / r for r in RUN_IDS), "-o", out).returncode == 0
        outputs.append((out.read_text(), (out.parent / "charts" / "cpu.png").read_bytes()))
    assert outputs[0] == outputs[1]


def test_a_missing_directory_is_a_usage_error(tmp_path):
    done = render(tmp_path / "nope", "-o", tmp_path / "r.md")
    assert done.returncode == 2
    assert "not a results directory" in done.stderr
    assert not (tmp_path / "r.md").exists()
