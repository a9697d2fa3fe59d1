"""Unique-and-compact: relabel a layer's nodes to local ids, destinations first.

CPU tensors go through one fused numba kernel, chosen by how dense the ids are:

* dense (the largest id is at most a few times the number of ids, as in the input layer
  of a large batch): a ``[max_id + 1]`` byte array marks the ids present; one ascending
  sweep over it, eight ids a step, numbers the new ids, so no sort is needed. Parallel.
* sparse, many ids (a large layer of a graph with far more nodes, e.g. 768k ids of a
  111M-node graph): the ids are grouped into ranges of ids by a parallel counting sort;
  each range then finds its new ids with its own hash table and orders them, the ranges
  in parallel. Numbering the ranges in order gives the new ids in ascending order, as
  the dense sweep does.
* sparse, few ids (under ``_PARALLEL_MIN_IDS``): one open-addressing hash table finds
  the new ids, which a radix sort then orders. Serial: starting threads costs more.

Every path gives the same result, whatever the number of threads. A destination id
given more than once (a seed repeated in a batch) is the local id of its first position,
decided without races.

Tensors on other devices (GPUs) use the torch ops of
:func:`~graphpipe.ops.gpu_sampling.unique_and_compact_torch`.
"""

from typing import Optional, Tuple

import numba
import numpy as np
import torch
from numba.cpython.unsafe.numbers import trailing_zeros

from graphpipe.ops.gpu_sampling import unique_and_compact_torch
from graphpipe.ops.random import mix64

__all__ = ["unique_and_compact"]

# The dense kernel sweeps ``max_id + 1`` table entries (a byte each, eight per step) and
# the serial hash costs about 13 ns per id, so dense pays while the id range is at most
# this many times the number of ids (plus a constant for tiny inputs). Measured on a 2M
# id range, 2 threads: 45k ids dense 0.35 ms / hash 0.58 ms; 5k ids 0.17 / 0.05 ms;
# 460k ids 1.5 / 13 ms.
_DENSE_FACTOR = 128
_DENSE_SLACK = 1 << 16
# Chunks of the dense sweep: a fixed number, so the numbering never depends on threads.
_NUM_CHUNKS = 64
# Id ranges of the sparse parallel path: as many as make a range at most 2**16 ids, within
# these bounds (a number fixed by the id range alone, as the chunks).
_MIN_BUCKETS = 256
_MAX_BUCKETS = 4096
# Below this many ids (destinations plus sources) the serial hash path is faster. Measured
# on 2 threads (uniform ids over 111M nodes, no destinations): 32k ids 1.4 ms serial vs
# 1.9 ms bucketed, 64k 2.75 vs 2.81, 768k 105 vs 66. Skewed ids with few distinct ones
# favour the serial hash (768k Zipf(1.3) ids: 42 vs 63 ms); sampled layers are far less
# skewed than that.
_PARALLEL_MIN_IDS = 1 << 16


