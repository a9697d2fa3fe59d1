"""Device helpers: pinning host memory in place, zero-copy CUDA views of it, devices.

Under unified virtual addressing the address of page-locked host memory (``pin_memory``
or ``cudaHostRegister``, as :func:`pin_in_place` does) is valid on the device, so
:func:`zero_copy_view` wraps it as a CUDA tensor through ``__cuda_array_interface__``
(no extension needed): kernels and torch ops read it over PCIe/NVLink.
"""

from __future__ import annotations

import ctypes
import math
import operator
import warnings
import weakref
from typing import Tuple, Union

import numpy as np
import torch

__all__ = [
    "cuda_or_warn_once",
    "device_array",
    "device_or_cpu",
    "is_pinned",
    "pin_in_place",
    "resolve_device",
    "table_dtype_and_row_shape",
    "zero_copy_view",
]

Table = Union[torch.Tensor, np.ndarray]

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


def is_pinned(table: Table) -> bool:
    """True if ``table`` is CPU memory the GPU can address (pinned or ``cudaHostRegister``ed)."""
    if not torch.cuda.is_available():
        return False
    if isinstance(table, np.ndarray):
        if table.size == 0:
            return False
        table = _as_tensor(table)
    return not table.is_cuda and table.is_pinned()


def _as_tensor(array: np.ndarray) -> torch.Tensor:
    """``array``'s memory as a tensor (no copy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # read-only memmaps: torch warns; nothing here writes them
        return torch.from_numpy(array)


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


def resolve_device(device: Union[int, str, torch.device, None] = None, where: str = "resolve_device") -> torch.device:
    """``device`` as a ``torch.device`` with its CUDA index filled in (default: CUDA); a
    ValueError naming ``where`` when it is not a device.

    An index-less CUDA device differs from every tensor's ``.device`` and means the
    calling thread's current device (0 in a background stage thread): resolve it once,
    where a stage or cache is built. Without CUDA the device is returned as is.
    """
    given = device
    if not isinstance(device, (bool, str, torch.device)) and device is not None:
        try:  # an index (int, numpy integer): torch's meaning, cuda:i; without CUDA torch.device(0) raises
            device = f"cuda:{operator.index(device)}"
        except TypeError:
            pass
    try:
        device = torch.device("cuda" if device is None else device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"{where}: `device` must be a torch device or a name like 'cuda:0', got {given!r}") from err
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return device


def device_or_cpu(device: Union[int, str, torch.device], message: str, where: str) -> torch.device:
    """``device`` as :func:`resolve_device` gives it, or the CPU where it is a CUDA device
    and CUDA is not available (warning ``message`` once per process). ``None`` (which
    :func:`resolve_device` reads as CUDA, ``Tensor.to`` as "stay") is refused."""
    if device is None:
        raise ValueError(f"{where}: `device` must be a torch device or a name like 'cuda:0', got None")
    device = resolve_device(device, where)
    if device.type == "cuda" and not cuda_or_warn_once(message):
        return torch.device("cpu")
    return device


def pin_in_place(tensor: torch.Tensor) -> torch.Tensor:
    """Page-lock a contiguous CPU tensor in place (``cudaHostRegister``, no copy) and
    return it, for memory the GPU only reads (not a buffer device-to-host copies write).

    Registered read-only where the device supports it (so a read-only memory map can be
    pinned), else plainly; the pages stay locked in RAM until ``tensor`` is collected
    (views from :func:`zero_copy_view` keep it alive). Needs CUDA; tensors that are
    empty, already pinned or on a GPU are left as they are.
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
    """Reset the thread's last CUDA error after a failed ``cudaHostRegister``: torch would
    report it as its next kernel's. ``torch.cuda.cudart()`` has no ``cudaGetLastError``,
    so call the ``libcudart`` torch loaded (nothing to do where it is linked statically).
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
    """A CUDA tensor of ``table``'s shape and dtype aliasing the pinned CPU ``table`` (a
    contiguous tensor or numpy array, kept alive by the view): no copy, reads travel to
    host memory, so torch ops and kernels use it directly."""
    if not is_pinned(table):
        raise ValueError(
            "zero_copy_view: `table` must be pinned CPU memory (tensor.pin_memory() or "
            "Feature.pin_memory_()), and CUDA must be available"
        )
    if isinstance(table, np.ndarray):
        table = _as_tensor(table)  # shares the memory, and keeps the array alive
    if not table.is_contiguous():
        raise ValueError("zero_copy_view: `table` must be contiguous (rows stored one after another)")
    device = resolve_device(device)
    row_nbytes = math.prod(table.shape[1:]) * table.element_size()
    rows = torch.as_tensor(_CudaArrayInterface(table.data_ptr(), (table.shape[0], row_nbytes), table), device=device)
    if rows.data_ptr() != table.data_ptr():
        # torch copied instead of aliasing: it placed the memory on another device.
        raise RuntimeError(f"zero_copy_view: the pinned table could not be viewed in place on {device}")
    return rows.view(table.dtype).reshape(table.shape)


def table_dtype_and_row_shape(table: Table) -> Tuple[torch.dtype, Tuple[int, ...]]:
    """The torch dtype of a tensor or numpy table and the shape of one row."""
    dtype = table.dtype if isinstance(table, torch.Tensor) else torch.from_numpy(np.empty(0, dtype=table.dtype)).dtype
    return dtype, tuple(table.shape[1:])


_warned_unpinned = False


def device_array(array: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``array`` readable by torch ops on ``device``: itself, a zero-copy view of pinned
    host memory, or (unpinned host memory on a CUDA device) a device copy, with a
    warning once per process, since such a copy is made again for every layer."""
    global _warned_unpinned
    if array.device == device:
        return array
    if device.type == "cuda" and is_pinned(array):
        return zero_copy_view(array, device)
    if not _warned_unpinned:
        _warned_unpinned = True
        warnings.warn(
            "GPU sampling on a graph that is neither on the GPU nor pinned copies its arrays for "
            "every layer; call graph.pin_memory_() or graph.to('cuda') once"
        )
    return array.to(device)
