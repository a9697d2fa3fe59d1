"""One-layer sampling and unique-and-compact as torch ops, for graphs and seeds on a GPU.

The CUDA branches of :func:`~graphpipe.ops.sample_neighbors`, ``sample_labor`` and
``unique_and_compact``, in device-agnostic torch ops (tested on CPU tensors against the
numba kernels): same contract, same vertex-keyed variates (:mod:`graphpipe.ops.torch_random`),
so a vertex's sample does not depend on the device that draws it. The graph may be in
device or pinned host memory. The host is read only for output sizes; the CPU kernels'
checks (bad ``indptr`` ranges, non-finite weights) ride on those reads (:func:`_host_ints`).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import torch

from graphpipe._internal.devices import device_array
from graphpipe.ops import torch_random
from graphpipe.ops.edge_lookup import EdgeExclusion
from graphpipe.ops.layer_sample import LayerSample, ragged
from graphpipe.ops.selection import LOG_SPACE_SPREAD, check_kernel_report

_TRITON_MAX_FANOUT = 64  # the largest fanout whose K x K ranks triton_sampling computes

__all__ = [
    "sample_labor_torch",
    "sample_neighbors_torch",
    "unique_and_compact_torch",
]


def _neighbourhoods(indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor):
    """``(indices, nodes, start, deg, bad)``: ``indices`` readable on ``nodes``' device, int64
    ``nodes``, their first edge ids and in-degrees, and ``bad`` (0-d) counting the ranges
    that are decreasing or outside ``[0, len(indices)]``: pass it to the first
    :func:`_host_ints` before using the ranges."""
    indptr, indices = device_array(indptr, nodes.device), device_array(indices, nodes.device)
    nodes = nodes.to(torch.int64)
    start = indptr[nodes].to(torch.int64)
    end = indptr[nodes + 1].to(torch.int64)
    bad = ((start < 0) | (end < start) | (end > indices.numel())).sum()
    return indices, nodes, start, end - start, bad


def _host_ints(where: str, bad: torch.Tensor, *values: torch.Tensor, non_finite=None) -> list:
    """The 0-d integer tensors ``values`` as Python ints, in one host read, after raising
    for ``bad`` ranges (:func:`_neighbourhoods`) or ``non_finite`` weights."""
    checks = [bad, bad if non_finite is None else non_finite]
    read = torch.stack([*checks, *(v.to(torch.int64) for v in values)]).tolist()
    check_kernel_report(read[0], 0 if non_finite is None else read[1], where)
    return read[2:]


def _in_edge_weights(weights: torch.Tensor, start: torch.Tensor, deg: torch.Tensor, bad: torch.Tensor):
    """Every in-edge's float64 weight, laid out by :func:`~graphpipe.ops.layer_sample.ragged`: ``(row, pos, offsets, w,
    non_finite, largest, log_space)``, with the 0-d count of NaN or infinite weights and per
    row the largest positive weight (0 if none) and whether scores need log space, as
    :func:`~graphpipe.ops.selection.weight_range` (over every in-edge, as the CPU kernels)."""
    (total_in,) = _host_ints("sample_neighbors", bad, deg.sum())
    row, pos, offsets = ragged(deg, total_in)
    w = weights[start[row] + pos].to(torch.float64)
    positive = w > 0
    largest = w.new_zeros(deg.numel()).scatter_reduce_(0, row, torch.where(positive, w, 0.0), reduce="amax")
    smallest = torch.full_like(largest, torch.inf).scatter_reduce_(
        0, row, torch.where(positive, w, torch.inf), reduce="amin"
    )
    return row, pos, offsets, w, (~torch.isfinite(w)).sum(), largest, smallest < largest * LOG_SPACE_SPREAD


class _Excluded(NamedTuple):
    """An :class:`EdgeExclusion` on the sampling op's device: per destination its excluded
    in-edges (``counts``, ``[num_dst]``) and the entries of earlier rows (``before``); per
    excluded in-edge its destination (``rows``), position in that range (``offsets``) and
    ``keys`` (ascending ``row * 2**32 + offset - j``, ``j`` its index within the row)."""

    counts: torch.Tensor
    before: torch.Tensor
    rows: torch.Tensor
    offsets: torch.Tensor
    keys: torch.Tensor


def _excluded(exclude: Optional[EdgeExclusion], start: torch.Tensor) -> Optional[_Excluded]:
    if exclude is None:
        return None
    indptr, positions = exclude.indptr.to(start.device), exclude.positions.to(start.device)
    m, total = indptr.numel() - 1, positions.numel()
    per_row = indptr.diff()
    counts = torch.zeros_like(start)
    counts[:m] = per_row
    before = torch.full_like(start, total)
    before[:m] = indptr[:-1]
    rows, rank, _ = ragged(per_row, total)  # rank: j, the entry's index within its row
    offsets = positions - start[rows]
    keys = rows * 2**32 + offsets - rank
    return _Excluded(counts, before, rows, offsets, keys)


def _skip_excluded(excluded: Optional[_Excluded], row: torch.Tensor, rank: torch.Tensor) -> torch.Tensor:
    """Ranks among a row's drawable in-edges -> positions in its range: the ``r``-th drawable
    one is ``r + #{j : offset_j - j <= r}`` (the CPU kernels' ``_skip_excluded``)."""
    if excluded is None:
        return rank
    return rank + torch.searchsorted(excluded.keys, row * 2**32 + rank, right=True) - excluded.before[row]


