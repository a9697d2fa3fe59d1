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
* **weighted LABOR-0** (``probs`` = edge weights ``A_ts``), as GraphBolt's
  ``sample_layer_neighbor(prob_name=...)``: ``s`` keeps exactly ``min(k, m_s)`` of its
  ``m_s`` positive-weight in-edges, those with the smallest ``r_t / A_ts`` (ties to the
  lower edge id). Zero-weight edges are never kept. This is priority sampling (Duffield,
  Lund & Thorup, 2007) with priorities ``A_ts / r_t``: given ``τ_s``, the ``(k + 1)``-th
  smallest ``r_t / A_ts`` of ``s``, edge ``t`` is kept with conditional probability
  ``min(1, A_ts τ_s)``. No iteration: a bounded heap per destination, so weights of any
  spread finish (a water-filling constant did not converge past a spread of ~5e15).

Edge weights (float32) are HT weights: ``w_ts = 1 / (d_s π_ts)``, so
``Σ_{kept t} w_ts h_t`` is an unbiased estimate of the neighbourhood mean
``(1/d_s) Σ_t h_t``; ``fanout=-1`` keeps every edge with weight ``1 / d_s``. Weighted:
``w_ts = A_ts / (Σ_t A_ts · min(1, A_ts τ_s))`` (priority sampling's estimator, unbiased
for ``Σ_t A_ts h_t / Σ_t A_ts`` when ``s`` has no parallel edges, whose sources share one
``r_t``); ``A_ts / Σ_t A_ts`` where every positive-weight edge is
kept (``k >= m_s``, ``fanout=-1``). Weights of any finite magnitude work: they are divided
by the destination's largest, and a destination whose weights span more than 1e300
compares ``log r_t - log A_ts`` (:func:`~graphpipe.ops.selection.weighted_score`).

Errors: ``indptr`` ranges of the destinations outside ``indices`` (checked as the kernels
read them, ``O(batch)``) and NaN or infinite weights of their in-edges raise ValueError.

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
from numba.extending import intrinsic, overload

