"""Compile (or load from numba's disk cache) the kernels an op will need, before its first batch.

Each function calls its op on a two-edge graph with the given dtypes and options, so it
takes the op's own path to exactly the kernels a batch uses: seconds per op when compiled,
well under a second when loaded. :func:`graphpipe.loading.compile.compile_kernels` runs them
for a pipe's stages. numba caches next to the sources (``graphpipe/ops/__pycache__``) when
that is writable, else per user (``~/.cache/numba``, ``$XDG_CACHE_HOME/numba``;
``NUMBA_CACHE_DIR`` overrides both): :func:`cache_dir` says where.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from graphpipe.ops.gather import gather_rows
from graphpipe.ops.labor import Variates, _labor0, sample_labor
from graphpipe.ops.negative_sampling import sample_uniform_negatives
from graphpipe.ops.neighbor_sampling import sample_neighbors
from graphpipe.ops.temporal import TimeArrays, is_time_sorted, latest_candidates, narrow_to_window, time_keys, valid_candidates
from graphpipe.ops.unique_and_compact import unique_and_compact

__all__ = [
    "cache_dir",
    "compile_gather_rows",
    "compile_sample_labor",
    "compile_sample_neighbors",
    "compile_temporal",
    "compile_unique_and_compact",
    "compile_uniform_negatives",
    "dtype_only",
    "gather_rows_task",
    "unique_and_compact_task",
]


def dtype_only(tensor: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """An empty tensor of ``tensor``'s dtype (``None`` stays ``None``): all the compile
    functions read of a graph's arrays, small enough to send to another process."""
    return None if tensor is None else torch.empty(0, dtype=tensor.dtype)


def _two_edge_graph(indptr, indices, num_nodes, probs=None):
    """``num_nodes`` (2 or 3) nodes, node 0 with the in-edges 0 -> 0 and 1 -> 0, in the dtypes
    of ``indptr``, ``indices`` and ``probs``."""
    tiny_indptr = torch.tensor([0] + [2] * num_nodes, dtype=indptr.dtype)
    tiny_indices = torch.tensor([0, 1], dtype=indices.dtype)
    tiny_probs = None if probs is None else torch.ones(2, dtype=probs.dtype)
    return tiny_indptr, tiny_indices, tiny_probs


def compile_uniform_negatives(
    indptr: torch.Tensor, indices: torch.Tensor, type_per_edge: Optional[torch.Tensor], exclude_edges: bool
) -> None:
    """:func:`~graphpipe.ops.sample_uniform_negatives`' kernel for a graph of these dtypes
    (its arrays read with ``exclude_edges`` only; ``type_per_edge`` None: untyped)."""
    tiny_indptr, tiny_indices, _ = _two_edge_graph(indptr, indices, 2)
    types = None if type_per_edge is None else torch.zeros(2, dtype=type_per_edge.dtype)
    sample_uniform_negatives(
        torch.zeros((1, 2), dtype=torch.int64), 2, 1, key=0, indptr=tiny_indptr, indices=tiny_indices,
        exclude_edges=exclude_edges, type_per_edge=types, edge_type=-1 if types is None else 0,
    )  # fmt: skip


def compile_sample_neighbors(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    fanouts: Sequence[int],
    *,
    replace: bool = False,
    probs: Optional[torch.Tensor] = None,
) -> None:
    """The kernels :func:`~graphpipe.ops.sample_neighbors` uses for these ``fanouts`` and
    options on arrays of the dtypes of ``indptr``/``indices``/``probs`` (only dtypes matter)."""
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
    """The kernels :func:`~graphpipe.ops.sample_labor` uses for these options on arrays of the
    dtypes of ``indptr``/``indices``/``probs`` (``dependent``: the variates of
    ``batch_dependency > 1``, both its per-edge and its per-vertex-table kernel)."""
    variates = Variates(0, 1, 1.0, 0.0, dependent=True) if dependent else Variates(0)
    node = torch.zeros(1, dtype=torch.int64)
    # Fanout 1: node 0 scans 2 edges, fewer than 3 nodes (variates per edge), as many as 2 (a table).
    for num_nodes in (3, 2) if dependent else (3,):
        tiny_indptr, tiny_indices, tiny_probs = _two_edge_graph(indptr, indices, num_nodes, probs)
        sample_labor(
            tiny_indptr, tiny_indices, node, 1, variates=variates, importance_sampling=importance_sampling, probs=tiny_probs
        )


def compile_temporal(indptr: torch.Tensor, indices: torch.Tensor, node_time: bool, edge_time: bool, edge_order: bool) -> None:
    """The kernels of :mod:`graphpipe.ops.temporal` for a graph with these dtypes and the
    given kinds of times (and tie order): every path (sorted, scanned, latest)."""
    tiny_indptr, tiny_indices, _ = _two_edge_graph(indptr, indices, 2)
    times = np.zeros(2, np.int64)
    arrays = TimeArrays(tiny_indices.numpy(), times if node_time else times[:0], times if edge_time else times[:0], times if edge_order else times[:0])
    bounds = tiny_indptr[:2].clone()
    window = torch.zeros(1, dtype=torch.int64)
    narrow_to_window(bounds, window, window, arrays)
    valid_candidates(bounds, window, window, arrays)
    valid_candidates(bounds, window, window, arrays, draws=(0, window, torch.ones(1, dtype=torch.int64)))
    for is_sorted in (False, True):
        latest_candidates(bounds, window, window, torch.ones(1, dtype=torch.int64), arrays, is_sorted)
    is_time_sorted(np.array([0, 2], np.int64), time_keys(arrays, 2), arrays.edge_order)


def compile_unique_and_compact(num_nodes: int) -> None:
    """The kernels :func:`~graphpipe.ops.unique_and_compact` uses on a graph of ``num_nodes``
    nodes: ids spread over the range (a small layer) and ids close together (a large one)."""
    if num_nodes < 1:
        return
    one = torch.zeros(1, dtype=torch.int64)
    unique_and_compact(one, one, num_nodes)
    unique_and_compact(torch.full((1,), num_nodes - 1, dtype=torch.int64), one, num_nodes)


def compile_gather_rows(table) -> None:
    """The kernel :func:`~graphpipe.ops.gather_rows` uses for rows of ``table`` (a CPU tensor
    or numpy array; its first row is enough)."""
    if len(table):
        gather_rows(table, torch.zeros(1, dtype=torch.int64))


def unique_and_compact_task(num_nodes: int) -> Callable[[], None]:
    """A picklable call of :func:`compile_unique_and_compact` (a stage's compile task)."""
    return partial(compile_unique_and_compact, num_nodes)


def gather_rows_task(table) -> Callable[[], None]:
    """A picklable call of :func:`compile_gather_rows` holding a copy of ``table``'s first row
    only, small enough to send to another process (a stage's compile task)."""
    return partial(compile_gather_rows, table[:1].clone() if isinstance(table, torch.Tensor) else np.array(table[:1]))


def cache_dir(kernel=_labor0) -> str:
    """The directory numba caches ``kernel`` (a graphpipe kernel) in."""
    return kernel.stats.cache_path
