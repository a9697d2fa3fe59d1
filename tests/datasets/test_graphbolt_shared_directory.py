"""GraphBolt 2.1 (in its own environment, a subprocess) and graphpipe share one dataset
directory: neither invalidates the other's cache, in either order, and graphpipe opens
GraphBolt's ``preprocessed/`` output too."""

import os
import subprocess

import pytest
import torch

import graphpipe as gp
from dgl_env import dgl_python
from graphbolt_layout import write_graphbolt_dataset

GRAPHBOLT = """
import sys
import dgl.graphbolt as gb
ds = gb.OnDiskDataset(sys.argv[1]).load()
print("graph", ds.graph.total_num_nodes, ds.graph.total_num_edges)
"""


def _graphbolt_load(root) -> bool:
    """Open ``root`` with GraphBolt; whether it (re)preprocessed the dataset."""
    run = subprocess.run([dgl_python(), "-c", GRAPHBOLT, str(root)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "graph 300 2000" in run.stdout
    return "Start to preprocess" in run.stdout


def _graphpipe_load(path, d):
    """Open ``path`` with graphpipe, check the graph, and return the cache's stamp mtime."""
    ds = gp.datasets.OnDiskDataset(path).load()
    expected = gp.CSCGraph.from_coo(torch.from_numpy(d.src), torch.from_numpy(d.dst), d.num_nodes)
    assert torch.equal(ds.graph.indptr, expected.indptr) and torch.equal(ds.graph.indices, expected.indices)
    assert torch.equal(ds.feature.read("node", None, "feat"), torch.from_numpy(d.feat))
    assert torch.equal(ds.tasks[0].train_set.items[0].long(), torch.from_numpy(d.splits["train"]))
    return os.stat(os.path.join(ds.cache_dir, "graph.json")).st_mtime_ns


def _graphbolt_state(root):
    hashes = root / "preprocessed" / "dataset_hash_value.txt"
    return hashes.stat().st_mtime_ns, hashes.read_text()


@pytest.mark.parametrize("first", ["graphbolt", "graphpipe"])
def test_both_caches_stay_valid_in_either_order(tmp_path, first):
    """GraphBolt does not preprocess again after graphpipe opened the directory or its
    ``preprocessed/`` output, and graphpipe does not rebuild its graph after GraphBolt
    preprocessed: graphpipe's cache lies beside the directory, outside GraphBolt's hash."""
    dgl_python()  # skip before writing anything when there is no DGL environment
    root = tmp_path / "ds"
    d = write_graphbolt_dataset(root, "numpy", seed_name="seed_nodes")
    if first == "graphpipe":
        stamp = _graphpipe_load(root, d)
        assert _graphbolt_load(root)
    else:
        assert _graphbolt_load(root)
        stamp = _graphpipe_load(root, d)
    state = _graphbolt_state(root)
    assert _graphpipe_load(root / "preprocessed", d) == stamp  # GraphBolt's output: the same cache, still fresh
    assert _graphpipe_load(root, d) == stamp
    assert not _graphbolt_load(root)
    assert _graphbolt_state(root) == state
    assert sorted(os.listdir(tmp_path)) == ["ds", "ds.graphpipe"]
