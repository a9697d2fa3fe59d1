"""One-layer sampling and unique-and-compact as torch ops, for graphs and seeds on a GPU.

The CUDA branches of :func:`~graphpipe.ops.sample_neighbors`, ``sample_labor`` and
``unique_and_compact``, in device-agnostic torch ops (the tests run them on CPU tensors
against the numba kernels). Same contract as the CPU ops, and the same vertex-keyed
variates (:mod:`graphpipe.ops.torch_random` is bit-identical to the numba hash), so a
vertex's sample does not depend on the device, batch or rank that draws it.

The graph may be in device memory or pinned host memory (read through zero-copy views).
The host is read only for output sizes (a layer's candidate and sampled edges,
``torch.unique``'s size); the CPU kernels' checks (bad ``indptr`` ranges, non-finite
weights) ride on those reads (:func:`_host_ints`).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from graphpipe._internal.devices import device_array
from graphpipe.ops import torch_random
from graphpipe.ops.layer_sample import LayerSample

# As :data:`graphpipe.ops.selection.LOG_SPACE_SPREAD` (not imported: that module needs numba).
_LOG_SPACE_SPREAD = 1e-300

__all__ = [
    "sample_labor_torch",
    "sample_neighbors_torch",
    "unique_and_compact_torch",
]

def _neighbourhoods(indptr: torch.Tensor, nodes: torch.Tensor, num_edges: int):
    """``(first edge id, in-degree, bad)`` of every node, int64; ``bad`` (a 0-d tensor)
    counts the nodes whose range is decreasing or not within ``[0, num_edges]``: pass
    it to the first :func:`_host_ints` before using the ranges."""
    start = indptr[nodes].to(torch.int64)
    end = indptr[nodes + 1].to(torch.int64)
    bad = ((start < 0) | (end < start) | (end > num_edges)).sum()
    return start, end - start, bad


def _host_ints(where: str, bad: torch.Tensor, *values: torch.Tensor, non_finite=None) -> list:
    """The 0-d integer tensors ``values`` as Python ints, in one host read, after raising
    for ``bad`` ranges (:func:`_neighbourhoods`) or ``non_finite`` weights."""
    checks = [bad, bad if non_finite is None else non_finite]
    read = torch.stack([*checks, *(v.to(torch.int64) for v in values)]).tolist()
    if read[0]:
        raise ValueError(
            f"{where}: `indptr` and `indices` disagree: {read[0]} destination(s) have an in-edge "
            f"range [indptr[v], indptr[v + 1]) that is decreasing or outside [0, len(indices)]"
        )
    if non_finite is not None and read[1]:
        raise ValueError(
            f"{where}: `probs` must be finite: {read[1]} in-edge weight(s) of these destinations are NaN or infinite"
        )
    return read[2:]


def _row_weight_range(w: torch.Tensor, row: torch.Tensor, num_rows: int):
    """Per row the largest positive weight (0 if none) and whether the positive weights
    span more than ``1 / _LOG_SPACE_SPREAD`` (scores then compared in log space), as the
    numba kernels' ``weight_range``."""
    positive = w > 0
    largest = torch.zeros(num_rows, dtype=w.dtype, device=w.device).scatter_reduce_(
        0, row, torch.where(positive, w, 0.0), reduce="amax"
    )
    smallest = torch.full((num_rows,), torch.inf, dtype=w.dtype, device=w.device).scatter_reduce_(
        0, row, torch.where(positive, w, torch.inf), reduce="amin"
    )
    return largest, smallest < largest * _LOG_SPACE_SPREAD


