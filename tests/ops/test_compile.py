"""The compile-ahead functions compile (or load) every kernel the op then runs.

Checked in a new process, where no kernel is loaded yet: before each case every graphpipe
kernel forgets its compiled signatures, the compile function runs, and then the op's real
calls (same dtypes and options) must add no signature to any kernel. A compile function
that did nothing fails: the real calls would compile the kernels, or load them from numba's
disk cache, themselves (the ``skipped`` control case shows it)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    sys.path.insert(0, sys.argv[1])
    from conftest import random_graph  # tests/conftest.py
    from numba.core.registry import CPUDispatcher
    from graphpipe.ops import derive_key, gather_rows, sample_labor, sample_neighbors, unique_and_compact
    from graphpipe.ops.compile import (
        compile_gather_rows, compile_sample_labor, compile_sample_neighbors, compile_temporal, compile_unique_and_compact,
    )
    from graphpipe.ops import temporal
    from graphpipe.ops.labor import Variates

    def kernels():
        return [value for name, module in list(sys.modules.items()) if name.startswith("graphpipe.")
                for value in vars(module).values() if isinstance(value, CPUDispatcher)]

    def neighbors(index_dtype, replace):
        graph = random_graph(300, 100, seed=4, index_dtype=getattr(torch, index_dtype), weights=True)
        probs, fanouts = graph.edge_attributes["weight"], [100, 5, -1]  # large fanouts, usual, all edges
        def compile():
            compile_sample_neighbors(graph.indptr, graph.indices, fanouts, replace=replace)
            compile_sample_neighbors(graph.indptr, graph.indices, fanouts, replace=replace, probs=probs)
        def run():
            for fanout in fanouts:
                for weights in (None, probs):
                    sample_neighbors(graph.indptr, graph.indices, torch.arange(0, 300, 2), fanout, key=1,
                                     replace=replace, probs=weights)
        return compile, run

    def labor(importance_sampling, dependent):
        graph = random_graph(300, 100, seed=5, index_dtype=torch.int32, weights=True)
        probs = graph.edge_attributes["weight"]
        variates = Variates(derive_key(1), derive_key(2), 0.6, 0.8, dependent)
        def compile():
            compile_sample_labor(graph.indptr, graph.indices, importance_sampling=importance_sampling, dependent=dependent)
            if importance_sampling == 0:
                compile_sample_labor(graph.indptr, graph.indices, dependent=dependent, probs=probs)
        def run():
            # 3 destinations scan fewer edges than the graph's 300 nodes, 300 more: dependent
            # variates per edge and from a per-vertex table.
            for nodes in (torch.arange(3), torch.arange(300)):
                for fanout in (1, 5, -1):
                    sample_labor(graph.indptr, graph.indices, nodes, fanout, variates=variates,
                                 importance_sampling=importance_sampling)
                    if importance_sampling == 0:
                        sample_labor(graph.indptr, graph.indices, nodes, fanout, variates=variates, probs=probs)
        return compile, run

    def unique():
        num_nodes = 10_000_000
        def run():
            unique_and_compact(torch.tensor([5, num_nodes - 1]), torch.tensor([7, 5, 9_000_000]), num_nodes)  # spread
            unique_and_compact(torch.arange(1000), torch.arange(500, 2000), num_nodes)  # close together
        return (lambda: compile_unique_and_compact(num_nodes)), run

    def gather(dtype):
        table = torch.zeros(100, 7, dtype=getattr(torch, dtype))
        def run():
            assert torch.equal(gather_rows(table, torch.tensor([3, 99, 3])), table[[3, 99, 3]])
        return (lambda: compile_gather_rows(table)), run

    def timed(index_dtype):
        graph = random_graph(300, 100, seed=6, index_dtype=getattr(torch, index_dtype))
        num_edges = graph.indices.numel()
        times = torch.randint(0, 100, (num_edges,)).numpy()
        arrays = temporal.TimeArrays(graph.indices.numpy(), times[:300], times, torch.arange(num_edges).numpy())
        bounds = torch.stack([graph.indptr[:-1], graph.indptr[1:]], dim=1).reshape(-1)[:40]
        lo, hi = torch.full((20,), temporal.UNTIMED), torch.full((20,), 50)
        def run():
            temporal.narrow_to_window(bounds, lo, hi, arrays)
            temporal.valid_candidates(bounds, lo, hi, arrays)
            temporal.valid_candidates(bounds, lo, hi, arrays, draws=(5, torch.arange(20), torch.full((20,), 2)))
            for is_sorted in (False, True):
                temporal.latest_candidates(bounds, lo, hi, torch.full((20,), 3), arrays, is_sorted)
            temporal.is_time_sorted(graph.indptr.numpy().astype("int64"), temporal.time_keys(arrays, num_edges), arrays.edge_order)
        return (lambda: compile_temporal(graph.indptr, graph.indices, True, True, True)), run

    CASES = {
        **{f"neighbors-{d}-{r}": neighbors(d, r) for d in ("int32", "int64") for r in (False, True)},
        **{f"temporal-{d}": timed(d) for d in ("int32", "int64")},
        **{f"labor-{i}-{d}": labor(i, d) for i in (0, -1) for d in (False, True)},
        "unique_and_compact": unique(),
        **{f"gather-{d}": gather(d) for d in ("float32", "bfloat16", "int64")},
    }
    added = {}
    for name, (compile, run) in [*CASES.items(), ("skipped", (lambda: None, CASES["neighbors-int64-True"][1]))]:
        for kernel in kernels():
            kernel._reset_overloads()
        compile()
        before = {id(kernel): set(kernel.overloads) for kernel in kernels()}
        run()
        added[name] = sorted(f"{k.py_func.__qualname__}{sig}" for k in kernels() for sig in set(k.overloads) - before[id(k)])
    print(json.dumps(added))
    """
)


@pytest.fixture(scope="module")
def added_by_real_calls():
    """``{case: signatures the op's real calls added after the case's compile function}``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_NUM_THREADS="1")  # the same signatures, quicker
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "tests")], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


CASES = [f"neighbors-{d}-{r}" for d in ("int32", "int64") for r in (False, True)]
CASES += [f"labor-{i}-{d}" for i in (0, -1) for d in (False, True)]
CASES += ["unique_and_compact"] + [f"gather-{d}" for d in ("float32", "bfloat16", "int64")]
CASES += [f"temporal-{d}" for d in ("int32", "int64")]


@pytest.mark.parametrize("case", CASES)
def test_the_compile_function_leaves_nothing_for_the_real_calls(added_by_real_calls, case):
    assert added_by_real_calls[case] == []


def test_the_check_fails_when_nothing_is_compiled_first(added_by_real_calls):
    assert any("_sample" in signature for signature in added_by_real_calls["skipped"])


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
