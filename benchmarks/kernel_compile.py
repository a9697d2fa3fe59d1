"""Seconds numba takes to compile the sampling kernels, and the sampling ops' speed beside it.

``compile``: in a new, empty ``NUMBA_CACHE_DIR``, times graphpipe's compile functions for the
dtype signatures the test suite compiles (LABOR: plain, dependent, weighted; neighbor sampling:
plain, weighted; int32/int64 ``indptr``/``indices``), then ``compile_temporal``. ``speed``: ms
per call of one layer (20,000 random destinations, fanout 15) on a 400k-node, 12M-edge
power-law graph; the minimum of 7 medians of 12 calls. Run an old and a new checkout side by
side or alternately (from each checkout's root) to compare:

    python benchmarks/kernel_compile.py compile
    python benchmarks/kernel_compile.py speed labor labor_w labor_dep ns ns_w
"""

import os
import statistics
import sys
import tempfile
import time

os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp()  # before numba is imported
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

from graphpipe.ops import sample_labor, sample_neighbors  # noqa: E402
from graphpipe.ops.compile import compile_sample_labor, compile_sample_neighbors, compile_temporal  # noqa: E402
from graphpipe.ops.labor import Variates  # noqa: E402

I32, I64, F32, F64 = (torch.empty(0, dtype=d) for d in (torch.int32, torch.int64, torch.float32, torch.float64))
SIGNATURES = [
    ("labor dependent int64", lambda: compile_sample_labor(I64, I64, dependent=True)),
    ("labor dependent int32", lambda: compile_sample_labor(I32, I32, dependent=True)),
    *[(f"labor {a} {b}", lambda x=x, y=y: compile_sample_labor(x, y)) for a, b, x, y in [("int32", "int32", I32, I32), ("int64", "int64", I64, I64), ("int64", "int32", I64, I32)]],
    *[(f"labor weighted {a} {p}", lambda x=x, q=q: compile_sample_labor(x, x, probs=q)) for a, x in [("int32", I32), ("int64", I64)] for p, q in [("float32", F32), ("float64", F64)]],
    ("labor weighted int64 int32 float32", lambda: compile_sample_labor(I64, I32, probs=F32)),
    *[(f"ns {a}", lambda x=x: compile_sample_neighbors(x, x, [5, 100])) for a, x in [("int32", I32), ("int64", I64)]],
    *[(f"ns weighted {a} {p}", lambda x=x, q=q: compile_sample_neighbors(x, x, [5], probs=q)) for a, x in [("int32", I32), ("int64", I64)] for p, q in [("float32", F32), ("float64", F64)]],
    ("ns int64 int32", lambda: compile_sample_neighbors(I64, I32, [5])),
    ("temporal x3", lambda: [compile_temporal(I32, I32, *t) for t in ((True, False, False), (False, True, True), (True, True, True))]),
]


def compile_times() -> None:
    total = 0.0
    for name, compile_kernels in SIGNATURES:
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
