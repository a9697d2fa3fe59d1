"""Shared fixtures: small random graphs, a numba thread-count switch, a no-compilation check,
and the costly kernels compiled once, side by side, when the suite runs on several workers.

The suite runs with the README's OpenMP settings for few cores (set here, before torch
is imported; child processes inherit them): with OpenMP's default spinning, a tiny
parallel kernel call took 1-25 ms instead of 0.06-0.09 ms on the 2-core machine.
"""

import contextlib
import functools
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import numba  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from numba.core import event  # noqa: E402

if not torch.cuda.is_available():  # Triton's interpreter runs the Triton kernels' tests on CPU (read when a kernel is defined)
    os.environ.setdefault("TRITON_INTERPRET", "1")

from graphpipe import CSCGraph  # noqa: E402
from graphpipe.ops.compile import (  # noqa: E402
    compile_gather_rows,
    compile_temporal,
    compile_sample_labor,
    compile_sample_neighbors,
    compile_unique_and_compact,
)


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


@pytest.fixture(scope="session")
def kernels_for_child_processes():
    """Compiles, once per session, the kernels that tests running graphpipe in child
    processes use (graphs built by ``from_coo`` and the synthetic datasets have int32
    arrays), so that the children load them from numba's on-disk cache instead of each
    compiling them, several ranks at once on 2 cores. The tests in this process compile
    the same kernels anyway: this only does it before the first child starts."""
    from graphpipe.datasets import synthetic_node_classification

    graph = CSCGraph.from_coo(torch.tensor([1, 2]), torch.tensor([0, 0]), num_nodes=3)
    assert graph.indptr.dtype == graph.indices.dtype == torch.int32
    compile_sample_neighbors(graph.indptr, graph.indices, [2])
    for options in ({}, {"dependent": True}, {"importance_sampling": -1}):
        compile_sample_labor(graph.indptr, graph.indices, **options)
    compile_unique_and_compact(10**7)  # ids close together and spread out
    compile_gather_rows(torch.zeros(1, 8))
    for times in ((True, False, False), (False, True, True), (True, True, True)):
        compile_temporal(graph.indptr, graph.indices, *times)
    synthetic_node_classification(num_nodes=500, seed=0)  # the generator's kernels


# The costly kernels the suite compiles (3-7 s each with an empty numba cache), as calls of
# graphpipe's compile functions for the dtypes of (indptr, indices[, probs]) the suite uses,
# costliest first: every n-th of them makes shares of about equal cost. A kernel missing
# here is only compiled later, by the first test that needs it.
def _of(dtype):
    return torch.empty(0, dtype=dtype)


_I32, _I64, _F32, _F64 = _of(torch.int32), _of(torch.int64), _of(torch.float32), _of(torch.float64)
_COSTLY_KERNELS = [
    functools.partial(compile_sample_labor, _I64, _I64, dependent=True),
    functools.partial(compile_sample_labor, _I32, _I32, dependent=True),
    functools.partial(compile_unique_and_compact, 10**7),
    functools.partial(compile_sample_neighbors, _I32, _I32, [5, 100]),
    functools.partial(compile_sample_neighbors, _I64, _I64, [5, 100]),
    functools.partial(compile_sample_labor, _I32, _I32),
    functools.partial(compile_sample_labor, _I64, _I64),
    functools.partial(compile_sample_labor, _I64, _I32),
    functools.partial(compile_sample_labor, _I32, _I32, probs=_F32),
    functools.partial(compile_sample_labor, _I32, _I32, probs=_F64),
    functools.partial(compile_sample_labor, _I64, _I64, probs=_F32),
    functools.partial(compile_sample_labor, _I64, _I64, probs=_F64),
    functools.partial(compile_sample_labor, _I64, _I32, probs=_F32),
    functools.partial(compile_sample_neighbors, _I32, _I32, [5], probs=_F32),
    functools.partial(compile_sample_neighbors, _I32, _I32, [5], probs=_F64),
    functools.partial(compile_sample_neighbors, _I64, _I64, [5], probs=_F32),
    functools.partial(compile_sample_neighbors, _I64, _I64, [5], probs=_F64),
    functools.partial(compile_sample_neighbors, _I64, _I32, [5]),
]


@pytest.fixture(scope="session", autouse=True)
def costly_kernels_shared_between_workers(request):
    """Under pytest-xdist (the README runs the suite with ``-n 3``), worker ``i`` of ``n``
    compiles every ``n``-th of the costly kernels before its first test. With an empty
    numba cache the workers then compile them side by side, each once, into the on-disk
    cache (the others load them from there when their tests need them), instead of
    several compiling the same ones as their tests reach them. Without xdist, with a
    warm cache, or for a subset chosen by marker (``-m cuda``: most of these kernels are
    not used), it costs nothing: each test compiles or loads what it uses, as always."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or workers < 2 or request.config.getoption("markexpr"):
        return
    for compile_kernels in _COSTLY_KERNELS[int(worker[2:]) :: workers]:
        compile_kernels()


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a CUDA device: without one they are skipped (the GPU
    machine runs them with ``pytest -m cuda``; see benchmarks/gpu/run_all.sh)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)