def _without_excluded(w: torch.Tensor, excluded: Optional[_Excluded], offsets: torch.Tensor) -> torch.Tensor:
    """Weights ``w`` (rows laid out by :func:`ragged` at ``offsets``), 0 at excluded in-edges."""
    if excluded is None:
        return w
    return w.index_fill(0, offsets[excluded.rows] + excluded.offsets, 0.0)


def _smallest_per_row(score: torch.Tensor, row: torch.Tensor, offsets: torch.Tensor, take: torch.Tensor, total_out: int):
    """Flat positions of the ``take[r]`` smallest scores of each row (items row-major, as
    :func:`ragged` lays them), ascending; ties keep the lower position."""
    order = torch.sort(score, stable=True).indices
    order = order[torch.sort(row[order], stable=True).indices]
    rank = torch.arange(order.numel(), device=order.device) - offsets[row[order]]
    keep = torch.zeros(score.numel(), dtype=torch.bool, device=score.device)
    keep[order] = rank < take[row[order]]
    return torch.nonzero_static(keep, size=total_out).view(-1)


def _layer(indices, counts, edge_ids, edge_weights=None) -> LayerSample:
    return LayerSample.from_counts(counts, indices[edge_ids].to(torch.int64), edge_ids, edge_weights)


def sample_neighbors_torch(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    fanout: int,
    *,
    key: int,
    replace: bool = False,
    probs: Optional[torch.Tensor] = None,
    exclude: Optional[EdgeExclusion] = None,
) -> LayerSample:
    """``sample_neighbors`` with torch ops (the CSC arrays on ``nodes``' device or pinned):
    uniform draws give the CPU op's edges; weighted ones match up to ``log`` rounding ties,
    and with replacement up to an edge at a prefix-sum boundary. ``exclude``'s in-edges are
    skipped while drawing, as the CPU kernels do. On a GPU, uniform draws without
    replacement or exclusion (the usual layer) run as two Triton kernels."""
    if nodes.is_cuda and probs is None and exclude is None and not replace and 0 < fanout <= _TRITON_MAX_FANOUT:
        from graphpipe.ops import triton_sampling  # needs triton, which CUDA builds of torch ship

        return triton_sampling.sample_uniform_triton(
            device_array(indptr, nodes.device), device_array(indices, nodes.device), nodes.to(torch.int64), fanout, key,
            lambda bad, total: _host_ints("sample_neighbors", bad, total)[0],
        )
    indices, nodes, start, deg, bad = _neighbourhoods(indptr, indices, nodes)
    weights = None if probs is None else device_array(probs, nodes.device)
    vkeys = torch_random.hash2(key, nodes)  # vertex v's variates depend on (key, v) only
    excluded = _excluded(exclude, start)
    if replace and fanout != -1:
        return _with_replacement(indices, nodes, fanout, start, deg, bad, vkeys, weights, excluded)
    if weights is None:
        drawable = deg if excluded is None else deg - excluded.counts
        counts = drawable if fanout == -1 else torch.clamp(drawable, max=fanout)
        over = drawable > (fanout if fanout != -1 else torch.iinfo(torch.int64).max)  # rows that draw a subset
        total_out, num_over = _host_ints("sample_neighbors", bad, counts.sum(), over.sum())
        row, pos, _ = ragged(counts, total_out)
        if num_over:  # Floyd's subsets for those rows only: memory in proportion to their output
            subset = torch.nonzero_static(over, size=num_over).view(-1)
            slot = torch.zeros_like(drawable).index_put_((subset,), torch.arange(num_over, device=drawable.device))
            floyd = _floyd(vkeys[subset], drawable[subset], fanout)
            pos = torch.where(over[row], floyd[slot[row], pos.clamp(max=fanout - 1)], pos)
        return _layer(indices, counts, start[row] + _skip_excluded(excluded, row, pos))
    row, pos, offsets, w, non_finite, largest, log_space = _in_edge_weights(weights, start, deg, bad)
    w = _without_excluded(w, excluded, offsets)
    positive = w > 0
    num_positive = torch.zeros_like(deg).index_add_(0, row, positive.to(torch.int64))
    counts = num_positive if fanout == -1 else torch.clamp(num_positive, max=fanout)
    (total_out,) = _host_ints("sample_neighbors", bad, counts.sum(), non_finite=non_finite)
    top = largest[row]
    exponential = -torch.log(torch_random.uniform_open(vkeys[row], pos))
    score = torch.where(
        log_space[row], torch.log(exponential) - (torch.log(w) - torch.log(top)), exponential / (w / top)
    )
    chosen = _smallest_per_row(torch.where(positive, score, torch.inf), row, offsets, counts, total_out)
    return _layer(indices, counts, start[row[chosen]] + pos[chosen])


