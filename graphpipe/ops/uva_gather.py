"""UVA gather: rows of a pinned host table read by the GPU directly, no staging copy.

Under unified virtual addressing the address of page-locked host memory (``pin_memory``
or ``cudaHostRegister``, as ``Feature.pin_memory_()`` does in place) is valid on the
device, so :func:`zero_copy_view` wraps it as a CUDA tensor through
``__cuda_array_interface__`` (no extension needed) and a Triton kernel reads the rows
over PCIe/NVLink into device memory.

At minibatch sizes (~150k rows of a few hundred bytes) such reads are latency bound, so
the kernel is shaped for many reads in flight and for few wasted bytes per request:

* ids are sorted first, so consecutive lanes read ascending addresses and neighbouring
  rows that share a cache line are fetched together; each row is written to its
  original position (``out[perm[i]] = table[sorted_ids[i]]``);
* rows are read as the widest machine words that tile them (8, 4, 2 or 1 bytes), and
  the lanes of a program are laid on 128-byte-aligned line positions, so every load
  instruction covers whole aligned lines instead of straddling them;
* a program copies a tile of ``rows_per_program`` rows at once and the grid is capped
  (``max_programs``, persistent programs loop over tiles) so that a gather running on a
  side stream leaves most SMs to the training kernels.

Triton is imported lazily: it ships with CUDA builds of torch. The kernel also runs in
Triton's interpreter (``TRITON_INTERPRET=1``) on CPU tensors, which the tests use to
check it without a GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import warnings
import weakref
from typing import Optional, Tuple, Union

import numpy as np
import torch

__all__ = ["is_pinned", "pin_in_place", "resolve_device", "uva_gather", "zero_copy_view"]

Table = Union[torch.Tensor, np.ndarray]

_LINE_BYTES = 128
_TILE_WORDS = 2048
_PROGRAMS_PER_SM = 2
_kernel = None
_CUDA_ERROR_ALREADY_REGISTERED = 712
# cudaHostRegister flags. Portable (every device's context) and mapped (an address the
# device can read; under UVA the host address) are what UVA reads need. Read-only: the
# device only reads the memory, so its pages are pinned without write access, and a
# read-only memory map can be registered.
_HOST_REGISTER_PORTABLE_MAPPED = 1 | 2
_HOST_REGISTER_READ_ONLY = 8
_libcudart = None


class _CudaArrayInterface:
    """Exposes host memory at ``ptr`` as a device array (valid under UVA); keeps ``owner`` alive."""

    def __init__(self, ptr: int, shape: Tuple[int, ...], owner):
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
        }


def _host_bytes(table: Table) -> Tuple[int, int, int]:
    """``(data pointer, num_rows, row_nbytes)`` of a CPU table with C-contiguous rows."""
    if isinstance(table, torch.Tensor):
        if table.is_cuda:
            raise ValueError("zero_copy_view: `table` is already on a CUDA device")
        if not table.is_contiguous():
            raise ValueError("zero_copy_view: `table` must be contiguous (rows stored one after another)")
        num_rows = table.shape[0]
        row_nbytes = table[0].numel() * table.element_size() if num_rows else 0
        return table.data_ptr(), num_rows, row_nbytes
    if not table.flags.c_contiguous:
        raise ValueError("zero_copy_view: `table` must be C-contiguous (rows stored one after another)")
    num_rows = table.shape[0]
    return table.ctypes.data, num_rows, (table.nbytes // num_rows if num_rows else 0)


def is_pinned(table: Table) -> bool:
    """True if ``table`` is CPU memory the GPU can address (pinned or ``cudaHostRegister``ed)."""
    if not torch.cuda.is_available():
        return False
    if isinstance(table, np.ndarray):
        if table.size == 0:
            return False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read-only memmaps: torch warns, we only ask a question
            table = torch.from_numpy(table)
    return not table.is_cuda and table.is_pinned()


_warned_without_cuda: set = set()


def cuda_or_warn_once(message: str) -> bool:
    """True when CUDA is available; otherwise warn ``message`` (once per process per
    message) and return False: pinning without CUDA is a no-op, so CPU code keeps working."""
    if torch.cuda.is_available():
        return True
    if message not in _warned_without_cuda:
        _warned_without_cuda.add(message)
        warnings.warn(message)
    return False


def resolve_device(device: Union[int, str, torch.device, None] = None) -> torch.device:
    """``device`` as a ``torch.device`` with its CUDA index filled in (default: CUDA).

    ``torch.device("cuda") != torch.device("cuda:0")``, while every CUDA tensor's
    ``.device`` has an index; and an index-less device means the *calling thread's*
    current device, which is device 0 in a background stage thread. Resolving it once,
    where a stage or cache is built, fixes both. Without CUDA the device is returned as is.
    """
    device = torch.device("cuda" if device is None else device)
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return device


def pin_in_place(tensor: torch.Tensor) -> torch.Tensor:
    """Page-lock a contiguous CPU tensor's memory in place (``cudaHostRegister``, no copy),
    for memory the GPU only reads (feature tables, graph arrays): do not pin this way a
    buffer that device-to-host copies write into.

    Registered read-only for the device where it supports that
    (``cudaDevAttrHostRegisterReadOnlySupported``), which lets a read-only memory map be
    pinned; elsewhere registered plainly. Pinning locks the pages in RAM. Returns
    ``tensor``. The registration ends when ``tensor`` is garbage-collected (views made by
    :func:`zero_copy_view` keep it alive). Needs CUDA; tensors that are empty, already
    pinned or on a GPU are left as they are.
    """
    if tensor.is_cuda or tensor.numel() == 0 or tensor.is_pinned():
        return tensor
    if not tensor.is_contiguous():
        raise ValueError("pin_in_place: `tensor` must be contiguous")
    cudart = torch.cuda.cudart()
    ptr, nbytes = tensor.data_ptr(), tensor.numel() * tensor.element_size()
    failed = []
    for flags in (_HOST_REGISTER_PORTABLE_MAPPED | _HOST_REGISTER_READ_ONLY, _HOST_REGISTER_PORTABLE_MAPPED):
        result = cudart.cudaHostRegister(ptr, nbytes, flags)
        if int(result) == 0:
            weakref.finalize(tensor, cudart.cudaHostUnregister, ptr)
            return tensor
        _clear_last_cuda_error()
        if int(result) == _CUDA_ERROR_ALREADY_REGISTERED:  # part of the range is: leave it to its owner
            return tensor
        failed.append(f"{int(result)} ({cudart.cudaGetErrorString(result)})")
    raise RuntimeError(
        f"pin_in_place: cudaHostRegister of {nbytes} bytes failed: read-only registration with CUDA error "
        f"{failed[0]}, plain registration with {failed[1]}. A read-only memory map can only be pinned where "
        "the device supports read-only registration; elsewhere map the file with mmap_mode='c' or load it "
        "into memory"
    )


def _clear_last_cuda_error() -> None:
    """Reset the thread's last CUDA runtime error after a failed ``cudaHostRegister``.

    The runtime keeps the failure as the last error, and torch reads that after its next
    kernel launch and reports it as the kernel's. ``torch.cuda.cudart()`` has no
    ``cudaGetLastError``, so call it in the ``libcudart`` torch loaded (nothing to do
    where torch links the runtime statically, or the library cannot be opened again: the
    error that follows then names the registration's failure as the last error).
    """
    global _libcudart
    try:
        if _libcudart is None:
            with open("/proc/self/maps") as maps:
                path = next((line.split(maxsplit=5)[-1].strip() for line in maps if "/libcudart.so" in line), None)
            if path is None:
                return
            _libcudart = ctypes.CDLL(path)
        _libcudart.cudaGetLastError()
    except OSError:
        return


def zero_copy_view(table: Table, device: Union[int, str, torch.device, None] = None) -> torch.Tensor:
    """A CUDA tensor of ``table``'s shape and dtype aliasing the pinned CPU ``table``.

    No copy: reads of the view travel to host memory, so torch ops (indexing a pinned
    graph's ``indptr``, say) and kernels can use it directly. ``table`` (a contiguous
    tensor or numpy array) must be page-locked (see :func:`is_pinned`) and stays alive
    as long as the view does.
    """
    if not is_pinned(table):
        raise ValueError(
            "zero_copy_view: `table` must be pinned CPU memory (tensor.pin_memory() or "
            "Feature.pin_memory_()), and CUDA must be available"
        )
    ptr, num_rows, row_nbytes = _host_bytes(table)
    device = resolve_device(device)
    dtype, row_shape = _table_dtype_and_row_shape(table)
    rows = torch.as_tensor(_CudaArrayInterface(ptr, (num_rows, row_nbytes), table), device=device)
    if rows.data_ptr() != ptr:
        # torch copied instead of aliasing: it placed the memory on another device.
        raise RuntimeError(f"zero_copy_view: the pinned table could not be viewed in place on {device}")
    return rows.view(dtype).reshape((num_rows,) + row_shape)


def _word_dtype(row_nbytes: int, ptr: int) -> torch.dtype:
    for dtype in (torch.int64, torch.int32, torch.int16):
        size = dtype.itemsize
        if row_nbytes % size == 0 and ptr % size == 0:
            return dtype
    return torch.uint8


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def _gather_kernel():
    """The Triton kernel, compiled on first use."""
    global _kernel
    if _kernel is not None:
        return _kernel
    import triton
    import triton.language as tl

    @triton.jit
    def gather_rows_kernel(
        table, sorted_ids, perm, out, n, row_words, table_words, num_tiles,
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
                values = tl.load(table + word, mask=row_ok[:, None] & (word < table_words))
                tl.store(out + (dst * row_words)[:, None] + (word - start[:, None]), values,
                         mask=row_ok[:, None] & in_row)

    _kernel = gather_rows_kernel
    return _kernel


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

    Returns ``[n, *row_shape]`` with ``table``'s dtype on ``ids``' device. Runs on the
    current stream (the transforms put it on a side stream).
    """
    dtype, row_shape = _table_dtype_and_row_shape(table)
    n = ids.numel()
    if out is None:
        out = torch.empty((n,) + row_shape, dtype=dtype, device=ids.device)
    elif tuple(out.shape) != (n,) + row_shape or out.dtype != dtype or out.device != ids.device or not out.is_contiguous():
        raise ValueError(
            f"uva_gather: `out` must be a contiguous {dtype} tensor of shape {(n,) + row_shape} on "
            f"{ids.device}, got {out.dtype} shape {tuple(out.shape)} on {out.device}"
        )
    if n == 0 or out.numel() == 0:
        return out
    if not (isinstance(table, torch.Tensor) and table.device == ids.device):
        table = zero_copy_view(table, ids.device)
    rows = table.reshape(table.shape[0], -1).view(torch.uint8)
    word = _word_dtype(rows.shape[1], rows.data_ptr())
    words = rows.view(word)
    row_words = words.shape[1]
    line_words = _LINE_BYTES // word.itemsize
    block_w = min(_next_pow2(row_words + line_words - 1), 1024)
    rows_per_program = rows_per_program or max(1, _TILE_WORDS // block_w)
    rows_per_program = _next_pow2(rows_per_program)
    num_tiles = -(-n // rows_per_program)
    if max_programs is None:
        max_programs = _PROGRAMS_PER_SM * _num_sms(ids.device)
    sorted_ids, perm = torch.sort(ids.to(torch.int64))
    out_words = out.view(n, -1).view(torch.uint8).view(word)
    # Triton launches on the thread's current device: make it ids' (a stage thread's is 0).
    with torch.cuda.device(ids.device) if ids.is_cuda else contextlib.nullcontext():
        _gather_kernel()[(min(num_tiles, max_programs),)](
            words, sorted_ids, perm, out_words, n, row_words, words.numel(), num_tiles,
            ROWS=rows_per_program, BLOCK_W=block_w, LINE_WORDS=line_words,
        )
    return out


def _table_dtype_and_row_shape(table: Table) -> Tuple[torch.dtype, Tuple[int, ...]]:
    if isinstance(table, torch.Tensor):
        return table.dtype, tuple(table.shape[1:])
    return torch.from_numpy(np.empty(0, dtype=table.dtype)).dtype, tuple(table.shape[1:])


def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count