def _ragged(counts: torch.Tensor, total: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flatten ragged rows of ``counts`` items: ``(row of item, position in row, row offsets)``."""
    offsets = torch.cumsum(counts, 0) - counts
    row = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts, output_size=total)
    return row, torch.arange(total, device=counts.device) - offsets[row], offsets


def _indptr(counts: torch.Tensor) -> torch.Tensor:
    indptr = torch.zeros(counts.numel() + 1, dtype=torch.int64, device=counts.device)
    torch.cumsum(counts, 0, out=indptr[1:])
    return indptr


def _smallest_per_row(score: torch.Tensor, row: torch.Tensor, offsets: torch.Tensor, take: torch.Tensor, total_out: int):
    """Flat positions of the ``take[r]`` smallest scores of each row, ascending position.

    Items are laid out row-major (as :func:`_ragged` makes them); ties keep the lower
    position. Two stable sorts give the order by (row, score).
    """
    order = torch.sort(score, stable=True).indices
    order = order[torch.sort(row[order], stable=True).indices]
    rank = torch.arange(order.numel(), device=order.device) - offsets[row[order]]
    keep = torch.zeros(score.numel(), dtype=torch.bool, device=score.device)
    keep[order] = rank < take[row[order]]
    return torch.nonzero_static(keep, size=total_out).view(-1)


def _layer(indptr, indices, nodes, counts, edge_ids, edge_weights=None) -> LayerSample:
    return LayerSample(_indptr(counts), indices[edge_ids].to(torch.int64), edge_ids, edge_weights)


def _vertex_keys(key: int, nodes: torch.Tensor) -> torch.Tensor:
    """A per-destination sub-key: the variates of vertex ``v`` depend on ``(key, v)`` only."""
    return torch_random.hash2(key, nodes)


def sample_neighbors_torch(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    fanout: int,
    *,
    key: int,
    replace: bool = False,
    probs: Optional[torch.Tensor] = None,
) -> LayerSample:
    """Neighbor sampling of one layer with torch ops: ``sample_neighbors``'s arguments
    (the CSC arrays on ``nodes``' device or pinned) and rules, draw for draw. Uniform
    draws give the CPU op's edges (Floyd's algorithm runs one vectorised step per draw
    for all destinations); weighted ones match up to ``log`` rounding ties, and with
    replacement up to an edge at a prefix-sum boundary (sums rounded in another order)."""
    device = nodes.device
    indptr, indices = device_array(indptr, device), device_array(indices, device)
    nodes = nodes.to(torch.int64)
    start, deg, bad = _neighbourhoods(indptr, nodes, indices.numel())
    weights = None if probs is None else device_array(probs, device)
    vkeys = _vertex_keys(key, nodes)
    if replace and fanout != -1:
        return _with_replacement(indptr, indices, nodes, fanout, start, deg, bad, vkeys, weights)
    if weights is None:
        counts = deg if fanout == -1 else torch.clamp(deg, max=fanout)
        (total_out,) = _host_ints("sample_neighbors", bad, counts.sum())
        row, pos, _ = _ragged(counts, total_out)
        if fanout != -1 and fanout < indices.numel():  # else no node has more in-edges
            floyd = _floyd(vkeys, deg, fanout)
            pos = torch.where(deg[row] > fanout, floyd[row, pos.clamp(max=fanout - 1)], pos)
        return _layer(indptr, indices, nodes, counts, start[row] + pos)
    (total_in,) = _host_ints("sample_neighbors", bad, deg.sum())
    row, pos, offsets = _ragged(deg, total_in)
    w = weights[start[row] + pos].to(torch.float64)
    positive = w > 0
    num_positive = torch.zeros_like(deg).index_add_(0, row, positive.to(torch.int64))
    counts = num_positive if fanout == -1 else torch.clamp(num_positive, max=fanout)
    (total_out,) = _host_ints("sample_neighbors", bad, counts.sum(), non_finite=(~torch.isfinite(w)).sum())
    largest, log_space = _row_weight_range(w, row, nodes.numel())
    top = largest[row]
    exponential = -torch.log(torch_random.uniform_open(vkeys[row], pos))
    score = torch.where(
        log_space[row], torch.log(exponential) - (torch.log(w) - torch.log(top)), exponential / (w / top)
    )
    chosen = _smallest_per_row(torch.where(positive, score, torch.inf), row, offsets, counts, total_out)
    return _layer(indptr, indices, nodes, counts, start[row[chosen]] + pos[chosen])


def _randint(vkeys: torch.Tensor, draws, n: torch.Tensor) -> torch.Tensor:
    """Uniform integers in ``[0, n)`` (``n < 2**32``) from the variates ``(vkeys, draws)``,
    as the numba ``_randint``: the hash's high 32 bits times ``n``, shifted down 32
    (the uint64 product fits, so its int64 bits wrap exactly)."""
    high = torch_random.logical_shift_right(torch_random.hash2(vkeys, draws), 32)
    return torch_random.logical_shift_right(high * n, 32)


def _floyd(vkeys: torch.Tensor, deg: torch.Tensor, k: int) -> torch.Tensor:
    """``[num_dst, k]`` ascending positions: Floyd's uniform ``k``-subset of ``[0, d)`` per
    row (meaningful where ``d > k``): step ``s`` draws ``t_s`` in ``[0, j_s]``, ``j_s = d -
    k + s``, which joins unless already chosen, then ``j_s`` does.

    All steps at once, in a fixed number of ops: ``t_s`` is already chosen iff an earlier
    draw equals it, or it equals ``j_r`` of the earlier step ``r = t_s - (d - k)`` whose
    own draw was already chosen: an OR down a chain, resolved by pointer jumping in
    ``ceil(log2 k)`` rounds."""
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


def _with_replacement(indptr, indices, nodes, fanout, start, deg, bad, vkeys, weights) -> LayerSample:
    draws = torch.arange(fanout, device=nodes.device)
    non_finite = None
    if weights is None:
        pos = _randint(vkeys[:, None], draws[None, :], deg[:, None])
        has_edges = deg > 0
    else:
        u = torch_random.uniform(vkeys[:, None], draws[None, :])
        (total_in,) = _host_ints("sample_neighbors", bad, deg.sum())
        row_all, pos_all, offsets = _ragged(deg, total_in)
        w = weights[start[row_all] + pos_all].to(torch.float64)
        non_finite = (~torch.isfinite(w)).sum()
        largest, _ = _row_weight_range(w, row_all, nodes.numel())
        w = torch.where(w > 0, w / largest[row_all], 0.0)  # ratios: no overflowing sum, no subnormals
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
    counts = torch.where(has_edges, fanout, 0)
    (drawing,) = _host_ints("sample_neighbors", bad, has_edges.sum(), non_finite=non_finite)
    rows = torch.nonzero_static(has_edges, size=drawing).view(-1)
    edge_ids = (start[:, None] + pos)[rows].view(-1)
    return _layer(indptr, indices, nodes, counts, edge_ids)


def sample_labor_torch(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    fanout: int,
    *,
    variates,
) -> LayerSample:
    """Unweighted LABOR-0 of one layer with torch ops (rules of ``sample_labor``):
    ``variates(t)`` maps ``[k]`` int64 vertex ids to their float64 uniforms ``r_t``;
    destination ``s`` keeps its ``min(fanout, d_s)`` in-edges with the smallest ``r_t``
    (ties to the lower edge id), each with float32 weight ``1 / min(fanout, d_s)``."""
    device = nodes.device
    indptr, indices = device_array(indptr, device), device_array(indices, device)
    nodes = nodes.to(torch.int64)
    start, deg, bad = _neighbourhoods(indptr, nodes, indices.numel())
    counts = deg if fanout == -1 else torch.clamp(deg, max=fanout)
    total_in, total_out = _host_ints("sample_labor", bad, deg.sum(), counts.sum())
    row, pos, offsets = _ragged(deg, total_in)
    eids = start[row] + pos
    if total_in != total_out:
        chosen = _smallest_per_row(variates(indices[eids].to(torch.int64)), row, offsets, counts, total_out)
        eids = eids[chosen]
    weights = torch.repeat_interleave(
        1.0 / counts.clamp(min=1).to(torch.float32), counts, output_size=total_out
    )
    return _layer(indptr, indices, nodes, counts, eids, weights)


def unique_and_compact_torch(dst_nodes: torch.Tensor, src_nodes: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``unique_and_compact`` with torch ops (any device), same contract; two host
    synchronisations (the output sizes of ``torch.unique`` and of the new ids)."""
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