def _randint(vkeys: torch.Tensor, draws, n: torch.Tensor) -> torch.Tensor:
    """Uniform integers in ``[0, n)`` (``n < 2**32``) from ``(vkeys, draws)``, as the numba
    ``_randint``: the hash's high 32 bits times ``n``, shifted down 32."""
    high = torch_random.logical_shift_right(torch_random.hash2(vkeys, draws), 32)
    return torch_random.logical_shift_right(high * n, 32)


def _floyd(vkeys: torch.Tensor, deg: torch.Tensor, k: int) -> torch.Tensor:
    """``[num_dst, k]`` ascending positions: Floyd's uniform ``k``-subset of ``[0, d)`` per row
    (where ``d > k``), all steps at once: ``t_s`` is already chosen iff an earlier draw
    equals it, or it equals ``j_r`` of the earlier step ``r = t_s - (d - k)`` whose own draw
    was chosen: an OR down a chain, resolved by pointer jumping in ``ceil(log2 k)`` rounds."""
    steps = torch.arange(k, device=deg.device)
    j = deg[:, None] - k + steps
    t = _randint(vkeys[:, None], steps, (j + 1).clamp(min=1))
    # An earlier equal draw: after a stable sort by value, every draw but the first of its value.
    values, order = torch.sort(t, dim=1, stable=True)
    repeat = torch.zeros_like(values, dtype=torch.bool)
    repeat[:, 1:] = values[:, 1:] == values[:, :-1]
    taken = torch.zeros_like(repeat).scatter_(1, order, repeat)
    link = t - (deg[:, None] - k)  # the step whose j equals the draw, if an earlier one
    link = torch.where((link >= 0) & (link < steps), link, steps)  # else itself: the chain ends
    for _ in range(max(1, (k - 1).bit_length())):
        taken = taken | taken.gather(1, link)
        link = link.gather(1, link)
    return torch.sort(torch.where(taken, j, t), dim=1).values


