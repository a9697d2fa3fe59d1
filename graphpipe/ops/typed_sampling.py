"""Sampling one layer of a typed graph: one kernel call serves every edge type.

A typed :class:`~graphpipe.CSCGraph` groups each destination's in-edges by edge type, so
the in-edges of type ``t`` of destination ``v`` are a sub-range ``[lo, hi)`` of ``v``'s
CSC range, found by two binary searches on ``type_per_edge``. :func:`typed_segments_of_nodes`
lists these ranges for the layer's ``(v, t)`` pairs ("segments") interleaved as
``[lo_0, hi_0, lo_1, hi_1, ...]``: read as an ``indptr`` with destinations ``0, 2, 4,
...``, it lets the homogeneous kernels sample every segment of the layer in one call,
each with the rules and the fanout of its edge type.

Randomness stays keyed by vertices, never by positions: neighbor sampling keys segment
``(v, t)`` by ``v * num_edge_types + t`` (so the edge types of one node draw independent
variates) and LABOR keys every variate by its source node, as on homogeneous graphs.
A segment's sample thus depends only on the key, ``v``, ``t`` and the fanout: the same in
every batch, on every rank and for any thread count.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import numba
import numpy as np
import torch

from graphpipe.ops.edge_lookup import EdgeExclusion
from graphpipe.ops.layer_sample import LayerSample
from graphpipe.ops.selection import check_kernel_report, lower_bound_in, range_is_bad

__all__ = ["typed_segments_of_nodes", "sample_segments"]

# sample(indptr, nodes, fanout, key_ids, exclude) -> LayerSample of the in-edge ranges
# [indptr[v], indptr[v + 1]) of ``nodes`` (for segments: indptr = bounds, nodes = even
# positions), destination i keyed by key_ids[i] (None: by its node id), the first
# destinations skipping what ``exclude`` names.
SegmentSampler = Callable[[torch.Tensor, torch.Tensor, int, Optional[torch.Tensor], Optional[EdgeExclusion]], LayerSample]


@numba.njit(parallel=True, nogil=True, cache=True)
def _segments_of_nodes(indptr, type_per_edge, nodes, edge_types, first_segment, num_edge_types, bounds, key_ids):
    """Fill ``bounds[2s:2s + 2]`` with the in-edge range and ``key_ids[s]`` with the key
    of every pair of ``nodes`` (one node type's destinations) and ``edge_types``
    (ascending ids), where segment ``s = first_segment[j] + i`` is node ``i``'s range of
    type ``edge_types[j]``; a node's range is read once for all its types. Returns the
    number of destinations whose range is bad (their segments are empty)."""
    num_edges = type_per_edge.size
    bad = 0
    for i in numba.prange(nodes.size):
        v = nodes[i]
        start, end = np.int64(indptr[v]), np.int64(indptr[v + 1])
        broken = range_is_bad(start, end, num_edges)
        bad += broken
        lo = start
        for j in range(edge_types.size):
            t = edge_types[j]
            s = first_segment[j] + i
            key_ids[s] = v * num_edge_types + t
            if broken:
                bounds[2 * s] = 0
                bounds[2 * s + 1] = 0
                continue
            lo = lower_bound_in(type_per_edge, lo, end, t)
            hi = lower_bound_in(type_per_edge, lo, end, t + 1)
            bounds[2 * s] = lo
            bounds[2 * s + 1] = hi
            lo = hi
    return bad


def typed_segments_of_nodes(
    indptr: torch.Tensor,
    type_per_edge: torch.Tensor,
    groups: Sequence[Tuple[torch.Tensor, Sequence[int]]],
    num_edge_types: int,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The CSC ranges of the in-edges of every edge type of every node of ``groups``,
    ordered by edge type, then node.

    Args:
        indptr: ``[num_nodes + 1]`` the typed graph's CSC offsets (CPU).
        type_per_edge: ``[num_edges]`` edge type ids, ascending within each destination.
        groups: ``(nodes, edge_types)`` per destination node type: ``[n]`` int64 global
            ids and the (ascending) edge type ids whose segments they get; every edge
            type appears in one group at most.
        num_edge_types: the graph's number of edge types.

    Returns:
        ``(bounds, key_ids)``: ``[2 * S]`` ``[lo_0, hi_0, lo_1, hi_1, ...]`` of
        ``indptr``'s dtype (so the sampling kernels run the code compiled for the graph's
        own ``indptr``) and ``[S]`` int64 ``node * num_edge_types + edge_type``; segments
        in ascending edge type order, each edge type's in the order of its group's nodes.
    """
    indptr_np, types_np = indptr.numpy(), type_per_edge.numpy()
    sizes = {t: nodes.numel() for nodes, edge_types in groups for t in edge_types}
    first, total = {}, 0
    for t in sorted(sizes):
        first[t] = total
        total += sizes[t]
    bounds = np.empty(2 * total, indptr_np.dtype)
    key_ids = np.empty(total, np.int64)
    bad = 0
    for nodes, edge_types in groups:
        edge_types = sorted(edge_types)
        if not edge_types or nodes.numel() == 0:
            continue
        bad += _segments_of_nodes(
            indptr_np, types_np, nodes.numpy(), np.array(edge_types, np.int64), np.array([first[t] for t in edge_types], np.int64),
            num_edge_types, bounds, key_ids,
        )  # fmt: skip
    check_kernel_report(bad, 0, "typed_segments_of_nodes")
    return torch.from_numpy(bounds), torch.from_numpy(key_ids)


def sample_segments(
    bounds: torch.Tensor,
    key_ids: torch.Tensor,
    fanouts: torch.Tensor,
    sample: SegmentSampler,
    exclude: Optional[EdgeExclusion] = None,
) -> LayerSample:
    """Sample the segments of ``bounds``/``key_ids`` (:func:`typed_segments_of_nodes`),
    segment ``i`` with ``fanouts[i]`` (``-1``: all its in-edges): one call of ``sample``
    per run of equal fanouts, so a layer whose edge types share one fanout (usually all
    of them) is one call.

    ``sample(bounds, segment_nodes, fanout, key_ids, exclude)`` samples the segments
    ``segment_nodes`` (even positions of ``bounds``) with one fanout, e.g.
    :func:`~graphpipe.ops.sample_neighbors` or :func:`~graphpipe.ops.sample_labor` with
    ``indptr=bounds``. ``exclude`` (over the first segments, as the ops take it) is cut
    per call. Returns a :class:`LayerSample` with one destination per segment, in
    segment order; its ``indices`` are global source ids and ``edge_ids`` CSC positions
    of the graph."""
    num_segments = key_ids.numel()
    if num_segments == 0:
        return sample(bounds.new_zeros(1), bounds.new_empty(0), 1, key_ids, None)
    change = torch.nonzero(fanouts[1:] != fanouts[:-1]).flatten() + 1
    cuts = [0, *change.tolist(), num_segments]
    runs = []
    for lo, hi in zip(cuts, cuts[1:]):
        runs.append(sample(bounds, torch.arange(2 * lo, 2 * hi, 2), int(fanouts[lo]), key_ids[lo:hi], _cut(exclude, lo, hi)))
    if len(runs) == 1:
        return runs[0]
    counts = torch.cat([run.indptr[1:] - run.indptr[:-1] for run in runs])
    indptr_out = torch.zeros(num_segments + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=indptr_out[1:])
    weights = None if runs[0].edge_weights is None else torch.cat([run.edge_weights for run in runs])
    return LayerSample(
        indptr_out, torch.cat([run.indices for run in runs]), torch.cat([run.edge_ids for run in runs]), weights
    )


def _cut(exclude: Optional[EdgeExclusion], lo: int, hi: int) -> Optional[EdgeExclusion]:
    """The part of ``exclude`` for the segments ``[lo, hi)``, or None when it names none."""
    if exclude is None or lo >= exclude.indptr.numel() - 1:
        return None
    indptr = exclude.indptr[lo : min(hi, exclude.indptr.numel() - 1) + 1]
    first, last = int(indptr[0]), int(indptr[-1])
    return None if first == last else EdgeExclusion(indptr - first, exclude.positions[first:last])