def unique_and_compact(
    dst_nodes: torch.Tensor, src_nodes: torch.Tensor, num_nodes: Optional[int] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Give every node of a sampled layer a local id, destination nodes first.

    Args:
        dst_nodes: ``[num_dst]`` int64 global ids (the layer's destinations; an id may
            repeat, e.g. a seed drawn twice: it then keeps every position, and sources
            with that id take the first).
        src_nodes: ``[num_edges]`` int64 global ids of sampled sources (repeats allowed).
        num_nodes: every id must be in ``[0, num_nodes)`` (ids taken from a graph): for
            a dense id range this saves the pass that finds the largest id.

    Returns:
        ``(unique_nodes, local_src)``: ``unique_nodes`` ``[num_src]`` int64 is
        ``dst_nodes`` followed by the source ids that are not destinations, each once, in
        ascending id order; ``local_src`` ``[num_edges]`` int64 gives
        ``unique_nodes[local_src] == src_nodes`` (a source that is a destination: the
        destination's first position).

    Raises:
        ValueError: an id is negative, or not below ``num_nodes`` when it is given.
    """
    if dst_nodes.device.type != "cpu" or src_nodes.device.type != "cpu":
        return unique_and_compact_torch(dst_nodes, src_nodes)
    dst = dst_nodes.to(torch.int64).contiguous()
    src = src_nodes.to(torch.int64).contiguous()
    if dst.numel() + src.numel() == 0:
        return dst.clone(), src.clone()
    if num_nodes is not None and num_nodes < 1:
        raise ValueError(f"unique_and_compact: `num_nodes` must be >= 1 when there are ids, got {num_nodes}")
    dst_np, src_np = dst.numpy(), src.numpy()
    dense_limit = _DENSE_FACTOR * (dst.numel() + src.numel()) + _DENSE_SLACK
    if num_nodes is not None and num_nodes <= dense_limit:
        hi = num_nodes - 1  # the dense kernel checks the ids against it
    else:
        lo, hi = _id_bounds(dst_np, src_np)
        if lo < 0 and num_nodes is None:
            raise ValueError(f"unique_and_compact: node ids must be >= 0, got {lo}")
        if num_nodes is not None and (lo < 0 or hi >= num_nodes):
            _raise_outside(lo if lo < 0 else hi, num_nodes, None)
    if hi + 1 <= dense_limit:
        unique_nodes, local_src, outside, bad = _unique_dense(dst_np, src_np, hi)
        if outside:
            _raise_outside(bad, num_nodes, outside)
    elif dst.numel() + src.numel() >= _PARALLEL_MIN_IDS:
        unique_nodes, local_src = _unique_bucketed(dst_np, src_np, hi, numba.get_num_threads())
    else:
        unique_nodes, local_src = _unique_hashed(dst_np, src_np)
    return torch.from_numpy(unique_nodes), torch.from_numpy(local_src)


def _raise_outside(bad: int, num_nodes: int, count: Optional[int]):
    """The error for ids outside the graph, e.g. read from a corrupted memory-mapped
    ``indices``: it names one of them and ``num_nodes``."""
    how_many = "" if count is None else f" ({count} ids are)"
    raise ValueError(
        f"unique_and_compact: node id {bad} is outside [0, num_nodes) = [0, {num_nodes}){how_many}; "
        f"node ids must be in that range (a corrupted graph file?)"
    )


@numba.njit(parallel=True, nogil=True, cache=True)
def _id_bounds(dst, src):
    """``(min, max)`` over both arrays (not both empty), one parallel pass."""
    lo = dst[0] if dst.shape[0] else src[0]
    hi = lo
    for i in numba.prange(dst.shape[0]):
        lo = min(lo, dst[i])
        hi = max(hi, dst[i])
    for e in numba.prange(src.shape[0]):
        lo = min(lo, src[e])
        hi = max(hi, src[e])
    return lo, hi


_LOW_BITS = np.uint64(0x0101010101010101)


@numba.njit(inline="always", nogil=True, cache=True)
def _new_id_bits(word):
    """Bit 0 of each byte of ``word`` set where that byte of ``marks`` is exactly 1 (a
    source that is not a destination); marks are 0..3, so that is bit 0 and not bit 1."""
    return word & ~(word >> np.uint64(1)) & _LOW_BITS


@numba.njit(parallel=True, nogil=True, cache=True)
def _unique_dense(dst, src, max_id):
    """Dense-id kernel: ``marks[x]`` is 2 for a destination, |1 for a source; the ids
    marked exactly 1 are numbered by a sweep over ``marks`` read as uint64 words (eight
    ids a step, jumping from one new id to the next), in ``_NUM_CHUNKS`` chunks. Local
    ids are kept as int32 (a layer has far fewer than 2**31 nodes). The third result
    counts ids outside ``[0, max_id]`` and the fourth is one of them (the largest as
    uint64: a negative one if any); when the count is not 0 the others are meaningless."""
    num_dst = dst.shape[0]
    num_words = (max_id + 8) // 8
    marks = np.zeros(num_words * 8, np.uint8)
    # Ids index as uint64: numba then skips its negative-index wraparound, and one
    # unsigned comparison rejects negative ids and ids above max_id alike.
    limit = np.uint64(max_id)
    outside = 0
    worst = np.uint64(0)
    for i in numba.prange(num_dst):
        x = np.uint64(dst[i])
        if x <= limit:
            marks[x] = 2
        else:
            outside += 1
            worst = max(worst, x)
    # Threads racing on one byte all turn 0 into 1 or 2 into 3: no update is lost.
    for e in numba.prange(src.shape[0]):
        x = np.uint64(src[e])
        if x <= limit:
            marks[x] |= 1
        else:
            outside += 1
            worst = max(worst, x)
    if outside:
        return np.empty(0, np.int64), np.empty(0, np.int64), outside, np.int64(worst)
    # Byte j of word w is id 8 * w + j (little-endian, as on x86 and ARM).
    words = marks.view(np.uint64)
    chunk = (num_words + _NUM_CHUNKS - 1) // _NUM_CHUNKS
    offsets = np.zeros(_NUM_CHUNKS + 1, np.int64)
    for c in numba.prange(_NUM_CHUNKS):
        count = 0
        for w in range(c * chunk, min((c + 1) * chunk, num_words)):
            # at most one bit per byte: the product sums the bytes into the top byte
            count += np.int64((_new_id_bits(words[w]) * _LOW_BITS) >> np.uint64(56))
        offsets[c + 1] = count
    for c in range(_NUM_CHUNKS):
        offsets[c + 1] += offsets[c]
    num_unique = num_dst + offsets[_NUM_CHUNKS]
    unique_nodes = np.empty(num_unique, np.int64)
    local = np.empty(num_words * 8, np.int32)
    for c in numba.prange(_NUM_CHUNKS):
        next_id = num_dst + offsets[c]
        for w in range(c * chunk, min((c + 1) * chunk, num_words)):
            bits = _new_id_bits(words[w])
            while bits:
                x = 8 * w + (np.int64(trailing_zeros(bits)) >> 3)
                local[x] = next_id
                unique_nodes[next_id] = x
                next_id += 1
                bits &= bits - np.uint64(1)
    # Serial and backwards, so that a repeated destination keeps its first position (in
    # parallel, the threads writing its positions raced).
    for i in range(num_dst - 1, -1, -1):
        local[np.uint64(dst[i])] = i
    unique_nodes[:num_dst] = dst
    local_src = np.empty(src.shape[0], np.int64)
    for e in numba.prange(src.shape[0]):
        local_src[e] = local[np.uint64(src[e])]
    return unique_nodes, local_src, 0, np.int64(0)


@numba.njit(inline="always", nogil=True, cache=True)
def _find_slot(keys, x, mask, base=0):
    """The slot holding ``x`` in the table ``keys[base : base + mask + 1]``, or the empty
    slot where it would go (linear probing)."""
    slot = np.int64(mix64(x) & mask)
    while keys[base + slot] != -1 and keys[base + slot] != x:
        slot = (slot + 1) & np.int64(mask)
    return base + slot


@numba.njit(nogil=True, cache=True)
def _bucket_layout(counts):
    """``(cursors, bucket_start, table_start)`` of the ids counted per (chunk, bucket) in
    ``counts``: each (chunk, bucket)'s first slot in the grouped ids, bucket-major and
    chunk-minor (positions stay in increasing order in a bucket, so its destinations come
    before its sources); each bucket's first slot; each bucket's first slot in the hash
    tables (a power of two of at least twice its ids, and 16)."""
    num_chunks, num_buckets = counts.shape
    cursors = np.empty((num_chunks, num_buckets), np.int64)
    bucket_start = np.empty(num_buckets + 1, np.int64)
    table_start = np.empty(num_buckets + 1, np.int64)
    total = 0
    tables = 0
    for b in range(num_buckets):
        bucket_start[b] = total
        table_start[b] = tables
        for c in range(num_chunks):
            cursors[c, b] = total
            total += counts[c, b]
        size = 16
        while size < 2 * (total - bucket_start[b]):
            size <<= 1
        tables += size
    bucket_start[num_buckets] = total
    table_start[num_buckets] = tables
    return cursors, bucket_start, table_start


@numba.njit(parallel=True, nogil=True, cache=True)
def _unique_bucketed(dst, src, max_id, num_chunks):
    """Sparse-id parallel kernel. The ids of ``dst ++ src`` (position ``p`` in that
    concatenation) are grouped by id range (``id >> shift``) with a stable counting sort
    that moves the ids and their positions together, so the later passes read them in
    order. Each range (in parallel) puts its destinations and then its sources in its
    own small hash table (in cache) and collects its new ids, then orders them
    (:func:`_order_ids`). A prefix over the ranges numbers the new ids in ascending
    order; each range then writes its sources' local ids."""
    num_dst = dst.shape[0]
    n = num_dst + src.shape[0]
    num_buckets = min(_MAX_BUCKETS, max(_MIN_BUCKETS, (max_id >> 16) + 1))
    shift = 0
    while (max_id >> shift) >= num_buckets:
        shift += 1
    # ``num_chunks``: one per thread; the counting sort is stable, so the result does not
    # depend on it.
    chunk = (n + num_chunks - 1) // num_chunks
    counts = np.zeros((num_chunks, num_buckets), np.int64)
    for c in numba.prange(num_chunks):
        for p in range(c * chunk, min((c + 1) * chunk, n)):
            x = dst[p] if p < num_dst else src[p - num_dst]
            counts[c, x >> shift] += 1
    cursors, bucket_start, table_start = _bucket_layout(counts)
    tables = table_start[num_buckets]
    ids = np.empty(n, np.int64)  # the ids grouped by range
    positions = np.empty(n, np.int64)  # their positions p
    for c in numba.prange(num_chunks):
        for p in range(c * chunk, min((c + 1) * chunk, n)):
            x = dst[p] if p < num_dst else src[p - num_dst]
            k = cursors[c, x >> shift]
            ids[k] = x
            positions[k] = p
            cursors[c, x >> shift] = k + 1
    keys = np.full(tables, -1, np.int64)
    values = np.empty(tables, np.int64)
    slots = np.empty(n, np.int64)  # the table slot of ids[k]
    new_ids = np.empty(n, np.int64)  # range b's new ids from bucket_start[b]
    num_new = np.zeros(num_buckets + 1, np.int64)
    for b in numba.prange(num_buckets):
        base = table_start[b]
        mask = np.uint64(table_start[b + 1] - base - 1)
        found = 0
        for k in range(bucket_start[b], bucket_start[b + 1]):
            x = ids[k]
            slot = _find_slot(keys, x, mask, base)
            if keys[slot] == -1:  # first seen (positions ascend: a repeated destination keeps its first)
                keys[slot] = x
                if positions[k] < num_dst:
                    values[slot] = positions[k]
                else:
                    new_ids[bucket_start[b] + found] = x
                    found += 1
            slots[k] = slot
        _order_ids(new_ids[bucket_start[b] : bucket_start[b] + found], np.int64(b) << shift, shift)
        num_new[b + 1] = found
    for b in range(num_buckets):
        num_new[b + 1] += num_new[b]
    unique_nodes = np.empty(num_dst + num_new[num_buckets], np.int64)
    local_src = np.empty(src.shape[0], np.int64)
    for b in numba.prange(num_buckets):
        base = table_start[b]
        mask = np.uint64(table_start[b + 1] - base - 1)
        first = num_dst + num_new[b]
        for r in range(num_new[b + 1] - num_new[b]):
            x = new_ids[bucket_start[b] + r]
            values[_find_slot(keys, x, mask, base)] = first + r
            unique_nodes[first + r] = x
        for k in range(bucket_start[b], bucket_start[b + 1]):
            if positions[k] >= num_dst:
                local_src[positions[k] - num_dst] = values[slots[k]]
    for i in numba.prange(num_dst):
        unique_nodes[i] = dst[i]
    return unique_nodes, local_src


@numba.njit(nogil=True, cache=True)
def _order_ids(ids, lo, shift):
    """Sort ``ids`` (distinct, in ``[lo, lo + 2**shift)``) in place: through a bitmap of
    the range when sweeping it costs no more than about eight words per id, else
    numba's sort."""
    num_words = ((1 << shift) + 63) >> 6
    if num_words > 8 * ids.shape[0] + 1024:
        ids.sort()
        return
    bits = np.zeros(num_words, np.uint64)
    for x in ids:
        offset = x - lo
        bits[offset >> 6] |= np.uint64(1) << np.uint64(offset & 63)
    r = 0
    for w in range(num_words):
        word = bits[w]
        while word:
            ids[r] = lo + (w << 6) + np.int64(trailing_zeros(word))
            r += 1
            word &= word - np.uint64(1)


@numba.njit(nogil=True, cache=True)
def _radix_sort(values):
    """``values`` (non-negative int64) sorted ascending: LSD radix sort, 11-bit digits,
    as many passes as the largest value needs."""
    top = values.max() if values.shape[0] else 0
    out = values.copy()
    spare = np.empty_like(values)
    counts = np.empty(2049, np.int64)
    shift = 0
    while (top >> shift) > 0:
        counts[:] = 0
        for v in out:
            counts[((v >> shift) & 2047) + 1] += 1
        for b in range(2048):
            counts[b + 1] += counts[b]
        for v in out:
            digit = (v >> shift) & 2047
            spare[counts[digit]] = v
            counts[digit] += 1
        out, spare = spare, out
        shift += 11
    return out


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
        if keys[slot] == -1:  # a repeated destination keeps its first position
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
    new_ids = _radix_sort(new_ids[:num_new])
    for r in range(num_new):
        values[_find_slot(keys, new_ids[r], mask)] = num_dst + r
    unique_nodes = np.empty(num_dst + num_new, np.int64)
    unique_nodes[:num_dst] = dst
    unique_nodes[num_dst:] = new_ids
    local_src = np.empty(src.shape[0], np.int64)
    for e in range(src.shape[0]):
        local_src[e] = values[src_slot[e]]
    return unique_nodes, local_src
