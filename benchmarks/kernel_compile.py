"""Seconds numba takes to compile the sampling kernels, and the sampling ops' speed beside it.

``compile``: in a new, empty ``NUMBA_CACHE_DIR``, times each of the test suite's costly
kernels (``_COSTLY_KERNELS`` of ``tests/conftest.py``: LABOR plain, dependent and weighted,
neighbor sampling plain and weighted, unique_and_compact, for the suite's int32/int64
``indptr``/``indices``), then ``compile_temporal`` for three kinds of times. ``speed``: ms per
call of one layer (20,000 random destinations, fanout 15) on a 400k-node, 12M-edge power-law
graph; the minimum of 7 medians of 12 calls. Run an old and a new checkout side by side or
alternately (from each checkout's root) to compare:

    python benchmarks/kernel_compile.py compile
    python benchmarks/kernel_compile.py speed labor labor_w labor_dep ns ns_w
"""

import importlib.util
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
if sys.argv[1:2] == ["compile"]:
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp()  # before numba is imported
sys.path.insert(0, ROOT)
import torch  # noqa: E402

from graphpipe.ops import sample_labor, sample_neighbors  # noqa: E402
from graphpipe.ops.compile import compile_temporal  # noqa: E402
from graphpipe.ops.labor import Variates  # noqa: E402


def compile_times() -> None:
    spec = importlib.util.spec_from_file_location("suite_conftest", os.path.join(ROOT, "tests", "conftest.py"))
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    int32 = torch.empty(0, dtype=torch.int32)
    calls = [(f"{c.func.__name__} {[getattr(a, 'dtype', a) for a in c.args]} {c.keywords}", c) for c in suite._COSTLY_KERNELS]
    calls.append(("compile_temporal x3", lambda: [compile_temporal(int32, int32, *t) for t in ((True, False, False), (False, True, True), (True, True, True))]))
    total = 0.0
    for name, compile_kernels in calls:
        start = time.perf_counter()
        compile_kernels()
        seconds = time.perf_counter() - start
        total += seconds
        print(f"{seconds:7.2f} s  {name}", flush=True)
    print(f"{total:7.2f} s  total")


def speeds(ops) -> None:
    from bench_neighbor_sampling import power_law_csc

    graph = power_law_csc(400_000, 12_000_000)
    weights = torch.rand(graph.indices.numel(), generator=torch.Generator().manual_seed(1))
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randperm(400_000, generator=generator)[:20_000] for _ in range(4)]
    calls = {
        "labor": lambda s: sample_labor(graph.indptr, graph.indices, s, 15, variates=Variates(3)),
        "labor_w": lambda s: sample_labor(graph.indptr, graph.indices, s, 15, variates=Variates(3), probs=weights),
        "labor_dep": lambda s: sample_labor(graph.indptr, graph.indices, s, 15, variates=Variates(3, 4, 0.6, 0.8, dependent=True)),
        "ns": lambda s: sample_neighbors(graph.indptr, graph.indices, s, 15, key=1),
        "ns_w": lambda s: sample_neighbors(graph.indptr, graph.indices, s, 15, key=1, probs=weights),
    }
    for op in ops:
        call = calls[op]
        call(batches[0])  # compiles
        medians = []
        for _ in range(7):
            times = []
            for seeds in batches * 3:
                start = time.perf_counter()
                call(seeds)
                times.append(time.perf_counter() - start)
            medians.append(statistics.median(times) * 1e3)
        print(f"{op}: {min(medians):.2f} ms (median of the medians {statistics.median(medians):.2f})", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["compile"]:
        compile_times()
    elif sys.argv[1:2] == ["speed"]:
        speeds(sys.argv[2:] or ["labor", "labor_w", "labor_dep", "ns", "ns_w"])
    else:
        sys.exit(__doc__)
