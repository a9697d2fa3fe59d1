"""Out-of-core COO -> CSC: group an edge list by destination with bounded memory.

:func:`coo_to_csc_chunked` reads ``src``/``dst`` (arrays or memory maps larger than RAM)
``chunk_edges`` at a time and writes the CSC into the caller's outputs, one *block* of at
most ``block_edges`` output slots at a time, so a mapped output's dirty pages are bounded
by a block. Passes: 1. count in-degrees (and whether ``dst`` is sorted); 2. with several
blocks, put each edge's input position into ``scratch`` at its block's window; 3. place
each block's edges at ``cursor[dst]++``. Each pass reads every edge once. Sorted input is
copied. Edges keep their input order within a node. Memory: 16 bytes per node plus a
chunk (and ``scratch`` if not given). Each thread scans a chunk for its own node range:
no atomics, a result independent of the thread count.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numba
import numpy as np

__all__ = ["coo_to_csc_chunked", "coo_id_range", "MIN_CHUNK_EDGES", "MIN_BLOCK_EDGES"]

MIN_CHUNK_EDGES = 1 << 16  # smaller `chunk_edges` are raised to this
MIN_BLOCK_EDGES = 1 << 16  # smaller `block_edges` are raised to this


def coo_id_range(src: np.ndarray, dst: np.ndarray, chunk_edges: int = 1 << 24) -> Tuple[int, int]:
    """``(min, max)`` node id over ``src`` and ``dst`` (``(0, -1)`` without edges), read in chunks."""
    if src.shape[0] == 0:
        return 0, -1
    chunk_edges = max(chunk_edges, MIN_CHUNK_EDGES)
    lows, highs = [], []
    for start in range(0, src.shape[0], chunk_edges):
        for array in (src, dst):
            chunk = array[start : start + chunk_edges]
            lows.append(int(chunk.min()))
            highs.append(int(chunk.max()))
    return min(lows), max(highs)


def coo_to_csc_chunked(
    src: np.ndarray,
    dst: np.ndarray,
    num_nodes: int,
    indices_out: np.ndarray,
    edge_ids_out: Optional[np.ndarray],
    chunk_edges: int = 1 << 24,
    block_edges: int = 1 << 28,
    scratch: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, bool]:
    """Group the edges ``src[e] -> dst[e]`` by destination, writing into the outputs.

    Args:
        src, dst: ``[num_edges]`` integer arrays (memory maps welcome), ids in
            ``[0, num_nodes)`` (checked by the caller, e.g. with :func:`coo_id_range`).
        indices_out: ``[num_edges]`` integer array receiving the sources in CSC order.
        edge_ids_out: ``[num_edges]`` integer array receiving each CSC position's input
            position, or None.
        chunk_edges: edges read per kernel launch (at least :data:`MIN_CHUNK_EDGES`).
        block_edges: output slots written per block (at least :data:`MIN_BLOCK_EDGES`).
        scratch: ``[num_edges]`` integer array holding values up to ``num_edges - 1`` (a
            memory map for graphs larger than memory; allocated when None), used with
            several blocks of unsorted input only.

    Returns:
        ``(indptr, already_sorted)``: ``[num_nodes + 1]`` int64, and whether ``dst`` was
        non-decreasing (then CSC order is input order, the edge ids would be
        ``arange(num_edges)`` and ``edge_ids_out`` is left unwritten).
    """
    num_edges = src.shape[0]
    chunk_edges = max(chunk_edges, MIN_CHUNK_EDGES)
    block_edges = max(block_edges, MIN_BLOCK_EDGES)
    parts = _ranges(num_nodes)
    with_edge_ids = edge_ids_out is not None
    edge_ids = edge_ids_out if with_edge_ids else _NO_EDGE_IDS
    _compile_kernels(src, dst, indices_out, edge_ids, with_edge_ids, scratch)
    indptr, already_sorted = _count(dst, num_nodes, parts, chunk_edges)
    block_starts = _block_starts(indptr, block_edges)  # [num_blocks + 1] node ids
    windows = indptr[block_starts]  # block b writes output slots [windows[b], windows[b + 1])
    if already_sorted:  # CSC order is input order: copy, one window at a time
        for w0, w1 in zip(windows[:-1].tolist(), windows[1:].tolist()):
            for start in range(w0, w1, chunk_edges):
                stop = min(start + chunk_edges, w1)
                indices_out[start:stop] = src[start:stop]
            _flush(indices_out)
        return indptr, True
    cursor = indptr[:-1].copy()
    if block_starts.size == 2:  # the whole output is one window: place each chunk's edges directly
        for start in range(0, num_edges, chunk_edges):
            stop = min(start + chunk_edges, num_edges)
            _fill_kernel(
                src[start:stop], dst[start:stop], start, _NO_POSITIONS, False, parts, cursor, indices_out, edge_ids, with_edge_ids
            )
        _flush(indices_out, edge_ids_out)
        return indptr, False
    if scratch is None:
        scratch = np.empty(num_edges, dtype=np.int64)
    # Pass 2: each block's edges into its window of `scratch`; thread t distributes the edges
    # of the blocks [block_parts[t], block_parts[t + 1]).
    block_cursor = windows[:-1].copy()
    block_parts = _ranges(block_starts.size - 1)
    for start in range(0, num_edges, chunk_edges):
        _distribute_kernel(dst[start : start + chunk_edges], start, block_starts, block_parts, block_cursor, scratch)
    _flush(scratch)
    for b in range(block_starts.size - 1):  # pass 3: place each block's edges
        v0, v1 = int(block_starts[b]), int(block_starts[b + 1])
        node_parts = _ranges(v1 - v0) + v0
        for start in range(int(windows[b]), int(windows[b + 1]), chunk_edges):
            stop = min(start + chunk_edges, int(windows[b + 1]))
            _fill_kernel(
                src, dst, 0, scratch[start:stop], True, node_parts, cursor, indices_out, edge_ids, with_edge_ids
            )
        _flush(indices_out, edge_ids_out)
    return indptr, False


def _compile_kernels(src, dst, indices_out, edge_ids, with_edge_ids, scratch) -> None:
    """Compile every kernel for these types on empty inputs before the first pass: LLVM's
    memory does not grow midway, and a compile error comes before hours of passes."""
    none, two, parts = np.zeros(0, np.int64), np.zeros(2, np.int64), _ranges(0)
    scratch = _NO_POSITIONS if scratch is None else scratch  # allocated later, as this type
    _count_kernel(dst[:0], parts, none)
    _distribute_kernel(dst[:0], 0, two, two, none, scratch)
    for positions in (_NO_POSITIONS, scratch):  # both kinds of positions the passes give
        _fill_kernel(src[:0], dst[:0], 0, positions[:0], False, parts, none, indices_out, edge_ids, with_edge_ids)


def _count(dst: np.ndarray, num_nodes: int, parts: np.ndarray, chunk_edges: int) -> Tuple[np.ndarray, bool]:
    """Pass 1: ``[num_nodes + 1]`` int64 ``indptr`` and whether ``dst`` is non-decreasing."""
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)  # in-degrees at [1:], then their prefix sums
    already_sorted = True
    previous = -1
    for start in range(0, dst.shape[0], chunk_edges):
        chunk = dst[start : start + chunk_edges]
        _count_kernel(chunk, parts, indptr[1:])
        if already_sorted and chunk.size:
            already_sorted = previous <= int(chunk[0]) and bool(_is_sorted(chunk))
            previous = int(chunk[-1])
    np.cumsum(indptr, out=indptr)
    return indptr, already_sorted


_NO_EDGE_IDS = np.empty(0, dtype=np.int64)
_NO_POSITIONS = np.empty(0, dtype=np.int64)


def _flush(*arrays) -> None:
    for array in arrays:
        if isinstance(array, np.memmap):
            array.flush()


def _ranges(count: int) -> np.ndarray:
    """Boundaries ``[T + 1]`` int64 splitting ``[0, count)`` into one range per thread."""
    parts = max(1, min(numba.get_num_threads(), count))
    return (np.arange(parts + 1, dtype=np.int64) * count) // parts


def _block_starts(indptr: np.ndarray, block_edges: int) -> np.ndarray:
    """``[num_blocks + 1]`` int64 node boundaries of ranges of at most ``block_edges`` edges
    (or one node)."""
    num_nodes = indptr.size - 1
    starts = [0]
    while starts[-1] < num_nodes:
        v0 = starts[-1]
        v1 = int(np.searchsorted(indptr, indptr[v0] + block_edges, side="right")) - 1
        starts.append(min(max(v1, v0 + 1), num_nodes))
    if num_nodes == 0:
        starts.append(0)
    return np.array(starts, dtype=np.int64)


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


@numba.njit(inline="always", nogil=True, cache=True)
def _place(v, source, edge_id, cursor, indices, edge_ids, with_edge_ids):
    """Write the edge ``source -> v`` at ``v``'s cursor and advance it."""
    position = cursor[v]
    indices[position] = source
    if with_edge_ids:
        edge_ids[position] = edge_id
    cursor[v] = position + 1


