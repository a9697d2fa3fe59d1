"""Unique-and-compact: relabel a layer's nodes to local ids, destinations first.

CPU tensors go through one numba kernel, chosen by how dense the ids are: dense (the
largest id at most ~128x the number of ids) marks the ids in a byte array and numbers them
in one ascending sweep, no sort; sparse with many ids groups them into id ranges by a
parallel counting sort, each range numbering its ids with its own hash table; sparse with
few ids uses one hash table and a radix sort, serially. Every path gives the same result
for any thread count. Other devices use :func:`~graphpipe.ops.gpu_sampling.unique_and_compact_torch`.
"""

from typing import Optional, Tuple

import numba
import numpy as np
import torch
from numba.cpython.unsafe.numbers import trailing_zeros

from graphpipe.ops.gpu_sampling import unique_and_compact_torch
from graphpipe.ops.random import mix64

__all__ = ["unique_and_compact"]

# Dense pays while the id range is at most this many times the number of ids, plus a
# constant (2M id range, 2 threads: 45k ids dense 0.35 ms / hash 0.58 ms; 5k 0.17 / 0.05).
_DENSE_FACTOR = 128
_DENSE_SLACK = 1 << 16
# Chunks of the dense sweep: a fixed number, so the numbering never depends on threads.
_NUM_CHUNKS = 64
# Id ranges of the sparse parallel path: ranges of at most 2**16 ids, within these bounds.
_MIN_BUCKETS = 256
_MAX_BUCKETS = 4096
# Below this many ids the serial hash is faster (benchmarks/RESULTS.md, "unique_and_compact").
_PARALLEL_MIN_IDS = 1 << 16


def unique_and_compact(
    dst_nodes: torch.Tensor, src_nodes: torch.Tensor, num_nodes: Optional[int] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Give every node of a sampled layer a local id, destination nodes first.

    Args:
        dst_nodes: ``[num_dst]`` int64 global ids of the destinations; a repeated id keeps
            every position, and sources with that id take the first.
        src_nodes: ``[num_edges]`` int64 global ids of sampled sources (repeats allowed).
        num_nodes: optional bound of every id (a graph's), which spares a pass over dense ids.

    Returns:
        ``(unique_nodes, local_src)``, int64: ``unique_nodes`` ``[num_src]`` is ``dst_nodes``
        then the other source ids, each once, ascending; ``local_src`` ``[num_edges]`` gives
        ``unique_nodes[local_src] == src_nodes``.

    Raises:
        ValueError: an id is negative, or not below ``num_nodes`` when it is given.
    """
    if dst_nodes.device.type != "cpu" or src_nodes.device.type != "cpu":
        unique_nodes, local_src = unique_and_compact_torch(dst_nodes, src_nodes)
        if unique_nodes.numel():  # one more host read: the checks of the CPU path
            _check_bounds(*torch.stack(torch.aminmax(unique_nodes)).tolist(), num_nodes)
        return unique_nodes, local_src
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
        _check_bounds(lo, hi, num_nodes)
    if hi + 1 <= dense_limit:
        unique_nodes, local_src, outside, bad = _unique_dense(dst_np, src_np, hi)
        if outside:
            _raise_outside(bad, num_nodes, outside)
    elif dst.numel() + src.numel() >= _PARALLEL_MIN_IDS:
        unique_nodes, local_src = _unique_bucketed(dst_np, src_np, hi, numba.get_num_threads())
    else:
        unique_nodes, local_src = _unique_hashed(dst_np, src_np)
    return torch.from_numpy(unique_nodes), torch.from_numpy(local_src)


def _check_bounds(lo: int, hi: int, num_nodes: Optional[int]) -> None:
    """Raise for ids (their least ``lo`` and greatest ``hi``) negative or not below ``num_nodes``."""
    if lo < 0 and num_nodes is None:
        raise ValueError(f"unique_and_compact: node ids must be >= 0, got {lo}")
    if num_nodes is not None and (lo < 0 or hi >= num_nodes):
        _raise_outside(lo if lo < 0 else hi, num_nodes, None)


def _raise_outside(bad: int, num_nodes: int, count: Optional[int]):
    """The error for ids outside the graph (a corrupted ``indices``), naming one of them."""
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
    """Bit 0 of each byte of ``word`` where that byte of ``marks`` (0..3) is exactly 1: a
    source that is not a destination."""
    return word & ~(word >> np.uint64(1)) & _LOW_BITS


@numba.njit(parallel=True, nogil=True, cache=True)
def _unique_dense(dst, src, max_id):
    """Dense-id kernel: ``marks[x]`` is 2 for a destination, |1 for a source; the ids marked
    exactly 1 are numbered by a sweep over ``marks`` as uint64 words in ``_NUM_CHUNKS``
    chunks. Also returns the count of ids outside ``[0, max_id]`` and one of them (the
    largest as uint64: a negative one if any); the rest is meaningless if any."""
    num_dst = dst.shape[0]
    num_words = (max_id + 8) // 8
    marks = np.zeros(num_words * 8, np.uint8)
    # Ids index as uint64: no wraparound check, and one comparison rejects negative ids too.
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
    """``(cursors, bucket_start, table_start)`` of the ids counted per (chunk, bucket): each
    (chunk, bucket)'s first slot in the grouped ids (bucket-major, so a bucket's positions
    ascend), each bucket's first slot, and its first slot in the hash tables (a power of
    two, at least 16 and twice its ids)."""
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
    """Sparse-id parallel kernel: the ids of ``dst ++ src`` and their positions are grouped
    by id range (``id >> shift``) with a stable counting sort; each range (in parallel)
    finds its new ids with its own small hash table and orders them (:func:`_order_ids`);
    a prefix over the ranges numbers them in ascending order."""
    num_dst = dst.shape[0]
    n = num_dst + src.shape[0]
    num_buckets = min(_MAX_BUCKETS, max(_MIN_BUCKETS, (max_id >> 16) + 1))
    shift = 0
    while (max_id >> shift) >= num_buckets:
        shift += 1
    # One chunk per thread; the counting sort is stable, so the result does not depend on it.
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
    """Sort ``ids`` (distinct, in ``[lo, lo + 2**shift)``) in place: by a bitmap of the range
    when that is at most about eight words per id, else numba's sort."""
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
    """``values`` (non-negative int64) sorted: LSD radix sort, 11-bit digits."""
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
