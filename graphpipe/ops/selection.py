"""Small numba building blocks shared by the sampling kernels: a bounded max-heap that
keeps the ``k`` smallest ``(score, position)`` pairs, a sort for a fanout's few values,
work chunks of equal edge counts for ``prange`` loops over destinations of power-law
degrees, the per-destination ranges of a kernel's fill pass, scale-free weighted scores;
and the argument checks the public sampling ops share (graph arrays, a kernel's report
of bad ranges or weights, output sizes)."""

import functools
import math
import os

import numba
import numpy as np
import torch

__all__ = [
    "CHUNKS_PER_THREAD",
    "LOG_SPACE_SPREAD",
    "check_graph_arrays",
    "check_kernel_report",
    "check_probs",
    "destination_ranges",
    "edge_balanced_chunks",
    "heapify",
    "kth_smallest",
    "lower_bound",
    "lower_bound_in",
    "max_output_edges",
    "offer",
    "range_is_bad",
    "sift_down",
    "sort_by_rank",
    "sort_small",
    "weight_range",
    "weighted_score",
    "write_ranked",
]

# prange splits its range into one contiguous block per thread; this many chunks per
# thread keeps the blocks even when single destinations are heavy.
CHUNKS_PER_THREAD = 16


@numba.njit(inline="always", nogil=True, cache=True)
def sift_down(score, pos, n, m):
    """Restore the max-heap of ``(score, pos)[:n]`` (by score, then position) below ``m``."""
    while True:
        child = 2 * m + 1
        if child >= n:
            return
        if child + 1 < n and (
            score[child + 1] > score[child] or (score[child + 1] == score[child] and pos[child + 1] > pos[child])
        ):
            child += 1
        if score[child] > score[m] or (score[child] == score[m] and pos[child] > pos[m]):
            score[m], score[child] = score[child], score[m]
            pos[m], pos[child] = pos[child], pos[m]
            m = child
        else:
            return


