"""reports/report.ipynb runs top to bottom on the fixtures (nbclient), and takes
its RESULTS parameter from papermill."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "report.ipynb"


def outputs_text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            data = out.get("data", {})
            parts += [data.get("text/plain", ""), data.get("text/markdown", "")]
    return "\n".join(parts)


def test_notebook_executes_on_the_fixtures():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    text = outputs_text(nb)
    assert "Verified: 0 lost, 0 duplicated, 0 reordered, 0 corrupt across 239,400 messages" in text
    assert "raw samples of 2 generators pooled" in text
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 4  # throughput, batch latency, e2e latency, cpu
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


def test_papermill_parameters_select_the_runs(tmp_path):
    import papermill

    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK), str(out), kernel_name="python3", cwd=str(NOTEBOOK.parent.parent), progress_bar=False,
        parameters={"RESULTS": ["reports/tests/fixtures/runs/20261122T102000Z-kafka-acksall"]},
    )
    text = outputs_text(nbformat.read(out, as_version=4))
    assert "20261122T102000Z-kafka-acksall" in text
    assert "20261122T100000Z-chronik-acks1" not in text
    assert "across 230,000 messages" in text
