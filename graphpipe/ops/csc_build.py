"""Out-of-core COO -> CSC: group an edge list by destination with bounded memory.

:func:`coo_to_csc_chunked` reads ``src``/``dst`` (arrays or memory maps of files larger
than RAM) ``chunk_edges`` edges at a time and writes the CSC into output arrays the
caller provides (memory maps, when the CSC does not fit either). The destinations are
split into *blocks* of at most ``block_edges`` output slots, written one at a time, so
the dirty pages of a mapped output are bounded by a block, not the graph.

1. **count** in-degrees (and whether ``dst`` is sorted), chunk by chunk;
2. **distribute** (more than one block only): each edge's input position goes into
   ``scratch`` at its block's window, in input order;
3. **fill** each block: its edges (every edge, with one block) go to ``cursor[dst]++``.

Each pass reads every edge once: linear in the edges for any ``chunk_edges`` and
``block_edges`` (both raised to at least ``2**16``, below which they only add launches).
Sorted input is copied block by block. Edges keep their input order within a node (as
:meth:`graphpipe.CSCGraph.from_coo`). Memory: ``indptr`` and a cursor (16 bytes per
node), plus the chunk being read; nothing of size ``num_edges`` but ``scratch`` when the
caller gives none. Each thread scans a chunk for its own node range: no atomics, and a
result independent of the thread count.
"""

from __future__ import annotations

from typing import Optional, Tuple

import numba
import numpy as np

__all__ = ["coo_to_csc_chunked", "coo_id_range", "MIN_CHUNK_EDGES", "MIN_BLOCK_EDGES"]

MIN_CHUNK_EDGES = 1 << 16  # smaller `chunk_edges` are raised to this
MIN_BLOCK_EDGES = 1 << 16  # smaller `block_edges` are raised to this


def coo_id_range(src: np.ndarray, dst: np.ndarray, chunk_edges: int = 1 << 24) -> Tuple[int, int]:
    """``(min, max)`` node id over ``src`` and ``dst`` (``(0, -1)`` without edges), read
    ``chunk_edges`` (at least :data:`MIN_CHUNK_EDGES`) at a time."""
    if src.shape[0] == 0:
        return 0, -1
    chunk_edges = max(chunk_edges, MIN_CHUNK_EDGES)
    lo, hi = None, None
    for start in range(0, src.shape[0], chunk_edges):
        for array in (src, dst):
            chunk = array[start : start + chunk_edges]
            low, high = int(chunk.min()), int(chunk.max())
            lo = low if lo is None else min(lo, low)
            hi = high if hi is None else max(hi, high)
    return lo, hi


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
        num_nodes: number of nodes.
        indices_out: ``[num_edges]`` integer array receiving the sources in CSC order.
        edge_ids_out: ``[num_edges]`` integer array receiving each CSC position's input
            position, or None if not wanted.
        chunk_edges: edges read per kernel launch (at least :data:`MIN_CHUNK_EDGES`).
        block_edges: output slots written per block (the window of the output that
            one block dirties; at least :data:`MIN_BLOCK_EDGES`).
        scratch: ``[num_edges]`` integer array able to hold ``num_edges - 1``, where the
            edges' input positions are grouped by block when the output takes more than
            one block (a memory map of a scratch file for graphs larger than memory;
            allocated in memory when None). Not used with one block or sorted input.

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
    _fill_by_blocks(src, dst, block_starts, windows, cursor, indices_out, edge_ids_out, chunk_edges, scratch)
    return indptr, False


def _compile_kernels(src, dst, indices_out, edge_ids, with_edge_ids, scratch) -> None:
    """Compile (or load from numba's cache) every kernel for these types before the
    first pass, on empty inputs: a build does not grow (LLVM's memory) midway, and a
    compile error comes before hours of passes."""
    none, two, parts = np.zeros(0, np.int64), np.zeros(2, np.int64), _ranges(0)
    scratch = _NO_POSITIONS if scratch is None else scratch  # allocated later, as this type
    _count_kernel(dst[:0], parts, none)
    _distribute_kernel(dst[:0], 0, two, two, none, scratch)
    for positions in (_NO_POSITIONS, scratch):  # both kinds of positions the passes give
        _fill_kernel(src[:0], dst[:0], 0, positions[:0], False, parts, none, indices_out, edge_ids, with_edge_ids)


def _count(dst: np.ndarray, num_nodes: int, parts: np.ndarray, chunk_edges: int) -> Tuple[np.ndarray, bool]:
    """Pass 1: ``(indptr, already_sorted)``, ``[num_nodes + 1]`` int64 and whether ``dst``
    is non-decreasing, one chunk at a time."""
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


def _fill_by_blocks(src, dst, block_starts, windows, cursor, indices_out, edge_ids_out, chunk_edges, scratch) -> None:
    """Passes 2 and 3 with several blocks: list each block's edges in its window of
    ``scratch``, then place them block by block."""
    with_edge_ids = edge_ids_out is not None
    edge_ids = edge_ids_out if with_edge_ids else _NO_EDGE_IDS
    num_blocks = block_starts.size - 1
    block_cursor = windows[:-1].copy()
    block_parts = _ranges(num_blocks)  # thread t distributes the edges of blocks [block_parts[t], block_parts[t + 1])
    for start in range(0, src.shape[0], chunk_edges):
        _distribute_kernel(dst[start : start + chunk_edges], start, block_starts, block_parts, block_cursor, scratch)
    _flush(scratch)
    for b in range(num_blocks):
        v0, v1 = int(block_starts[b]), int(block_starts[b + 1])
        node_parts = _ranges(v1 - v0) + v0
        for start in range(int(windows[b]), int(windows[b + 1]), chunk_edges):
            stop = min(start + chunk_edges, int(windows[b + 1]))
            _fill_kernel(
                src, dst, 0, scratch[start:stop], True, node_parts, cursor, indices_out, edge_ids, with_edge_ids
            )
        _flush(indices_out, edge_ids_out)


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
    """``[num_blocks + 1]`` int64 node boundaries of consecutive node ranges covering all
    nodes, each holding at most ``block_edges`` edges unless a single node has more."""
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
    # Thread t places the edges whose destination is in [parts[t], parts[t + 1]), in
    # input order, so each node's edges keep their input order: every edge of the chunk
    # (its input position first_edge + k), or the edges at input `positions` (ascending).
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
