"""Edges by their endpoints: is ``u -> v`` an edge, where are its edges, and which edges a
layer must not sample (seed-edge exclusion for link prediction).

A CSC graph keeps the in-edges of ``v`` at positions ``indptr[v]:indptr[v + 1]``, their
sources in ``indices``, so finding the edges ``u -> v`` means finding ``u`` in ``v``'s
range: a binary search when every node's sources are sorted (:func:`in_neighbours_sorted`,
checked once by the stages that look edges up; ``synthetic_node_classification`` builds
such graphs, ``CSCGraph.from_coo`` keeps the user's order), a scan of the range otherwise.

Seed-edge exclusion: a link-prediction batch must not show the model the edges it is asked
to predict. :func:`seed_edge_exclusion` turns a batch's node pairs into an
:class:`EdgeExclusion`, the CSC positions to skip per seed node (every edge ``u -> v`` of a
pair ``(u, v)``, and optionally its reverse edges); the sampling ops skip them inside
their kernels (:func:`~graphpipe.ops.sample_neighbors`) or, where a kernel cannot,
:func:`drop_excluded` removes them from a sampled layer.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numba
import numpy as np
import torch

from graphpipe.ops.layer_sample import LayerSample
from graphpipe.ops.selection import lower_bound_in

__all__ = ["EdgeExclusion", "check_exclusion", "drop_excluded", "in_neighbours_sorted", "seed_edge_exclusion"]


class EdgeExclusion(NamedTuple):
    """CSC positions a sampling op must not take, for a PREFIX of its destinations.

    Destination ``i`` (for ``i < len(indptr) - 1``) of the op's ``nodes`` skips the
    positions ``positions[indptr[i]:indptr[i + 1]]``, which lie within its own in-edge
    range and ascend strictly; the later destinations skip nothing. Samplers build one
    per batch for its seed nodes (:func:`seed_edge_exclusion`), which are the first
    destinations of every block layer.

    Attributes:
        indptr: ``[num_excluding + 1]`` int64 offsets into ``positions``.
        positions: ``[num_excluded]`` int64 CSC positions.
    """

    indptr: torch.Tensor
    positions: torch.Tensor


# ---------------------------------------------------------------- kernels' building blocks
@numba.njit(inline="always", nogil=True, cache=True)
def count_source(indices, start, end, u, sorted_indices):
    """How many positions of ``[start, end)`` have source ``u`` (edges ``u -> v``)."""
    if sorted_indices:
        lo = lower_bound_in(indices, start, end, u)
        return lower_bound_in(indices, lo, end, u + 1) - lo
    count = 0
    for p in range(start, end):
        count += indices[p] == u
    return count


@numba.njit(inline="always", nogil=True, cache=True)
def has_source(indices, start, end, u, sorted_indices):
    """Whether some position of ``[start, end)`` has source ``u``."""
    if sorted_indices:
        p = lower_bound_in(indices, start, end, u)
        return p < end and indices[p] == u
    for p in range(start, end):
        if indices[p] == u:
            return True
    return False


@numba.njit(inline="always", nogil=True, cache=True)
def write_source_positions(indices, start, end, u, sorted_indices, out, at):
    """Write the positions of ``[start, end)`` with source ``u`` to ``out[at:]``, ascending;
    returns the index after the last one written."""
    p = lower_bound_in(indices, start, end, u) if sorted_indices else start
    while p < end:
        if indices[p] == u:
            out[at] = p
            at += 1
        elif sorted_indices:
            break
        p += 1
    return at


@numba.njit(parallel=True, nogil=True, cache=True)
def _unsorted_nodes(indptr, indices):
    bad = 0
    for v in numba.prange(indptr.size - 1):
        for p in range(indptr[v] + 1, indptr[v + 1]):
            if indices[p] < indices[p - 1]:
                bad += 1
                break
    return bad


def in_neighbours_sorted(indptr: torch.Tensor, indices: torch.Tensor) -> bool:
    """Whether every node's sources ``indices[indptr[v]:indptr[v + 1]]`` are in
    non-decreasing order (then edges are found by binary search). ``O(num_edges)``,
    parallel; False for a graph on a CUDA device (its lookups run on host copies)."""
    if indptr.is_cuda or indices.is_cuda:
        return False
    return _unsorted_nodes(indptr.contiguous().numpy(), indices.contiguous().numpy()) == 0


# ---------------------------------------------------------------- seed-edge exclusion
@numba.njit(parallel=True, nogil=True, cache=True)
def _exclusion_entries(indptr, indices, src, dst, local_src, local_dst, sorted_indices, reverse_pairs, reverse_positions):
    """``(local destination, CSC position)`` of every edge to exclude, unsorted, with repeats.

    Pair ``i`` contributes its edges ``src -> dst`` (at ``local_dst``) and, with
    ``reverse_pairs``, the edges ``dst -> src`` (at ``local_src``), or, with a non-empty
    ``reverse_positions``, ``reverse_positions[p]`` of each of its edges ``p`` (at
    ``local_src``: the map sends an edge to one with swapped endpoints)."""
    n = src.size
    forward = np.empty(n, np.int64)
    backward = np.empty(n, np.int64)
    by_map = reverse_positions.size > 0
    for i in numba.prange(n):
        v, u = dst[i], src[i]
        forward[i] = count_source(indices, np.int64(indptr[v]), np.int64(indptr[v + 1]), u, sorted_indices)
        if by_map:
            backward[i] = forward[i]
        elif reverse_pairs:
            backward[i] = count_source(indices, np.int64(indptr[u]), np.int64(indptr[u + 1]), v, sorted_indices)
        else:
            backward[i] = 0
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + forward[i] + backward[i]
    positions = np.empty(offsets[n], np.int64)
    owners = np.empty(offsets[n], np.int64)
    for i in numba.prange(n):
        v, u = dst[i], src[i]
        at = offsets[i]
        end = write_source_positions(indices, np.int64(indptr[v]), np.int64(indptr[v + 1]), u, sorted_indices, positions, at)
        owners[at:end] = local_dst[i]
        if by_map:
            for j in range(at, end):
                positions[end + j - at] = reverse_positions[positions[j]]
            owners[end : end + forward[i]] = local_src[i]
        elif reverse_pairs:
            stop = write_source_positions(indices, np.int64(indptr[u]), np.int64(indptr[u + 1]), v, sorted_indices, positions, end)
            owners[end:stop] = local_src[i]
    return owners, positions


@numba.njit(nogil=True, cache=True)
def _group_by_owner(owners, positions, num_owners, num_edges):
    """CSR over owners of their distinct positions, ascending (positions are unique to an
    owner: a CSC position has one destination)."""
    keys = owners * num_edges + positions
    keys.sort()
    indptr = np.zeros(num_owners + 1, np.int64)
    out = np.empty(keys.size, np.int64)
    m = 0
    for j in range(keys.size):
        if j > 0 and keys[j] == keys[j - 1]:
            continue
        owner = keys[j] // num_edges
        out[m] = keys[j] - owner * num_edges
        indptr[owner + 1] += 1
        m += 1
    for i in range(num_owners):
        indptr[i + 1] += indptr[i]
    return indptr, out[:m]


def seed_edge_exclusion(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    pairs: torch.Tensor,
    local_pairs: torch.Tensor,
    num_seed_nodes: int,
    *,
    sorted_indices: bool,
    reverse_pairs: bool = False,
    reverse_positions: Optional[torch.Tensor] = None,
) -> EdgeExclusion:
    """The edges a batch of node pairs must not sample, grouped by seed node.

    Args:
        indptr, indices: the graph's CSC arrays (host memory).
        pairs: ``[N, 2]`` int64 global ``(source, destination)`` ids.
        local_pairs: ``[N, 2]`` int64 local ids of the same nodes among the batch's
            ``num_seed_nodes`` seed nodes (``MiniBatch.compacted_seeds``).
        num_seed_nodes: the number of seed nodes (the batch's first destinations).
        sorted_indices: every node's sources are sorted (:func:`in_neighbours_sorted`).
        reverse_pairs: also exclude every edge ``v -> u`` of a pair ``(u, v)``.
        reverse_positions: optional ``[num_edges]`` CSC position -> CSC position of its
            reverse edge, which must run between the same nodes the other way; the
            reverse of each seed edge is then excluded (instead of ``reverse_pairs``).

    Returns:
        An :class:`EdgeExclusion` over the ``num_seed_nodes`` seed nodes: seed node ``j``
        skips every edge ``u -> v`` of a pair whose ``v`` is node ``j`` (parallel edges
        included) and the chosen reverse edges that end at it. Pairs that are not edges
        (most negatives) exclude nothing.
    """
    host = [t.contiguous().numpy() for t in (indptr, indices)]
    pairs_np = pairs.to(torch.int64).contiguous().numpy()
    local_np = local_pairs.to(torch.int64).contiguous().numpy()
    reverse_np = np.empty(0, np.int64) if reverse_positions is None else reverse_positions.contiguous().numpy()
    owners, positions = _exclusion_entries(
        *host, pairs_np[:, 0].copy(), pairs_np[:, 1].copy(), local_np[:, 0].copy(), local_np[:, 1].copy(),
        bool(sorted_indices), bool(reverse_pairs), reverse_np,
    )  # fmt: skip
    grouped_indptr, grouped = _group_by_owner(owners, positions, int(num_seed_nodes), max(indices.numel(), 1))
    return EdgeExclusion(torch.from_numpy(grouped_indptr), torch.from_numpy(grouped))


def check_exclusion(exclude: EdgeExclusion, indptr: torch.Tensor, nodes: torch.Tensor, where: str) -> None:
    """``exclude`` is an :class:`EdgeExclusion` for a prefix of ``nodes`` whose positions
    ascend strictly within each destination's in-edge range: ``O(excluded)``."""
    if not isinstance(exclude, EdgeExclusion):
        raise TypeError(f"{where}: `exclude` must be a graphpipe.ops.edge_lookup.EdgeExclusion, got {type(exclude).__name__}")
    offsets, positions = exclude
    for name, t in (("indptr", offsets), ("positions", positions)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != 1:
            raise TypeError(f"{where}: `exclude.{name}` must be a 1-D int64 tensor")
    m = offsets.numel() - 1
    if m < 0 or m > nodes.numel():
        raise ValueError(
            f"{where}: `exclude` covers {m} destinations but there are {nodes.numel()} (`exclude.indptr` needs "
            f"between 1 and num_dst + 1 entries)"
        )
    offsets, positions = offsets.cpu(), positions.cpu()
    counts = offsets[1:] - offsets[:-1]
    if int(offsets[0]) != 0 or bool((counts < 0).any()) or int(offsets[-1]) != positions.numel():
        raise ValueError(f"{where}: `exclude.indptr` must rise from 0 to len(exclude.positions) = {positions.numel()}")
    if positions.numel() == 0:
        return
    owner = torch.repeat_interleave(torch.arange(m), counts)
    seeds = nodes[:m].to(indptr.device)
    start = indptr[seeds].cpu().to(torch.int64)[owner]
    end = indptr[seeds + 1].cpu().to(torch.int64)[owner]
    ascending = (positions[1:] > positions[:-1]) | (owner[1:] != owner[:-1])
    if not bool(((positions >= start) & (positions < end)).all()) or not bool(ascending.all()):
        raise ValueError(
            f"{where}: `exclude.positions` of each destination must ascend strictly within its in-edge range "
            f"[indptr[v], indptr[v + 1])"
        )


def drop_excluded(
    sample: LayerSample,
    exclusion: EdgeExclusion,
    nodes: torch.Tensor,
    indptr: torch.Tensor,
    probs: Optional[torch.Tensor] = None,
) -> LayerSample:
    """``sample`` without the edges ``exclusion`` names, for ops that cannot skip them while
    sampling (LABOR, the GPU paths). Those destinations then hold fewer edges than their
    fanout asked for.

    When the sample has ``edge_weights`` (LABOR's Horvitz-Thompson weights, which estimate
    the mean over a destination's in-edges), the weights of a destination with excluded
    in-edges are multiplied by ``total / kept``: its number of in-edges over those not
    excluded (with ``probs``: their weight sums), so that they estimate the mean over the
    in-edges that remain, the neighbourhood the model is allowed to see.

    Args:
        sample: a layer sampled for ``nodes``.
        exclusion: the positions to drop, for a prefix of ``nodes``.
        nodes: the ``[num_dst]`` destinations ``sample`` was drawn for.
        indptr: the graph's CSC offsets.
        probs: the edge weights the layer was sampled with, if any.
    """
    m = exclusion.indptr.numel() - 1
    excluded = exclusion.positions.to(sample.edge_ids.device)
    if m == 0 or excluded.numel() == 0:
        return sample
    head = int(sample.indptr[m])  # the sampled edges of the first m destinations
    drop = torch.zeros(sample.edge_ids.numel(), dtype=torch.bool, device=excluded.device)
    drop[:head] = torch.isin(sample.edge_ids[:head], excluded)
    keep = ~drop
    counts = sample.indptr[1:] - sample.indptr[:-1]
    destination = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)
    counts = counts - torch.zeros_like(counts).index_add_(0, destination[drop], torch.ones_like(destination[drop]))
    new_indptr = torch.zeros_like(sample.indptr)
    torch.cumsum(counts, 0, out=new_indptr[1:])
    weights = sample.edge_weights
    if weights is not None:
        weights = weights * _kept_share_inverse(exclusion, nodes[:m], indptr, probs).to(weights)[destination.clamp(max=m)]
    return LayerSample(
        new_indptr, sample.indices[keep], sample.edge_ids[keep], None if weights is None else weights[keep]
    )


def _kept_share_inverse(exclusion: EdgeExclusion, seeds: torch.Tensor, indptr: torch.Tensor, probs) -> torch.Tensor:
    """``[m + 1]`` float64: per excluding destination, (all in-edges) / (in-edges kept),
    by count or by weight (summed over the destination's range only); 1 where nothing
    remains, and a last entry 1 for the destinations after the prefix."""
    device = exclusion.positions.device
    seeds = seeds.to(indptr.device)
    start, end = indptr[seeds].to(torch.int64), indptr[seeds + 1].to(torch.int64)
    num_excluded = exclusion.indptr[1:] - exclusion.indptr[:-1]
    if probs is None:
        total = (end - start).to(torch.float64).to(device)
        removed = num_excluded.to(torch.float64)
    else:
        degrees = end - start
        owner = torch.repeat_interleave(torch.arange(seeds.numel(), device=start.device), degrees)
        first = torch.repeat_interleave(start - (torch.cumsum(degrees, 0) - degrees), degrees)
        in_edges = torch.arange(owner.numel(), device=start.device) + first
        weights = probs.to(start.device)[in_edges].to(torch.float64)
        total = torch.zeros(seeds.numel(), dtype=torch.float64, device=start.device).index_add_(0, owner, weights)
        total = total.to(device)
        excluded_owner = torch.repeat_interleave(torch.arange(seeds.numel(), device=device), num_excluded)
        excluded_weights = probs.to(device)[exclusion.positions].to(torch.float64)
        removed = torch.zeros_like(total).index_add_(0, excluded_owner, excluded_weights)
    kept = total - removed
    scale = torch.where(kept > 0, total / kept.clamp(min=1e-300), torch.ones_like(total))
    return torch.cat([scale, scale.new_ones(1)])
