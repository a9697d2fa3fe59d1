"""LABOR sampling of one layer (Balın & Çatalyürek, NeurIPS 2023): fused numba kernels.

Every neighbour ``t`` has ONE uniform variate ``r_t`` for the whole layer, shared by all
destinations that have ``t`` as an in-neighbour, so destinations that share neighbours
tend to pick the same ones and far fewer distinct vertices are sampled than with
neighbor sampling, at the same per-destination variance.

Modes (``d_s`` = in-degree of destination ``s``, ``k`` = fanout, HT = Horvitz-Thompson):

* **LABOR-0** (``importance_sampling=0``, unweighted): ``π_ts = min(1, k / d_s)``;
  ``s`` keeps its ``min(k, d_s)`` in-edges with the smallest ``r_t / π_ts`` (sequential
  Poisson sampling; ties to the lower edge id). Because ``π_ts`` is the same for every
  ``t`` of ``s``, this keeps the ``k`` smallest ``r_t``: a uniform ``k``-subset, so the
  inclusion probability is exactly ``k / d_s`` and the count exactly ``min(k, d_s)``.
* **LABOR-k / LABOR-\\*** (``importance_sampling=k > 0`` / ``-1``, unweighted): vertex
  probabilities ``π_t`` (start 1) and per-destination constants ``c_s`` solve the
  paper's fixed point: ``c_s`` meets ``Σ_t 1 / min(1, c_s π_t) = d_s² / k`` (the
  variance of LABOR-0 / neighbor sampling), then ``π_t ← max_s c_s π_t``; ``k``
  iterations, or (``-1``) until ``Σ_t min(1, π_t)``, the expected number of sampled
  vertices, changes by less than 1e-4 relative. ``s`` keeps ``t`` iff
  ``r_t <= min(1, c_s π_t)`` (Poisson sampling): exact inclusion probabilities, random
  counts with mean ``≈ k``.
* **weighted LABOR-0** (``probs`` = edge weights ``A_ts``): ``π_ts = min(1, c_s A_ts)``
  with ``c_s`` such that ``Σ_t π_ts = min(k, #positive-weight in-edges)``; ``s`` keeps
  ``t`` iff ``r_t <= π_ts`` (Poisson sampling: exact inclusion probabilities ``π_ts``,
  random counts with mean ``Σ π_ts``). Zero-weight edges are never kept.

Edge weights (float32) are HT weights: ``w_ts = 1 / (d_s π_ts)`` (weighted:
``w_ts = A_ts / (Σ_t A_ts · π_ts)``), so ``Σ_{kept t} w_ts h_t`` is an unbiased estimate
of the neighbourhood mean ``(1/d_s) Σ_t h_t`` (weighted: ``Σ_t A_ts h_t / Σ_t A_ts``).
``fanout=-1`` keeps every edge with weight ``1 / d_s`` (weighted: ``A_ts / Σ A``).

Variates: :class:`Variates` says how ``r_t`` is made from 64-bit keys — independent
(``uniform(key, t)``) or, for dependent minibatching, ``Φ(c0·N(k0, t) + c1·N(k1, t))``
with ``c0² + c1² = 1``: uniform in every batch, drifting smoothly between batches.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

import numba
import numpy as np
import torch
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from ..validation import check_fanout, check_importance_sampling, check_node_ids
from . import torch_random
from .gpu_sampling import sample_labor_torch
from .layer_sample import LayerSample
from .random import uniform, uniform_bits, uniform_open
from .selection import (
    CHUNKS_PER_THREAD,
    destination_ranges,
    edge_balanced_chunks,
    heapify,
    keep_k_smallest,
    offer,
    sort_small,
)
from .unique_and_compact import unique_and_compact

__all__ = ["Variates", "sample_labor", "labor_variates", "vertex_normals"]

_MAX_FIXED_POINT_ITERATIONS = 100
_CONVERGENCE = 1e-4
_SUM_CHUNKS = 64
# Rows of per-partition maxima in the vertex-probability update: at most this many, as
# zeroing and merging them costs partitions x vertices per iteration.
_MAX_PARTITIONS = 8


class Variates(NamedTuple):
    """How a layer's per-vertex uniforms ``r_t`` are made.

    Independent (``dependent=False``): ``r_t = uniform(k0, t)``. Dependent:
    ``r_t = Φ(c0·N(k0, t) + c1·N(k1, t))`` where ``N(k, t)`` is a standard normal from the
    counter hash (Box-Muller) and ``c0² + c1² = 1``, so ``r_t`` is exactly uniform for any
    ``(c0, c1)`` and moves continuously as ``(c0, c1)`` turns from ``(1, 0)`` to ``(0, 1)``.

    ``normals``: optional function ``key -> [num_nodes]`` float64 ``N(key, t)`` of every
    vertex (:func:`vertex_normals`), e.g. a cache that serves the ``κ`` batches of a period
    (their keys are the same). Used where a layer takes its variates from a per-vertex
    table; the variates are the same with or without it.
    """

    k0: int
    k1: int = 0
    c0: float = 1.0
    c1: float = 0.0
    dependent: bool = False
    normals: Optional[Callable[[int], np.ndarray]] = None


@numba.njit(inline="always", nogil=True, cache=True)
def _normal(key, t):
    """A standard normal from (key, t): Box-Muller on two counter-based uniforms."""
    u1 = uniform_open(key, np.uint64(2) * np.uint64(t))
    u2 = uniform(key, np.uint64(2) * np.uint64(t) + np.uint64(1))
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@numba.njit(inline="always", nogil=True, cache=True)
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


@numba.njit(inline="always", nogil=True, cache=True)
def _order_key(x):
    """An int64 ordered as the float64 ``x`` (not NaN) is: its bits, the magnitude bits
    of negative values flipped (``+ 0.0`` makes -0.0 into 0.0, which it equals)."""
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


@numba.njit(inline="always", nogil=True, cache=True)
def _normal_quantile(p):
    """About ``Φ⁻¹(p)`` for ``0 < p < 1`` (Abramowitz & Stegun 26.2.23, error < 4.5e-4):
    enough for a candidate threshold, which only sets how many candidates are kept."""
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
# A destination with d in-edges keeps the k smallest r_t. The kernel compares int64 keys
# with the order of r_t (independent: uniform_bits, the variate's exact 53-bit numerator;
# dependent: _order_key of r_t or of z_t), which vectorise where float64 variates do not.
# The k-th smallest of d uniforms is about k / d, so the scan keeps only the candidates
# below a threshold with _CANDIDATE_MARGIN standard deviations of room (about 30 of them
# for k = 15) and selects among those; fewer than k candidates (under 1% of destinations)
# or more than the buffer holds falls back to a max-heap over all d. Same result either
# way: the k smallest. The scan runs in segments of _SEGMENT edges: a branch-free loop of
# keys that LLVM vectorises, then a compaction of the candidates from that L1-resident
# buffer.
_CANDIDATE_MARGIN = 3.0
_SEGMENT = 1024
_SPARSE = 8
_SMALL_SORT = 64  # fanouts up to this sort their positions by rank (sort_small)


@numba.njit(inline="always", nogil=True, cache=True)
def _fill_variate_keys(indices, start, count, out, table, k0, k1, c0, c1, dependent):
    """``out[:count]`` = int64 keys with the order of ``r_t`` of the sources
    ``indices[start:start + count]``: ``table[t]`` when the table is not empty (keys of
    ``z_t``, ``r_t = Φ(z_t)``: LABOR-0 only compares variates, and Φ keeps their order),
    else computed per edge."""
    # Index a slice from 0: numba then knows the index is not negative and drops the
    # wraparound check that keeps ``indices[start + j]`` from vectorising (2-4x slower).
    sources = indices[start : start + count]
    if table.size:
        for j in range(count):
            out[j] = table[np.uint64(sources[j])]
    elif dependent:
        for j in range(count):
            out[j] = _order_key(_variate(sources[j], k0, k1, c0, c1, True))
    else:  # the hot case, kept free of branches so that it vectorises
        for j in range(count):
            out[j] = uniform_bits(k0, sources[j])


@numba.njit(inline="always", nogil=True, cache=True)
def _threshold_key(p, table, dependent):
    """The key of ``r_t = p`` in the keys of :func:`_fill_variate_keys` (``0 < p < 1``):
    ``r_t < p`` exactly when its key is below this (a table's ``z_t`` up to the
    approximate quantile: the threshold only bounds the candidates)."""
    if table.size:
        return _order_key(_normal_quantile(p))
    if dependent:
        return _order_key(p)
    return np.int64(math.ceil(p * 9007199254740992.0))  # r_t = bits / 2**53 < p


@numba.njit(inline="always", nogil=True, cache=True)
def _smallest_variates(indices, start, d, k, score, pos, keys, ranked, table, k0, k1, c0, c1, dependent):
    """``pos[:k]`` = the positions of the ``k < d`` smallest ``(r_t, position)`` among the
    in-edges ``indices[start:start + d]``, ascending. Scratch (int64): ``score``/``pos`` of
    ``> k`` slots (their size bounds the candidates), ``keys`` of ``_SEGMENT`` slots,
    ``ranked`` for :func:`sort_small`."""
    cap = score.size - _SEGMENT
    expected = k + _CANDIDATE_MARGIN * math.sqrt(k) + _CANDIDATE_MARGIN
    if expected < d and expected * 2.0 <= cap:
        threshold = _threshold_key(expected / d, table, dependent)  # r_t below expected / d
        sparse = d > _SPARSE * expected
        n = 0
        for segment in range(0, d, _SEGMENT):
            count = min(_SEGMENT, d - segment)
            _fill_variate_keys(indices, start + segment, count, keys, table, k0, k1, c0, c1, dependent)
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
                break
        if k <= n <= cap:
            keep_k_smallest(score, pos, n, k)
            sort_small(pos, k, ranked)
            return
    # Fallback: a max-heap of the k smallest over all d, fed segment by segment.
    _fill_variate_keys(indices, start, k, score, table, k0, k1, c0, c1, dependent)
    for j in range(k):
        pos[j] = j
    heapify(score, pos, k)
    for segment in range(k, d, _SEGMENT):
        count = min(_SEGMENT, d - segment)
        _fill_variate_keys(indices, start + segment, count, keys, table, k0, k1, c0, c1, dependent)
        for j in range(count):
            offer(score, pos, k, keys[j], segment + j)
    sort_small(pos, k, ranked)


@numba.njit(parallel=True, nogil=True, cache=True)
def _labor0(indptr, indices, nodes, fanout, table, k0, k1, c0, c1, dependent, num_chunks):
    """LABOR-0 of ``nodes``: ``(indptr [n + 1], sources, edge ids, float32 weights)``.

    ``table``: int64 order keys of ``z_t`` per vertex (``r_t = Φ(z_t)``, see
    :func:`_dependent_variate_table`), or empty (compute ``r_t`` per edge from the keys).
    ``num_chunks``: work chunks of about equal scanned edges for the ``prange``.
    """
    n = nodes.size
    out_indptr = np.zeros(n + 1, np.int64)
    selected = np.zeros(n, np.int64)  # k of the destinations that select (k < d)
    for i in numba.prange(n):
        v = nodes[i]
        d = np.int64(indptr[v + 1] - indptr[v])
        k = d if fanout == -1 or fanout >= d else fanout
        out_indptr[i + 1] = k
        selected[i] = k if k < d else 0
    largest = 0
    for i in range(n):
        out_indptr[i + 1] += out_indptr[i]
        largest = max(largest, selected[i])
    total = out_indptr[n]
    out_src = np.empty(total, np.int64)
    out_eids = np.empty(total, np.int64)
    out_w = np.empty(total, np.float32)
    chunks = edge_balanced_chunks(indptr, nodes, num_chunks)
    # Candidate buffer and fallback heap: > the largest k that selects, not the fanout
    # (which may be huge where every destination keeps all its edges).
    scratch = 4 * (largest + 16) + _SEGMENT
    for c in numba.prange(chunks.size - 1):
        score = np.empty(scratch, np.int64)
        pos = np.empty(scratch, np.int64)
        keys = np.empty(_SEGMENT, np.int64)
        ranked = np.empty(_SMALL_SORT, np.int64)
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
            _smallest_variates(indices, start, d, k, score, pos, keys, ranked, table, k0, k1, c0, c1, dependent)
            w = np.float32(1.0 / k)
            for j in range(k):
                e = start + pos[j]
                out_eids[lo + j] = e
                out_src[lo + j] = indices[e]
                out_w[lo + j] = w
    return out_indptr, out_src, out_eids, out_w


# ---------------------------------------------------------------- Poisson sampling
@numba.njit(parallel=True, nogil=True, cache=True)
def _poisson(indptr, indices, nodes, edge_prob, edge_offsets, variates, local, edge_weight_num, denom):
    """Keep in-edge ``j`` of destination ``i`` iff ``r_t <= p`` with ``p = edge_prob[o + j]``
    (``o = edge_offsets[i]``); weight ``edge_weight_num[o + j] / (denom[i] * p)``, with a
    numerator of 1 when ``edge_weight_num`` is empty. ``variates[local[o + j]]`` is
    ``r_t`` of the edge's source."""
    unit = edge_weight_num.size == 0
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
                numerator = 1.0 if unit else edge_weight_num[o + j]
                out_w[m] = np.float32(numerator / (denom[i] * p))
                m += 1
    return out_indptr, out_src, out_eids, out_w


