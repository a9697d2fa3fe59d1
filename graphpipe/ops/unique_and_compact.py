"""Unique-and-compact: relabel a layer's nodes to local ids, destinations first.

CPU tensors go through one fused numba kernel, chosen by how dense the ids are:

* dense (the largest id is at most a few times the number of ids, as in the input layer
  of a large batch): a ``[max_id + 1]`` table marks the ids present; one ascending sweep
  over it numbers the new ids, so no sort is needed. Parallel.
* sparse (few ids from a large id space): an open-addressing hash table finds the new
  ids, which are then sorted. Serial, but only for small layers.

Tensors on other devices (GPUs) use the torch ops of
:func:`~graphpipe.ops.gpu_sampling.unique_and_compact_torch`.
"""

from typing import Tuple

import numba
import numpy as np
import torch

from .gpu_sampling import unique_and_compact_torch
from .random import mix64

__all__ = ["unique_and_compact"]

# The dense kernel sweeps ``max_id + 1`` table entries: worth it while that is at most
# this many times the number of ids (plus a constant for tiny inputs).
_DENSE_FACTOR = 4
_DENSE_SLACK = 1 << 16
# Chunks of the dense sweep: a fixed number, so the numbering never depends on threads.
_NUM_CHUNKS = 64


def unique_and_compact(dst_nodes: torch.Tensor, src_nodes: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Give every node of a sampled layer a local id, destination nodes first.

    Args:
        dst_nodes: ``[num_dst]`` int64 distinct global ids (the layer's destinations).
        src_nodes: ``[num_edges]`` int64 global ids of sampled sources (repeats allowed).

    Returns:
        ``(unique_nodes, local_src)``: ``unique_nodes`` ``[num_src]`` int64 is
        ``dst_nodes`` followed by the source ids that are not destinations, each once, in
        ascending id order; ``local_src`` ``[num_edges]`` int64 gives
        ``unique_nodes[local_src] == src_nodes``.
    """
    if dst_nodes.device.type != "cpu" or src_nodes.device.type != "cpu":
        return unique_and_compact_torch(dst_nodes, src_nodes)
    dst = dst_nodes.to(torch.int64).contiguous()
    src = src_nodes.to(torch.int64).contiguous()
    if dst.numel() + src.numel() == 0:
        return dst.clone(), src.clone()
    bounds = [t.aminmax() for t in (dst, src) if t.numel()]
    lo = min(int(b.min) for b in bounds)
    hi = max(int(b.max) for b in bounds)
    if lo < 0:
        raise ValueError(f"unique_and_compact: node ids must be >= 0, got {lo}")
    if hi + 1 <= _DENSE_FACTOR * (dst.numel() + src.numel()) + _DENSE_SLACK:
        unique_nodes, local_src = _unique_dense(dst.numpy(), src.numpy(), hi)
    else:
        unique_nodes, local_src = _unique_hashed(dst.numpy(), src.numpy())
    return torch.from_numpy(unique_nodes), torch.from_numpy(local_src)


@numba.njit(parallel=True, nogil=True, cache=True)
def _unique_dense(dst, src, max_id):
    """Dense-id kernel: ``table[x]`` is ``local id + 1`` of ``x``, ``-1`` for a new
    source not yet numbered, ``0`` for absent ids."""
    num_dst = dst.shape[0]
    num_ids = max_id + 1
    table = np.zeros(num_ids, np.int32)
    for i in numba.prange(num_dst):
        table[dst[i]] = i + 1
    # Racing threads may both see 0 and both write -1: the same value, so harmless.
    for e in numba.prange(src.shape[0]):
        if table[src[e]] == 0:
            table[src[e]] = -1
    chunk = (num_ids + _NUM_CHUNKS - 1) // _NUM_CHUNKS
    offsets = np.zeros(_NUM_CHUNKS + 1, np.int64)
    for c in numba.prange(_NUM_CHUNKS):
        count = 0
        for x in range(c * chunk, min((c + 1) * chunk, num_ids)):
            if table[x] == -1:
                count += 1
        offsets[c + 1] = count
    for c in range(_NUM_CHUNKS):
        offsets[c + 1] += offsets[c]
    unique_nodes = np.empty(num_dst + offsets[_NUM_CHUNKS], np.int64)
    unique_nodes[:num_dst] = dst
    for c in numba.prange(_NUM_CHUNKS):
        local = num_dst + offsets[c]
        for x in range(c * chunk, min((c + 1) * chunk, num_ids)):
            if table[x] == -1:
                unique_nodes[local] = x
                local += 1
                table[x] = local
    local_src = np.empty(src.shape[0], np.int64)
    for e in numba.prange(src.shape[0]):
        local_src[e] = table[src[e]] - 1
    return unique_nodes, local_src


@numba.njit(inline="always", nogil=True, cache=True)
def _find_slot(keys, x, mask):
    """The slot holding ``x``, or the empty slot where it would go (linear probing)."""
    slot = np.int64(mix64(x) & mask)
    while keys[slot] != -1 and keys[slot] != x:
        slot = (slot + 1) & np.int64(mask)
    return slot


@numba.njit(nogil=True, cache=True)
def _unique_hashed(dst, src):
    """Sparse-id kernel: a hash table from global id to local id; new ids sorted once."""
    num_dst = dst.shape[0]
    size = 16
    while size < 2 * (num_dst + src.shape[0]):
        size <<= 1
    mask = np.uint64(size - 1)
    keys = np.full(size, -1, np.int64)
    values = np.empty(size, np.int64)
    for i in range(num_dst):
        slot = _find_slot(keys, dst[i], mask)
        keys[slot] = dst[i]
        values[slot] = i
    new_ids = np.empty(src.shape[0], np.int64)
    num_new = 0
    src_slot = np.empty(src.shape[0], np.int64)
    for e in range(src.shape[0]):
        slot = _find_slot(keys, src[e], mask)
        if keys[slot] == -1:
            keys[slot] = src[e]
            new_ids[num_new] = src[e]
            num_new += 1
        src_slot[e] = slot
    new_ids = np.sort(new_ids[:num_new])
    for r in range(num_new):
        values[_find_slot(keys, new_ids[r], mask)] = num_dst + r
    unique_nodes = np.empty(num_dst + num_new, np.int64)
    unique_nodes[:num_dst] = dst
    unique_nodes[num_dst:] = new_ids
    local_src = np.empty(src.shape[0], np.int64)
    for e in range(src.shape[0]):
        local_src[e] = values[src_slot[e]]
    return unique_nodes, local_src