from graphpipe._internal.checks import check_fanout, check_importance_sampling, check_node_ids
from graphpipe.ops import torch_random
from graphpipe.ops.gpu_sampling import sample_labor_torch
from graphpipe.ops.layer_sample import LayerSample
from graphpipe.ops.random import uniform, uniform_bits, uniform_open
from graphpipe.ops.selection import (
    CHUNKS_PER_THREAD,
    check_graph_arrays,
    check_kernel_report,
    check_probs,
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
# A fanout above this keeps every in-edge (no destination has more); it keeps the
# kernels' int64 arithmetic on fanouts from overflowing.
_FANOUT_CAP = 1 << 61


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


# _normal, _variate and _order_key are compiled once and called (LLVM inlines them):
# inlined in numba's IR, a dependent kernel copied them at each of ~30 uses and took
# twice as long to compile (11 s against 6 on the 2-core machine), for the same speed.
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


@numba.njit(nogil=True, cache=True)
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
# buffer. No sort: once the k-th smallest (key, position) is known, one ordered pass
# keeps the keys up to it, already in ascending position.
#
# The kernel is compiled for the kind of variates it is given, so a pipe compiles only
# the code of the kind it uses (numba compiles every branch of a kernel, taken or not):
#   (k0,)               independent, r_t = uniform(k0, t)
#   (k0, k1, c0, c1)    dependent, computed per scanned edge
#   table               int64 [num_nodes], the order key of z_t per vertex (r_t = Φ(z_t))
_CANDIDATE_MARGIN = 3.0
_SEGMENT = 1024
_SPARSE = 8
_ABOVE_EVERY_KEY = np.int64(np.iinfo(np.int64).max)  # keys are order keys of finite floats or < 2**53


def _variate_keys(indices, start, count, out, variates):
    """``out[:count]`` = int64 keys with the order of ``r_t`` of the sources
    ``indices[start:start + count]``, for one kind of ``variates`` (see above). A numba
    function: its code is chosen by the type of ``variates`` when a kernel is compiled."""
    raise NotImplementedError("_variate_keys is for numba kernels")


@overload(_variate_keys, inline="always")
def _variate_keys_of_kind(indices, start, count, out, variates):
    # Each reads a slice from 0: numba then knows the index is not negative and drops the
    # wraparound check that keeps ``indices[start + j]`` from vectorising (2-4x slower).
    if isinstance(variates, types.Array):

        def table_keys(indices, start, count, out, variates):
            # A source id past the table (a corrupted ``indices``) reads the last entry
            # instead of memory outside it; the id itself is returned and rejected
            # downstream (unique_and_compact): one unsigned min, no branch.
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
    """The key of ``r_t = p`` in the keys of :func:`_variate_keys` (``0 < p < 1``):
    ``r_t < p`` exactly when its key is below this (a table's ``z_t`` up to the
    approximate quantile: the threshold only bounds the candidates). A numba function."""
    raise NotImplementedError("_threshold_key is for numba kernels")


@overload(_threshold_key, inline="always")
def _threshold_key_of_kind(p, variates):
    if isinstance(variates, types.Array):
        return lambda p, variates: _order_key(_normal_quantile(p))
    if isinstance(variates, types.BaseTuple) and len(variates) == 4:
        return lambda p, variates: _order_key(p)
    if isinstance(variates, types.BaseTuple) and len(variates) == 1:
        return lambda p, variates: np.int64(math.ceil(p * 9007199254740992.0))  # r_t = bits / 2**53 < p
    return None


@numba.njit(inline="always", nogil=True, cache=True)
def _is_kept(key, position, tau_key, tau_position):
    """Whether ``(key, position)`` is at most ``(tau_key, tau_position)``, the k-th smallest."""
    return (key < tau_key) | ((key == tau_key) & (position <= tau_position))


@numba.njit(inline="always", nogil=True, cache=True)
def _smallest_candidates(indices, start, d, k, score, pos, heap_score, heap_pos, keys, variates):
    """Try the candidate scan: ``pos[:k]`` = the positions of the ``k < d`` smallest
    ``(r_t, position)`` among the in-edges ``indices[start:start + d]``, ascending, and
    True; or False when there were fewer than ``k`` candidates or more than the buffer
    holds (then :func:`_smallest_by_heap` finds them). With few more in-edges than ``k``,
    every in-edge is a candidate. Scratch (int64): ``score``/``pos``
    of ``> k`` slots (their size bounds the candidates), ``heap_score``/``heap_pos`` of
    ``k``, ``keys`` of ``_SEGMENT``."""
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
    """:func:`_smallest_candidates`' answer (``pos[:k]``, ``pos`` of ``> k`` slots) from
    all ``d`` in-edges: a max-heap of the ``k`` smallest, fed segment by segment, gives
    the largest kept pair, then a second pass keeps the keys up to it, in order (the keys
    are computed once when ``d`` fits one segment). Rare (under 1% of destinations), so
    out of line: the kernel stays small to compile."""
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
    ranges)``; nothing is sampled where destinations have bad ranges (:func:`range_is_bad`).

    ``variates``: the layer's variates, of one of the kinds above.
    ``num_chunks``: work chunks of about equal scanned edges for the ``prange``.
    """
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
    # Candidate buffer: > the largest k that selects, not the fanout (which may be huge
    # where every destination keeps all its edges).
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
    """Keep in-edge ``j`` of destination ``i`` iff ``r_t <= p`` with ``p = edge_prob[o + j]``
    (``o = edge_offsets[i]``); weight ``1 / (denom[i] * p)``. ``variates[local[o + j]]``
    is ``r_t`` of the edge's source."""
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
    """Offsets ``[n + 1]`` and the concatenated in-neighbour ids ``[Σ d]`` of ``nodes``,
    and the number of destinations with a bad range (:func:`range_is_bad`; then no ids)."""
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
    """HT weight ``a / (Σa · min(1, a τ))`` of a kept edge, ``a = w / largest`` its
    weight over the destination's largest and ``total = Σa``; ``tau`` is ``τ`` (or
    ``log τ`` when ``log_space``) in the same units as :func:`weighted_score`."""
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
    """Weighted LABOR-0 (priority sampling, module doc) of ``nodes``: ``(indptr [n + 1],
    sources, edge ids, float32 weights, non-finite weights)``; nothing is sampled when
    the last is not 0. ``variates[local[offsets[i] + j]]`` is ``r_t`` of in-edge ``j``
    of destination ``i``."""
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
def _labor0_variates(indptr, nodes, fanout, variates: Variates, num_nodes: int):
    """The variates argument of :func:`_labor0`: ``(k0,)`` when independent; when
    dependent, the int64 order keys of ``z_t`` (``r_t = Φ(z_t)``) of every vertex if
    dependent variates (two Box-Muller normals and an erfc each, ~50x a hash) would
    otherwise be computed per scanned edge for more edges than the graph has vertices,
    else ``(k0, k1, c0, c1)`` (compute per edge). The order of ``z_t`` is that of ``r_t``
    (up to ties that rounding ``Φ`` would make)."""
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
    num_nodes: Optional[int] = None,
) -> LayerSample:
    """LABOR-sample the in-edges of ``nodes`` for one layer (rules in the module doc).

    Args:
        indptr, indices: the graph's CSC arrays (int32/int64), valid as
            :class:`~graphpipe.CSCGraph` checks them. Checked here: their types,
            ``indptr[-1] <= len(indices)`` and the ranges of ``nodes``; not checked (that
            is ``O(graph)``): that every id in ``indices`` is a node, which a layer's
            unique_and_compact then checks for the ids sampled.
        nodes: ``[num_dst]`` int64 destination ids.
        fanout: ``>= 1`` or -1 (all in-edges).
        variates: the keys of the layer's per-vertex uniforms.
        importance_sampling: 0 (LABOR-0), ``k > 0`` (LABOR-k) or -1 (LABOR-*).
        probs: optional ``[num_edges]`` float32/float64 edge weights (weighted LABOR-0).
        num_nodes: ids in ``indices`` are below it; default ``len(indptr) - 1``. Given
            when ``indptr`` is not the graph's own (typed graphs sample through a table
            of per-edge-type ranges, :mod:`graphpipe.ops.typed_sampling`).

    Returns:
        :class:`LayerSample` with int64 ``indptr``, ``indices`` (global), ``edge_ids``
        (ascending within a destination) and float32 HT ``edge_weights``.

    Raises:
        ValueError: ``indptr`` ranges of ``nodes`` outside ``indices``, or NaN or
            infinite ``probs`` of their in-edges.
    """
    fanout = check_fanout(fanout, "sample_labor")
    check_importance_sampling(importance_sampling, "sample_labor")
    if probs is not None and importance_sampling != 0:
        raise NotImplementedError("sample_labor: weighted LABOR supports importance_sampling=0 only")
    check_graph_arrays(indptr, indices, "sample_labor")
    check_probs(probs, indices.numel(), "sample_labor")
    nodes = check_node_ids(nodes, indptr.numel() - 1, "nodes", "sample_labor")
    num_nodes = indptr.numel() - 1 if num_nodes is None else num_nodes
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
    return _sample_labor_cpu(indptr, indices, nodes, fanout, variates, importance_sampling, probs, num_nodes)


