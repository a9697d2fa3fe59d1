"""Neighbor sampling of one layer: a fused numba kernel per layer on CPU tensors.

Destination ``v`` draws its variates from the sub-key ``hash2(key, v)`` and a draw number,
so its edges depend only on ``(key, v, fanout)``: the same in every batch, on every rank,
for any thread count. Rules for ``d`` in-edges and fanout ``k``:

* ``k == -1`` or ``k >= d`` (without replacement): all in-edges;
* uniform, without replacement: Floyd's algorithm, every ``k``-subset equally likely;
* uniform, with replacement: draw ``j`` takes an independent uniform position;
* weighted, without replacement: the ``k`` positive-weight edges with the smallest
  ``-log(u_i) / w_i`` (Efraimidis-Spirakis: successive sampling proportional to weight);
* weighted, with replacement: draw ``j`` takes the edge whose weight prefix-sum interval
  holds ``u_j * sum(w)``.

Edges of weight <= 0 are never drawn; weights of any finite magnitude work
(:mod:`graphpipe.ops.selection`, "weights of any magnitude").
"""

from __future__ import annotations

import math
from typing import Optional

import numba
import numpy as np
import torch

from graphpipe.ops.gpu_sampling import sample_neighbors_torch
from graphpipe.ops.edge_lookup import EdgeExclusion, check_exclusion, exclusion_arrays
from graphpipe.ops.layer_sample import LayerSample
from graphpipe.ops.random import hash2, uniform, uniform_open
from graphpipe.ops.selection import (
    FANOUT_CAP,
    check_kernel_report,
    check_key,
    check_layer_inputs,
    destination_ranges,
    heapify,
    max_output_edges,
    offer,
    range_is_bad,
    sort_by_rank,
    weight_range,
    weighted_score,
    write_ranked,
)

__all__ = ["FanoutTooLarge", "sample_neighbors"]

# Up to this fanout Floyd's set is a plain array (O(k^2) branch-free work); above, a hash
# set and a sort keep it O(k log k).
_SMALL_FANOUT_MAX = 64
# Contiguous chunks of destinations, each allocating its scratch once.
_NUM_CHUNKS = 64
# Output bytes per sampled edge: an int64 edge id and source.
_BYTES_PER_EDGE = 16


