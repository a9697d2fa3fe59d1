"""LABOR sampling of one layer (Balın & Çatalyürek, NeurIPS 2023): fused numba kernels.

Every neighbour ``t`` has ONE uniform variate ``r_t`` per layer (:class:`Variates`), shared
by all destinations that have it, so destinations that share neighbours tend to pick the
same ones: far fewer distinct vertices than neighbor sampling, at the same per-destination
variance. With ``d_s`` the in-degree of destination ``s`` and ``k`` the fanout:

* **LABOR-0** (``importance_sampling=0``): ``s`` keeps the ``min(k, d_s)`` in-edges with
  the smallest ``r_t`` (ties to the lower edge id): a uniform ``k``-subset, inclusion
  probability ``π_ts = min(1, k / d_s)``, count exactly ``min(k, d_s)`` (parallel edges from
  one source share its ``r_t``: their probabilities are only close to ``k / d_s``).
* **LABOR-k / LABOR-\\*** (``importance_sampling=k > 0`` / ``-1``): vertex probabilities
  ``π_t`` (start 1) and per-destination constants ``c_s`` solve the paper's fixed point:
  ``c_s`` meets ``Σ_t 1 / min(1, c_s π_t) = d_s² / k`` (LABOR-0's variance), then
  ``π_t ← max_s c_s π_t``; ``k`` iterations, or (``-1``) until ``Σ_t min(1, π_t)``, the
  expected number of sampled vertices, changes by less than 1e-4 relative. ``s`` keeps
  ``t`` iff ``r_t <= min(1, c_s π_t)`` (Poisson sampling): random counts of mean ``≈ k``.
  A destination with ``d_s <= k`` keeps every in-edge with ``c_s = ∞`` (DGL: a large enough
  finite ``c_s`` that does), so its sources get ``π_t = ∞`` and every destination keeps them.
* **weighted LABOR-0** (``probs`` = edge weights ``A_ts``, as GraphBolt's
  ``sample_layer_neighbor(prob_name=...)``): ``s`` keeps the ``min(k, m_s)`` of its ``m_s``
  positive-weight in-edges with the smallest ``r_t / A_ts`` (ties to the lower edge id);
  zero-weight edges never. This is priority sampling (Duffield, Lund & Thorup, 2007): with
  ``τ_s`` the ``(k + 1)``-th smallest ``r_t / A_ts``, ``t`` is kept with conditional
  probability ``min(1, A_ts τ_s)``. A bounded heap per destination, no iteration.

Edge weights (float32) are Horvitz-Thompson weights ``w_ts = 1 / (d_s π_ts)``: ``Σ_{kept t}
w_ts h_t`` is an unbiased estimate of the mean ``(1/d_s) Σ_t h_t`` (``fanout=-1``: all edges,
``1 / d_s``). Weighted: ``w_ts = A_ts / (Σ_t A_ts · min(1, A_ts τ_s))``, unbiased for
``Σ_t A_ts h_t / Σ_t A_ts`` when ``s`` has no parallel edges (they share one ``r_t``), and
``A_ts / Σ_t A_ts`` where every positive-weight edge is kept. Weights of any finite
magnitude work (:mod:`graphpipe.ops.selection`, "weights of any magnitude").
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

import numba
import numpy as np
import torch
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from graphpipe._internal.checks import check_importance_sampling
from graphpipe.ops import torch_random
from graphpipe.ops.gpu_sampling import sample_labor_torch
from graphpipe.ops.layer_sample import LayerSample
from graphpipe.ops.random import uniform, uniform_bits, uniform_open
from graphpipe.ops.selection import (
    CHUNKS_PER_THREAD,
    FANOUT_CAP,
    check_kernel_report,
    check_layer_inputs,
    destination_ranges,
    edge_balanced_chunks,
    heapify,
    kth_smallest,
    lower_bound,
    offer,
    range_is_bad,
    sort_small,
    weight_range,
    weighted_score,
)
from graphpipe.ops.unique_and_compact import unique_and_compact

__all__ = ["Variates", "sample_labor", "labor_variates", "vertex_normals"]

_MAX_FIXED_POINT_ITERATIONS = 100
_CONVERGENCE = 1e-4
_SUM_CHUNKS = 64
# Rows of per-partition maxima in the vertex-probability update: at most this many, as
# zeroing and merging them costs partitions x vertices per iteration.
_MAX_PARTITIONS = 8


class Variates(NamedTuple):
    """How a layer's per-vertex uniforms ``r_t`` are made from 64-bit keys.

    Independent (``dependent=False``): ``r_t = uniform(k0, t)``. Dependent (dependent
    minibatching): ``r_t = Φ(c0·N(k0, t) + c1·N(k1, t))``, ``N(k, t)`` a standard normal from
    the counter hash (Box-Muller), ``c0² + c1² = 1``: exactly uniform for any ``(c0, c1)``,
    moving continuously as ``(c0, c1)`` turns from ``(1, 0)`` to ``(0, 1)``.

    ``normals``: optional ``key -> [num_nodes]`` float64 ``N(key, t)`` of every vertex
    (:func:`vertex_normals`), e.g. a cache for the ``κ`` batches of a period (same keys);
    read where a layer uses a per-vertex table. The variates are the same without it.
    """

    k0: int
    k1: int = 0
    c0: float = 1.0
    c1: float = 0.0
    dependent: bool = False
    normals: Optional[Callable[[int], np.ndarray]] = None


# The helpers are called, not inlined in numba's IR (as mix64 in graphpipe.ops.random): LLVM
# inlines the small ones, and the kernels compile in a fraction of the time at the same speed.
# Two stay inlined: the candidate scan (called, LABOR-0 sampled 10% slower) and the per-edge
# weight (benchmarks/RESULTS.md, "Kernel compile time").
@numba.njit(nogil=True, cache=True)
def _normal(key, t):
    """A standard normal from (key, t): Box-Muller on two counter-based uniforms."""
    u1 = uniform_open(key, np.uint64(2) * np.uint64(t))
    u2 = uniform(key, np.uint64(2) * np.uint64(t) + np.uint64(1))
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@numba.njit(nogil=True, cache=True)
def _variate(t, k0, k1, c0, c1, dependent):
    if not dependent:
        return uniform(k0, t)
    z = c0 * _normal(k0, t) + c1 * _normal(k1, t)
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


@numba.njit(parallel=True, nogil=True, cache=True)
def vertex_normals(key, num_nodes):
    """``[num_nodes]`` float64 ``N(key, t)`` for ``t = 0 .. num_nodes - 1``."""
    out = np.empty(num_nodes, np.float64)
    for t in numba.prange(num_nodes):
        out[t] = _normal(key, t)
    return out


@intrinsic
def _float_bits(typingctx, value):
    """The bits of a float64 as an int64 (a bitcast, no conversion)."""
    signature = types.int64(types.float64)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return signature, codegen


@numba.njit(nogil=True, cache=True)
def _order_key(x):
    """An int64 ordered as the float64 ``x`` (not NaN): its bits, with the magnitude bits of
    negative values flipped (``+ 0.0`` turns -0.0 into 0.0)."""
    bits = _float_bits(x + 0.0)
    return bits ^ ((bits >> np.int64(63)) & np.int64(0x7FFFFFFFFFFFFFFF))


@numba.njit(parallel=True, nogil=True, cache=True)
def _mixed_normal_keys(normals0, normals1, c0, c1):
    """Per vertex the order key (:func:`_order_key`) of ``z_t = c0·N0[t] + c1·N1[t]``;
    ``r_t = Φ(z_t)`` has the same order."""
    out = np.empty(normals0.size, np.int64)
    for t in numba.prange(normals0.size):
        out[t] = _order_key(c0 * normals0[t] + c1 * normals1[t])
    return out


@numba.njit(nogil=True, cache=True)
def _normal_quantile(p):
    """About ``Φ⁻¹(p)``, ``0 < p < 1`` (Abramowitz & Stegun 26.2.23, error < 4.5e-4): enough
    for a candidate threshold, which only sets how many candidates are kept."""
    q = p if p < 0.5 else 1.0 - p
    t = math.sqrt(-2.0 * math.log(q))
    z = t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t)
    return -z if p < 0.5 else z


@numba.njit(parallel=True, nogil=True, cache=True)
def labor_variates(ids, k0, k1, c0, c1, dependent):
    """``[n]`` float64 ``r_t`` of the vertices ``ids`` (see :class:`Variates`)."""
    out = np.empty(ids.size, np.float64)
    for i in numba.prange(ids.size):
        out[i] = _variate(ids[i], k0, k1, c0, c1, dependent)
    return out


# ---------------------------------------------------------------- LABOR-0, unweighted
# A destination keeps the k smallest r_t, compared as int64 keys of the same order (they
# vectorise where float64 variates do not). The k-th smallest of d uniforms is about k / d,
# so a scan keeps the candidates below a threshold _CANDIDATE_MARGIN standard deviations
# above it and selects among those; too few or too many candidates (under 1% of
# destinations) fall back to a max-heap over all d. The scan runs in segments of _SEGMENT
# edges (a branch-free loop that vectorises, then a compaction from L1); once the k-th
# smallest (key, position) is known, one ordered pass keeps the keys up to it: no sort.
# The kernel is compiled for the kind of variates it gets (numba compiles every branch):
#   (k0,)               independent, r_t = uniform(k0, t)
#   (k0, k1, c0, c1)    dependent, computed per scanned edge
#   table               int64 [num_nodes], the order key of z_t per vertex (r_t = Φ(z_t))
_CANDIDATE_MARGIN = 3.0
_SEGMENT = 1024
_SPARSE = 8
_ABOVE_EVERY_KEY = np.int64(np.iinfo(np.int64).max)  # keys are order keys of finite floats or < 2**53


def _variate_keys(indices, start, count, out, variates):
    """``out[:count]`` = int64 keys ordered as ``r_t`` of the sources ``indices[start:start +
    count]``; numba only, its code chosen by the kind of ``variates`` (above)."""
    raise NotImplementedError("_variate_keys is for numba kernels")


@overload(_variate_keys)
def _variate_keys_of_kind(indices, start, count, out, variates):
    # Each reads a slice from 0: numba drops the wraparound check that keeps
    # ``indices[start + j]`` from vectorising (2-4x slower).
    if isinstance(variates, types.Array):

        def table_keys(indices, start, count, out, variates):
            # A source id past the table (a corrupted ``indices``) reads the last entry; the
            # id itself is rejected downstream (unique_and_compact). No branch.
            sources = indices[start : start + count]
            last = np.uint64(variates.size - 1)
            for j in range(count):
                out[j] = variates[min(np.uint64(sources[j]), last)]

        return table_keys
    if isinstance(variates, types.BaseTuple) and len(variates) == 4:

        def dependent_keys(indices, start, count, out, variates):
            sources = indices[start : start + count]
            k0, k1, c0, c1 = variates
            for j in range(count):
                out[j] = _order_key(_variate(sources[j], k0, k1, c0, c1, True))

        return dependent_keys
    if isinstance(variates, types.BaseTuple) and len(variates) == 1:

        def independent_keys(indices, start, count, out, variates):
            sources = indices[start : start + count]
            k0 = variates[0]
            for j in range(count):  # the hot case, free of branches so that it vectorises
                out[j] = uniform_bits(k0, sources[j])

        return independent_keys
    return None


def _threshold_key(p, variates):
    """The key of ``r_t = p`` (``0 < p < 1``) in :func:`_variate_keys`' order (a table's up to
    the approximate quantile: it only bounds the candidates); numba only."""
    raise NotImplementedError("_threshold_key is for numba kernels")


@overload(_threshold_key)
def _threshold_key_of_kind(p, variates):
    if isinstance(variates, types.Array):
        return lambda p, variates: _order_key(_normal_quantile(p))
    if isinstance(variates, types.BaseTuple) and len(variates) == 4:
        return lambda p, variates: _order_key(p)
    if isinstance(variates, types.BaseTuple) and len(variates) == 1:
        return lambda p, variates: np.int64(math.ceil(p * 9007199254740992.0))  # r_t = bits / 2**53 < p
    return None


@numba.njit(nogil=True, cache=True)
def _is_kept(key, position, tau_key, tau_position):
    """Whether ``(key, position)`` is at most ``(tau_key, tau_position)``, the k-th smallest."""
    return (key < tau_key) | ((key == tau_key) & (position <= tau_position))


@numba.njit(inline="always", nogil=True, cache=True)
def _smallest_candidates(indices, start, d, k, score, pos, heap_score, heap_pos, keys, variates):
    """The candidate scan: ``pos[:k]`` = the positions of the ``k < d`` smallest ``(r_t,
    position)`` of the in-edges ``indices[start:start + d]``, ascending, and True; False
    with fewer than ``k`` candidates or more than ``score`` holds (then
    :func:`_smallest_by_heap`). int64 scratch: ``score``/``pos`` (``> k`` slots),
    ``heap_score``/``heap_pos`` (``k``), ``keys`` (``_SEGMENT``)."""
    cap = score.size - _SEGMENT
    expected = k + _CANDIDATE_MARGIN * math.sqrt(k) + _CANDIDATE_MARGIN
    if expected * 2.0 > cap:
        return False
    if expected < d:
        threshold = _threshold_key(expected / d, variates)  # r_t below expected / d
    else:  # few more in-edges than k: every one is a candidate
        threshold = _ABOVE_EVERY_KEY
    sparse = d > _SPARSE * expected
    n = 0
    for segment in range(0, d, _SEGMENT):
        count = min(_SEGMENT, d - segment)
        _variate_keys(indices, start + segment, count, keys, variates)
        if sparse:  # a candidate every _SPARSE edges or rarer: the branch predicts well
            for j in range(count):
                if keys[j] < threshold:
                    score[n] = keys[j]
                    pos[n] = segment + j
                    n += 1
        else:  # branch-free: every edge is written, candidates advance n
            for j in range(count):
                key = keys[j]
                score[n] = key
                pos[n] = segment + j
                n += key < threshold
        if n > cap:
            return False
    if n < k:
        return False
    tau_key, tau_position = kth_smallest(score, pos, n, k, heap_score, heap_pos)
    m = 0
    for j in range(n):  # the candidates up to τ, in order: a branch-free compaction
        kept = _is_kept(score[j], pos[j], tau_key, tau_position)
        pos[m] = pos[j]
        m += kept
    return True


@numba.njit(nogil=True, cache=True)
def _smallest_by_heap(indices, start, d, k, pos, heap_score, heap_pos, keys, variates):
    """:func:`_smallest_candidates`' ``pos[:k]`` from all ``d`` in-edges: a max-heap of the
    ``k`` smallest gives the largest kept pair, a second pass keeps the keys up to it, in
    order. Rare, so out of line: the kernel stays small to compile."""
    for segment in range(0, d, _SEGMENT):
        count = min(_SEGMENT, d - segment)
        _variate_keys(indices, start + segment, count, keys, variates)
        for j in range(count):
            position = segment + j
            if position >= k:
                offer(heap_score, heap_pos, k, keys[j], position)
                continue
            heap_score[position] = keys[j]
            heap_pos[position] = position
            if position == k - 1:
                heapify(heap_score, heap_pos, k)
    tau_key, tau_position = heap_score[0], heap_pos[0]
    m = 0
    for segment in range(0, d, _SEGMENT):
        count = min(_SEGMENT, d - segment)
        if d > _SEGMENT:  # ``keys`` holds the last segment only
            _variate_keys(indices, start + segment, count, keys, variates)
        for j in range(count):
            kept = _is_kept(keys[j], segment + j, tau_key, tau_position)
            pos[m] = segment + j
            m += kept


@numba.njit(parallel=True, nogil=True, cache=True)
def _labor0(indptr, indices, nodes, fanout, variates, num_chunks):
    """LABOR-0 of ``nodes``: ``(indptr [n + 1], sources, edge ids, float32 weights, bad
    ranges)``, nothing sampled if a range is bad. ``variates``: one of the kinds above;
    ``num_chunks``: edge-balanced chunks for the ``prange``."""
    n = nodes.size
    num_edges = indices.size
    out_indptr = np.zeros(n + 1, np.int64)
    selected = np.zeros(n, np.int64)  # k of the destinations that select (k < d)
    bad = 0
    for i in numba.prange(n):
        v = nodes[i]
        start, end = np.int64(indptr[v]), np.int64(indptr[v + 1])
        bad += range_is_bad(start, end, num_edges)
        d = end - start
        k = d if fanout == -1 or fanout >= d else fanout
        out_indptr[i + 1] = k
        selected[i] = k if k < d else 0
    if bad:
        return out_indptr, np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32), bad
    largest = 0
    for i in range(n):
        out_indptr[i + 1] += out_indptr[i]
        largest = max(largest, selected[i])
    total = out_indptr[n]
    out_src = np.empty(total, np.int64)
    out_eids = np.empty(total, np.int64)
    out_w = np.empty(total, np.float32)
    chunks = edge_balanced_chunks(indptr, nodes, num_chunks)
    # Candidate buffer: > the largest k that selects, not the fanout (which may be huge).
    scratch = 4 * (largest + 16) + _SEGMENT
    for c in numba.prange(chunks.size - 1):
        score = np.empty(scratch, np.int64)
        pos = np.empty(scratch, np.int64)
        heap_score = np.empty(largest + 1, np.int64)
        heap_pos = np.empty(largest + 1, np.int64)
        keys = np.empty(_SEGMENT, np.int64)
        for i in range(chunks[c], chunks[c + 1]):
            v, start, d, lo, k = destination_ranges(indptr, nodes, out_indptr, i)
            if k == 0:
                continue
            if k == d:
                w = np.float32(1.0 / d)
                for j in range(d):
                    out_eids[lo + j] = start + j
                    out_src[lo + j] = indices[start + j]
                    out_w[lo + j] = w
                continue
            if not _smallest_candidates(indices, start, d, k, score, pos, heap_score, heap_pos, keys, variates):
                _smallest_by_heap(indices, start, d, k, pos, heap_score, heap_pos, keys, variates)
            w = np.float32(1.0 / k)
            for j in range(k):
                e = start + pos[j]
                out_eids[lo + j] = e
                out_src[lo + j] = indices[e]
                out_w[lo + j] = w
    return out_indptr, out_src, out_eids, out_w, 0


# ---------------------------------------------------------------- Poisson sampling
@numba.njit(parallel=True, nogil=True, cache=True)
def _poisson(indptr, indices, nodes, edge_prob, edge_offsets, variates, local, denom):
    """Keep in-edge ``j`` of destination ``i`` iff ``r_t = variates[local[o + j]] <= p =
    edge_prob[o + j]`` (``o = edge_offsets[i]``), with weight ``1 / (denom[i] * p)``."""
    n = nodes.size
    out_indptr = np.zeros(n + 1, np.int64)
    for i in numba.prange(n):
        o = edge_offsets[i]
        c = 0
        for j in range(edge_offsets[i + 1] - o):
            p = edge_prob[o + j]
            if p > 0.0 and variates[local[o + j]] <= p:
                c += 1
        out_indptr[i + 1] = c
    for i in range(n):
        out_indptr[i + 1] += out_indptr[i]
    total = out_indptr[n]
    out_src = np.empty(total, np.int64)
    out_eids = np.empty(total, np.int64)
    out_w = np.empty(total, np.float32)
    for i in numba.prange(n):
        start = np.int64(indptr[nodes[i]])
        o = edge_offsets[i]
        m = out_indptr[i]
        for j in range(edge_offsets[i + 1] - o):
            p = edge_prob[o + j]
            if p > 0.0 and variates[local[o + j]] <= p:
                out_eids[m] = start + j
                out_src[m] = indices[start + j]
                out_w[m] = np.float32(1.0 / (denom[i] * p))
                m += 1
    return out_indptr, out_src, out_eids, out_w


@numba.njit(parallel=True, nogil=True, cache=True)
def _gather_neighbourhoods(indptr, indices, nodes):
    """Offsets ``[n + 1]``, the concatenated in-neighbour ids ``[Σ d]`` of ``nodes``, and the
    number of bad ranges (then no ids)."""
    n = nodes.size
    offsets = np.zeros(n + 1, np.int64)
    bad = 0
    for i in range(n):
        v = nodes[i]
        start, end = np.int64(indptr[v]), np.int64(indptr[v + 1])
        if range_is_bad(start, end, indices.size):
            bad += 1
        offsets[i + 1] = offsets[i] + (end - start)
    if bad:
        return offsets, np.empty(0, np.int64), bad
    ids = np.empty(offsets[n], np.int64)
    for i in numba.prange(n):
        start = np.int64(indptr[nodes[i]])
        o = offsets[i]
        for j in range(offsets[i + 1] - o):
            ids[o + j] = indices[start + j]
    return offsets, ids, 0


# ---------------------------------------------------------------- weighted LABOR-0
_SMALL_SORT = 64  # fanouts up to this sort their kept positions by rank (sort_small)


@numba.njit(inline="always", nogil=True, cache=True)
def _priority_weight(w, largest, tau, total, log_space):
    """HT weight ``a / (Σa · min(1, a τ))`` of a kept edge, ``a = w / largest``, ``total =
    Σa``; ``tau`` is ``τ`` (``log τ`` when ``log_space``) in :func:`weighted_score`'s units."""
    if log_space:
        log_a = math.log(w) - math.log(largest)
        if log_a + tau >= 0.0:
            return math.exp(log_a) / total
        return math.exp(-tau) / total
    a = w / largest
    if a * tau >= 1.0:
        return a / total
    return 1.0 / (total * tau)