def _with_replacement(indices, nodes, fanout, start, deg, bad, vkeys, weights, excluded) -> LayerSample:
    draws = torch.arange(fanout, device=nodes.device)
    non_finite = None
    if weights is None:
        drawable = deg if excluded is None else deg - excluded.counts
        pos = _randint(vkeys[:, None], draws[None, :], drawable[:, None])
        has_edges = drawable > 0
    else:
        u = torch_random.uniform(vkeys[:, None], draws[None, :])
        row_all, pos_all, offsets, w, non_finite, largest, _ = _in_edge_weights(weights, start, deg, bad)
        w = _without_excluded(torch.where(w > 0, w / largest[row_all], 0.0), excluded, offsets)  # ratios: no overflow
        cum = torch.cumsum(w, 0)
        before = cum[(offsets - 1).clamp(min=0)] if cum.numel() else offsets.to(torch.float64)
        before = torch.where(offsets > 0, before, 0.0)
        seg_total = torch.zeros(deg.numel(), dtype=torch.float64, device=deg.device).index_add_(0, row_all, w)
        has_edges = seg_total > 0
        target = before[:, None] + u * seg_total[:, None]
        pos = torch.searchsorted(cum, target, right=True) - offsets[:, None]
        # Rounding can put a target past the range: it belongs to the last positive edge.
        last_positive = torch.full_like(deg, -1).scatter_reduce_(
            0, row_all, torch.where(w > 0, pos_all, -1), reduce="amax"
        )
        pos = torch.where(pos >= deg[:, None], last_positive[:, None], pos)
    pos = torch.sort(pos, dim=1).values
    if weights is None:
        pos = _skip_excluded(excluded, torch.arange(pos.size(0), device=pos.device)[:, None], pos)
    counts = torch.where(has_edges, fanout, 0)
    (drawing,) = _host_ints("sample_neighbors", bad, has_edges.sum(), non_finite=non_finite)
    rows = torch.nonzero_static(has_edges, size=drawing).view(-1)
    edge_ids = (start[:, None] + pos)[rows].view(-1)
    return _layer(indices, counts, edge_ids)


def sample_labor_torch(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    fanout: int,
    *,
    variates,
) -> LayerSample:
    """Unweighted LABOR-0 with torch ops (``sample_labor``'s rules); ``variates(t)`` maps
    ``[k]`` int64 vertex ids to their float64 uniforms ``r_t``."""
    indices, nodes, start, deg, bad = _neighbourhoods(indptr, indices, nodes)
    counts = deg if fanout == -1 else torch.clamp(deg, max=fanout)
    total_in, total_out = _host_ints("sample_labor", bad, deg.sum(), counts.sum())
    row, pos, offsets = ragged(deg, total_in)
    eids = start[row] + pos
    if total_in != total_out:
        chosen = _smallest_per_row(variates(indices[eids].to(torch.int64)), row, offsets, counts, total_out)
        eids = eids[chosen]
    weights = torch.repeat_interleave(
        1.0 / counts.clamp(min=1).to(torch.float32), counts, output_size=total_out
    )
    return _layer(indices, counts, eids, weights)


def unique_and_compact_torch(dst_nodes: torch.Tensor, src_nodes: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``unique_and_compact`` with torch ops (any device), same contract; two host reads (output sizes)."""
    dst_nodes, src_nodes = dst_nodes.to(torch.int64), src_nodes.to(torch.int64)
    num_dst = dst_nodes.numel()
    uniq, inverse = torch.unique(torch.cat([dst_nodes, src_nodes]), sorted=True, return_inverse=True)
    device = uniq.device
    first = torch.full((uniq.numel(),), num_dst, dtype=torch.int64, device=device)
    first.scatter_reduce_(0, inverse[:num_dst], torch.arange(num_dst, device=device), reduce="amin")
    is_new = first == num_dst
    local_of_uniq = torch.where(is_new, num_dst + torch.cumsum(is_new.to(torch.int64), 0) - 1, first)
    unique_nodes = torch.cat([dst_nodes, uniq[is_new]])
    return unique_nodes, local_of_uniq[inverse[num_dst:]]