@numba.njit(inline="always", nogil=True, cache=True)
def _randint(vkey, draw, n):
    """A uniform integer in ``[0, n)``, ``n < 2**32``, from the variate ``(vkey, draw)``:
    the hash's high 32 bits scaled by ``n`` (multiply-shift; bias below ``n / 2**32``). A
    larger ``n`` wraps: a node's in-edges past ``2**32`` are never drawn (README, Samplers)."""
    return np.int64(((hash2(vkey, draw) >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


@numba.njit(inline="always", nogil=True, cache=True)
def _floyd_small(vkey, start, d, k, out, draws):
    """Floyd's algorithm: ``out[:k]`` = ``start +`` a uniform random ``k``-subset of
    ``[0, d)``, ascending, ``k <= 64``. Step ``s`` draws ``t`` in ``[0, j]``, ``j = d - k +
    s``; ``t`` joins the set unless it is there already, then ``j`` does. The draws are made
    first in a loop that vectorises; a 64-bit filter of the members' low 6 bits spares most
    membership scans, and the members are written at their ranks (no branches)."""
    for s in range(k):
        draws[s] = _randint(vkey, s, d - k + s + 1)
    seen = np.uint64(0)
    for s in range(k):
        t = draws[s]
        bit = np.uint64(1) << np.uint64(t & 63)
        if seen & bit:
            hits = 0
            for m in range(s):
                hits += draws[m] == t
            if hits:
                t = d - k + s
                draws[s] = t
                bit = np.uint64(1) << np.uint64(t & 63)
        seen |= bit
    write_ranked(draws, k, out, start)


@numba.njit(nogil=True, cache=True)
def _floyd_hashed(vkey, start, d, k, out):
    """:func:`_floyd_small` (same draws, same subset) for any ``d`` and ``k``, the set
    in an open-addressing hash table; ``O(k log k)``."""
    size = 1
    while size < 2 * k:
        size <<= 1
    table = np.full(size, -1, np.int64)
    mask = np.uint64(size - 1)
    for s in range(k):
        j = start + d - k + s
        t = start + _randint(vkey, s, d - k + s + 1)
        slot = np.int64(hash2(vkey, t) & mask)
        while table[slot] != -1 and table[slot] != t:
            slot = (slot + 1) & (size - 1)
        if table[slot] == t:
            t = j
            slot = np.int64(hash2(vkey, t) & mask)
            while table[slot] != -1:
                slot = (slot + 1) & (size - 1)
        table[slot] = t
        out[s] = t
    out[:k].sort()


@numba.njit(inline="always", nogil=True, cache=True)
def _offsets(out_indptr, max_out):
    """Prefix sums of the counts ``out_indptr[1:]`` in place, saturating at ``max_out + 1``:
    returns the total, more than ``max_out`` if the output would not fit."""
    n = out_indptr.size - 1
    for i in range(n):
        out_indptr[i + 1] = min(out_indptr[i + 1] + out_indptr[i], max_out + 1)
    return out_indptr[n]


@numba.njit(inline="always", nogil=True, cache=True)
def _excluded_count(ex_indptr, i):
    """How many in-edges destination ``i`` must skip (an :class:`EdgeExclusion`)."""
    return ex_indptr[i + 1] - ex_indptr[i] if i < ex_indptr.size - 1 else 0


@numba.njit(inline="always", nogil=True, cache=True)
def _skip_excluded(out, k, start, excluded):
    """Map ``out[:k]`` = ``start +`` ascending ranks among the positions not ``excluded``
    (ascending) to those positions: the ``r``-th remaining one is ``r + j``, ``j`` the
    number of excluded positions up to it."""
    j = 0
    x = excluded.size
    for m in range(k):
        r = out[m] - start
        while j < x and excluded[j] - start <= r + j:
            j += 1
        out[m] = start + r + j


@numba.njit(inline="always", nogil=True, cache=True)
def _sample_size(d, fanout, replace):
    """Edges a destination with ``d`` drawable in-edges takes."""
    if fanout == -1:
        return d
    if replace:
        return fanout if d > 0 else 0
    return min(d, fanout)


def _uniform_kernel(large_fanouts: bool, name: str):
    """The uniform kernel with (``large_fanouts``) or without the code for fanouts above
    ``_SMALL_FANOUT_MAX``, most of the compile time of the usual fanouts (numba compiles
    every branch; one on a closure constant is dropped first). Each variant has its own
    ``name``: numba names cache files after it, and variants sharing one loaded each
    other's code."""

    def sample_uniform(indptr, indices, nodes, key_ids, fanout, key, replace, max_out, ex_indptr, ex_pos):
        """Pass 1 counts, pass 2 picks edge ids, pass 3 gathers their sources (independent
        loads: misses overlap). Destination ``i`` draws from ``hash2(key, key_ids[i])``;
        one with excluded in-edges (``ex_indptr``/``ex_pos``) draws ranks among the others.
        Returns ``(indptr, sources, edge ids, bad ranges)``, nothing sampled if a range is
        bad or the output would exceed ``max_out`` edges."""
        num_dst = nodes.shape[0]
        num_edges = indices.shape[0]
        starts = np.empty(num_dst, np.int64)
        degrees = np.empty(num_dst, np.int64)
        out_indptr = np.empty(num_dst + 1, np.int64)
        out_indptr[0] = 0
        bad = 0
        for i in numba.prange(num_dst):
            start = np.int64(indptr[nodes[i]])
            end = np.int64(indptr[nodes[i] + 1])
            bad += range_is_bad(start, end, num_edges)
            d = end - start - _excluded_count(ex_indptr, i)
            starts[i] = start
            degrees[i] = d
            out_indptr[i + 1] = _sample_size(d, fanout, replace)
        if bad:
            return out_indptr, np.empty(0, np.int64), np.empty(0, np.int64), bad
        num_out = _offsets(out_indptr, max_out)
        if num_out > max_out:
            return out_indptr, np.empty(0, np.int64), np.empty(0, np.int64), 0
        out_eids = np.empty(num_out, np.int64)
        for chunk in numba.prange(_NUM_CHUNKS):
            draws = np.empty(_SMALL_FANOUT_MAX, np.int64)
            for i in range(chunk * num_dst // _NUM_CHUNKS, (chunk + 1) * num_dst // _NUM_CHUNKS):
                lo = out_indptr[i]
                k = out_indptr[i + 1] - lo
                if k == 0:
                    continue
                start = starts[i]
                d = degrees[i]
                vkey = hash2(key, key_ids[i])
                out = out_eids[lo : lo + k]
                if fanout == -1 or (k == d and not replace):
                    for m in range(k):
                        out[m] = start + m
                elif replace:
                    for m in range(k):
                        out[m] = start + _randint(vkey, m, d)
                    if large_fanouts and k > _SMALL_FANOUT_MAX:
                        out.sort()
                    else:
                        sort_by_rank(out, k, draws)
                elif large_fanouts and k > _SMALL_FANOUT_MAX:
                    _floyd_hashed(vkey, start, d, k, out)
                else:
                    _floyd_small(vkey, start, d, k, out, draws)
                if i < ex_indptr.size - 1 and ex_indptr[i + 1] > ex_indptr[i]:
                    _skip_excluded(out, k, start, ex_pos[ex_indptr[i] : ex_indptr[i + 1]])
        out_src = np.empty(num_out, np.int64)
        for e in numba.prange(num_out):
            out_src[e] = indices[np.uint64(out_eids[e])]  # unsigned: no wraparound check
        return out_indptr, out_src, out_eids, 0

    sample_uniform.__name__ = sample_uniform.__qualname__ = name
    return numba.njit(parallel=True, nogil=True, cache=True)(sample_uniform)


_sample_uniform = _uniform_kernel(large_fanouts=False, name="_sample_uniform")
_sample_uniform_large = _uniform_kernel(large_fanouts=True, name="_sample_uniform_large")


@numba.njit(inline="always", nogil=True, cache=True)
def _drawable_weight(probs, start, p, excluded, x):
    """``(w, x)``: the weight of position ``p`` (0.0 when it is the next of the ``excluded``
    CSC positions, ascending), and how many excluded positions are passed."""
    if x < excluded.size and excluded[x] == start + p:
        return 0.0, x + 1
    return np.float64(probs[start + p]), x


@numba.njit(nogil=True, cache=True)
def _weighted_without_replacement(vkey, probs, start, d, k, largest, log_space, pos, excluded):
    """``pos[:k]`` = the ``k`` positive-weight positions, ``excluded`` ones left out, with the
    smallest ``-log(u)/w`` (:func:`weighted_score`), ascending: a max-heap of the best ``k``
    (equal scores keep the lower position)."""
    score = np.empty(k, np.float64)
    n = 0
    x = 0
    for p in range(d):
        w, x = _drawable_weight(probs, start, p, excluded, x)
        if not w > 0.0:
            continue
        u = uniform_open(vkey, p)
        # -log(u) >= 1 - u: an edge this bound already rules out needs no logarithm.
        if n == k and not log_space and 1.0 - u >= score[0] * (w / largest):
            continue
        s = weighted_score(-math.log(u), w, largest, log_space)
        if n < k:
            score[n] = s
            pos[n] = p
            n += 1
            if n == k:
                heapify(score, pos, k)
        else:
            offer(score, pos, k, s, p)
    pos[:k].sort()


@numba.njit(nogil=True, cache=True)
def _weighted_with_replacement(vkey, probs, start, d, k, largest, pos, excluded):
    """``pos[:k]`` = ``k`` independent draws proportional to weight, ascending, among the
    positions not ``excluded``: the sorted targets ``u_j * total`` take, in one sweep, the
    first position whose prefix sum of ``w / largest`` exceeds them."""
    total = 0.0
    x = 0
    for p in range(d):
        w, x = _drawable_weight(probs, start, p, excluded, x)
        if w > 0.0:
            total += w / largest
    targets = np.empty(k, np.float64)
    for j in range(k):
        targets[j] = uniform(vkey, j) * total
    targets.sort()
    cum = 0.0
    j = 0
    last = 0
    x = 0
    for p in range(d):
        w, x = _drawable_weight(probs, start, p, excluded, x)
        if not w > 0.0:
            continue
        cum += w / largest
        last = p
        while j < k and targets[j] < cum:
            pos[j] = p
            j += 1
        if j == k:
            return
    # Rounding can leave a target at the very end of the range: it belongs to the last edge.
    for m in range(j, k):
        pos[m] = last


@numba.njit(parallel=True, nogil=True, cache=True)
def _sample_weighted(indptr, indices, nodes, key_ids, probs, fanout, key, replace, max_out, ex_indptr, ex_pos):
    """Pass 1 checks the ranges and counts positive-weight in-edges (and the largest weight,
    whether scores need log space), pass 2 fills; excluded in-edges are neither counted nor
    drawn. Returns ``(indptr, sources, edge ids, bad ranges, non-finite weights)``, nothing
    sampled if either count is not 0 or the output would exceed ``max_out`` edges."""
    num_dst = nodes.shape[0]
    num_edges = indices.shape[0]
    out_indptr = np.empty(num_dst + 1, np.int64)
    out_indptr[0] = 0
    largest = np.empty(num_dst, np.float64)
    log_space = np.empty(num_dst, np.bool_)
    bad = 0
    non_finite = 0
    for i in numba.prange(num_dst):
        v = nodes[i]
        start, end = np.int64(indptr[v]), np.int64(indptr[v + 1])
        if range_is_bad(start, end, num_edges):
            bad += 1
            out_indptr[i + 1] = 0
            continue
        positive, largest[i], log_space[i], this_non_finite = weight_range(probs, start, end - start)
        non_finite += this_non_finite
        if i < ex_indptr.size - 1:
            for j in range(ex_indptr[i], ex_indptr[i + 1]):
                positive -= probs[ex_pos[j]] > 0.0
        out_indptr[i + 1] = _sample_size(positive, fanout, replace)
    empty = np.empty(0, np.int64)
    if bad or non_finite:
        return out_indptr, empty, empty, bad, non_finite
    num_out = _offsets(out_indptr, max_out)
    if num_out > max_out:
        return out_indptr, empty, empty, 0, 0
    out_eids = np.empty(num_out, np.int64)
    out_src = np.empty(num_out, np.int64)
    for i in numba.prange(num_dst):
        v, start, d, lo, k = destination_ranges(indptr, nodes, out_indptr, i)
        if k == 0:
            continue
        pos = out_eids[lo : lo + k]
        vkey = hash2(key, key_ids[i])
        excluded = ex_pos[ex_indptr[i] : ex_indptr[i + 1]] if i < ex_indptr.size - 1 else ex_pos[:0]
        if replace and fanout != -1:
            _weighted_with_replacement(vkey, probs, start, d, k, largest[i], pos, excluded)
        elif fanout == -1 or k < fanout:  # every positive-weight in-edge
            m = 0
            x = 0
            for p in range(d):
                w, x = _drawable_weight(probs, start, p, excluded, x)
                if w > 0.0:
                    pos[m] = p
                    m += 1
        else:
            _weighted_without_replacement(vkey, probs, start, d, k, largest[i], log_space[i], pos, excluded)
        for m in range(k):
            e = start + pos[m]
            pos[m] = e
            out_src[lo + m] = indices[e]
    return out_indptr, out_src, out_eids, 0, 0


def sample_neighbors(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    fanout: int,
    *,
    key: int,
    replace: bool = False,
    probs: Optional[torch.Tensor] = None,
    exclude: Optional[EdgeExclusion] = None,
    key_ids: Optional[torch.Tensor] = None,
) -> LayerSample:
    """Sample in-edges of ``nodes`` for one GNN layer (rules in the module doc).

    Args:
        indptr: ``[num_nodes + 1]`` int32/int64 CSC offsets of the graph.
        indices: ``[num_edges]`` int32/int64 source ids of the graph.
        nodes: ``[num_dst]`` int32/int64 destination ids in ``[0, num_nodes)``.
        fanout: in-edges per destination, ``>= 1``, 0 (none) or -1 (all of them).
        key: the layer's key, an int in ``[0, 2**64)`` (``SubgraphSampler.layer_key``).
        replace: draw with replacement (exactly ``fanout`` edges when the destination
            has any drawable in-edge).
        probs: optional ``[num_edges]`` float32/float64 edge weights; sampling is then
            proportional to weight and non-positive weights are never drawn.
        exclude: optional :class:`~graphpipe.ops.edge_lookup.EdgeExclusion`, in-edges the
            first destinations must not take (link prediction's seed edges). The CPU
            kernels draw among the other in-edges by the same rules; the GPU path drops
            them from its sample.
        key_ids: optional ``[num_dst]`` int64 ids keying each destination's variates
            instead of its node id (CPU only; typed segments, :mod:`~graphpipe.ops.typed_sampling`).

    Returns:
        A :class:`LayerSample` (``edge_weights=None``): ``indptr`` ``[num_dst + 1]``,
        ``indices`` (global source ids) and ``edge_ids``, all int64, each destination's
        edges in ascending edge id.

    Raises:
        ValueError: ``indptr`` ranges of ``nodes`` outside ``indices``, NaN or infinite
            ``probs`` of their in-edges, or an output too large for memory
            (:class:`FanoutTooLarge`).
    """
    key = check_key(key, "sample_neighbors")
    fanout, nodes = check_layer_inputs(indptr, indices, nodes, fanout, probs, "sample_neighbors")
    if exclude is not None:
        check_exclusion(exclude, indptr, nodes, "sample_neighbors")
    if key_ids is not None and (nodes.is_cuda or indptr.is_cuda or key_ids.shape != nodes.shape):
        raise ValueError("sample_neighbors: `key_ids` must be a CPU tensor shaped like `nodes`, with CPU `nodes` and graph")
    return sample_neighbors_trusted(indptr, indices, nodes, fanout, key, replace, probs, exclude, key_ids)


def sample_neighbors_trusted(indptr, indices, nodes, fanout: int, key: int, replace: bool, probs, exclude, key_ids) -> LayerSample:
    """:func:`sample_neighbors` of inputs the library checked where they entered (the
    samplers' graph, fanouts and weights when built, the seeds per batch, and ids it made
    since: :func:`~graphpipe.ops.unique_and_compact` checks the sources it compacts, a
    layer without deduplication its sources): no per-layer check. ``nodes``: ``[num_dst]`` int64."""
    device = nodes.device if nodes.is_cuda else indptr.device
    if fanout == 0:
        return LayerSample.empty(nodes.numel(), device)
    if device.type == "cuda":  # GPU path: the graph in device or pinned host memory
        # The torch ops draw [num_dst, fanout] with replacement, whatever the degrees.
        if replace and fanout != -1 and fanout * nodes.numel() > max_output_edges(_BYTES_PER_EDGE):
            raise _too_many_edges(fanout, replace, nodes.numel())
        fanout = min(fanout, FANOUT_CAP)
        return sample_neighbors_torch(indptr, indices, nodes.to(device), fanout, key=key, replace=replace, probs=probs, exclude=exclude)
    return _sample_cpu(indptr, indices, nodes, fanout, key, replace, probs, exclude, key_ids)


class FanoutTooLarge(ValueError):
    """A fanout whose sample could not fit in memory (``replace=True`` draws exactly
    ``fanout`` edges per destination); pipes re-raise it naming their ``fanouts[i]``."""


def _too_many_edges(fanout: int, replace: bool, num_dst: int) -> FanoutTooLarge:
    return FanoutTooLarge(
        f"sample_neighbors: `fanout`={fanout} (replace={bool(replace)}) would sample more than "
        f"{max_output_edges(_BYTES_PER_EDGE)} edges for these {num_dst} destinations, more than fit in the "
        f"machine's memory; use a smaller fanout"
    )


def _sample_cpu(indptr, indices, nodes, fanout, key, replace, probs, exclude, key_ids=None) -> LayerSample:
    """The CPU kernels; destination ``i`` keys its variates by ``key_ids[i]`` (default ``nodes[i]``)."""
    nodes_np = nodes.contiguous().numpy()
    graph = (indptr.contiguous().numpy(), indices.contiguous().numpy(), nodes_np, nodes_np if key_ids is None else key_ids.contiguous().numpy())
    max_out = max_output_edges(_BYTES_PER_EDGE)
    capped = min(fanout, FANOUT_CAP)
    options = (capped, np.uint64(key), bool(replace), max_out, *exclusion_arrays(exclude))
    try:
        if probs is None:
            kernel = _sample_uniform if capped <= _SMALL_FANOUT_MAX else _sample_uniform_large
            result = (*kernel(*graph, *options), 0)  # no weights: none non-finite
        else:
            result = _sample_weighted(*graph, probs.contiguous().numpy(), *options)
    except MemoryError as error:
        raise MemoryError(
            f"sample_neighbors: out of memory sampling {nodes.numel()} destinations with `fanout`={fanout} "
            f"(replace={bool(replace)}); use a smaller fanout or batch"
        ) from error
    *out, bad_ranges, non_finite = result
    check_kernel_report(bad_ranges, non_finite, "sample_neighbors")
    if out[0][-1] > max_out:
        raise _too_many_edges(fanout, replace, nodes.numel())
    return LayerSample(*(torch.from_numpy(a) for a in out))