@numba.njit(inline="always", nogil=True, cache=True)
def heapify(score, pos, k):
    """Make ``(score, pos)[:k]`` a max-heap (by score, then position)."""
    for m in range(k // 2 - 1, -1, -1):
        sift_down(score, pos, k, m)


@numba.njit(inline="always", nogil=True, cache=True)
def offer(score, pos, k, value, position):
    """Put ``(value, position)`` into the max-heap ``[:k]`` of the ``k`` smallest so far if
    it is smaller than the largest; ``position`` must exceed every position offered
    before, so only a strictly smaller ``value`` gets in."""
    if value < score[0]:
        score[0] = value
        pos[0] = position
        sift_down(score, pos, k, 0)


@numba.njit(inline="always", nogil=True, cache=True)
def kth_smallest(score, pos, n, k, heap_score, heap_pos):
    """The ``k``-th smallest ``(score, pos)`` pair of ``[:n]`` (``1 <= k <= n``), as
    ``(score, pos)``: the root of a max-heap of the ``k`` smallest, built in the scratch
    ``heap_score``/``heap_pos`` (``>= k`` slots), so the input keeps its order.

    ``pos[:n]`` must be ascending, so a later pair only replaces the heap's largest when
    its score is strictly smaller. ``O(n + k log k log(n / k))`` expected for random scores.
    """
    for j in range(k):
        heap_score[j] = score[j]
        heap_pos[j] = pos[j]
    heapify(heap_score, heap_pos, k)
    for j in range(k, n):
        offer(heap_score, heap_pos, k, score[j], pos[j])
    return heap_score[0], heap_pos[0]


@numba.njit(inline="always", nogil=True, cache=True)
def write_ranked(values, n, out, offset):
    """``out[r] = offset + values[i]`` where ``r`` is the rank of ``values[i]`` among the
    DISTINCT ``values[:n]``: ``out[:n]`` holds ``offset + values[:n]`` ascending. ``n²``
    branch-free comparisons, for the few values of a fanout."""
    for i in range(n):
        t = values[i]
        rank = 0
        for j in range(n):
            rank += values[j] < t
        out[rank] = offset + t


@numba.njit(inline="always", nogil=True, cache=True)
def sort_by_rank(values, n, scratch):
    """Sort ``values[:n]`` (repeats allowed, ``n <= scratch.size``) ascending in place, by
    rank through ``scratch`` (same dtype): ``n²`` branch-free comparisons. A sort call
    costs about 400 ns however few the values; ranking 15 of them costs about 65 ns."""
    for i in range(n):
        t = values[i]
        rank = 0
        for j in range(n):  # equal values keep their order
            rank += (values[j] < t) | ((values[j] == t) & (j < i))
        scratch[rank] = t
    for i in range(n):
        values[i] = scratch[i]


@numba.njit(inline="always", nogil=True, cache=True)
def sort_small(values, n, scratch):
    """Sort ``values[:n]`` (repeats allowed) ascending in place: :func:`sort_by_rank`
    when ``n <= scratch.size``, else numpy's sort (whose code takes seconds to compile:
    kernels that never sort more than ``scratch.size`` values call ``sort_by_rank``)."""
    if n > scratch.size:
        values[:n].sort()
        return
    sort_by_rank(values, n, scratch)


@numba.njit(nogil=True, cache=True)
def edge_balanced_chunks(indptr, nodes, chunks):
    """``[c + 1]`` int64 bounds (``c <= chunks``) that cut ``nodes`` into contiguous chunks
    of about equal ``Σ (in-degree + 16)``, so a ``prange`` over them gives threads equal
    work. Pass ``chunks = CHUNKS_PER_THREAD * numba.get_num_threads()`` (read outside the
    kernel: calling it inside would keep numba from caching the kernel)."""
    n = nodes.size
    cost = np.empty(n + 1, np.int64)
    cost[0] = 0
    for i in range(n):
        v = nodes[i]
        cost[i + 1] = cost[i] + (indptr[v + 1] - indptr[v]) + 16
    chunks = min(n, chunks)
    bounds = np.empty(chunks + 1, np.int64)
    for c in range(chunks + 1):
        bounds[c] = lower_bound(cost, cost[n] * c // max(chunks, 1))
    bounds[chunks] = n
    return bounds


@numba.njit(inline="always", nogil=True, cache=True)
def lower_bound(sorted_values, x):
    """The first index ``i`` with ``sorted_values[i] >= x`` (``np.searchsorted(...,
    side="left")``, whose generic code takes a second to compile)."""
    return lower_bound_in(sorted_values, 0, sorted_values.size, x)


@numba.njit(inline="always", nogil=True, cache=True)
def lower_bound_in(sorted_values, start, end, x):
    """The first index in ``[start, end)`` with ``sorted_values[i] >= x`` (``end`` if none;
    the values in that range are sorted)."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(inline="always", nogil=True, cache=True)
def destination_ranges(indptr, nodes, out_indptr, i):
    """``(v, start, d, lo, k)`` of destination ``i``: its id, its in-edges
    ``[start, start + d)`` in the CSC, and its output slots ``[lo, lo + k)``."""
    v = nodes[i]
    start = np.int64(indptr[v])
    d = np.int64(indptr[v + 1]) - start
    lo = out_indptr[i]
    return v, start, d, lo, out_indptr[i + 1] - lo


# ---------------------------------------------------------------- weights of any magnitude
# Weighted kernels divide every weight by its destination's largest, so that sums and
# scores depend on ratios only: a destination's weights may be subnormal or sum past
# float64's range. Where its positive weights span more than 1 / LOG_SPACE_SPREAD, a
# score ``x / (w / w_max)`` could overflow (and ties of inf would pick by position), so
# that destination compares ``log(x) - (log(w) - log(w_max))`` instead: finite for every
# positive finite weight, the same order.
LOG_SPACE_SPREAD = 1e-300


@numba.njit(inline="always", nogil=True, cache=True)
def weight_range(probs, start, d):
    """``(positive, largest, log_space, non_finite)`` of the weights ``probs[start:start
    + d]``: the number of positive weights, the largest weight (0.0 if none), whether
    their spread calls for log-space scores, and the number of NaN or infinite weights
    (which no rule samples: the caller raises)."""
    positive = 0
    largest = 0.0
    smallest = np.inf
    non_finite = 0
    weights = probs[start : start + d]  # indexed from 0: no wraparound checks
    for j in range(d):  # branch-free
        w = np.float64(weights[j])
        non_finite += not abs(w) < np.inf
        positive += w > 0.0
        largest = max(largest, w)
        smallest = min(smallest, w if w > 0.0 else np.inf)
    return positive, largest, smallest < largest * LOG_SPACE_SPREAD, non_finite


@numba.njit(inline="always", nogil=True, cache=True)
def weighted_score(x, w, largest, log_space):
    """``x / (w / largest)`` for ``x >= 0`` and a positive weight ``w <= largest``, or
    its logarithm when ``log_space`` (:data:`LOG_SPACE_SPREAD`): ordered as ``x / w``."""
    if log_space:
        return math.log(x) - (math.log(w) - math.log(largest))
    return x / (w / largest)


# ---------------------------------------------------------------- checks of the public ops
@numba.njit(inline="always", nogil=True, cache=True)
def range_is_bad(start, end, num_edges):
    """Whether the CSC range ``[start, end)`` is not within ``[0, num_edges]`` or runs
    backwards: two unsigned comparisons (a negative bound is a huge unsigned one)."""
    return (np.uint64(start) > np.uint64(end)) | (np.uint64(end) > np.uint64(num_edges))


def check_graph_arrays(indptr, indices, where: str) -> None:
    """``indptr``/``indices`` are 1-D int32/int64 tensors with ``0 <= indptr[-1] <=
    len(indices)`` (read when ``indptr`` is in host memory): O(1). The kernels check the
    destinations' own ranges as they read them (:func:`range_is_bad`,
    :func:`check_kernel_report`): O(batch), not O(graph)."""
    for name, array in (("indptr", indptr), ("indices", indices)):
        if not isinstance(array, torch.Tensor) or array.dtype not in (torch.int32, torch.int64):
            raise TypeError(
                f"{where}: `{name}` must be an int32 or int64 tensor, got "
                f"{getattr(array, 'dtype', type(array).__name__)}"
            )
        if array.dim() != 1:
            raise ValueError(f"{where}: `{name}` must be 1-D, got shape {tuple(array.shape)}")
    if indptr.numel() == 0:
        raise ValueError(f"{where}: `indptr` must have num_nodes + 1 >= 1 entries, got none")
    if indptr.is_cuda:  # reading it would synchronise: the torch ops check the ranges they read
        return
    last = int(indptr[-1])
    if not 0 <= last <= indices.numel():
        raise ValueError(
            f"{where}: `indptr` and `indices` disagree: indptr[-1] = {last} but `indices` has "
            f"{indices.numel()} entries"
        )


def check_probs(probs, num_edges: int, where: str) -> None:
    """``probs`` is None or a ``[num_edges]`` float32/float64 tensor. Its values are
    checked by the kernels, for the in-edges of the destinations they read."""
    if probs is None:
        return
    if not isinstance(probs, torch.Tensor) or probs.dtype not in (torch.float32, torch.float64):
        raise TypeError(
            f"{where}: `probs` must be a float32 or float64 tensor, got "
            f"{getattr(probs, 'dtype', type(probs).__name__)}"
        )
    if probs.dim() != 1 or probs.numel() != num_edges:
        raise ValueError(f"{where}: `probs` must have shape [num_edges]=[{num_edges}], got {tuple(probs.shape)}")


def check_kernel_report(bad_ranges: int, non_finite: int, where: str) -> None:
    """Raise for what a kernel's first pass found: destinations whose ``indptr`` range is
    not within ``indices``, or NaN / infinite weights among their in-edges."""
    if bad_ranges:
        raise ValueError(
            f"{where}: `indptr` and `indices` disagree: {bad_ranges} destination(s) have an "
            f"in-edge range [indptr[v], indptr[v + 1]) that is decreasing or outside "
            f"[0, len(indices)]; is the graph file corrupted?"
        )
    if non_finite:
        raise ValueError(
            f"{where}: `probs` must be finite: {non_finite} in-edge weight(s) of these "
            f"destinations are NaN or infinite"
        )


@functools.lru_cache(maxsize=None)
def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        return 1 << 62


def max_output_edges(bytes_per_edge: int) -> int:
    """The most sampled edges whose output arrays (``bytes_per_edge`` each) fit in the
    machine's physical memory: a larger output can only end in an allocation failure."""
    return _physical_memory() // bytes_per_edge
