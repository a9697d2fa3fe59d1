"""Reading dataset files: numeric CSV (optionally gzipped) in bounded memory, and
GraphBolt's ``numpy`` / ``torch`` array files."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import stat
import warnings
import zlib
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from graphpipe._internal.safe_files import publish, real_directory, regular_file, scratch_directory

__all__ = [
    "csv_shape", "read_csv", "csv_to_npy", "read_array", "fingerprint", "trusted_directories", "cache_is_fresh",
    "make_cache_directory", "publish_cache",
]  # fmt: skip

_BLOCK_BYTES = 1 << 26
_CSV_FORM = "numeric rows 'a,b,...' (ASCII, no header), optionally gzipped as '.gz'"
_BLANK_LINE = re.compile(rb"^[ \t\r]*\n", re.MULTILINE)  # as pandas reads lines: only spaces, tabs and CRs
_BOM = b"\xef\xbb\xbf"  # UTF-8's byte order mark, which pandas skips at the start of a file
_NOT_SEPARATORS = bytes(byte for byte in range(256) if byte not in b",\n")


def _open(path: str):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _line_blocks(path: str, block_bytes: int = _BLOCK_BYTES) -> Iterator[bytes]:
    """Whole lines of ``path``, ``block_bytes`` at a time (each block ends at a newline),
    blank lines and a leading UTF-8 byte order mark dropped.

    Raises:
        ValueError: naming ``path`` for a ``.gz`` file that is not gzip, truncated or corrupted.
    """
    try:
        with _open(path) as f:
            rest = f.read(len(_BOM))
            rest = b"" if rest == _BOM else rest
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
                yield from _without_blank_lines(data[:cut])
            if rest.strip():
                yield from _without_blank_lines(rest + b"\n")
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(
            f"'{path}' cannot be decompressed ({type(error).__name__}: {error}): a '.gz' file must be a whole "
            f"gzip file (truncated by an interrupted download or copy, or not gzip at all?)"
        ) from error


def _without_blank_lines(block: bytes) -> Iterator[bytes]:
    """``block`` (whole lines) without its blank lines (empty, or only spaces, tabs and
    CRs), which pandas, and so GraphBolt, skips; nothing if none is left."""
    # Fast scans before the slower regular expression, which runs only where a line may
    # be blank: empty, or beginning and ending with a space, a tab or a CR. A byte is
    # looked for alone first (a quick scan); a pair beginning with the newline on every
    # line is a slow one (about as slow as the block's slice).
    present = [byte for byte in (b" ", b"\t", b"\r") if byte in block]
    if (
        b"\n\n" in block
        or not block[: block.index(b"\n")].strip(b" \t\r")  # the first line
        or (present and any(byte + b"\n" in block for byte in present) and any(b"\n" + byte in block for byte in present))
    ):
        block = _BLANK_LINE.sub(b"", block)
    if block:
        yield block


def csv_shape(path: str, expected_columns: Optional[int] = None) -> Tuple[int, int]:
    """``(rows, columns)`` of a numeric CSV file without a header (blank lines skipped).

    Raises:
        ValueError: naming ``path`` when it is empty, cannot be decompressed, or its first
            row has other than ``expected_columns`` values (when given).
    """
    rows, columns = 0, None
    for block in _line_blocks(path):
        if columns is None:
            columns = block[: block.index(b"\n")].count(b",") + 1
        rows += block.count(b"\n")
    if not rows:
        raise ValueError(f"'{path}' is empty; expected {_CSV_FORM}")
    if expected_columns is not None and columns != expected_columns:
        raise ValueError(f"'{path}' has {columns} comma-separated columns, expected {expected_columns}: {_CSV_FORM}")
    return rows, columns


def _parse(block: bytes, dtype, columns: int, path: str, first_row: int) -> np.ndarray:
    rows = block.count(b"\n")
    _check_row_lengths(block, columns, path, first_row)
    try:
        text = block.decode("ascii").replace("\r", "").rstrip("\n").replace("\n", ",")
    except UnicodeDecodeError as error:
        line = _line_number(path, first_row + block[: error.start].count(b"\n"))
        raise ValueError(
            f"'{path}': line {line} holds a non-ASCII byte ({block[error.start]:#04x}); expected {_CSV_FORM}"
        ) from None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns (and stops) at the first value it cannot parse
        try:
            values = np.fromstring(text, dtype=np.float64 if np.issubdtype(dtype, np.floating) else np.int64, sep=",")
        except (DeprecationWarning, ValueError):
            values = None
    if values is None or values.size != rows * columns:
        raise ValueError(
            f"'{path}': lines {_line_number(path, first_row)}..{_line_number(path, first_row + rows - 1)} do not "
            f"hold {columns} comma-separated numbers each (a header, another separator or a malformed value?); "
            f"expected {_CSV_FORM}"
        )
    if values.dtype == np.int64:
        _check_no_overflow(values, text, columns, path, first_row)
    return values.reshape(rows, columns)


def _check_no_overflow(values: np.ndarray, text: str, columns: int, path: str, first_row: int) -> None:
    """Raise naming the first value of ``text`` (parsed as ``values``) beyond int64, which
    numpy's parser reads as int64's limit."""
    limits = np.iinfo(np.int64)
    if not bool(((values == limits.max) | (values == limits.min)).any()):
        return
    for position, token in enumerate(text.split(",")):
        if not limits.min <= int(token) <= limits.max:
            raise ValueError(
                f"'{path}': line {_line_number(path, first_row + position // columns)} holds {token}, beyond int64's "
                f"range; expected {_CSV_FORM}"
            )


def _check_row_lengths(block: bytes, columns: int, path: str, first_row: int) -> None:
    """Raise naming the first line of ``block`` (whole lines) without ``columns`` values:
    the values of all lines are parsed as one sequence, into which a short line and a
    long one would shift the values between rows unnoticed."""
    separators = block.translate(None, delete=_NOT_SEPARATORS)  # a third of the time of the search below
    if separators == (b"," * (columns - 1) + b"\n") * block.count(b"\n"):
        return
    data = np.frombuffer(block, dtype=np.uint8)
    commas_before_end = np.searchsorted(np.flatnonzero(data == ord(",")), np.flatnonzero(data == ord("\n")))
    values = np.diff(commas_before_end, prepend=0) + 1
    bad = int(np.flatnonzero(values != columns)[0])
    raise ValueError(
        f"'{path}': line {_line_number(path, first_row + bad)} has {values[bad]} comma-separated values, "
        f"expected {columns} as on the first line; expected {_CSV_FORM}"
    )


def _line_number(path: str, row: int) -> int:
    """The line of ``path`` (from 1) that holds its row ``row`` (from 0; blank lines hold none)."""
    number = 0
    with _open(path) as f:
        for number, line in enumerate(f, 1):
            row -= bool((line[len(_BOM):] if number == 1 and line.startswith(_BOM) else line).strip(b" \t\r\n"))
            if row < 0:
                break
    return number


def read_csv(path: str, dtype, expected_columns: Optional[int] = None) -> np.ndarray:
    """The whole numeric CSV file as ``[rows, columns]`` of ``dtype`` (for small files)."""
    rows, columns = csv_shape(path, expected_columns)
    out = np.empty((rows, columns), dtype=dtype)
    _fill_from_csv(path, out, columns)
    return out


def csv_to_npy(path: str, out_path: str, dtype, transpose: bool = False, expected_columns: Optional[int] = None) -> np.ndarray:
    """Convert a numeric CSV file into the ``.npy`` file ``out_path`` one block at a
    time (memory: a block of 64 MiB of text), returning it memory-mapped read-only.

    The array is ``[rows, columns]``, or ``[columns, rows]`` with ``transpose`` (an edge
    list ``src,dst`` per line becomes GraphBolt's ``[2, num_edges]``). It is written in a
    private scratch directory beside ``out_path`` (whose directory must be a real one, not
    a symlink) and renamed over ``out_path``: a symlink there is replaced, not followed,
    and a killed conversion leaves only the scratch directory, removed by the next one.
    """
    rows, columns = csv_shape(path, expected_columns)
    shape = (columns, rows) if transpose else (rows, columns)
    with scratch_directory(os.path.dirname(os.path.abspath(out_path)), f"converting '{path}'") as scratch:
        temporary = os.path.join(scratch, "array.npy")
        out = np.lib.format.open_memmap(temporary, mode="w+", dtype=dtype, shape=shape)
        _fill_from_csv(path, out.T if transpose else out, columns)
        out.flush()
        del out
        publish(temporary, out_path)
    return np.load(out_path, mmap_mode="r")


def _fill_from_csv(path: str, out: np.ndarray, columns: int) -> None:
    row = 0
    for block in _line_blocks(path):
        values = _parse(block, out.dtype, columns, path, row)
        out[row : row + values.shape[0]] = values
        row += values.shape[0]


def read_array(path: str, fmt: str, in_memory: bool = True, where: str = "") -> np.ndarray | torch.Tensor:
    """An array file as GraphBolt names it: ``fmt`` ``"numpy"`` (a ``.npy``, memory-mapped
    when not ``in_memory``) or ``"torch"`` (a tensor saved with ``torch.save``), of a
    bool, integer or floating dtype (no pickled objects: ``allow_pickle=False``,
    ``weights_only=True``)."""
    if not os.path.isfile(path):
        if os.path.exists(path):
            raise ValueError(f"{where}'{path}' is not a regular file (a directory, a pipe or a device?)")
        raise FileNotFoundError(f"{where}no such file: '{path}'")
    if fmt == "numpy":
        try:
            data = np.load(path, mmap_mode=None if in_memory else "r", allow_pickle=False)
        except Exception as error:
            raise ValueError(f"{where}'{path}' is not a readable .npy file ({error})") from error
        if not isinstance(data, np.ndarray):
            raise ValueError(f"{where}'{path}' holds a {type(data).__name__} (an .npz archive?), expected one .npy array")
        if data.dtype.kind not in "biuf" or data.dtype.itemsize > 8 or not data.dtype.isnative:
            raise ValueError(
                f"{where}'{path}' holds dtype {data.dtype.str} ({data.dtype}), which graphpipe does not read; "
                f"expected a bool, integer or floating dtype of at most 8 bytes in native byte order "
                f"(e.g. float32, int64): convert it with numpy.save(path, array.astype(...))"
            )
        return data
    if fmt == "torch":
        try:
            data = torch.load(path, weights_only=True, map_location="cpu")
        except Exception as error:
            raise ValueError(f"{where}'{path}' is not a tensor file written by torch.save ({error})") from error
        if not isinstance(data, torch.Tensor):
            raise ValueError(f"{where}'{path}' holds a {type(data).__name__}, expected a tensor")
        if data.layout != torch.strided:
            raise ValueError(f"{where}'{path}' holds a {data.layout} tensor, expected a dense one (tensor.to_dense())")
        return data
    raise ValueError(f"{where}`format` must be 'numpy' or 'torch', got {fmt!r} (for '{path}')")


def fingerprint(*paths: Optional[str]) -> list:
    """``[path, device, inode, size, mtime_ns, ctime_ns]`` of each file, to tell when a
    cache is stale.

    Size and mtime alone miss a file replaced by one of the same size whose mtime was
    restored (``cp -p``, ``rsync -a``, ``tar``, ``os.utime``). The kernel sets ``ctime``
    on every write, rename, ``utime`` and ``chmod``, and no system call sets it to a chosen
    value, and a replaced file has a new inode: so a changed file changes its fingerprint
    (or at worst a harmless change, e.g. a ``chmod``, rebuilds the cache). This costs one
    ``stat`` per file, where hashing the content would read every input at every open. It
    also means a cache copied or shipped with a dataset never matches, so a planted
    ``graph.json`` cannot vouch for a planted graph.
    """
    out = []
    for path in paths:
        if path is not None:
            info = os.stat(path)
            out.append([os.path.abspath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns])
    return out


def trusted_directories(directories, where: str) -> List[str]:
    """The ``trusted_directories`` argument checked: a list of existing directories."""
    form = "a list of directories, e.g. trusted_directories=['/data/features']"
    if isinstance(directories, (str, bytes, os.PathLike)) or not isinstance(directories, (list, tuple)):
        raise TypeError(f"{where}: `trusted_directories` must be {form}, got {directories!r}")
    out = []
    for directory in directories:
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"{where}: `trusted_directories` must be {form}, got an entry {directory!r}")
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"{where}: `trusted_directories` entry '{os.fspath(directory)}' is not a directory")
        out.append(os.path.abspath(os.fspath(directory)))
    return out


def cache_is_fresh(cache_dir: str, stamp_name: str, stamp: dict, where: str) -> Optional[List[str]]:
    """The names of the cached files when the cache in ``cache_dir`` was built from the
    inputs ``stamp`` describes (see :func:`fingerprint`), else None.

    Up to date means: the stamp file ``stamp_name`` (written by :func:`publish_cache`)
    holds ``stamp`` and the fingerprint of every file it lists, each still a regular file
    (not a symlink) with that fingerprint, in a real directory.

    Raises:
        ValueError: ``cache_dir`` is a symlink or not a directory.
    """
    if not os.path.lexists(cache_dir):
        return None
    real_directory(cache_dir, f"{where}: cache directory (pass another one as `cache_dir`)")
    stamp_file = os.path.join(cache_dir, stamp_name)
    if not regular_file(stamp_file):
        return None
    try:
        with os.fdopen(os.open(stamp_file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or not isinstance(saved.get("cache"), dict):
        return None
    outputs = saved.pop("cache")
    if saved != json.loads(json.dumps(stamp)):
        return None
    for name, expected in outputs.items():
        path = os.path.join(cache_dir, name)
        if os.path.basename(name) != name or not regular_file(path) or fingerprint(path) != expected:
            return None
    return list(outputs)


def make_cache_directory(cache_dir: str, default_cache: bool, where: str) -> None:
    """Create the cache directory if needed (and its parents for one the caller named,
    not ``default_cache``) and check it is a real directory, not a symlink; a default
    one must also be this user's and not writable by others (it may sit in a shared
    parent directory, where someone else could have made it first)."""
    what = f"{where}: cache directory"
    try:
        if not default_cache:
            os.makedirs(os.path.dirname(cache_dir), exist_ok=True)
        real_directory(cache_dir, what + " (pass another one as `cache_dir`)", create=True)
    except PermissionError as error:
        raise PermissionError(f"{what} '{cache_dir}' cannot be created ({error}); pass a writable `cache_dir`") from error
    info = os.lstat(cache_dir)
    if default_cache and hasattr(os, "geteuid") and (info.st_uid != os.geteuid() or info.st_mode & stat.S_IWOTH):
        raise PermissionError(
            f"{what} '{cache_dir}' belongs to another user or others may write to it, so its files cannot be "
            f"trusted; remove it, or pass a `cache_dir` of your own"
        )


def publish_cache(scratch: str, cache_dir: str, stamp_name: str, stamp: dict, names: Sequence[str],
                  stale: Iterable[str] = ()) -> None:  # fmt: skip
    """Move the files ``names`` from ``scratch`` (a :func:`scratch_directory` in
    ``cache_dir``) into ``cache_dir``, remove the files ``stale`` (outputs of an earlier
    build this one does not have), then write the stamp file ``stamp_name``: ``stamp``
    and the fingerprint of each published file (what :func:`cache_is_fresh` checks).

    The old stamp goes first, so an interrupted publish leaves a cache that is rebuilt,
    never one a stamp vouches for; files are renamed into place (a symlink there is
    replaced, not followed). Processes may publish into one cache at once: a file another
    one removed first is skipped, and a stamp is written only when every file it lists is
    still the one this process built (the last to publish each file wins; when the winners
    of two files differ, no stamp vouches for the mix and the next open rebuilds).
    """
    for name in (stamp_name, *stale):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(cache_dir, name))
    built = {name: os.lstat(os.path.join(scratch, name)).st_ino for name in names}
    for name in names:
        publish(os.path.join(scratch, name), os.path.join(cache_dir, name))
    try:
        published = {name: fingerprint(os.path.join(cache_dir, name)) for name in names}
    except FileNotFoundError:  # removed by another process as stale
        return
    if any(published[name][0][2] != inode for name, inode in built.items()):  # [0][2]: the inode; another process replaced it
        return
    written = os.path.join(scratch, stamp_name)
    with open(written, "x") as f:
        json.dump({**stamp, "cache": published}, f)
    publish(written, os.path.join(cache_dir, stamp_name))
