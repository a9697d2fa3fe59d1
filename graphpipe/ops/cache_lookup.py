"""A device cache's lookup and hit gather in one Triton kernel.

For each id: its slot (``slot_of_row[id]``, -1 when not cached); a hit's row is copied from
the cache table to its output row and its slot's reference bit set (CLOCK); a miss is
flagged and counted. Rows move as the widest words that tile them, a row's width a
compile-time constant so that the loads vectorise. Triton ships with CUDA builds of torch
(the cache imports this module only there); its interpreter (``TRITON_INTERPRET=1``) runs
the kernel on CPU tensors in the tests.
"""

from __future__ import annotations

import contextlib
from typing import Tuple

import torch
import triton
import triton.language as tl

from graphpipe.ops.uva_gather import word_dtype

__all__ = ["read_hits"]

_TILE_WORDS = 4096


@triton.jit(do_not_specialize=["n"])  # one compile for every batch size
def _read_kernel(
    ids, slot_of_row, cache, out, referenced, miss, num_misses, n,
    ROW_WORDS: tl.constexpr, BLOCK_W: tl.constexpr, ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = rows < n
    slot = tl.load(slot_of_row + tl.load(ids + rows, mask=ok, other=0), mask=ok, other=-1).to(tl.int64)
    hit = ok & (slot >= 0)
    missed = ok & (slot < 0)
    tl.store(miss + rows, missed, mask=ok)
    tl.store(referenced + slot, tl.full((ROWS,), 1, tl.int32), mask=hit)
    tl.atomic_add(num_misses, tl.sum(missed.to(tl.int64), axis=0))
    words = tl.arange(0, BLOCK_W)[None, :]
    copy = hit[:, None] & (words < ROW_WORDS)
    values = tl.load(cache + slot[:, None] * ROW_WORDS + words, mask=copy)
    tl.store(out + rows.to(tl.int64)[:, None] * ROW_WORDS + words, values, mask=copy)


def read_hits(
    ids: torch.Tensor, slot_of_row: torch.Tensor, cache: torch.Tensor, out: torch.Tensor, referenced: torch.Tensor
) -> Tuple[torch.Tensor, int]:
    """Copy the cached rows of ``ids`` into ``out`` and mark their slots referenced.

    Args:
        ids: ``[n]`` int64 row ids, each in ``[0, len(slot_of_row))``.
        slot_of_row: int32 slot of each row, -1 when not cached.
        cache: ``[capacity, *row_shape]`` contiguous table of the cached rows.
        out: contiguous ``[n, *row_shape]`` of ``cache``'s dtype: hit rows are written.
        referenced: ``[capacity + 1]`` int32 reference bits, set to 1 for each hit's slot.

    Returns ``(miss, num_misses)``: ``[n]`` bool, True where ``ids[i]`` is not cached,
    and their number (one host read). All tensors on one device (CUDA; CPU under Triton's
    interpreter)."""
    n = ids.numel()
    rows = cache.view(cache.shape[0], -1).view(torch.uint8)
    word = word_dtype(rows.shape[1], rows.data_ptr() | out.data_ptr())
    row_words = rows.shape[1] // word.itemsize
    block_w = triton.next_power_of_2(max(row_words, 1))
    miss = torch.empty(n, dtype=torch.bool, device=ids.device)
    num_misses = torch.zeros((), dtype=torch.int64, device=ids.device)
    tile = max(1, _TILE_WORDS // block_w)
    # Triton launches on the thread's current device: make it the ids' (a stage thread's is 0).
    with torch.cuda.device(ids.device) if ids.is_cuda else contextlib.nullcontext():
        _read_kernel[(triton.cdiv(n, tile),)](
            ids, slot_of_row, rows.view(word), out.view(n, -1).view(torch.uint8).view(word), referenced, miss,
            num_misses, n, ROW_WORDS=row_words, BLOCK_W=block_w, ROWS=tile,
        )
    return miss, int(num_misses)
