"""Edges by their endpoints, and the edges a layer must not sample (link prediction's seeds).

The edges ``u -> v`` are the positions of ``v``'s CSC range whose source is ``u``: a binary
search when every node's sources are sorted (:func:`in_neighbours_sorted`), a scan
otherwise. On a typed graph a node's in-edges are grouped by ascending edge type, so type
``t``'s are a sub-range (:func:`in_edge_range`), and "sorted" means within each sub-range.
:func:`seed_edge_exclusion` turns :class:`EdgeQueries` into an :class:`EdgeExclusion`, which
the NS ops (CPU and GPU) skip while sampling and :func:`drop_excluded` removes from a sampled layer (LABOR).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numba
import numpy as np
import torch

from graphpipe.ops.layer_sample import LayerSample, ragged
from graphpipe.ops.selection import lower_bound_in

__all__ = ["EdgeExclusion", "EdgeQueries", "check_exclusion", "drop_excluded", "exclusion_arrays", "in_edge_range"]
__all__ += ["in_neighbours_sorted", "seed_edge_exclusion"]


class EdgeExclusion(NamedTuple):
    """CSC positions a sampling op must not take, for a PREFIX of its destinations (a batch's
    seeds, the first destinations of every layer): destination ``i < len(indptr) - 1``
    skips ``positions[indptr[i]:indptr[i + 1]]``, strictly ascending within its own range.

    Attributes:
        indptr: ``[num_excluding + 1]`` int64 offsets into ``positions``.
        positions: ``[num_excluded]`` int64 CSC positions.
    """

    indptr: torch.Tensor
    positions: torch.Tensor


class EdgeQueries(NamedTuple):
    """Edges to look up, one query per row, all ``[Q]`` int64: the in-edges of ``nodes[i]``
    (of type ``edge_types[i]`` on a typed graph) from ``sources[i]``, excluded for the
    destination ``owners[i]``, and their reverse edges for ``reverse_owners[i]``.

    Attributes:
        nodes: the destinations whose in-edges are searched.
        sources: the source each query looks for.
        owners: the destination (of the sampling op) that must skip what is found.
        edge_types: edge type ids, or None (every in-edge of an untyped graph).
        reverse_owners: owners of the mapped reverse edges, or None.
    """

    nodes: torch.Tensor
    sources: torch.Tensor
    owners: torch.Tensor
    edge_types: Optional[torch.Tensor] = None
    reverse_owners: Optional[torch.Tensor] = None


# No edge types (an untyped graph) or no excluded edges (an EdgeExclusion over no
# destinations): one compiled kernel either way.
_NO_TYPES = np.zeros(0, np.uint8)
_NO_EXCLUSION = (np.zeros(1, np.int64), np.zeros(0, np.int64))


def exclusion_arrays(exclude: Optional[EdgeExclusion]):
    """``(indptr, positions)`` of ``exclude`` as numpy arrays for the kernels (none: empty)."""
    return _NO_EXCLUSION if exclude is None else tuple(t.contiguous().numpy() for t in exclude)


# ---------------------------------------------------------------- kernels' building blocks
@numba.njit(inline="always", nogil=True, cache=True)
def in_edge_range(indptr, type_per_edge, v, t):
    """``(start, end)``: the CSC positions of ``v``'s in-edges of edge type ``t``, or of all
    of them when ``t < 0`` (``type_per_edge`` may then be empty)."""
    start, end = np.int64(indptr[v]), np.int64(indptr[v + 1])
    if t < 0:
        return start, end
    lo = lower_bound_in(type_per_edge, start, end, t)
    return lo, lower_bound_in(type_per_edge, lo, end, t + 1)


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
    """Write the positions of ``[start, end)`` with source ``u`` to ``out[at:]``; returns the end."""
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
def _unsorted_nodes(indptr, indices, type_per_edge):
    typed = type_per_edge.size > 0
    bad = 0
    for v in numba.prange(indptr.size - 1):
        for p in range(indptr[v] + 1, indptr[v + 1]):
            if indices[p] < indices[p - 1] and (not typed or type_per_edge[p] == type_per_edge[p - 1]):
                bad += 1
                break
    return bad


def in_neighbours_sorted(indptr: torch.Tensor, indices: torch.Tensor, type_per_edge: Optional[torch.Tensor] = None) -> bool:
    """Whether every node's sources are non-decreasing (within each edge type's sub-range
    when ``type_per_edge`` is given), so edges are found by binary search. ``O(num_edges)``;
    False on a CUDA device."""
    if indptr.is_cuda or indices.is_cuda:
        return False
    types = _NO_TYPES if type_per_edge is None else type_per_edge.contiguous().numpy()
    return _unsorted_nodes(indptr.contiguous().numpy(), indices.contiguous().numpy(), types) == 0


# ---------------------------------------------------------------- seed-edge exclusion
@numba.njit(parallel=True, nogil=True, cache=True)
def _exclusion_entries(indptr, indices, type_per_edge, nodes, sources, owners, edge_types, reverse_owners, sorted_indices, reverse_positions):
    """``(owner, CSC position)`` of every edge the queries find, unsorted, with repeats (and
    ``reverse_positions[p]`` for ``reverse_owners`` when that is not empty)."""
    n = nodes.size
    typed = edge_types.size > 0
    by_map = reverse_owners.size > 0
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    found = np.empty(n, np.int64)
    for i in numba.prange(n):
        starts[i], ends[i] = in_edge_range(indptr, type_per_edge, nodes[i], edge_types[i] if typed else -1)
        found[i] = count_source(indices, starts[i], ends[i], sources[i], sorted_indices)
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + found[i] * (2 if by_map else 1)
    positions = np.empty(offsets[n], np.int64)
    entry_owners = np.empty(offsets[n], np.int64)
    for i in numba.prange(n):
        at = offsets[i]
        end = write_source_positions(indices, starts[i], ends[i], sources[i], sorted_indices, positions, at)
        entry_owners[at:end] = owners[i]
        if by_map:
            for j in range(at, end):
                positions[end + j - at] = reverse_positions[positions[j]]
            entry_owners[end : end + found[i]] = reverse_owners[i]
    return entry_owners, positions


@numba.njit(nogil=True, cache=True)
def _group_by_owner(owners, positions, num_owners, num_edges):
    """CSR over owners of their distinct positions, ascending."""
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
    queries: EdgeQueries,
    num_owners: int,
    *,
    sorted_indices: bool,
    type_per_edge: Optional[torch.Tensor] = None,
    reverse_positions: Optional[torch.Tensor] = None,
) -> EdgeExclusion:
    """The edges a batch must not sample, grouped by owner.

    Args:
        indptr, indices: the graph's CSC arrays (host memory).
        queries: owners in ``[0, num_owners)``, the first destinations of the sampling ops.
        sorted_indices: :func:`in_neighbours_sorted` of the graph.
        type_per_edge: a typed graph's ``[num_edges]`` edge type ids, with ``queries.edge_types``.
        reverse_positions: ``[num_edges]`` CSC position of each edge's reverse, with
            ``queries.reverse_owners``.

    Returns:
        An :class:`EdgeExclusion` over ``num_owners`` destinations: owner ``j`` skips every
        edge its queries found (parallel edges included), each once.
    """

    def host(t, dtype=np.int64):
        return np.zeros(0, dtype) if t is None else t.to(torch.int64).contiguous().numpy()

    types = _NO_TYPES if type_per_edge is None else type_per_edge.contiguous().numpy()
    owners, positions = _exclusion_entries(
        indptr.contiguous().numpy(), indices.contiguous().numpy(), types, host(queries.nodes), host(queries.sources),
        host(queries.owners), host(queries.edge_types), host(queries.reverse_owners), bool(sorted_indices),
        host(None) if reverse_positions is None else reverse_positions.contiguous().numpy(),
    )  # fmt: skip
    grouped_indptr, grouped = _group_by_owner(owners, positions, int(num_owners), max(indices.numel(), 1))
    return EdgeExclusion(torch.from_numpy(grouped_indptr), torch.from_numpy(grouped))


def check_exclusion(exclude: EdgeExclusion, indptr: torch.Tensor, nodes: torch.Tensor, where: str) -> None:
    """``exclude`` is a valid :class:`EdgeExclusion` for a prefix of ``nodes``: ``O(excluded)``."""
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
    """``sample`` (drawn for ``nodes`` with the edge weights ``probs``, if any) without the
    edges ``exclusion`` names, for ops that cannot skip them while sampling (LABOR, whose
    variates are shared between nodes): those destinations hold fewer edges than their fanout. Their Horvitz-Thompson
    ``edge_weights``, if any, are multiplied by (in-edges) / (in-edges not excluded), by
    count or by ``probs``, to estimate the mean over the neighbourhood that remains."""
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
    weights = sample.edge_weights
    if weights is not None:
        weights = weights * _kept_share_inverse(exclusion, nodes[:m], indptr, probs).to(weights)[destination.clamp(max=m)]
    return LayerSample.from_counts(
        counts, sample.indices[keep], sample.edge_ids[keep], None if weights is None else weights[keep]
    )


def _kept_share_inverse(exclusion: EdgeExclusion, seeds: torch.Tensor, indptr: torch.Tensor, probs) -> torch.Tensor:
    """``[m + 1]`` float64: per excluding destination, (in-edges) / (in-edges kept) by count or
    weight, 1 where nothing remains, and a last 1 for the destinations after the prefix."""
    device = exclusion.positions.device
    seeds = seeds.to(indptr.device)
    start, end = indptr[seeds].to(torch.int64), indptr[seeds + 1].to(torch.int64)
    num_excluded = exclusion.indptr[1:] - exclusion.indptr[:-1]
    if probs is None:
        total = (end - start).to(torch.float64).to(device)
        removed = num_excluded.to(torch.float64)
    else:
        owner, position, _ = ragged(end - start, int((end - start).sum()))
        weights = probs.to(start.device)[start[owner] + position].to(torch.float64)
        total = torch.zeros(seeds.numel(), dtype=torch.float64, device=start.device).index_add_(0, owner, weights)
        total = total.to(device)
        excluded_owner = torch.repeat_interleave(torch.arange(seeds.numel(), device=device), num_excluded)
        excluded_weights = probs.to(device)[exclusion.positions].to(torch.float64)
        removed = torch.zeros_like(total).index_add_(0, excluded_owner, excluded_weights)
    kept = total - removed
    scale = torch.where(kept > 0, total / kept.clamp(min=1e-300), torch.ones_like(total))
    return torch.cat([scale, scale.new_ones(1)])
