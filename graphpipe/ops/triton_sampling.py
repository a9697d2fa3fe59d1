"""Uniform neighbour sampling without replacement in two Triton kernels per layer.

The torch-op sampler (:mod:`graphpipe.ops.gpu_sampling`) launches about a hundred small
kernels per layer, so on a GPU it is bound by the host launching them. Here one kernel
counts each destination's sample size (and the bad ``indptr`` ranges), ``cumsum`` lays the
output out, and one kernel draws Floyd's subset per destination, hashing the same
variates as the numba kernels (:mod:`graphpipe.ops.random`), so the edges are the CPU op's,
edge for edge. Destinations are processed ``_ROWS`` at a time, a row's ``fanout`` draws
across ``K = next_pow2(fanout)`` lanes: membership and ranks are ``K x K`` comparisons.

Triton ships with CUDA builds of torch (the GPU path imports this module only there); its
interpreter (``TRITON_INTERPRET=1``) runs the kernels on CPU tensors in the tests.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from graphpipe.ops import torch_random
from graphpipe.ops.layer_sample import LayerSample

__all__ = ["sample_uniform_triton"]

_ROWS = 32


@triton.jit
def _mix64(x):
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB
    return x ^ (x >> 31)


@triton.jit
def _hash2(key, counter):
    """uint64 SplitMix64 output ``counter`` of seed ``key`` (both uint64)."""
    return _mix64(key + (counter + 1) * 0x9E3779B97F4A7C15)


@triton.jit(do_not_specialize=["num_dst", "num_edges", "fanout"])  # one compile for every batch
def _count_kernel(indptr, nodes, counts, bad, num_dst, num_edges, fanout, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = rows < num_dst
    v = tl.load(nodes + rows, mask=ok, other=0)
    start = tl.load(indptr + v, mask=ok, other=0).to(tl.int64)
    end = tl.load(indptr + v + 1, mask=ok, other=0).to(tl.int64)
    wrong = ok & ((start < 0) | (end < start) | (end > num_edges))
    tl.store(counts + rows, tl.where(wrong, 0, tl.minimum(end - start, fanout)), mask=ok)
    tl.atomic_add(bad, tl.sum(wrong.to(tl.int64), axis=0))


@triton.jit(do_not_specialize=["key", "num_dst", "fanout"])
def _draw_kernel(
    indptr, indices, nodes, out_indptr, out_src, out_eid, key, num_dst, fanout,
    ROWS: tl.constexpr, K: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = rows < num_dst
    v = tl.load(nodes + rows, mask=ok, other=0)
    start = tl.load(indptr + v, mask=ok, other=0).to(tl.int64)
    d = tl.load(indptr + v + 1, mask=ok, other=0).to(tl.int64) - start
    lo = tl.load(out_indptr + rows, mask=ok, other=0)
    k = tl.load(out_indptr + rows + 1, mask=ok, other=0) - lo
    vkey = _hash2(key.to(tl.int64).to(tl.uint64, bitcast=True), v.to(tl.uint64))
    lanes = tl.arange(0, K)[None, :]
    # Floyd: step s draws t in [0, d - fanout + s]; t joins unless chosen, then j = d - fanout + s does.
    picks = tl.zeros((ROWS, K), dtype=tl.int64) - 1
    for s in range(fanout):
        j = d - fanout + s
        high = _hash2(vkey, tl.zeros((ROWS,), tl.uint64) + s) >> 32
        t = ((high * (j + 1).to(tl.uint64)) >> 32).to(tl.int64)
        taken = tl.sum(((picks == t[:, None]) & (lanes < s)).to(tl.int32), axis=1) > 0
        picks = tl.where(lanes == s, tl.where(taken, j, t)[:, None], picks)
    big = (d > fanout)[:, None]
    # Positions: Floyd's picks where the range is larger than the fanout, else the range.
    pos = tl.where(big, tl.where(lanes < fanout, picks, d[:, None] + lanes), lanes)
    rank = tl.sum((pos[:, None, :] < pos[:, :, None]).to(tl.int32), axis=2)
    keep = ok[:, None] & (lanes < k[:, None])
    eid = start[:, None] + pos
    at = lo[:, None] + rank
    tl.store(out_eid + at, eid, mask=keep)
    tl.store(out_src + at, tl.load(indices + eid, mask=keep, other=0).to(tl.int64), mask=keep)


def sample_uniform_triton(
    indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor, fanout: int, key: int, bad_ranges
) -> LayerSample:
    """``sample_neighbors(..., fanout, key=key)`` (uniform, without replacement, ``1 <=
    fanout <= 64``: a row's draws are ``K x K`` comparisons) for int64 ``nodes`` on a CUDA device (CPU under Triton's
    interpreter), ``indptr``/``indices`` readable there; ``bad_ranges(bad)`` raises when the
    0-d count ``bad`` of bad ``indptr`` ranges is not 0 and returns the total output
    size (one host read)."""
    device = nodes.device
    num_dst = nodes.numel()
    out_indptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=device)
    bad = torch.zeros((), dtype=torch.int64, device=device)
    grid = (max(1, -(-num_dst // _ROWS)),)
    # Triton launches on the thread's current device: make it the nodes' (a stage thread's is 0).
    with torch.cuda.device(device) if nodes.is_cuda else contextlib.nullcontext():
        _count_kernel[grid](indptr, nodes, out_indptr[1:], bad, num_dst, indices.numel(), fanout, ROWS=_ROWS)
        torch.cumsum(out_indptr[1:], 0, out=out_indptr[1:])
        total = bad_ranges(bad, out_indptr[-1])
        out_src = torch.empty(total, dtype=torch.int64, device=device)
        out_eid = torch.empty(total, dtype=torch.int64, device=device)
        if total:
            _draw_kernel[grid](
                indptr, indices, nodes, out_indptr, out_src, out_eid, torch_random.as_int64_key(key), num_dst, fanout,
                ROWS=_ROWS, K=max(2, 1 << (fanout - 1).bit_length()),
            )
    return LayerSample(out_indptr, out_src, out_eid, None)
