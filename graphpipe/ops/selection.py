"""numba building blocks of the sampling kernels (a bounded max-heap of the ``k`` smallest
``(score, position)`` pairs, sorts for a fanout's few values, edge-balanced chunks, scores
for weights of any magnitude) and the argument checks the public sampling ops share.

Most helpers are called, not inlined in numba's IR: LLVM inlines the small ones, and a LABOR
kernel compiles in about two thirds of the time at the same speed (benchmarks/RESULTS.md,
"Kernel compile time"). ``weighted_score``, ``lower_bound_in`` and ``range_is_bad``, per edge
or per lookup in other kernels too, stay inlined."""

import math
import os

import numba
import numpy as np
import torch

from graphpipe._internal.checks import check_fanout, check_node_ids

__all__ = [
    "CHUNKS_PER_THREAD",
    "FANOUT_CAP",
    "LOG_SPACE_SPREAD",
    "check_kernel_report",
    "check_layer_inputs",
    "check_key",
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

# prange gives each thread one contiguous block: this many chunks per thread keep them even.
CHUNKS_PER_THREAD = 16
# A fanout above this keeps every in-edge (no destination has more), and int64 counts of
# fanouts do not overflow.
FANOUT_CAP = 1 << 61


@numba.njit(nogil=True, cache=True)
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


@numba.njit(nogil=True, cache=True)
def heapify(score, pos, k):
    """Make ``(score, pos)[:k]`` a max-heap (by score, then position)."""
    for m in range(k // 2 - 1, -1, -1):
        sift_down(score, pos, k, m)


@numba.njit(nogil=True, cache=True)
def offer(score, pos, k, value, position):
    """Put ``(value, position)`` into the max-heap ``[:k]`` of the ``k`` smallest if smaller
    than its largest; ``position`` must exceed every earlier one (a tie stays out)."""
    if value < score[0]:
        score[0] = value
        pos[0] = position
        sift_down(score, pos, k, 0)


@numba.njit(nogil=True, cache=True)
def kth_smallest(score, pos, n, k, heap_score, heap_pos):
    """The ``k``-th smallest ``(score, pos)`` pair of ``[:n]`` (``1 <= k <= n``, ``pos[:n]``
    ascending): the root of a max-heap of the ``k`` smallest built in the scratch
    ``heap_score``/``heap_pos`` (``>= k`` slots); the input keeps its order."""
    for j in range(k):
        heap_score[j] = score[j]
        heap_pos[j] = pos[j]
    heapify(heap_score, heap_pos, k)
    for j in range(k, n):
        offer(heap_score, heap_pos, k, score[j], pos[j])
    return heap_score[0], heap_pos[0]


@numba.njit(nogil=True, cache=True)
def write_ranked(values, n, out, offset):
    """``out[:n]`` = ``offset + values[:n]`` (DISTINCT) ascending, each written at its rank:
    ``n²`` branch-free comparisons, for the few values of a fanout."""
    for i in range(n):
        t = values[i]
        rank = 0
        for j in range(n):
            rank += values[j] < t
        out[rank] = offset + t


@numba.njit(nogil=True, cache=True)
def sort_by_rank(values, n, scratch):
    """Sort ``values[:n]`` (repeats allowed, ``n <= scratch.size``) in place by rank through
    ``scratch``: for 15 values 65 ns, where a sort call costs 400 ns."""
    for i in range(n):
        t = values[i]
        rank = 0
        for j in range(n):  # equal values keep their order
            rank += (values[j] < t) | ((values[j] == t) & (j < i))
        scratch[rank] = t
    for i in range(n):
        values[i] = scratch[i]


@numba.njit(nogil=True, cache=True)
def sort_small(values, n, scratch):
    """Sort ``values[:n]`` in place: :func:`sort_by_rank` up to ``scratch.size`` values, else
    numpy's sort (seconds to compile: kernels that need no more call ``sort_by_rank``)."""
    if n > scratch.size:
        values[:n].sort()
        return
    sort_by_rank(values, n, scratch)


@numba.njit(nogil=True, cache=True)
def edge_balanced_chunks(indptr, nodes, chunks):
    """``[c + 1]`` int64 bounds (``c <= chunks``) cutting ``nodes`` into contiguous chunks of
    about equal ``Σ (in-degree + 16)``. Pass ``chunks = CHUNKS_PER_THREAD *
    numba.get_num_threads()``, read outside the kernel (inside, numba cannot cache it)."""
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


@numba.njit(nogil=True, cache=True)
def lower_bound(sorted_values, x):
    """The first ``i`` with ``sorted_values[i] >= x`` (``np.searchsorted`` takes a second to compile)."""
    return lower_bound_in(sorted_values, 0, sorted_values.size, x)


@numba.njit(inline="always", nogil=True, cache=True)
def lower_bound_in(sorted_values, start, end, x):
    """The first ``i`` in ``[start, end)`` with ``sorted_values[i] >= x`` (sorted there), else ``end``."""
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) >> 1
        if sorted_values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(nogil=True, cache=True)
def destination_ranges(indptr, nodes, out_indptr, i):
    """``(v, start, d, lo, k)`` of destination ``i``: its id, its in-edges
    ``[start, start + d)`` in the CSC, and its output slots ``[lo, lo + k)``."""
    v = nodes[i]
    start = np.int64(indptr[v])
    d = np.int64(indptr[v + 1]) - start
    lo = out_indptr[i]
    return v, start, d, lo, out_indptr[i + 1] - lo


# ---------------------------------------------------------------- weights of any magnitude
# Weighted kernels divide each weight by its destination's largest: sums and scores depend
# on ratios only (subnormal weights, sums past float64's range). Where positive weights
# span more than 1 / LOG_SPACE_SPREAD, ``x / (w / w_max)`` could overflow, so that
# destination compares ``log(x) - (log(w) - log(w_max))``: finite, the same order.
LOG_SPACE_SPREAD = 1e-300


@numba.njit(nogil=True, cache=True)
def weight_range(probs, start, d):
    """``(positive, largest, log_space, non_finite)`` of ``probs[start:start + d]``: the count
    of positive weights, the largest (0.0 if none), whether scores need log space, and the
    count of NaN or infinite weights (the caller raises)."""
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
    """Whether the CSC range ``[start, end)`` runs backwards or leaves ``[0, num_edges]``."""
    return (np.uint64(start) > np.uint64(end)) | (np.uint64(end) > np.uint64(num_edges))


def check_layer_inputs(indptr, indices, nodes, fanout, probs, where: str):
    """The user inputs of a one-layer sampling op: ``(fanout, nodes)``, ``fanout`` as an
    int, ``nodes`` as int64 ids of the graph. ``indptr``/``indices`` are 1-D int32/int64
    tensors, ``0 <= indptr[-1] <= len(indices)`` (host ``indptr`` only): O(1), the kernels
    check the ranges they read (O(batch)); ``probs`` is None or a ``[num_edges]`` float32/float64 tensor (the
    kernels check the values they read)."""
    fanout = check_fanout(fanout, where)
    for name, array in (("indptr", indptr), ("indices", indices)):
        _check_dtype(array, name, (torch.int32, torch.int64), "an int32 or int64", where)
        if array.dim() != 1:
            raise ValueError(f"{where}: `{name}` must be 1-D, got shape {tuple(array.shape)}")
    if indptr.numel() == 0:
        raise ValueError(f"{where}: `indptr` must have num_nodes + 1 >= 1 entries, got none")
    # A CUDA indptr is not read (a synchronisation): the torch ops check the ranges they read.
    if not indptr.is_cuda and not 0 <= int(indptr[-1]) <= indices.numel():
        raise ValueError(
            f"{where}: `indptr` and `indices` disagree: indptr[-1] = {int(indptr[-1])} but `indices` has "
            f"{indices.numel()} entries"
        )
    if probs is not None:
        _check_dtype(probs, "probs", (torch.float32, torch.float64), "a float32 or float64", where)
        if probs.dim() != 1 or probs.numel() != indices.numel():
            raise ValueError(
                f"{where}: `probs` must have shape [num_edges]=[{indices.numel()}], got {tuple(probs.shape)}"
            )
    return fanout, check_node_ids(nodes, indptr.numel() - 1, "nodes", where)


def _check_dtype(value, name: str, dtypes, what: str, where: str) -> None:
    if not isinstance(value, torch.Tensor) or value.dtype not in dtypes:
        raise TypeError(f"{where}: `{name}` must be {what} tensor, got {getattr(value, 'dtype', type(value).__name__)}")


def check_key(key, where: str) -> int:
    """``key`` as an int in ``[0, 2**64)`` (a layer's or batch's key), else a ValueError."""
    if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or not 0 <= key < 2**64:
        raise ValueError(f"{where}: `key` must be an int in [0, 2**64), got {key!r}")
    return int(key)


def check_kernel_report(bad_ranges: int, non_finite: int, where: str) -> None:
    """Raise for a kernel's count of bad ``indptr`` ranges or of NaN / infinite weights."""
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


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        return 1 << 62


def max_output_edges(bytes_per_edge: int) -> int:
    """The most sampled edges whose outputs (``bytes_per_edge`` each) fit in physical memory."""
    return _physical_memory() // bytes_per_edge
