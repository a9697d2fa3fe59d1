"""Reading dataset files: numeric CSV (optionally gzipped) in bounded memory, and
GraphBolt's ``numpy`` / ``torch`` array files."""

from __future__ import annotations

import gzip
import os
import warnings
from typing import Iterator, Optional, Tuple

import numpy as np
import torch

__all__ = ["csv_shape", "read_csv", "csv_to_npy", "read_array", "fingerprint"]

_BLOCK_BYTES = 1 << 26


def _open(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _line_blocks(path: str, block_bytes: int = _BLOCK_BYTES) -> Iterator[bytes]:
    """Whole lines of ``path``, ``block_bytes`` at a time (each block ends at a newline)."""
    with _open(path) as f:
        rest = b""
        while True:
            data = f.read(block_bytes)
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            rest = data[cut:]
            yield data[:cut]
        if rest.strip():
            yield rest + b"\n"


def csv_shape(path: str) -> Tuple[int, int]:
    """``(rows, columns)`` of a numeric CSV file without a header (blank lines not allowed)."""
    rows, columns = 0, None
    for block in _line_blocks(path):
        if columns is None:
            columns = block[: block.index(b"\n")].count(b",") + 1
        rows += block.count(b"\n")
    return rows, columns or 0


def _parse(block: bytes, dtype, columns: int, path: str, first_row: int) -> np.ndarray:
    rows = block.count(b"\n")
    text = block.replace(b"\r", b"").rstrip(b"\n").replace(b"\n", b",").decode("ascii")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns (and stops) at the first value it cannot parse
        try:
            values = np.fromstring(text, dtype=np.float64 if np.issubdtype(dtype, np.floating) else np.int64, sep=",")
        except (DeprecationWarning, ValueError):
            values = None
    if values is None or values.size != rows * columns:
        raise ValueError(
            f"'{path}': rows {first_row}..{first_row + rows - 1} do not hold {columns} comma-separated "
            f"numbers each (a header, a blank line or a malformed value?)"
        )
    return values.reshape(rows, columns)


def read_csv(path: str, dtype) -> np.ndarray:
    """The whole numeric CSV file as ``[rows, columns]`` of ``dtype`` (for small files)."""
    rows, columns = csv_shape(path)
    out = np.empty((rows, columns), dtype=dtype)
    _fill_from_csv(path, out, columns)
    return out


def csv_to_npy(path: str, out_path: str, dtype, transpose: bool = False) -> np.ndarray:
    """Convert a numeric CSV file into the ``.npy`` file ``out_path`` one block at a
    time (memory: a block of 64 MiB of text), returning it memory-mapped read-only.

    The array is ``[rows, columns]``, or ``[columns, rows]`` with ``transpose`` (an edge
    list ``src,dst`` per line becomes GraphBolt's ``[2, num_edges]``).
    """
    rows, columns = csv_shape(path)
    shape = (columns, rows) if transpose else (rows, columns)
    temporary = f"{out_path}.{os.getpid()}.tmp.npy"
    try:
        out = np.lib.format.open_memmap(temporary, mode="w+", dtype=dtype, shape=shape)
        _fill_from_csv(path, out.T if transpose else out, columns)
        out.flush()
        del out
        os.replace(temporary, out_path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return np.load(out_path, mmap_mode="r")


def _fill_from_csv(path: str, out: np.ndarray, columns: int) -> None:
    row = 0
    for block in _line_blocks(path):
        values = _parse(block, out.dtype, columns, path, row)
        out[row : row + values.shape[0]] = values
        row += values.shape[0]


def read_array(path: str, fmt: str, in_memory: bool = True, where: str = "") -> np.ndarray | torch.Tensor:
    """An array file as GraphBolt names it: ``fmt`` ``"numpy"`` (a ``.npy``, memory-mapped
    when not ``in_memory``) or ``"torch"`` (a tensor saved with ``torch.save``)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{where}no such file: '{path}'")
    if fmt == "numpy":
        try:
            return np.load(path, mmap_mode=None if in_memory else "r")
        except Exception as error:
            raise ValueError(f"{where}'{path}' is not a readable .npy file ({error})") from error
    if fmt == "torch":
        data = torch.load(path, weights_only=True)
        if not isinstance(data, torch.Tensor):
            raise ValueError(f"{where}'{path}' holds a {type(data).__name__}, expected a tensor")
        return data
    raise ValueError(f"{where}`format` must be 'numpy' or 'torch', got {fmt!r} (for '{path}')")


def fingerprint(*paths: Optional[str]) -> list:
    """``[path, size, mtime_ns]`` of each file, to tell when a cache is stale."""
    out = []
    for path in paths:
        if path is not None:
            stat = os.stat(path)
            out.append([os.path.abspath(path), stat.st_size, stat.st_mtime_ns])
    return out