@numba.njit(parallel=True, nogil=True, cache=True)
def _fill_kernel(src, dst, first_edge, positions, by_position, parts, cursor, indices, edge_ids, with_edge_ids):
    # Thread t places, in input order, the edges with destination in [parts[t], parts[t + 1]):
    # every edge of the chunk (input position first_edge + k), or those at `positions`.
    count = positions.size if by_position else dst.size
    for t in numba.prange(parts.size - 1):
        lo = parts[t]
        hi = parts[t + 1]
        for k in range(count):
            e = positions[k] if by_position else k
            v = dst[e]
            if lo <= v < hi:
                _place(v, src[e], first_edge + e, cursor, indices, edge_ids, with_edge_ids)


@numba.njit(parallel=True, nogil=True, cache=True)
def _distribute_kernel(dst, first_edge, block_starts, block_parts, block_cursor, positions):
    # Thread t appends the input positions of the edges of blocks [block_parts[t],
    # block_parts[t + 1]) to their blocks' windows of `positions`, in input order.
    for t in numba.prange(block_parts.size - 1):
        lo = block_starts[block_parts[t]]
        hi = block_starts[block_parts[t + 1]]
        for e in range(dst.size):
            v = dst[e]
            if lo <= v < hi:
                b = np.searchsorted(block_starts, v, side="right") - 1
                slot = block_cursor[b]
                positions[slot] = first_edge + e
                block_cursor[b] = slot + 1