@numba.njit(parallel=True, nogil=True, cache=True)
def _weighted_labor0(indptr, indices, nodes, probs, offsets, local, variates, fanout, num_chunks):
    """Weighted LABOR-0 of ``nodes``: ``(indptr [n + 1], sources, edge ids, float32 weights,
    non-finite weights)``, nothing sampled if the last is not 0. ``r_t`` of in-edge ``j``
    of destination ``i`` is ``variates[local[offsets[i] + j]]``."""
    n = nodes.size
    out_indptr = np.zeros(n + 1, np.int64)
    positives = np.empty(n, np.int64)
    largest = np.empty(n, np.float64)
    log_space = np.empty(n, np.bool_)
    non_finite = 0
    for i in numba.prange(n):
        start = np.int64(indptr[nodes[i]])
        positive, largest[i], log_space[i], this_non_finite = weight_range(probs, start, offsets[i + 1] - offsets[i])
        non_finite += this_non_finite
        positives[i] = positive
        out_indptr[i + 1] = positive if fanout == -1 or fanout >= positive else fanout
    if non_finite:
        return out_indptr, np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32), non_finite
    heap = 1  # slots of the heap of the k + 1 smallest scores: > the largest k that selects
    for i in range(n):
        if out_indptr[i + 1] < positives[i]:
            heap = max(heap, out_indptr[i + 1] + 1)
        out_indptr[i + 1] += out_indptr[i]
    total = out_indptr[n]
    out_src = np.empty(total, np.int64)
    out_eids = np.empty(total, np.int64)
    out_w = np.empty(total, np.float32)
    chunks = edge_balanced_chunks(indptr, nodes, num_chunks)
    for c in numba.prange(chunks.size - 1):
        score = np.empty(heap, np.float64)
        pos = np.empty(heap, np.int64)
        ranked = np.empty(_SMALL_SORT, np.int64)
        for i in range(chunks[c], chunks[c + 1]):
            v, start, d, lo, k = destination_ranges(indptr, nodes, out_indptr, i)
            if k == 0:
                continue
            top, logs = largest[i], log_space[i]
            weights = probs[start : start + d]
            sum_a = 0.0
            if k == positives[i]:  # every positive-weight edge, weight a / Σa
                for j in range(d):
                    w = np.float64(weights[j])
                    sum_a += w / top if w > 0.0 else 0.0
                m = lo
                for j in range(d):
                    w = np.float64(weights[j])
                    if w > 0.0:
                        out_eids[m] = start + j
                        out_src[m] = indices[start + j]
                        out_w[m] = np.float32(w / top / sum_a)
                        m += 1
                continue
            # A max-heap of the k + 1 smallest (score, position): its root is τ, the rest
            # are kept. Positions ascend, so ties go to the lower edge id.
            sources = local[offsets[i] : offsets[i] + d]
            filled = 0
            for j in range(d):
                w = np.float64(weights[j])
                if not w > 0.0:
                    continue
                sum_a += w / top
                s = weighted_score(variates[sources[j]], w, top, logs)
                if filled <= k:
                    score[filled] = s
                    pos[filled] = j
                    filled += 1
                    if filled == k + 1:
                        heapify(score, pos, k + 1)
                else:
                    offer(score, pos, k + 1, s, j)
            tau = score[0]
            kept = pos[1 : k + 1]
            sort_small(kept, k, ranked)
            for j in range(k):
                e = start + kept[j]
                out_eids[lo + j] = e
                out_src[lo + j] = indices[e]
                out_w[lo + j] = np.float32(_priority_weight(np.float64(weights[kept[j]]), top, tau, sum_a, logs))
    return out_indptr, out_src, out_eids, out_w, 0


