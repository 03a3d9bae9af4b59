"""The costliest tier per message and the sizing table ("Where the cores go"):
cores = CPU µs/msg × target rate ÷ 10⁶, pods at the overlay's pod CPU."""

from __future__ import annotations

import json
import math
import shutil
import textwrap

import pytest

from reports import build_report, render_markdown, sizing

from .conftest import ACKS1, KAFKA, RUN_IDS, RUNS_DIR, row
from .test_cli import render


def _tier_us(report, run_id):
    """Each tier's CPU µs/msg straight from the per-component table."""
    comps = report.components[report.components["run_id"] == run_id].set_index("component")["cpu_us_per_msg"]
    return {tier: comps.reindex(names).sum(min_count=1) for tier, names in sizing.TIERS.items()}


def _scale_cpu(run, component, factor=None, drop=False):
    """Rewrite resources.csv: ``component``'s cumulative CPU × ``factor``, or its rows dropped."""
    lines = (run / "resources.csv").read_text().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        fields = line.split(",")
        if fields[1] == component:
            if drop:
                continue
            fields[4] = f"{float(fields[4]) * factor:.4f}"
        out.append(",".join(fields))
    (run / "resources.csv").write_text("\n".join(out) + "\n")


def _set_overlay(run, overlay):
    meta = json.loads((run / "meta.json").read_text())
    meta["settings"]["overlay"] = overlay
    (run / "meta.json").write_text(json.dumps(meta))


