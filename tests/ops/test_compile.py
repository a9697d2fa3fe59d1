"""The compile-ahead functions compile every kernel the op then runs: afterwards, real
calls with the same dtypes and options compile nothing."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graphpipe.ops import derive_key, gather_rows, sample_labor, sample_neighbors, unique_and_compact
from graphpipe.ops.compile import (
    compile_gather_rows,
    compile_sample_labor,
    compile_sample_neighbors,
    compile_unique_and_compact,
)
from graphpipe.ops.labor import Variates

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("replace", [False, True])
def test_neighbor_sampling(graph_builder, no_compilation, index_dtype, replace):
    graph = graph_builder(300, 100, seed=4, index_dtype=index_dtype, weights=True)
    probs = graph.edge_attributes["weight"]
    fanouts = [100, 5, -1]  # the kernel for large fanouts, the usual one, all edges
    compile_sample_neighbors(graph.indptr, graph.indices, fanouts, replace=replace)
    compile_sample_neighbors(graph.indptr, graph.indices, fanouts, replace=replace, probs=probs)
    nodes = torch.arange(0, 300, 2)
    with no_compilation():
        for fanout in fanouts:
            for weights in (None, probs):
                sample_neighbors(graph.indptr, graph.indices, nodes, fanout, key=1, replace=replace, probs=weights)


@pytest.mark.parametrize("importance_sampling", [0, -1])
@pytest.mark.parametrize("dependent", [False, True])
def test_labor(graph_builder, no_compilation, importance_sampling, dependent):
    graph = graph_builder(300, 100, seed=5, index_dtype=torch.int32, weights=True)
    probs = graph.edge_attributes["weight"]
    compile_sample_labor(graph.indptr, graph.indices, importance_sampling=importance_sampling, dependent=dependent)
    if importance_sampling == 0:
        compile_sample_labor(graph.indptr, graph.indices, dependent=dependent, probs=probs)
    variates = Variates(derive_key(1), derive_key(2), 0.6, 0.8, dependent)
    # 3 destinations scan fewer edges than the graph's 300 nodes, 300 more: dependent
    # variates per edge and from a per-vertex table.
    with no_compilation():
        for nodes in (torch.arange(3), torch.arange(300)):
            for fanout in (1, 5, -1):
                sample_labor(graph.indptr, graph.indices, nodes, fanout, variates=variates, importance_sampling=importance_sampling)
                if importance_sampling == 0:
                    sample_labor(graph.indptr, graph.indices, nodes, fanout, variates=variates, probs=probs)


def test_unique_and_compact_small_and_large_layers(no_compilation):
    num_nodes = 10_000_000
    compile_unique_and_compact(num_nodes)
    with no_compilation():
        unique_and_compact(torch.tensor([5, num_nodes - 1]), torch.tensor([7, 5, 9_000_000]), num_nodes)  # spread out
        unique_and_compact(torch.arange(1000), torch.arange(500, 2000), num_nodes)  # close together


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_gather_rows(no_compilation, dtype):
    table = torch.zeros(100, 7, dtype=dtype)
    compile_gather_rows(table)
    with no_compilation():
        assert torch.equal(gather_rows(table, torch.tensor([3, 99, 3])), table[[3, 99, 3]])


_CHILD = """
import torch
from graphpipe.ops import gather_rows
from graphpipe.ops.compile import cache_dir
from graphpipe.ops.gather import _gather_words

gather_rows(torch.zeros(4, 2), torch.tensor([1, 3]))
print(cache_dir(_gather_words), sum(_gather_words.stats.cache_hits.values()), sum(_gather_words.stats.cache_misses.values()))
"""


def test_kernels_are_cached_per_user_when_the_package_directory_is_not_writable(tmp_path):
    """As in a read-only site-packages: numba cannot write next to the sources, so it
    caches in the user's cache directory, and the next process loads from there. (A
    file named __pycache__ stands for the read-only directory: root writes anywhere.)"""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "graphpipe", site / "graphpipe", ignore=shutil.ignore_patterns("__pycache__"))
    for package in (site / "graphpipe").rglob("__init__.py"):
        (package.parent / "__pycache__").write_text("not a directory")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1")
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        path, hits, misses = done.stdout.split()
        runs.append((int(hits), int(misses)))
    assert Path(path).is_relative_to(tmp_path / "cache" / "numba")
    assert list(Path(path).glob("gather.*.nbi"))
    assert runs == [(0, 1), (1, 0)]  # compiled, then loaded