# ---------------------------------------------------------------- LABOR-k / LABOR-*
@numba.njit(parallel=True, nogil=True, cache=True)
def _solve_constants(offsets, local, inv_pi, targets, c, chunks):
    """``c[s]`` solving ``Σ_t 1 / min(1, c_s π_t) = targets[s]`` (``inf``: keep all), from
    float32 ``inv_pi = 1 / π``, over edge-balanced ``chunks`` of the destinations."""
    for chunk in numba.prange(chunks.size - 1):
        lo, hi = chunks[chunk], chunks[chunk + 1]
        longest = 0
        for i in range(lo, hi):
            longest = max(longest, offsets[i + 1] - offsets[i])
        inverses = np.empty(longest, np.float64)
        for i in range(lo, hi):
            # One gather of the neighbours' 1 / π; the passes below then stream it.
            neighbours = local[offsets[i] : offsets[i + 1]]
            for j in range(neighbours.size):
                inverses[j] = inv_pi[np.uint64(neighbours[j])]
            c[i] = _solve_constant(inverses[: neighbours.size], targets[i])


@numba.njit(nogil=True, cache=True)
def _solve_constant(inverses, target):
    """``c_s`` of one destination from ``inverses``, the ``1 / π_t`` of its in-neighbours."""
    d = inverses.size
    if not target > d:  # fanout >= degree (or -1): every edge, c = inf
        return np.inf
    # f(c) = #capped + (1/c) Σ_uncapped 1/π is decreasing in c; iterate the capped set.
    capped = 0
    inv_rest = 0.0
    for j in range(d):
        inv_rest += inverses[j]
    if inv_rest == 0.0:  # every neighbour is taken anyway (π = inf): keep all
        return np.inf
    cs = inv_rest / target
    while True:
        new_capped = 0
        new_inv_rest = 0.0
        for j in range(d):  # branch-free, so that it vectorises
            inverse = inverses[j]
            capped_here = inverse <= cs  # c_s π_t >= 1
            new_capped += capped_here
            new_inv_rest += 0.0 if capped_here else inverse
        if new_capped == capped:
            return cs
        capped, inv_rest = new_capped, new_inv_rest
        cs = inv_rest / (target - capped)