def _sizing_cell(md, run_id, tier, column):
    """One cell of the rendered sizing table, by the run, the tier's label and the header."""
    table = md[md.index("#### Sizing for"):].split("\n\n")[1].splitlines()
    headers = [h.strip() for h in table[0].strip("|").split("|")]
    for line in table[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == f"`{run_id}`" and cells[1] == tier:
            return cells[headers.index(column)]
    raise AssertionError(f"no sizing row for {run_id} {tier}")


def test_tiers_sum_their_components(report):
    for run_id in RUN_IDS:
        expected = _tier_us(report, run_id)
        for tier, us in expected.items():
            assert row(report.tiers, run_id=run_id, tier=tier)["cpu_us_per_msg"] == pytest.approx(us)
    # the ingestor tier is both ingestor processes together
    assert row(report.tiers, run_id=ACKS1, tier="ingestor")["processes"] == 2


def test_the_costliest_tier_and_the_ingestor_to_consumer_ratio(report):
    us = _tier_us(report, ACKS1)
    top = max(us, key=us.get)
    assert top == "ingestor"
    cost = row(report.tier_costs, run_id=ACKS1)
    assert cost["top_tier"] == "ingestor"
    assert cost["top_us_per_msg"] == pytest.approx(us["ingestor"])
    ratio = us["ingestor"] / us["consumer"]
    assert cost["ingestor_to_consumer"] == pytest.approx(ratio)
    md = render_markdown(report)
    assert (f"- `{ACKS1}`: The ingestor tier costs the most CPU per message: {us['ingestor']:.2f} µs, "
            f"{ratio:.1f}× the consumers' {us['consumer']:.2f} µs.") in md
    where = md.index("The ingestor tier costs the most")
    assert md.index("### Where the cores go") < where < md.index("### Per process")


def test_another_costliest_tier_still_gives_the_ratio(copy_run):
    run = copy_run(ACKS1)
    _scale_cpu(run, "broker", factor=3)
    r = build_report([run])
    us = _tier_us(r, ACKS1)
    assert max(us, key=us.get) == "broker"
    assert row(r.tier_costs, run_id=ACKS1)["top_tier"] == "broker"
    assert (f"The broker tier costs the most CPU per message: {us['broker']:.2f} µs; the ingestors' "
            f"{us['ingestor']:.2f} µs is {us['ingestor'] / us['consumer']:.1f}× the consumers' "
            f"{us['consumer']:.2f} µs.") in render_markdown(r)


def test_sizing_cores_at_the_default_target(report):
    assert report.target_rate == sizing.DEFAULT_TARGET_RATE == 800_000
    z = report.sizing
    assert len(z) == 4 * len(RUN_IDS)
    for t in z.itertuples():
        assert t.target_msg_per_s == 800_000
        assert t.cores == pytest.approx(t.cpu_us_per_msg * 800_000 / 1e6)
        # the fixture runs are local: no overlay, so no pods
        assert t.overlay is None and math.isnan(t.pods)
    md = render_markdown(report)
    assert "#### Sizing for 800,000 msg/s" in md
    assert "A linear projection from each run's own measured CPU per message" in md
    assert "No headroom" in md and "pods need an overlay" in md
    ing = row(z, run_id=KAFKA, tier="ingestor")
    assert _sizing_cell(md, KAFKA, "Ingestors", "Cores for 800,000 msg/s") == f"{ing['cores']:,.2f}"
    assert _sizing_cell(md, KAFKA, "Ingestors", "Pods") == "—"


def test_sizing_cores_at_another_target(runs):
    r = build_report(runs, target_rate=250_000)
    for t in r.sizing.itertuples():
        assert t.cores == pytest.approx(t.cpu_us_per_msg * 250_000 / 1e6)
    assert "#### Sizing for 250,000 msg/s" in render_markdown(r)


def test_target_rate_option_of_render(tmp_path, report):
    out = tmp_path / "report.md"
    done = render(*(RUNS_DIR / r for r in RUN_IDS), "--no-charts", "--target-rate", "1500000", "-o", out)
    assert done.returncode == 0, done.stderr
    md = out.read_text()
    assert "#### Sizing for 1,500,000 msg/s" in md
    for tier, label in (("loadgen", "Load generator (chronik-loadgen)"), ("ingestor", "Ingestors"),
                        ("broker", "Brokers"), ("consumer", "Consumers")):
        us = row(report.tiers, run_id=ACKS1, tier=tier)["cpu_us_per_msg"]
        assert _sizing_cell(md, ACKS1, label, "Cores for 1,500,000 msg/s") == f"{us * 1_500_000 / 1e6:,.2f}"


@pytest.mark.parametrize("rate", ["0", "-5", "fast"])
def test_a_bad_target_rate_is_a_usage_error(tmp_path, rate):
    done = render(RUNS_DIR / ACKS1, "--no-charts", "--target-rate", rate, "-o", tmp_path / "r.md")
    assert done.returncode == 2
    assert "--target-rate" in done.stderr
    assert not (tmp_path / "r.md").exists()


def test_a_run_without_consumer_data_still_renders(copy_run):
    run = copy_run(ACKS1)
    _scale_cpu(run, "consumer", drop=True)
    shutil.rmtree(run / "consumers")
    r = build_report([run])
    assert math.isnan(row(r.tiers, run_id=ACKS1, tier="consumer")["cpu_us_per_msg"])
    assert row(r.tier_costs, run_id=ACKS1)["top_tier"] == "ingestor"
    md = render_markdown(r)
    assert "no consumer CPU was sampled, so no ingestor-to-consumer ratio." in md
    assert _sizing_cell(md, ACKS1, "Consumers", "Cores for 800,000 msg/s") == "n/a"
    ing = row(r.sizing, run_id=ACKS1, tier="ingestor")
    assert _sizing_cell(md, ACKS1, "Ingestors", "Cores for 800,000 msg/s") == f"{ing['cores']:,.2f}"


def test_a_run_without_resources_has_no_sizing(copy_run):
    run = copy_run(ACKS1)
    (run / "resources.csv").unlink()
    r = build_report([run])
    assert r.tiers.empty and r.tier_costs.empty and r.sizing.empty
    md = render_markdown(r)
    assert "_not available_: no resources.csv." in md and "#### Sizing" not in md


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _workload(kind, name, containers):
    """One workload's YAML: `containers` as (name, resources) pairs, the
    resources a YAML flow mapping."""
    lines = [f"kind: {kind}", f"metadata: {{name: {name}}}", "spec:", "  template:", "    spec:",
             "      containers:"]
    for container, resources in containers:
        lines += [f"        - name: {container}", f"          resources: {resources}"]
    return "\n".join(lines) + "\n"


def _patches(*targets):
    """A kustomization's `patches:` giving each (kind, name, container,
    resources) target those resources."""
    out = "patches:\n"
    for kind, name, container, resources in targets:
        patch = textwrap.indent(_workload(kind, name, [(container, resources)]), " " * 6)
        out += f"  - target: {{kind: {kind}, name: {name}}}\n    patch: |-\n{patch}"
    return out


@pytest.fixture
def overlays(tmp_path):
    """A small overlay tree: a base with CPU requests, a component lowering
    the broker's request, an overlay patching limits onto two tiers."""
    root = tmp_path / "k8s"
    _write(root / "base" / "kustomization.yaml", "resources:\n  - workloads.yaml\n")
    _write(root / "base" / "workloads.yaml", "---\n".join("apiVersion: apps/v1\n" + _workload(*w) for w in [
        ("StatefulSet", "chronik", [("chronik", '{requests: {cpu: "2"}}')]),
        ("Deployment", "chronik-ingestor", [("ingestor", "{requests: {cpu: 500m}}")]),
        ("Deployment", "chronik-consumer", [("consumer", "{requests: {cpu: 250m}}"),
                                            ("sidecar", "{requests: {cpu: 5m}, limits: {cpu: 10m}}")]),
    ]))
    _write(root / "components" / "small" / "kustomization.yaml", "kind: Component\n" + _patches(
        ("StatefulSet", "chronik", "chronik", "{requests: {cpu: 1500m}}")))
    _write(root / "overlays" / "big" / "kustomization.yaml",
           "resources:\n  - ../../base\ncomponents:\n  - ../../components/small\n" + _patches(
               ("Deployment", "chronik-ingestor", "ingestor", '{limits: {cpu: "8"}}'),
               ("StatefulSet", "chronik", "chronik", '{limits: {cpu: "16"}}')))
    _write(root / "overlays" / "broken" / "kustomization.yaml", "resources: [\n")
    return root / "overlays"


def test_pod_cpu_follows_the_overlay_as_kustomize_would(overlays):
    assert sizing.pod_cpu("big", overlays) == {
        "broker": (16.0, "limit"),  # the overlay's patch, after the component's request
        "ingestor": (8.0, "limit"),
        "consumer": (0.25, "request"),  # the main container's, not the sidecar's
    }
    # unknown, unreadable or escaping names: nothing, never an error
    for name in ("nope", "broken", "../overlays/big", ""):
        assert sizing.pod_cpu(name, overlays) == {}


def test_pods_at_the_overlays_pod_cpu(copy_run, overlays, monkeypatch):
    monkeypatch.setattr(sizing, "OVERLAYS", overlays)
    run = copy_run(ACKS1)
    _set_overlay(run, "big")
    r = build_report([run], target_rate=2_000_000)
    for tier, cpu in (("broker", 16.0), ("ingestor", 8.0), ("consumer", 0.25)):
        z = row(r.sizing, run_id=ACKS1, tier=tier)
        assert z["overlay"] == "big" and z["pod_cpu"] == cpu
        assert z["pods"] == math.ceil(z["cpu_us_per_msg"] * 2_000_000 / 1e6 / cpu)
    assert math.isnan(row(r.sizing, run_id=ACKS1, tier="loadgen")["pods"])  # the overlay sizes no load generator
    md = render_markdown(r)
    assert _sizing_cell(md, ACKS1, "Ingestors", "Overlay") == "`big`"
    assert _sizing_cell(md, ACKS1, "Ingestors", "Pod CPU (cores)") == "8 (limit)"
    assert _sizing_cell(md, ACKS1, "Consumers", "Pod CPU (cores)") == "0.25 (request)"
    assert _sizing_cell(md, ACKS1, "Load generator (chronik-loadgen)", "Pods") == "—"
    assert "pods need an overlay" not in md


def test_the_repositorys_overlays_give_every_tier_a_pod_cpu():
    """k8s-perf/overlays as they are: a seed-sized overlay has CPU limits for all four tiers."""
    cpu = sizing.pod_cpu("test-4")
    assert set(cpu) == set(sizing.TIERS)
    assert all(cores > 0 and source == "limit" for cores, source in cpu.values())
