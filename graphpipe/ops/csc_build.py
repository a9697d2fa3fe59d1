"""Out-of-core COO -> CSC: group an edge list by destination with bounded memory.

:func:`coo_to_csc_chunked` reads the edge arrays ``src``/``dst`` (numpy arrays or
``numpy.memmap`` s of files larger than RAM) in chunks of ``chunk_edges`` edges and
writes the CSC arrays into output arrays the caller provides (``numpy.memmap`` s of
files, for graphs whose CSC does not fit in memory either). Two passes:

1. **count**: in-degrees of every node (and the range of ``src`` and whether ``dst``
   is already sorted), one chunk at a time;
2. **fill**: for each *block* of destination nodes whose edges take at most
   ``block_edges`` output slots, scan the chunks again and write each edge of the block
   at ``cursor[dst]++``. The writes of one block stay within one window of the output,
   so the dirty pages of a memory-mapped output are bounded by the block, not the
   graph (a graph larger than RAM would otherwise thrash the page cache).

Edges keep their input order within a node (a stable grouping, as
:meth:`graphpipe.CSCGraph.from_coo`), so ``original_edge_ids[e]`` is the input position
of the edge at CSC position ``e``. Memory: ``indptr`` and a cursor (16 bytes per node)
plus the chunk being read (a view of the memory map); nothing of size ``num_edges`` is
allocated. The kernels split the nodes into one range per thread, each thread scanning
the chunk for its own range: no atomics, and the result does not depend on the number
of threads.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numba
import numpy as np

__all__ = ["coo_to_csc_chunked", "coo_id_range"]


def coo_id_range(src: np.ndarray, dst: np.ndarray, chunk_edges: int = 1 << 24) -> Tuple[int, int]:
    """``(min, max)`` node id over ``src`` and ``dst`` (``(0, -1)`` without edges), read
    ``chunk_edges`` at a time."""
    lo, hi = np.iinfo(np.int64).max, -1
    for start in range(0, src.shape[0], chunk_edges):
        for array in (src, dst):
            chunk = array[start : start + chunk_edges]
            lo = min(lo, int(chunk.min()))
            hi = max(hi, int(chunk.max()))
    return (0, -1) if hi < 0 and lo == np.iinfo(np.int64).max else (lo, hi)


def coo_to_csc_chunked(
    src: np.ndarray,
    dst: np.ndarray,
    num_nodes: int,
    indices_out: np.ndarray,
    edge_ids_out: Optional[np.ndarray],
    chunk_edges: int = 1 << 24,
    block_edges: int = 1 << 28,
) -> Tuple[np.ndarray, bool]:
    """Group the edges ``src[e] -> dst[e]`` by destination, writing into the outputs.

    Args:
        src, dst: ``[num_edges]`` integer arrays (memory maps welcome), ids in
            ``[0, num_nodes)`` (checked by the caller, e.g. with :func:`coo_id_range`).
        num_nodes: number of nodes.
        indices_out: ``[num_edges]`` integer array receiving the sources in CSC order.
        edge_ids_out: ``[num_edges]`` integer array receiving each CSC position's input
            position, or None if not wanted.
        chunk_edges: edges read per step.
        block_edges: output slots written per fill pass (the window of the output that
            one pass dirties); the number of passes over the input is about
            ``num_edges / block_edges``.

    Returns:
        ``(indptr, already_sorted)``: ``[num_nodes + 1]`` int64, and whether ``dst`` was
        non-decreasing (then CSC order is input order, the edge ids would be
        ``arange(num_edges)`` and ``edge_ids_out`` is left unwritten).
    """
    num_edges = src.shape[0]
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)  # in-degrees at [1:], then their prefix sums
    parts = _node_ranges(num_nodes)
    already_sorted = True
    previous = -1
    for start in range(0, num_edges, chunk_edges):
        chunk = dst[start : start + chunk_edges]
        _count_kernel(chunk, parts, indptr[1:])
        if already_sorted and chunk.size:
            already_sorted = previous <= int(chunk[0]) and bool(_is_sorted(chunk))
            previous = int(chunk[-1])
    np.cumsum(indptr, out=indptr)

    cursor = indptr[:-1].copy()
    if already_sorted:  # CSC order is input order: the edge ids would be arange(num_edges)
        edge_ids_out = None
    for v0, v1 in _node_blocks(indptr, block_edges):
        block_parts = _node_ranges(v1 - v0) + v0
        for start in range(0, num_edges, chunk_edges):
            stop = min(start + chunk_edges, num_edges)
            _fill_kernel(
                src[start:stop], dst[start:stop], start, block_parts, cursor, indices_out,
                edge_ids_out if edge_ids_out is not None else _NO_EDGE_IDS, edge_ids_out is not None,
            )
        for out in (indices_out, edge_ids_out):
            if isinstance(out, np.memmap):
                out.flush()
    return indptr, already_sorted


_NO_EDGE_IDS = np.empty(0, dtype=np.int64)


def _node_ranges(num_nodes: int) -> np.ndarray:
    """Boundaries ``[T + 1]`` int64 splitting ``[0, num_nodes)`` into one range per thread."""
    parts = max(1, min(numba.get_num_threads(), num_nodes))
    return (np.arange(parts + 1, dtype=np.int64) * num_nodes) // parts


def _node_blocks(indptr: np.ndarray, block_edges: int):
    """Consecutive node ranges ``(v0, v1)`` covering all nodes, each holding at most
    ``block_edges`` edges unless a single node has more."""
    num_nodes = indptr.size - 1
    v0 = 0
    while v0 < num_nodes:
        v1 = int(np.searchsorted(indptr, indptr[v0] + block_edges, side="right")) - 1
        v1 = min(max(v1, v0 + 1), num_nodes)
        yield v0, v1
        v0 = v1


@numba.njit(nogil=True, cache=True)
def _is_sorted(values):
    for i in range(1, values.size):
        if values[i] < values[i - 1]:
            return False
    return True


@numba.njit(parallel=True, nogil=True, cache=True)
def _count_kernel(dst, parts, counts):
    # Thread t counts only the destinations in [parts[t], parts[t + 1]).
    for t in numba.prange(parts.size - 1):
        lo = parts[t]
        hi = parts[t + 1]
        for e in range(dst.size):
            v = dst[e]
            if lo <= v < hi:
                counts[v] += 1


@numba.njit(parallel=True, nogil=True, cache=True)
def _fill_kernel(src, dst, first_edge, parts, cursor, indices, edge_ids, with_edge_ids):
    # Thread t places the edges whose destination is in [parts[t], parts[t + 1]), in
    # input order, so each node's edges keep their input order.
    for t in numba.prange(parts.size - 1):
        lo = parts[t]
        hi = parts[t + 1]
        for e in range(dst.size):
            v = dst[e]
            if lo <= v < hi:
                position = cursor[v]
                indices[position] = src[e]
                if with_edge_ids:
                    edge_ids[position] = first_edge + e
                cursor[v] = position + 1
