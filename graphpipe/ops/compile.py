"""Compiling the numba kernels of the ops before the first batch needs them.

numba compiles a kernel the first time it is called with new argument types, then keeps
it in its on-disk cache (``cache=True``): a fresh install waits seconds per op for its
first batch, later processes load the kernels in well under a second. The functions
here compile (or load) what one op will need, for the dtypes and options given, by
calling the op on a two-edge graph: they take the op's own path to its kernels, so
they compile exactly those. :func:`graphpipe.loading.compile.compile_kernels` runs them
for the stages of a pipe in a background thread, with a notice.

Where numba writes: next to the sources (``graphpipe/ops/__pycache__``) when that
directory is writable, else in the user's cache directory (``~/.cache/numba``, or
``$XDG_CACHE_HOME/numba``; ``NUMBA_CACHE_DIR`` overrides both). An install in a
read-only ``site-packages`` therefore caches per user. :func:`cache_dir` says where.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from graphpipe.ops.gather import gather_rows
from graphpipe.ops.labor import Variates, _labor0, sample_labor
from graphpipe.ops.neighbor_sampling import sample_neighbors
from graphpipe.ops.unique_and_compact import unique_and_compact

__all__ = [
    "cache_dir",
    "compile_gather_rows",
    "compile_sample_labor",
    "compile_sample_neighbors",
    "compile_unique_and_compact",
    "dtype_only",
    "gather_rows_task",
    "unique_and_compact_task",
]


def dtype_only(tensor: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """An empty tensor of ``tensor``'s dtype (``None`` stays ``None``): what the compile
    functions here read of a graph's arrays, small enough to send to another process."""
    return None if tensor is None else torch.empty(0, dtype=tensor.dtype)


def _two_edge_graph(indptr, indices, num_nodes, probs=None):
    """A graph of ``num_nodes`` (2 or 3) nodes whose node 0 has the in-edges 0 -> 0 and
    1 -> 0, with the dtypes of ``indptr``, ``indices`` and ``probs``: sampling it takes
    the op's path to its kernels in microseconds once they are compiled."""
    tiny_indptr = torch.tensor([0] + [2] * num_nodes, dtype=indptr.dtype)
    tiny_indices = torch.tensor([0, 1], dtype=indices.dtype)
    tiny_probs = None if probs is None else torch.ones(2, dtype=probs.dtype)
    return tiny_indptr, tiny_indices, tiny_probs


def compile_sample_neighbors(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    fanouts: Sequence[int],
    *,
    replace: bool = False,
    probs: Optional[torch.Tensor] = None,
) -> None:
    """Compile (or load) the kernels :func:`~graphpipe.ops.sample_neighbors` uses for
    graphs with the dtypes of ``indptr``/``indices``/``probs`` and these ``fanouts`` and
    options (only the dtypes of the arrays matter)."""
    tiny_indptr, tiny_indices, tiny_probs = _two_edge_graph(indptr, indices, 3, probs)
    node = torch.zeros(1, dtype=torch.int64)
    for fanout in sorted(set(fanouts)):
        sample_neighbors(tiny_indptr, tiny_indices, node, fanout, key=0, replace=replace, probs=tiny_probs)


def compile_sample_labor(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    *,
    importance_sampling: int = 0,
    dependent: bool = False,
    probs: Optional[torch.Tensor] = None,
) -> None:
    """Compile (or load) the kernels :func:`~graphpipe.ops.sample_labor` uses for graphs
    with the dtypes of ``indptr``/``indices``/``probs`` and these options (``dependent``:
    the variates of ``batch_dependency > 1``; the kernels do not depend on the fanout).
    Dependent LABOR-0 reads its variates from a per-vertex table in layers that scan more
    edges than the graph has nodes, and computes them per edge in the others: both
    kernels are compiled."""
    variates = Variates(0, 1, 1.0, 0.0, dependent=True) if dependent else Variates(0)
    node = torch.zeros(1, dtype=torch.int64)
    # Fanout 1: node 0 scans its 2 edges, fewer than 3 nodes (variates per edge) and as
    # many as 2 (a table).
    for num_nodes in (3, 2) if dependent else (3,):
        tiny_indptr, tiny_indices, tiny_probs = _two_edge_graph(indptr, indices, num_nodes, probs)
        sample_labor(
            tiny_indptr, tiny_indices, node, 1, variates=variates, importance_sampling=importance_sampling, probs=tiny_probs
        )


def compile_unique_and_compact(num_nodes: int) -> None:
    """Compile (or load) the kernels :func:`~graphpipe.ops.unique_and_compact` uses for
    a graph of ``num_nodes`` nodes: ids spread over the whole range (a small layer of a
    large graph) and ids close together (a large layer)."""
    if num_nodes < 1:
        return
    one = torch.zeros(1, dtype=torch.int64)
    unique_and_compact(one, one, num_nodes)
    unique_and_compact(torch.full((1,), num_nodes - 1, dtype=torch.int64), one, num_nodes)


def compile_gather_rows(table) -> None:
    """Compile (or load) the kernel :func:`~graphpipe.ops.gather_rows` uses for rows of
    ``table`` (a CPU tensor or numpy array; its first row is enough), by reading row 0."""
    if len(table):
        gather_rows(table, torch.zeros(1, dtype=torch.int64))


def unique_and_compact_task(num_nodes: int) -> Callable[[], None]:
    """A picklable call of :func:`compile_unique_and_compact` (a stage's compile task)."""
    return partial(compile_unique_and_compact, num_nodes)


def gather_rows_task(table) -> Callable[[], None]:
    """A picklable call of :func:`compile_gather_rows` for the rows of ``table`` (a CPU
    tensor or numpy array) that holds a copy of its first row only, small enough to send
    to another process (a stage's compile task)."""
    return partial(compile_gather_rows, table[:1].clone() if isinstance(table, torch.Tensor) else np.array(table[:1]))


def cache_dir(kernel=_labor0) -> str:
    """The directory numba caches ``kernel`` (a graphpipe kernel) in."""
    return kernel.stats.cache_path
