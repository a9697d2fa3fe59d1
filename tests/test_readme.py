"""The README's self-contained Python snippets run as written (on CPU, on a smaller graph)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.usefixtures("kernels_for_child_processes")  # the children load them from the cache

ROOT = Path(__file__).resolve().parents[1]
SNIPPETS = [
    code
    for code in re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    if "synthetic_node_classification(" in code or "synthetic_mag(" in code  # builds its own data: runs as it is
]


def test_the_snippets_that_build_their_own_data_are_found():
    assert len(SNIPPETS) == 3 and "copy_to(\"cuda\")" in SNIPPETS[2] and "synthetic_mag(" in SNIPPETS[1]


@pytest.mark.parametrize("index", range(len(SNIPPETS)), ids=["first", "hetero", "gpu"])
def test_snippet_runs(index):
    if index == 1:
        pytest.importorskip("torch_geometric")
    code = SNIPPETS[index].replace("num_nodes=200_000", "num_nodes=3_000").replace("num_papers=100_000", "num_papers=3_000")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    if index == 1:
        assert "HeteroData(" in done.stdout and "num_sampled_nodes=[3]" in done.stdout
    if index == 2 and not torch.cuda.is_available():
        assert "copy_to('cuda'): CUDA is not available; batches stay on the CPU" in done.stderr
