"""Small numba building blocks shared by the sampling kernels: a bounded max-heap that
keeps the ``k`` smallest ``(score, position)`` pairs, a sort for a fanout's few values,
work chunks of equal edge counts for ``prange`` loops over destinations of power-law
degrees, and the per-destination ranges of a kernel's fill pass."""

import numba
import numpy as np

__all__ = [
    "CHUNKS_PER_THREAD",
    "destination_ranges",
    "edge_balanced_chunks",
    "heapify",
    "keep_k_smallest",
    "offer",
    "sift_down",
    "sort_small",
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
def keep_k_smallest(score, pos, n, k):
    """Move the ``k`` smallest ``(score, pos)`` pairs of ``[:n]`` into ``[:k]`` (any order).

    ``pos[:n]`` must be ascending, so a later pair only replaces the heap's largest when
    its score is strictly smaller. ``O(n + k log k log(n / k))`` expected for random scores.
    """
    heapify(score, pos, k)
    for j in range(k, n):
        offer(score, pos, k, score[j], pos[j])


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
def sort_small(values, n, scratch):
    """Sort ``values[:n]`` (repeats allowed) ascending in place; by rank through
    ``scratch`` (same dtype) when ``n <= scratch.size``. A sort call costs about 400 ns
    however few the values; ranking 15 of them costs about 65 ns."""
    if n > scratch.size:
        values[:n].sort()
        return
    for i in range(n):
        t = values[i]
        rank = 0
        for j in range(n):  # equal values keep their order
            rank += (values[j] < t) | ((values[j] == t) & (j < i))
        scratch[rank] = t
    for i in range(n):
        values[i] = scratch[i]


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
        bounds[c] = np.searchsorted(cost, cost[n] * c // max(chunks, 1))
    bounds[chunks] = n
    return bounds


@numba.njit(inline="always", nogil=True, cache=True)
def destination_ranges(indptr, nodes, out_indptr, i):
    """``(v, start, d, lo, k)`` of destination ``i``: its id, its in-edges
    ``[start, start + d)`` in the CSC, and its output slots ``[lo, lo + k)``."""
    v = nodes[i]
    start = np.int64(indptr[v])
    d = np.int64(indptr[v + 1]) - start
    lo = out_indptr[i]
    return v, start, d, lo, out_indptr[i + 1] - lo