@numba.njit(parallel=True, nogil=True, cache=True)
def _gather_neighbourhoods(indptr, indices, nodes):
    """Offsets ``[n + 1]`` and the concatenated in-neighbour ids ``[Σ d]`` of ``nodes``."""
    n = nodes.size
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        v = nodes[i]
        offsets[i + 1] = offsets[i] + (indptr[v + 1] - indptr[v])
    ids = np.empty(offsets[n], np.int64)
    for i in numba.prange(n):
        start = np.int64(indptr[nodes[i]])
        o = offsets[i]
        for j in range(offsets[i + 1] - o):
            ids[o + j] = indices[start + j]
    return offsets, ids


@numba.njit(parallel=True, nogil=True, cache=True)
def _weighted_probabilities(indptr, nodes, probs, offsets, fanout):
    """Per edge ``π_ts = min(1, c_s A_ts)`` with ``Σ_t π_ts = min(k, #positive)``; per
    destination the weight sum ``Σ_t A_ts`` (the HT denominator's scale)."""
    n = nodes.size
    edge_prob = np.zeros(offsets[n], np.float64)
    weight = np.zeros(offsets[n], np.float64)
    sums = np.zeros(n, np.float64)
    for i in numba.prange(n):
        start = np.int64(indptr[nodes[i]])
        o = offsets[i]
        d = offsets[i + 1] - o
        positive = 0
        total = 0.0
        for j in range(d):
            a = np.float64(probs[start + j])
            a = a if a > 0.0 else 0.0
            weight[o + j] = a
            total += a
            positive += a > 0.0
        sums[i] = total
        k = positive if fanout == -1 or fanout >= positive else fanout
        if k == 0:
            continue
        if k == positive:
            for j in range(d):
                edge_prob[o + j] = 1.0 if weight[o + j] > 0.0 else 0.0
            continue
        # Water-filling: c = (k - #capped) / Σ_uncapped A, until the capped set is stable.
        capped_sum = 0.0
        capped = 0
        while True:
            c = (k - capped) / (total - capped_sum)
            new_capped = 0
            new_sum = 0.0
            for j in range(d):
                if weight[o + j] * c >= 1.0:
                    new_capped += 1
                    new_sum += weight[o + j]
            if new_capped == capped:
                break
            capped, capped_sum = new_capped, new_sum
        for j in range(d):
            edge_prob[o + j] = min(1.0, c * weight[o + j])
    return edge_prob, weight, sums


