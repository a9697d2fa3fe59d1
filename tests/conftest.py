"""Shared fixtures: small random graphs, a numba thread-count switch, a no-compilation check."""

import contextlib

import numba
import pytest
import torch
from numba.core import event

from graphpipe import CSCGraph


def random_graph(num_nodes=200, max_degree=40, seed=0, index_dtype=torch.int64, weights=False) -> CSCGraph:
    """A random CSCGraph with skewed in-degrees (many small, a few up to ``max_degree``,
    some nodes with none) and distinct in-neighbours per node. ``weights=True`` adds a
    float32 ``"weight"`` edge attribute with some zeros."""
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(num_nodes, generator=g)
    degrees = (max_degree * u**3).to(torch.int64)
    src, dst = [], []
    for v in range(num_nodes):
        d = int(degrees[v])
        src.append(torch.randperm(num_nodes, generator=g)[:d])
        dst.append(torch.full((d,), v, dtype=torch.int64))
    src, dst = torch.cat(src), torch.cat(dst)
    attrs = {}
    if weights:
        w = torch.rand(src.numel(), generator=g)
        w[torch.rand(src.numel(), generator=g) < 0.2] = 0.0
        attrs["weight"] = w
    graph = CSCGraph.from_coo(src, dst, num_nodes=num_nodes, edge_attributes=attrs)
    return CSCGraph(graph.indptr.to(index_dtype), graph.indices.to(index_dtype), graph.edge_attributes)


@pytest.fixture
def graph_builder():
    """``random_graph(num_nodes, max_degree, seed, index_dtype, weights)``."""
    return random_graph


@contextlib.contextmanager
def _threads(n):
    old = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(old)


@pytest.fixture
def numba_threads():
    """``with numba_threads(n):`` runs numba kernels on ``n`` threads (capped by the machine)."""
    return _threads


class _Compilations(event.Listener):
    def __init__(self):
        self.names = []

    def on_start(self, ev):
        self.names.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass


@contextlib.contextmanager
def _no_compilation():
    listener = _Compilations()
    with event.install_listener("numba:compile", listener):
        yield
    assert listener.names == [], f"numba compiled {listener.names}"


@pytest.fixture
def no_compilation():
    """``with no_compilation():`` fails if numba compiles anything inside the block."""
    return _no_compilation