def _sample_labor_cpu(indptr, indices, nodes, fanout, variates, importance_sampling, probs, num_nodes) -> LayerSample:
    """The CPU kernels: LABOR-0 in one pass; weighted LABOR-0 and LABOR-k over the
    gathered neighbourhoods and their unique sources."""
    indptr_np, indices_np, nodes_np = (t.contiguous().numpy() for t in (indptr, indices, nodes))
    fanout = min(fanout, _FANOUT_CAP)
    chunks = CHUNKS_PER_THREAD * numba.get_num_threads()
    if probs is None and importance_sampling == 0:
        kernel_variates = _labor0_variates(indptr_np, nodes_np, fanout, variates, num_nodes)
        *out, bad_ranges = _labor0(indptr_np, indices_np, nodes_np, fanout, kernel_variates, chunks)
        check_kernel_report(bad_ranges, 0, "sample_labor")
        return LayerSample(*(torch.from_numpy(a) for a in out))
    offsets, neighbour_ids, bad_ranges = _gather_neighbourhoods(indptr_np, indices_np, nodes_np)
    check_kernel_report(bad_ranges, 0, "sample_labor")
    vertices, local = unique_and_compact(
        torch.empty(0, dtype=torch.int64), torch.from_numpy(neighbour_ids), num_nodes
    )
    vertices_np, local_np = vertices.numpy(), local.numpy()
    keys = np.uint64(variates.k0), np.uint64(variates.k1)
    r = labor_variates(vertices_np, *keys, float(variates.c0), float(variates.c1), bool(variates.dependent))
    if probs is not None:
        probs_np = probs.contiguous().numpy()
        *out, non_finite = _weighted_labor0(
            indptr_np, indices_np, nodes_np, probs_np, offsets, local_np, r, fanout, chunks
        )
        check_kernel_report(0, non_finite, "sample_labor")
    else:
        degrees = np.diff(offsets)
        edge_prob = _importance_sampling(offsets, local_np, vertices_np.size, degrees, fanout, importance_sampling)
        out = _poisson(indptr_np, indices_np, nodes_np, edge_prob, offsets, r, local_np, degrees.astype(np.float64))
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
