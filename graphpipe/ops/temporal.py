"""Temporal filtering of in-edge segments: which in-edges are valid for a destination's time window.

A layer's in-edges come as segments ``s`` with CSC positions ``[bounds[2s], bounds[2s + 1])``
(:mod:`graphpipe.ops.typed_sampling`'s table; an untyped layer has one segment per
destination) and a closed window ``[lo[s], hi[s]]`` of int64 times (a strict ``t <
seed_time`` is ``hi = seed_time - 1``). The in-edge at position ``p`` is valid iff

* ``node_time[indices[p]]`` lies in the window (when node times are given), and
* ``edge_time[p]`` lies in the window (when edge times are given);

a time equal to :data:`UNTIMED` (``int64`` min) is no constraint. An edge's *time key* is
the larger of its given times: the time the edge becomes valid under the upper bound.

Three kernels, all ``O(log d)`` or ``O(d)`` per segment, parallel over segments:

* :func:`narrow_to_window`: where a segment's in-edges are sorted by time key, the valid
  ones are one sub-range, found by binary search (``O(log d)``).
* :func:`valid_candidates`: any order: a scan listing the valid positions (and skipping
  an :class:`~graphpipe.ops.edge_lookup.EdgeExclusion`), for the samplers to draw from.
* :func:`latest_candidates`: the ``k`` valid in-edges with the largest time keys (ties:
  the larger ``edge_order``), PyG's ``temporal_strategy="last"``; ``O(log d + k)`` on
  sorted segments, ``O(d log d)`` otherwise.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numba
import numpy as np
import torch

from graphpipe.ops.edge_lookup import EdgeExclusion, exclusion_arrays
from graphpipe.ops.random import hash2
from graphpipe.ops.selection import lower_bound_in

__all__ = [
    "UNTIMED",
    "TimeArrays",
    "is_time_sorted",
    "latest_candidates",
    "narrow_to_window",
    "time_keys",
    "valid_candidates",
]

# Rejection draws (uniform draws without replacement on unsorted in-edges): segments of more
# than _REJECTION_DEGREE * fanout in-edges, at most _REJECTION_TRIES * fanout draws each.
_REJECTION_DEGREE = 8
_REJECTION_TRIES = 32
# A node or edge time that constrains nothing (a node type without timestamps).
UNTIMED = np.iinfo(np.int64).min
_NO_TIMES = np.zeros(0, np.int64)


class TimeArrays(NamedTuple):
    """The graph arrays a temporal filter reads, as numpy views (empty: not given).

    Attributes:
        indices: ``[num_edges]`` int32/int64 source ids by CSC position.
        node_time: ``[num_nodes]`` int64, or empty.
        edge_time: ``[num_edges]`` int64 by CSC position, or empty.
        edge_order: ``[num_edges]`` int64 tie order of equal time keys (the user's edge
            ids), or empty (CSC order).
    """

    indices: np.ndarray
    node_time: np.ndarray
    edge_time: np.ndarray
    edge_order: np.ndarray


@numba.njit(inline="always", nogil=True, cache=True)
def _key(p, indices, node_time, edge_time):
    """The time key of position ``p``: the larger of its given times (UNTIMED: none)."""
    t = UNTIMED
    if node_time.size:
        t = max(t, node_time[indices[p]])
    if edge_time.size:
        t = max(t, edge_time[p])
    return t


@numba.njit(inline="always", nogil=True, cache=True)
def _in_window(t, lo, hi):
    return t == UNTIMED or (lo <= t and t <= hi)


@numba.njit(inline="always", nogil=True, cache=True)
def _is_valid(p, indices, node_time, edge_time, lo, hi):
    if node_time.size and not _in_window(node_time[indices[p]], lo, hi):
        return False
    return not (edge_time.size and not _in_window(edge_time[p], lo, hi))


@numba.njit(inline="always", nogil=True, cache=True)
def _first_key_above(indices, node_time, edge_time, start, end, x):
    """The first ``p`` in ``[start, end)`` whose key is ``> x`` (keys sorted there), else ``end``."""
    a, b = start, end
    while a < b:
        mid = (a + b) >> 1
        if _key(mid, indices, node_time, edge_time) <= x:
            a = mid + 1
        else:
            b = mid
    return a


@numba.njit(parallel=True, nogil=True, cache=True)
def _narrow(bounds, lo, hi, indices, node_time, edge_time, out):
    for s in numba.prange(lo.size):
        start, end = np.int64(bounds[2 * s]), np.int64(bounds[2 * s + 1])
        a = start if lo[s] == UNTIMED else _first_key_above(indices, node_time, edge_time, start, end, lo[s] - 1)
        b = _first_key_above(indices, node_time, edge_time, a, end, hi[s])
        out[2 * s] = a
        out[2 * s + 1] = b


def narrow_to_window(bounds: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, arrays: TimeArrays) -> torch.Tensor:
    """``[2S]`` int64 bounds of the valid in-edges of each segment, its in-edges sorted by
    time key and its window's ``lo`` either UNTIMED or below no UNTIMED key, with a single
    kind of time given (else use :func:`valid_candidates`).

    Args:
        bounds: ``[2S]`` int32/int64 segment bounds.
        lo, hi: ``[S]`` int64 closed windows.
        arrays: the graph's :class:`TimeArrays`.
    """
    out = np.empty(bounds.numel(), np.int64)
    _narrow(bounds.numpy(), lo.numpy(), hi.numpy(), arrays.indices, arrays.node_time, arrays.edge_time, out)
    return torch.from_numpy(out)


@numba.njit(parallel=True, nogil=True, cache=True)
def _count_valid(bounds, lo, hi, indices, node_time, edge_time, ex_indptr, ex_pos, counts):
    for s in numba.prange(lo.size):
        counts[s] = _valid_in_segment(s, bounds, lo, hi, indices, node_time, edge_time, ex_indptr, ex_pos)


@numba.njit(inline="always", nogil=True, cache=True)
def _valid_in_segment(s, bounds, lo, hi, indices, node_time, edge_time, ex_indptr, ex_pos):
    """How many in-edges of segment ``s`` are valid and not excluded."""
    e, e_end = (ex_indptr[s], ex_indptr[s + 1]) if s < ex_indptr.size - 1 else (0, 0)
    c = 0
    for p in range(bounds[2 * s], bounds[2 * s + 1]):
        if e < e_end and ex_pos[e] == p:
            e += 1
        elif _is_valid(p, indices, node_time, edge_time, lo[s], hi[s]):
            c += 1
    return c


@numba.njit(parallel=True, nogil=True, cache=True)
def _fill_valid(bounds, lo, hi, indices, node_time, edge_time, ex_indptr, ex_pos, offsets, scratch, scratch_at, out):
    for s in numba.prange(lo.size):
        at = offsets[s]
        if scratch_at[s] >= 0:  # drawn by rejection
            for j in range(offsets[s + 1] - at):
                out[at + j] = scratch[scratch_at[s] + j]
            continue
        e, e_end = (ex_indptr[s], ex_indptr[s + 1]) if s < ex_indptr.size - 1 else (0, 0)
        for p in range(bounds[2 * s], bounds[2 * s + 1]):
            if e < e_end and ex_pos[e] == p:
                e += 1
            elif _is_valid(p, indices, node_time, edge_time, lo[s], hi[s]):
                out[at] = p
                at += 1


def valid_candidates(
    bounds: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    arrays: TimeArrays,
    exclude: Optional[EdgeExclusion] = None,
    draws: Optional[Tuple[int, torch.Tensor, torch.Tensor]] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The valid in-edges of every segment, in CSC order, but those ``exclude`` names.

    ``draws`` ``(key, key_ids [S], fanouts [S])``: for uniform draws without replacement,
    a segment of more than ``_REJECTION_DEGREE * fanout`` in-edges gets instead ``fanout``
    distinct valid ones drawn by rejection (variates ``hash2(hash2(key, key_ids[s]),
    attempt)``): a uniform ``fanout``-subset of its valid in-edges without scanning it
    (GraphBolt's fast path for high-degree nodes), or all its valid ones if the draws fail.

    Returns:
        ``(candidate_bounds, positions)``: ``[2S]`` int64 bounds of segment ``s``'s
        candidates in ``positions``, and ``[C]`` int64 their CSC positions.
    """
    bounds_np, lo_np, hi_np = bounds.numpy(), lo.numpy(), hi.numpy()
    ex_indptr, ex_pos = exclusion_arrays(exclude)
    counts = np.empty(lo_np.size, np.int64)
    args = (bounds_np, lo_np, hi_np, arrays.indices, arrays.node_time, arrays.edge_time, ex_indptr, ex_pos)
    if draws is None:
        _count_valid(*args, counts)
        scratch, scratch_at = _NO_TIMES, np.full(lo_np.size, -1, np.int64)
    else:
        key, key_ids, fanouts = draws
        fanouts = fanouts.numpy()
        degrees = bounds_np[1::2].astype(np.int64) - bounds_np[0::2]
        large = (fanouts > 0) & (degrees > _REJECTION_DEGREE * fanouts)
        scratch_at = np.where(large, np.cumsum(np.where(large, fanouts, 0)) - fanouts, -1)
        scratch = np.empty(int(np.where(large, fanouts, 0).sum()), np.int64)
        # key_ids may be a strided view: contiguous, the kernel compiled for contiguous arrays serves
        _count_drawn(bounds_np, lo_np, hi_np, fanouts, np.uint64(key), key_ids.contiguous().numpy(), *args[3:], scratch, scratch_at, counts)
    offsets = np.zeros(lo_np.size + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    positions = np.empty(offsets[-1], np.int64)
    _fill_valid(*args, offsets, scratch, scratch_at, positions)
    candidate_bounds = np.stack([offsets[:-1], offsets[1:]], axis=1).reshape(-1)  # [lo_0, hi_0, lo_1, ...]
    return torch.from_numpy(candidate_bounds), torch.from_numpy(positions)


@numba.njit(inline="always", nogil=True, cache=True)
def _is_excluded(ex_pos, e0, e1, p):
    """Whether position ``p`` is among ``ex_pos[e0:e1]`` (ascending)."""
    a = lower_bound_in(ex_pos, e0, e1, p)
    return a < e1 and ex_pos[a] == p


@numba.njit(nogil=True, cache=True)
def _draw_valid(start, d, k, vkey, lo, hi, indices, node_time, edge_time, ex_pos, e0, e1, out, at):
    """Rejection: ``k`` distinct valid positions of ``[start, start + d)``, each uniform
    among the valid ones not drawn yet, written ascending at ``out[at:at + k]``; False
    when ``_REJECTION_TRIES * k`` draws did not find them (the segment is then scanned)."""
    n = 0
    for attempt in range(_REJECTION_TRIES * k):
        p = start + np.int64(((hash2(vkey, attempt) >> np.uint64(32)) * np.uint64(d)) >> np.uint64(32))
        if not _is_valid(p, indices, node_time, edge_time, lo, hi) or _is_excluded(ex_pos, e0, e1, p):
            continue
        taken = False
        for j in range(n):
            taken |= out[at + j] == p
        if not taken:
            out[at + n] = p
            n += 1
            if n == k:
                out[at : at + k].sort()
                return True
    return False


@numba.njit(parallel=True, nogil=True, cache=True)
def _count_drawn(bounds, lo, hi, fanouts, key, key_ids, indices, node_time, edge_time, ex_indptr, ex_pos, scratch, scratch_at, counts):
    """Per segment the number of candidates: ``fanouts[s]`` drawn by rejection where the
    segment is large (``scratch_at[s] >= 0``) and they are found (else ``scratch_at[s]``
    becomes -1), or its valid in-edges."""
    for s in numba.prange(lo.size):
        start, end = np.int64(bounds[2 * s]), np.int64(bounds[2 * s + 1])
        e0, e1 = (ex_indptr[s], ex_indptr[s + 1]) if s < ex_indptr.size - 1 else (0, 0)
        vkey = hash2(key, key_ids[s])
        if scratch_at[s] >= 0 and _draw_valid(start, end - start, fanouts[s], vkey, lo[s], hi[s], indices, node_time, edge_time, ex_pos, e0, e1, scratch, scratch_at[s]):
            counts[s] = fanouts[s]
            continue
        scratch_at[s] = -1
        counts[s] = _valid_in_segment(s, bounds, lo, hi, indices, node_time, edge_time, ex_indptr, ex_pos)


@numba.njit(nogil=True, cache=True)
def _latest_of(s, bounds, lo, hi, want, indices, node_time, edge_time, edge_order, is_sorted, ex_indptr, ex_pos, out, at, write):
    """Segment ``s``'s ``want`` latest valid positions (all valid if fewer): written
    ascending at ``out[at:]`` when ``write`` (``want`` is then their exact count);
    returns how many."""
    start, end = np.int64(bounds[2 * s]), np.int64(bounds[2 * s + 1])
    e0, e1 = (ex_indptr[s], ex_indptr[s + 1]) if s < ex_indptr.size - 1 else (0, 0)
    if is_sorted:  # walk back from the last key <= hi: the first `want` valid ones are the latest
        p = _first_key_above(indices, node_time, edge_time, start, end, hi[s]) - 1
        n = 0
        while p >= start and n < want:
            if _is_valid(p, indices, node_time, edge_time, lo[s], hi[s]) and not _is_excluded(ex_pos, e0, e1, p):
                n += 1
                if write:
                    out[at + want - n] = p
            p -= 1
        return n
    valid = np.empty(end - start, np.int64)
    n = 0
    for p in range(start, end):
        if _is_valid(p, indices, node_time, edge_time, lo[s], hi[s]) and not _is_excluded(ex_pos, e0, e1, p):
            valid[n] = p
            n += 1
    if not write:
        return min(n, want)
    if n <= want:
        out[at : at + n] = valid[:n]
        return n
    keys = np.empty(n, np.int64)
    order = np.empty(n, np.int64)
    for j in range(n):
        keys[j] = _key(valid[j], indices, node_time, edge_time)
        order[j] = edge_order[valid[j]] if edge_order.size else valid[j]
    by_order = np.argsort(order, kind="mergesort")
    by_key = np.argsort(keys[by_order], kind="mergesort")
    out[at : at + want] = np.sort(valid[:n][by_order[by_key[n - want :]]])
    return want


@numba.njit(parallel=True, nogil=True, cache=True)
def _latest(bounds, lo, hi, fanouts, indices, node_time, edge_time, edge_order, is_sorted, ex_indptr, ex_pos, offsets, out, write):
    for s in numba.prange(lo.size):
        if write:
            want = np.int64(offsets[s + 1] - offsets[s])
        else:
            want = np.int64(bounds[2 * s + 1] - bounds[2 * s]) if fanouts[s] < 0 else np.int64(fanouts[s])
        n = _latest_of(s, bounds, lo, hi, want, indices, node_time, edge_time, edge_order, is_sorted, ex_indptr, ex_pos, out, offsets[s], write)
        if not write:
            offsets[s + 1] = n


def latest_candidates(
    bounds: torch.Tensor,
    lo: torch.Tensor,
    hi: torch.Tensor,
    fanouts: torch.Tensor,
    arrays: TimeArrays,
    is_sorted: bool,
    exclude: Optional[EdgeExclusion] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyG's ``temporal_strategy="last"``: per segment the ``fanouts[s]`` valid in-edges
    (``-1``: all) with the largest time keys, ties to the larger ``edge_order``, but
    those ``exclude`` names.

    Returns:
        ``(indptr, positions)``: ``[S + 1]`` int64 offsets and ``[E]`` int64 CSC
        positions, ascending within a segment.
    """
    ex_indptr, ex_pos = exclusion_arrays(exclude)
    args = (bounds.numpy(), lo.numpy(), hi.numpy(), fanouts.numpy(), *arrays, bool(is_sorted), ex_indptr, ex_pos)
    offsets = np.zeros(lo.numel() + 1, np.int64)
    _latest(*args, offsets, _NO_TIMES, False)
    np.cumsum(offsets, out=offsets)
    positions = np.empty(offsets[-1], np.int64)
    _latest(*args, offsets, positions, True)
    return torch.from_numpy(offsets), torch.from_numpy(positions)


@numba.njit(parallel=True, nogil=True, cache=True)
def _keys(indices, node_time, edge_time, out):
    for p in numba.prange(out.size):
        out[p] = _key(p, indices, node_time, edge_time)


def time_keys(arrays: TimeArrays, num_edges: int) -> np.ndarray:
    """``[num_edges]`` int64: every in-edge's time key."""
    out = np.empty(num_edges, np.int64)
    _keys(arrays.indices, arrays.node_time, arrays.edge_time, out)
    return out


@numba.njit(parallel=True, nogil=True, cache=True)
def _unsorted_segments(segment_starts, keys, edge_order):
    bad = 0
    for s in numba.prange(segment_starts.size - 1):
        for p in range(segment_starts[s] + 1, segment_starts[s + 1]):
            if keys[p] < keys[p - 1] or (keys[p] == keys[p - 1] and edge_order.size and edge_order[p] < edge_order[p - 1]):
                bad += 1
                break
    return bad


def is_time_sorted(segment_starts: np.ndarray, keys: np.ndarray, edge_order: np.ndarray) -> bool:
    """Whether every segment ``[segment_starts[s], segment_starts[s + 1])`` has its
    in-edges sorted by time key, ties by ``edge_order`` (when given). ``O(num_edges)``."""
    return _unsorted_segments(segment_starts, keys, edge_order) == 0
