"""Runs notebooks/explore.ipynb headless on a small graph (10k nodes, 10-20 s)."""

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("kernels_for_child_processes")  # the children load them from the cache

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "explore.ipynb"


def test_explore_notebook_runs(monkeypatch):
    monkeypatch.setenv("GRAPHPIPE_NOTEBOOK_NODES", "10000")
    monkeypatch.setenv("GRAPHPIPE_NOTEBOOK_PAPERS", "3000")
    root = str(NOTEBOOK.parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()
    outputs = ["".join(output.get("text", "")) for cell in notebook.cells for output in cell.get("outputs", [])]
    text = "\n".join(outputs)
    assert "Pipe as run:" in text and "NeighborSampler" in text and "Prefetcher(2)" in text
    assert "training accuracy" in text and "batches/s" in text
    assert "training: 100%" in text  # the training loop's progress bar
    assert "node_types={'author'" in text and "HeteroData" in "\n".join(
        "".join(output.get("data", {}).get("text/plain", "")) for cell in notebook.cells for output in cell.get("outputs", [])
    )
    kinds = {output.get("output_type") for cell in notebook.cells for output in cell.get("outputs", [])}
    assert "display_data" in kinds  # the figures
