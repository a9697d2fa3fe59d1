"""Sampling one layer of a typed graph: one kernel call serves every edge type.

A typed :class:`~graphpipe.CSCGraph` groups each destination's in-edges by edge type, so
type ``t``'s in-edges of ``v`` are a sub-range ``[lo, hi)`` of ``v``'s CSC range (a
"segment"). :func:`typed_segments_of_nodes` lists a layer's segments as ``[lo_0, hi_0,
lo_1, hi_1, ...]``: read as an ``indptr`` with destinations ``0, 2, 4, ...``, the
homogeneous kernels sample them all in one call. Variates stay keyed by vertices: neighbor
sampling keys segment ``(v, t)`` by ``v * num_edge_types + t``, LABOR by source node, so a
segment's sample depends only on the key, ``v``, ``t`` and the fanout.
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

# sample(indptr, nodes, fanout, key_ids, exclude) -> LayerSample of the ranges of ``nodes``
# (segments: indptr = bounds, nodes = even positions), destination i keyed by key_ids[i].
SegmentSampler = Callable[[torch.Tensor, torch.Tensor, int, Optional[torch.Tensor], Optional[EdgeExclusion]], LayerSample]


@numba.njit(parallel=True, nogil=True, cache=True)
def _segments_of_nodes(indptr, type_per_edge, nodes, edge_types, first_segment, num_edge_types, bounds, key_ids):
    """Fill ``bounds[2s:2s + 2]`` and ``key_ids[s]`` of segment ``s = first_segment[j] + i``,
    node ``i``'s range of type ``edge_types[j]`` (ascending); returns the count of bad
    ranges (their segments are empty)."""
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
    """The segments of every edge type of every node of ``groups``, by edge type, then node.

    Args:
        indptr: ``[num_nodes + 1]`` the typed graph's CSC offsets (CPU).
        type_per_edge: ``[num_edges]`` edge type ids, ascending within each destination.
        groups: ``(nodes, edge_types)`` per destination node type: ``[n]`` int64 global
            ids and the edge type ids whose segments they get (each type in one group).
        num_edge_types: the graph's number of edge types.

    Returns:
        ``(bounds, key_ids)``: ``[2 * S]`` ``[lo_0, hi_0, ...]`` of ``indptr``'s dtype (the
        kernels compiled for the graph's ``indptr`` serve) and ``[S]`` int64 ``node *
        num_edge_types + edge_type``.
    """
    indptr_np, types_np = indptr.numpy(), type_per_edge.numpy()
    sizes = {t: nodes.numel() for nodes, edge_types in groups for t in edge_types}
    starts = np.cumsum([0] + [sizes[t] for t in sorted(sizes)]).tolist()  # of each type's segments
    first, total = dict(zip(sorted(sizes), starts)), starts[-1]
    bounds = np.empty(2 * total, indptr_np.dtype)
    key_ids = np.empty(total, np.int64)
    bad = 0
    for nodes, edge_types in groups:
        edge_types = sorted(edge_types)
        if not edge_types or nodes.numel() == 0:
            continue
        # nodes may be a strided view (a pair column): contiguous, the compiled kernel serves
        bad += _segments_of_nodes(
            indptr_np, types_np, nodes.contiguous().numpy(), np.array(edge_types, np.int64), np.array([first[t] for t in edge_types], np.int64),
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
    """Sample segment ``i`` of ``bounds``/``key_ids`` (:func:`typed_segments_of_nodes`) with
    ``fanouts[i]``: one call of ``sample`` (a :data:`SegmentSampler`, e.g. ``sample_neighbors``
    with ``indptr=bounds``) per run of equal fanouts, ``exclude`` (over the first segments)
    cut per call. Returns a :class:`LayerSample` with one destination per segment; its
    ``edge_ids`` are CSC positions of the graph."""
    num_segments = key_ids.numel()
    if num_segments == 0:
        return sample(bounds.new_zeros(1), key_ids.new_empty(0), 1, key_ids, None)
    change = torch.nonzero(fanouts[1:] != fanouts[:-1]).flatten() + 1
    cuts = [0, *change.tolist(), num_segments]
    runs = []
    for lo, hi in zip(cuts, cuts[1:]):
        runs.append(sample(bounds, torch.arange(2 * lo, 2 * hi, 2), int(fanouts[lo]), key_ids[lo:hi], _cut(exclude, lo, hi)))
    if len(runs) == 1:
        return runs[0]
    counts = torch.cat([run.indptr[1:] - run.indptr[:-1] for run in runs])
    weights = None if runs[0].edge_weights is None else torch.cat([run.edge_weights for run in runs])
    return LayerSample.from_counts(
        counts, torch.cat([run.indices for run in runs]), torch.cat([run.edge_ids for run in runs]), weights
    )


def _cut(exclude: Optional[EdgeExclusion], lo: int, hi: int) -> Optional[EdgeExclusion]:
    """The part of ``exclude`` for the segments ``[lo, hi)``, or None when it names none."""
    if exclude is None or lo >= exclude.indptr.numel() - 1:
        return None
    indptr = exclude.indptr[lo : min(hi, exclude.indptr.numel() - 1) + 1]
    first, last = int(indptr[0]), int(indptr[-1])
    return None if first == last else EdgeExclusion(indptr - first, exclude.positions[first:last])