@numba.njit(parallel=True, nogil=True, cache=True)
def _update_vertex_probabilities(offsets, local, pi, c, partial):
    """``π_t ← π_t · max_s c_s`` over the destinations ``s`` of ``t``: the new ``π`` (float64),
    ``1 / π`` (float32) and ``Σ_t min(1, π_t)``. Row ``p`` of the float32 scratch
    ``partial [partitions, num_vertices]`` takes the maxima of one slice of the
    destinations, a second pass combines the rows; the sum runs over ``_SUM_CHUNKS`` fixed
    chunks, so it (and the stopping test) is the same for any thread count."""
    n = offsets.size - 1
    partitions = partial.shape[0]
    for p in numba.prange(partitions):
        row = partial[p]
        row[:] = 0.0
        lo = lower_bound(offsets, offsets[n] * p // partitions)
        hi = n if p == partitions - 1 else lower_bound(offsets, offsets[n] * (p + 1) // partitions)
        for i in range(lo, hi):
            cs = c[i]
            neighbours = local[offsets[i] : offsets[i + 1]]
            for j in range(neighbours.size):
                t = np.uint64(neighbours[j])
                if cs > row[t]:
                    row[t] = cs
    new_pi = np.empty(pi.size, np.float64)
    inv_pi = np.empty(pi.size, np.float32)
    sums = np.empty(_SUM_CHUNKS, np.float64)
    for chunk in numba.prange(_SUM_CHUNKS):
        chunk_sum = 0.0
        for t in range(chunk * pi.size // _SUM_CHUNKS, (chunk + 1) * pi.size // _SUM_CHUNKS):
            largest = partial[0, t]
            for p in range(1, partitions):
                largest = max(largest, partial[p, t])
            new_pi[t] = largest * pi[t]  # largest = float32(max_s c_s): rounding is monotone
            inv_pi[t] = 1.0 / new_pi[t]
            chunk_sum += min(1.0, new_pi[t])
        sums[chunk] = chunk_sum
    expected = 0.0
    for chunk in range(_SUM_CHUNKS):
        expected += sums[chunk]
    return new_pi, inv_pi, expected


@numba.njit(parallel=True, nogil=True, cache=True)
def _importance_edge_probabilities(offsets, local, pi, c):
    total = offsets[offsets.size - 1]
    edge_prob = np.empty(total, np.float64)
    for i in numba.prange(offsets.size - 1):
        for e in range(offsets[i], offsets[i + 1]):
            edge_prob[e] = min(1.0, c[i] * pi[local[e]])
    return edge_prob


def _importance_sampling(offsets, local, num_vertices, degrees, fanout, iterations):
    """Edge probabilities ``min(1, c_s π_t)`` of LABOR-k (``iterations = k``) / LABOR-*."""
    targets = np.where(
        (fanout == -1) | (degrees <= fanout), 0.0, degrees.astype(np.float64) ** 2 / max(fanout, 1)
    )
    threads = numba.get_num_threads()
    chunks = edge_balanced_chunks(offsets, np.arange(degrees.size), CHUNKS_PER_THREAD * threads)
    # The passes gather 1 / π and scatter maxima at random vertices: float32 keeps those in
    # the last-level cache (25% faster on the benchmark graph); π itself stays float64.
    partial = np.empty((min(threads, _MAX_PARTITIONS), num_vertices), np.float32)
    pi = np.ones(num_vertices, np.float64)
    c = np.empty(degrees.size, np.float64)
    _solve_constants(offsets, local, np.ones(num_vertices, np.float32), targets, c, chunks)  # 1 / π = 1
    expected = np.inf
    limit = _MAX_FIXED_POINT_ITERATIONS if iterations == -1 else iterations
    for _ in range(limit):
        # c_s = inf (destinations that keep every in-edge) makes π_t = inf: always sampled.
        pi, inv_pi, new_expected = _update_vertex_probabilities(offsets, local, pi, c, partial)
        _solve_constants(offsets, local, inv_pi, targets, c, chunks)
        converged = abs(expected - new_expected) <= _CONVERGENCE * new_expected
        expected = new_expected
        if iterations == -1 and converged:
            break
    return _importance_edge_probabilities(offsets, local, pi, c)


# ---------------------------------------------------------------- entry point
def _labor0_variates(indptr, nodes, fanout, variates: Variates, num_nodes: int):
    """:func:`_labor0`'s variates: ``(k0,)`` when independent; when dependent, a table of the
    order keys of ``z_t`` (``r_t = Φ(z_t)``, same order) of every vertex if the layer scans
    more edges than the graph has vertices (a dependent variate costs ~50 hashes), else
    ``(k0, k1, c0, c1)``, computed per edge."""
    k0 = np.uint64(variates.k0)
    if not variates.dependent:
        return (k0,)
    if fanout == -1 or _scanned_edges(indptr, nodes, fanout) < num_nodes:
        return (k0, np.uint64(variates.k1), float(variates.c0), float(variates.c1))
    normals = variates.normals or (lambda key: vertex_normals(np.uint64(key), num_nodes))
    normals0, normals1 = normals(variates.k0), normals(variates.k1)
    for table in (normals0, normals1):
        if table.shape != (num_nodes,) or table.dtype != np.float64:
            raise ValueError(
                f"sample_labor: Variates.normals must give float64 arrays of shape ({num_nodes},), "
                f"got {table.dtype} of shape {table.shape}"
            )
    return _mixed_normal_keys(normals0, normals1, variates.c0, variates.c1)


@numba.njit(nogil=True, cache=True)
def _scanned_edges(indptr, nodes, fanout):
    """``Σ`` in-degree of the ``nodes`` with more than ``fanout`` in-edges (those LABOR-0 draws for)."""
    total = 0
    for v in nodes:
        d = indptr[v + 1] - indptr[v]
        if d > fanout:
            total += d
    return total


def sample_labor(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    fanout: int,
    *,
    variates: Variates,
    importance_sampling: int = 0,
    probs: Optional[torch.Tensor] = None,
    num_nodes: Optional[int] = None,
) -> LayerSample:
    """LABOR-sample the in-edges of ``nodes`` for one layer (rules in the module doc).

    Args:
        indptr, indices: the graph's CSC arrays (int32/int64). Checked: their types,
            ``indptr[-1] <= len(indices)`` and the ranges of ``nodes``; not (``O(graph)``):
            that ids in ``indices`` are nodes (unique_and_compact checks those sampled).
        nodes: ``[num_dst]`` int64 destination ids.
        fanout: ``>= 1``, 0 (no in-edge) or -1 (all in-edges).
        variates: the keys of the layer's per-vertex uniforms.
        importance_sampling: 0 (LABOR-0), ``k > 0`` (LABOR-k) or -1 (LABOR-*).
        probs: optional ``[num_edges]`` float32/float64 edge weights (weighted LABOR-0).
        num_nodes: ids in ``indices`` are below it; default ``len(indptr) - 1`` (given when
            ``indptr`` is a table of segments, :mod:`graphpipe.ops.typed_sampling`).

    Returns:
        :class:`LayerSample` with int64 ``indptr``, ``indices`` (global), ``edge_ids``
        (ascending within a destination) and float32 HT ``edge_weights``.

    Raises:
        ValueError: ``indptr`` ranges of ``nodes`` outside ``indices``, or NaN or
            infinite ``probs`` of their in-edges.
    """
    check_importance_sampling(importance_sampling, "sample_labor")
    if probs is not None and importance_sampling != 0:
        raise NotImplementedError("sample_labor: weighted LABOR supports importance_sampling=0 only")
    fanout, nodes = check_layer_inputs(indptr, indices, nodes, fanout, probs, "sample_labor")
    return sample_labor_trusted(indptr, indices, nodes, fanout, variates, importance_sampling, probs, num_nodes)


def sample_labor_trusted(
    indptr, indices, nodes, fanout: int, variates: Variates, importance_sampling: int, probs, num_nodes: Optional[int]
) -> LayerSample:
    """:func:`sample_labor` of inputs the library checked where they entered (see
    :func:`~graphpipe.ops.neighbor_sampling.sample_neighbors_trusted`): no per-layer check.
    ``nodes``: ``[num_dst]`` int64."""
    device = nodes.device if nodes.is_cuda else indptr.device
    num_nodes = indptr.numel() - 1 if num_nodes is None else num_nodes
    if fanout == 0:  # LABOR-k would still solve probabilities for it
        return LayerSample.empty(nodes.numel(), device, weights=True)
    if device.type == "cuda":
        if probs is not None or importance_sampling != 0:
            raise NotImplementedError(
                "sample_labor: on CUDA only unweighted LABOR-0 is implemented; move the ids to the CPU "
                "for weighted LABOR or importance_sampling != 0"
            )
        return sample_labor_torch(
            indptr, indices, nodes.to(device), fanout, variates=lambda t: _labor_variates_torch(t, variates)
        )
    return _sample_labor_cpu(indptr, indices, nodes, fanout, variates, importance_sampling, probs, num_nodes)


def _sample_labor_cpu(indptr, indices, nodes, fanout, variates, importance_sampling, probs, num_nodes) -> LayerSample:
    """LABOR-0 in one pass; weighted LABOR-0 and LABOR-k over the gathered neighbourhoods."""
    indptr_np, indices_np, nodes_np = (t.contiguous().numpy() for t in (indptr, indices, nodes))
    fanout = min(fanout, FANOUT_CAP)
    chunks = CHUNKS_PER_THREAD * numba.get_num_threads()
    if probs is None and importance_sampling == 0:
        kernel_variates = _labor0_variates(indptr_np, nodes_np, fanout, variates, num_nodes)
        *out, bad_ranges = _labor0(indptr_np, indices_np, nodes_np, fanout, kernel_variates, chunks)
        check_kernel_report(bad_ranges, 0, "sample_labor")
        return LayerSample(*(torch.from_numpy(a) for a in out))
    offsets, neighbour_ids, bad_ranges = _gather_neighbourhoods(indptr_np, indices_np, nodes_np)
    check_kernel_report(bad_ranges, 0, "sample_labor")
    no_dst = torch.empty(0, dtype=torch.int64)
    vertices, local = (t.numpy() for t in unique_and_compact(no_dst, torch.from_numpy(neighbour_ids), num_nodes))
    keys = np.uint64(variates.k0), np.uint64(variates.k1)
    r = labor_variates(vertices, *keys, float(variates.c0), float(variates.c1), bool(variates.dependent))
    if probs is not None:
        *out, non_finite = _weighted_labor0(
            indptr_np, indices_np, nodes_np, probs.contiguous().numpy(), offsets, local, r, fanout, chunks
        )
        check_kernel_report(0, non_finite, "sample_labor")
    else:
        degrees = np.diff(offsets)
        edge_prob = _importance_sampling(offsets, local, vertices.size, degrees, fanout, importance_sampling)
        out = _poisson(indptr_np, indices_np, nodes_np, edge_prob, offsets, r, local, degrees.astype(np.float64))
    return LayerSample(*(torch.from_numpy(a) for a in out))


def _labor_variates_torch(ids: torch.Tensor, variates: Variates) -> torch.Tensor:
    """:func:`labor_variates` with torch ops (any device); bit-identical when independent."""
    if not variates.dependent:
        return torch_random.uniform(variates.k0, ids)

    def normal(key):
        u1 = torch_random.uniform_open(key, 2 * ids)
        u2 = torch_random.uniform(key, 2 * ids + 1)
        return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)

    z = variates.c0 * normal(variates.k0) + variates.c1 * normal(variates.k1)
    return 0.5 * torch.erfc(-z / math.sqrt(2.0))