# ---------------------------------------------------------------- LABOR-k / LABOR-*
@numba.njit(parallel=True, nogil=True, cache=True)
def _solve_constants(offsets, local, inv_pi, targets, c, chunks):
    """Per destination ``c_s``: ``Σ_t 1 / min(1, c_s π_t) = targets[s]`` (``inf``: keep all),
    from ``inv_pi = 1 / π`` (float32). ``chunks``: edge-balanced bounds over the destinations."""
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


@numba.njit(inline="always", nogil=True, cache=True)
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
    """``π_t ← π_t · max_s c_s`` over the destinations ``s`` that have ``t``; returns the
    new ``π`` (float64), ``1 / π`` (float32) and ``Σ_t min(1, π_t)``. Row ``p`` of the
    float32 scratch ``partial`` ``[partitions, num_vertices]`` takes the maxima of one
    edge-balanced slice of the destinations (threads never write the same row); a second
    pass combines the rows. The sum is added up in ``_SUM_CHUNKS`` fixed chunks, in
    order, so it (and the stopping test) is the same for any thread count."""
    n = offsets.size - 1
    partitions = partial.shape[0]
    for p in numba.prange(partitions):
        row = partial[p]
        row[:] = 0.0
        lo = np.searchsorted(offsets, offsets[n] * p // partitions)
        hi = n if p == partitions - 1 else np.searchsorted(offsets, offsets[n] * (p + 1) // partitions)
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
    # The per-iteration passes gather 1 / π and scatter maxima at random vertices: float32
    # keeps those arrays in the last-level cache (25% faster on the benchmark graph); π
    # itself and the edge probabilities stay float64.
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
def _dependent_variate_table(indptr, nodes, fanout, variates: Variates) -> np.ndarray:
    """int64 order keys of ``z_t`` (``r_t = Φ(z_t)``) of every vertex, when dependent
    variates (two Box-Muller normals and an erfc each, ~50x a hash) would otherwise be
    computed per scanned edge for more edges than the graph has vertices; else an empty
    array (compute per edge). The order of ``z_t`` is that of ``r_t`` (up to ties that
    rounding ``Φ`` would make)."""
    num_nodes = indptr.size - 1
    if not variates.dependent or fanout == -1 or _scanned_edges(indptr, nodes, fanout) < num_nodes:
        return np.empty(0, np.int64)
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
    """``Σ`` in-degree of the ``nodes`` with more than ``fanout`` in-edges: the edges a
    LABOR-0 layer draws variates for (the others keep every edge)."""
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
) -> LayerSample:
    """LABOR-sample the in-edges of ``nodes`` for one layer (rules in the module doc).

    Args:
        indptr, indices: the graph's CSC arrays (int32/int64), valid as
            :class:`~graphpipe.CSCGraph` checks them (every id in ``indices`` is a node):
            the kernels index with them unchecked.
        nodes: ``[num_dst]`` int64 destination ids.
        fanout: ``>= 1`` or -1 (all in-edges).
        variates: the keys of the layer's per-vertex uniforms.
        importance_sampling: 0 (LABOR-0), ``k > 0`` (LABOR-k) or -1 (LABOR-*).
        probs: optional ``[num_edges]`` float edge weights (weighted LABOR-0).

    Returns:
        :class:`LayerSample` with int64 ``indptr``, ``indices`` (global), ``edge_ids``
        (ascending within a destination) and float32 HT ``edge_weights``.
    """
    fanout = check_fanout(fanout, "sample_labor")
    check_importance_sampling(importance_sampling, "sample_labor")
    if probs is not None and importance_sampling != 0:
        raise NotImplementedError("sample_labor: weighted LABOR supports importance_sampling=0 only")
    nodes = check_node_ids(nodes, indptr.numel() - 1, "nodes", "sample_labor")
    k0, k1 = np.uint64(variates.k0), np.uint64(variates.k1)
    c0, c1, dependent = float(variates.c0), float(variates.c1), bool(variates.dependent)
    if nodes.is_cuda or indptr.is_cuda:
        if probs is not None or importance_sampling != 0:
            raise NotImplementedError(
                "sample_labor: on CUDA only unweighted LABOR-0 is implemented; move the ids to the CPU "
                "for weighted LABOR or importance_sampling != 0"
            )
        device = nodes.device if nodes.is_cuda else indptr.device
        return sample_labor_torch(
            indptr, indices, nodes.to(device), fanout, variates=lambda t: _labor_variates_torch(t, variates)
        )
    indptr_np, indices_np, nodes_np = (t.contiguous().numpy() for t in (indptr, indices, nodes))
    if probs is None and importance_sampling == 0:
        table = _dependent_variate_table(indptr_np, nodes_np, fanout, variates)
        chunks = CHUNKS_PER_THREAD * numba.get_num_threads()
        out = _labor0(indptr_np, indices_np, nodes_np, fanout, table, k0, k1, c0, c1, dependent, chunks)
        return LayerSample(*(torch.from_numpy(a) for a in out))
    offsets, neighbour_ids = _gather_neighbourhoods(indptr_np, indices_np, nodes_np)
    vertices, local = unique_and_compact(
        torch.empty(0, dtype=torch.int64), torch.from_numpy(neighbour_ids), indptr.numel() - 1
    )
    vertices_np, local_np = vertices.numpy(), local.numpy()
    r = labor_variates(vertices_np, k0, k1, c0, c1, dependent)
    if probs is not None:
        edge_prob, weight, sums = _weighted_probabilities(
            indptr_np, nodes_np, probs.contiguous().numpy(), offsets, fanout
        )
        out = _poisson(indptr_np, indices_np, nodes_np, edge_prob, offsets, r, local_np, weight, sums)
    else:
        degrees = np.diff(offsets)
        edge_prob = _importance_sampling(offsets, local_np, vertices_np.size, degrees, fanout, importance_sampling)
        unit = np.empty(0, np.float64)
        out = _poisson(indptr_np, indices_np, nodes_np, edge_prob, offsets, r, local_np, unit, degrees.astype(np.float64))
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
