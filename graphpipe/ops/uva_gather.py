"""UVA gather: rows of a pinned host table read by the GPU in place, no staging copy.

A Triton kernel reads the table through :func:`~graphpipe._internal.devices.zero_copy_view`.
Such reads are latency bound at minibatch sizes, so the kernel keeps many in flight and
wastes few bytes per request: ids are sorted first (consecutive lanes read ascending
addresses, rows sharing a cache line are fetched together) and each row is written to its
own position; rows are read as the widest words that tile them, lanes laid on 128-byte
aligned lines, each lane loading only its own row's words; a program copies a tile of
``rows_per_program`` rows and the grid is capped (``max_programs``, persistent programs) so a gather on a side stream leaves most SMs to
training. Triton ships with CUDA builds of torch; its interpreter (``TRITON_INTERPRET=1``)
runs the kernel on CPU tensors in the tests.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Optional

import torch

from graphpipe._internal.devices import Table, table_dtype_and_row_shape, zero_copy_view

__all__ = ["check_out", "uva_gather", "word_dtype"]

_LINE_BYTES = 128
_TILE_WORDS = 2048
_PROGRAMS_PER_SM = 2


def word_dtype(row_nbytes: int, ptr: int) -> torch.dtype:
    """The widest of int64/int32/int16/uint8 that tiles a row of ``row_nbytes`` and that
    address ``ptr`` is aligned to."""
    for dtype in (torch.int64, torch.int32, torch.int16):
        size = dtype.itemsize
        if row_nbytes % size == 0 and ptr % size == 0:
            return dtype
    return torch.uint8


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@functools.lru_cache(maxsize=None)
def _gather_kernel():
    """The Triton kernel, compiled on first use."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["n", "num_tiles"])  # one compile for every batch size
    def gather_rows_kernel(
        table, sorted_ids, perm, out, n, row_words, num_tiles,
        ROWS: tl.constexpr, BLOCK_W: tl.constexpr, LINE_WORDS: tl.constexpr,
    ):
        rows_in_tile = tl.arange(0, ROWS)
        lanes = tl.arange(0, BLOCK_W)
        for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):
            r = tile * ROWS + rows_in_tile
            row_ok = r < n
            src = tl.load(sorted_ids + r, mask=row_ok, other=0)
            dst = tl.load(perm + r, mask=row_ok, other=0)
            start = src * row_words
            # Lanes sit on line-aligned word positions covering [start, start + row_words).
            first = (start // LINE_WORDS) * LINE_WORDS
            for c0 in range(0, row_words + LINE_WORDS - 1, BLOCK_W):
                word = first[:, None] + (c0 + lanes)[None, :]
                in_row = (word >= start[:, None]) & (word < start[:, None] + row_words)
                values = tl.load(table + word, mask=row_ok[:, None] & in_row)
                tl.store(out + (dst * row_words)[:, None] + (word - start[:, None]), values,
                         mask=row_ok[:, None] & in_row)

    return gather_rows_kernel


def uva_gather(
    table: Table,
    ids: torch.Tensor,
    out: Optional[torch.Tensor] = None,
    *,
    rows_per_program: Optional[int] = None,
    max_programs: Optional[int] = None,
) -> torch.Tensor:
    """``table[ids]`` computed on ``ids``' device, reading ``table`` in place.

    Args:
        table: ``[num_rows, ...]`` pinned CPU tensor or numpy array (read through
            :func:`zero_copy_view`), or a tensor already on ``ids``' device.
        ids: ``[n]`` int64 row ids on a CUDA device (on CPU only under Triton's
            interpreter), each in ``[0, num_rows)``; repeats allowed. Not checked here:
            callers validate (``gather_rows`` does).
        out: optional contiguous ``[n, *row_shape]`` result on ``ids``' device.
        rows_per_program: rows per program tile (default: about 2048 words per tile).
        max_programs: grid cap (default: 2 programs per SM).

    Returns ``[n, *row_shape]`` with ``table``'s dtype on ``ids``' device, computed on the
    current stream.
    """
    dtype, row_shape = table_dtype_and_row_shape(table)
    n = ids.numel()
    if out is None:
        out = torch.empty((n,) + row_shape, dtype=dtype, device=ids.device)
    else:
        check_out(out, (n,) + row_shape, dtype, ids.device, "uva_gather")
    if n == 0 or out.numel() == 0:
        return out
    if not (isinstance(table, torch.Tensor) and table.device == ids.device):
        table = zero_copy_view(table, ids.device)
    rows = table.reshape(table.shape[0], -1).view(torch.uint8)
    word = word_dtype(rows.shape[1], rows.data_ptr())
    words = rows.view(word)
    row_words = words.shape[1]
    line_words = _LINE_BYTES // word.itemsize
    block_w = min(_next_pow2(row_words + line_words - 1), 1024)
    rows_per_program = _next_pow2(rows_per_program or max(1, _TILE_WORDS // block_w))
    num_tiles = -(-n // rows_per_program)
    if max_programs is None:
        max_programs = _PROGRAMS_PER_SM * _num_sms(ids.device)
    sorted_ids, perm = torch.sort(ids.to(torch.int64))
    out_words = out.view(n, -1).view(torch.uint8).view(word)
    # Triton launches on the thread's current device: make it ids' (a stage thread's is 0).
    with torch.cuda.device(ids.device) if ids.is_cuda else contextlib.nullcontext():
        _gather_kernel()[(min(num_tiles, max_programs),)](
            words, sorted_ids, perm, out_words, n, row_words, num_tiles,
            ROWS=rows_per_program, BLOCK_W=block_w, LINE_WORDS=line_words,
        )
    return out


def check_out(out: torch.Tensor, shape, dtype: torch.dtype, device: torch.device, where: str) -> None:
    """``out`` is a contiguous ``dtype`` tensor of ``shape`` on ``device``, else an error naming ``where``."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{where}: `out` must be a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or out.device != device or not out.is_contiguous():
        raise ValueError(
            f"{where}: `out` must be a contiguous {dtype} tensor of shape {tuple(shape)} on "
            f"{device}, got {out.dtype} shape {tuple(out.shape)} on {out.device}"
            f"{'' if out.is_contiguous() else ' (not contiguous)'}"
        )


def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count
