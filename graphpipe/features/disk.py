"""DiskBasedFeature: a ``.npy`` feature table read row by row from disk, not mapped.

For tables larger than RAM (GraphBolt's ``DiskBasedFeature``), where a memory map would
compete for memory through the page cache. Each requested row is ``pread`` into the
output by a pool of I/O threads running a numba kernel that releases the GIL, a few
hundred rows (at most a few MiB) per call, checking between calls whether to stop: so
Ctrl-C, :meth:`DiskBasedFeature.close` and interpreter exit stop a read within one call.
``direct_io`` opens the file ``O_DIRECT`` (no page cache). io_uring is not used: the
standard library has no binding, and ``pread`` from a few threads keeps an NVMe queue busy.
Put a :class:`~graphpipe.features.cpu_cache.CPUCachedFeature` in front for the hot rows.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Optional, Tuple

import numba
import numpy as np
import torch

from graphpipe.features.store import Feature, checked_metadata, npy_layout, output_rows
from graphpipe.ops.gather import numpy_to_torch_dtype
from graphpipe._internal.checks import check_int, check_node_ids

__all__ = ["DiskBasedFeature"]

_ALIGN = 4096  # O_DIRECT offsets, lengths and buffers must be multiples of the block size
_CALL_BYTES = 4 << 20  # rows one kernel call reads: about this many bytes, 16 to 1024 rows
_STOPPED = -2  # what a thread's share of a read returns when it stopped early
_CPU = torch.device("cpu")

# Set at interpreter exit before the I/O threads are joined (concurrent.futures' hook runs
# after this one): reads in progress stop after their current kernel call.
_EXITING = threading.Event()
threading._register_atexit(_EXITING.set)

_warned_fallback = set()  # files whose fallback from O_DIRECT was warned about

# libc's pread, called from numba by its symbol name (a ctypes pointer would stop numba
# from caching the kernel). Addresses travel as uintp (the C ABI is that of a pointer).
_pread = numba.types.ExternalFunction(
    "pread", numba.types.intp(numba.types.intc, numba.types.uintp, numba.types.uintp, numba.types.int64)
)


class DiskBasedFeature(Feature):
    """Rows of a ``.npy`` file (``[num_rows, *row_shape]``, C order) read on demand.

    Args:
        path: the ``.npy`` file.
        num_threads: I/O threads (each reads its share of a batch's rows).
        direct_io: ``True`` opens with ``O_DIRECT`` (OSError where refused), ``False``
            reads through the page cache, ``None`` tries ``O_DIRECT`` and else reads
            through the page cache, warning once per file.
        metadata: what :meth:`~graphpipe.Feature.metadata` returns (keyword only: GraphBolt's
            ``DiskBasedFeature(path, metadata)`` has it second).

    ``read(ids)`` returns ``[len(ids), *row_shape]`` on the CPU; ``read_async(ids)`` a
    ``Future`` of it. ``close()`` (or ``with``, or garbage collection) stops the threads
    and closes the file, which the next read reopens; a read stopped by ``close()`` from
    another thread or by interpreter exit raises ``RuntimeError``. Pickles as its path
    and options (worker processes open the file themselves).

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: not a ``.npy`` file, Fortran order, a header with a negative or
            overflowing shape, or shorter than its header says (naming the path).
        TypeError: a dtype torch has no equivalent of (object arrays included), as for
            an in-memory table.
    """

    def __init__(
        self, path: str | os.PathLike, num_threads: int = 4, direct_io: Optional[bool] = None, *, metadata=None
    ):
        path = os.path.abspath(os.fspath(path))
        where = f"DiskBasedFeature('{path}')"
        self._metadata = checked_metadata(metadata, where)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{where}: no such file")
        self.path = path
        self.num_threads = check_int(num_threads, "num_threads", "DiskBasedFeature", minimum=1)
        if direct_io is not None and not isinstance(direct_io, bool):
            raise ValueError(f"{where}: `direct_io` must be True, False or None, got {direct_io!r}")
        self.direct_io = direct_io
        self._shape, self._np_dtype, self._data_offset = npy_layout(path, where)
        status = os.stat(path)
        self._identity = (status.st_dev, status.st_ino)  # the file checked: reads open no other
        if self.row_bytes >= 2**62:  # a table of no rows may declare any row shape
            raise ValueError(f"{where}: the header's row shape {self.row_shape} {self._np_dtype} is too large to read")
        self._lock = threading.Lock()
        self._file: Optional[_OpenFile] = None
        self.uses_direct_io: Optional[bool] = None  # known once opened

    # ------------------------------------------------------------------ the Feature protocol
    @property
    def data(self):
        raise AttributeError("DiskBasedFeature has no in-memory table; read rows with read(ids)")

    @property
    def num_rows(self) -> int:
        return self._shape[0]

    @property
    def row_shape(self) -> Tuple[int, ...]:
        return tuple(self._shape[1:])

    @property
    def dtype(self) -> torch.dtype:
        return numpy_to_torch_dtype(self._np_dtype)

    @property
    def row_bytes(self) -> int:
        return math.prod(self._shape[1:]) * self._np_dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.num_rows * self.row_bytes

    def pin_memory_(self) -> "DiskBasedFeature":
        """Nothing to pin: rows are read into fresh (or given) buffers."""
        return self

    def read_valid(self, ids: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Rows ``ids`` (``[n]`` int32/int64, in range) as ``[n, *row_shape]`` on the
        device of ``ids`` (read on the CPU, into ``out`` when given)."""
        out = output_rows(out, (ids.numel(), *self.row_shape), self.dtype, _CPU, "DiskBasedFeature.read")
        self._read_into(ids.cpu(), out)
        return out.to(ids.device) if ids.is_cuda else out

    def read_async(self, ids: torch.Tensor, out: Optional[torch.Tensor] = None) -> Future:
        """Start reading rows ``ids`` (checked as by :meth:`read`); a Future of the result
        (as :meth:`read`, on the CPU)."""
        ids = check_node_ids(ids, self.num_rows, "ids", "DiskBasedFeature.read_async", "row").cpu()
        out = output_rows(out, (ids.numel(), *self.row_shape), self.dtype, _CPU, "DiskBasedFeature.read_async")
        file = self._open()
        return file.pool.submit(lambda: (self._read_into(ids, out, file), out)[1])

    # ------------------------------------------------------------------ I/O
    def _open(self) -> "_OpenFile":
        with self._lock:
            if self._file is None or self._file.pid != os.getpid():  # closed, or a forked child: open anew
                self._file = _OpenFile(self.path, self.direct_io, self.num_threads, self._identity)
                self.uses_direct_io = self._file.uses_direct_io
            return self._file

    def _read_into(self, ids: torch.Tensor, out: torch.Tensor, file: Optional["_OpenFile"] = None) -> None:
        n = ids.numel()
        if n == 0 or self.row_bytes == 0:
            return
        file = file or self._open()
        ids64 = ids.numpy().astype(np.int64, copy=False)
        order = np.argsort(ids64, kind="stable")  # ascending offsets: the disk reads forward
        out_bytes = out.view(torch.uint8).reshape(n, -1).numpy()
        parts = np.linspace(0, n, min(self.num_threads, n) + 1).astype(np.int64)
        span = _aligned_span(self.row_bytes) if file.uses_direct_io else 0
        rows_per_call = max(16, min(1024, _CALL_BYTES // self.row_bytes))
        cancelled = threading.Event()  # this read's caller was interrupted

        def work(lo, hi):
            scratch = _aligned_buffer(span)
            for start in range(lo, hi, rows_per_call):
                if cancelled.is_set() or file.stopped.is_set() or _EXITING.is_set():
                    return _STOPPED
                failed = _pread_rows(
                    file.fd, ids64, order[start : min(start + rows_per_call, hi)], self._data_offset,
                    self.row_bytes, out_bytes, scratch, scratch.ctypes.data if span else 0, span,
                )
                if failed >= 0:
                    return failed
            return -1

        with file.reading(self.path):
            on_pool = threading.current_thread().name.startswith("graphpipe-disk-io")
            if on_pool or len(parts) == 2:  # read_async's task, or one part: read here
                results = [work(lo, hi) for lo, hi in zip(parts[:-1], parts[1:])]
            else:
                futures = [file.pool.submit(work, lo, hi) for lo, hi in zip(parts[:-1], parts[1:])]
                try:
                    results = [f.result() for f in futures]
                except BaseException:  # Ctrl-C while waiting: the threads stop after their current call
                    cancelled.set()
                    raise
        if _STOPPED in results:
            raise RuntimeError(
                f"DiskBasedFeature('{self.path}'): the read was stopped: the feature was closed "
                "or the interpreter is exiting"
            )
        bad = [r for r in results if r >= 0]
        if bad:
            row = int(ids64[bad[0]])
            raise OSError(
                f"DiskBasedFeature('{self.path}'): reading row {row} (bytes "
                f"{self._data_offset + row * self.row_bytes}..) failed or came short: the file changed "
                "or the device reports an error"
            )

    def close(self) -> None:
        """Stop the I/O threads (reads in progress stop after their current kernel call
        and raise) and close the file; a later read opens them again."""
        with self._lock:
            file, self._file = self._file, None
        if file is not None:
            file.close()

    def __enter__(self) -> "DiskBasedFeature":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self):
        layout = (self._shape, self._np_dtype)
        return {"path": self.path, "num_threads": self.num_threads, "direct_io": self.direct_io, "layout": layout,
                "metadata": self._metadata}  # fmt: skip

    def __setstate__(self, state):
        self.__init__(state["path"], state["num_threads"], state["direct_io"], metadata=state.get("metadata"))
        if (self._shape, self._np_dtype) != state["layout"]:  # the rows pipes were built for
            raise ValueError(
                f"DiskBasedFeature('{self.path}'): the file changed after the feature was pickled: it now holds "
                f"{self._shape} {self._np_dtype}, it held {state['layout'][0]} {state['layout'][1]}; make the feature "
                f"(and what reads it) again from the new file"
            )

    def __repr__(self) -> str:
        return (
            f"DiskBasedFeature(path='{self.path}', num_rows={self.num_rows}, row_shape={self.row_shape}, "
            f"dtype={self.dtype}, num_threads={self.num_threads}, direct_io={self.direct_io})"
        )


class _OpenFile:
    """One opening of the file: its descriptor, its I/O threads and the reads using them."""

    def __init__(self, path: str, direct_io: Optional[bool], num_threads: int, identity: Tuple[int, int]):
        self.fd, self.uses_direct_io = _open_file(path, direct_io)
        status = os.fstat(self.fd)
        if (status.st_dev, status.st_ino) != identity:
            os.close(self.fd)
            raise ValueError(
                f"DiskBasedFeature('{path}'): the path names another file than when the feature was made (replaced "
                f"or re-linked since its header was checked); make the feature again from the file"
            )
        self.pool = ThreadPoolExecutor(num_threads, thread_name_prefix="graphpipe-disk-io")
        self.pid = os.getpid()
        self.stopped = threading.Event()  # set by close(): reads stop after their current call
        self._reads = 0
        self._idle = threading.Condition()

    @contextlib.contextmanager
    def reading(self, path: str):
        """Count a read in progress (close() waits for it); refuse one after close()."""
        with self._idle:
            if self.stopped.is_set():
                raise RuntimeError(f"DiskBasedFeature('{path}'): the feature was closed while this read was starting")
            self._reads += 1
        try:
            yield
        finally:
            with self._idle:
                self._reads -= 1
                self._idle.notify_all()

    def close(self) -> None:
        with self._idle:
            self.stopped.set()
        if self.pid != os.getpid():
            return  # a forked child's copy: the threads and the descriptor are the parent's
        on_pool = threading.current_thread().name.startswith("graphpipe-disk-io")
        self.pool.shutdown(wait=not on_pool, cancel_futures=True)
        with self._idle:
            self._idle.wait_for(lambda: self._reads == 0 or on_pool)
        os.close(self.fd)


def _open_file(path: str, direct_io: Optional[bool]):
    """``(fd, uses_direct_io)``; with ``direct_io=None`` a fallback to the page cache
    warns once per file."""
    flag = getattr(os, "O_DIRECT", 0)
    reason = "O_DIRECT is not available on this platform"
    if direct_io is not False and flag:
        try:
            return os.open(path, os.O_RDONLY | flag), True
        except OSError as error:
            if direct_io:
                raise OSError(f"DiskBasedFeature('{path}'): cannot open with O_DIRECT ({error}); pass direct_io=False") from error
            reason = f"the file system refuses O_DIRECT ({error.strerror or error})"
    elif direct_io:
        raise OSError(f"DiskBasedFeature('{path}'): {reason}; pass direct_io=False")
    if direct_io is None and path not in _warned_fallback:
        _warned_fallback.add(path)
        warnings.warn(
            f"DiskBasedFeature('{path}'): {reason}; rows are read through the page cache, which keeps what "
            f"was read in memory (pass direct_io=False to choose that without this warning)",
            RuntimeWarning,
            stacklevel=4,
        )
    return os.open(path, os.O_RDONLY), False


def _aligned_span(row_bytes: int) -> int:
    """Bytes of aligned blocks that cover one row wherever it starts."""
    return ((row_bytes + 2 * _ALIGN - 1) // _ALIGN) * _ALIGN


def _aligned_buffer(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % _ALIGN
    return raw[start : start + nbytes]


@numba.njit(nogil=True, cache=True)
def _pread_rows(fd, ids, order, data_offset, row_bytes, out, scratch, scratch_address, span):
    """Read rows ``ids[order[k]]`` into ``out[order[k]]``; -1, or the first failing position.

    ``span == 0``: buffered reads straight into ``out``. Else ``O_DIRECT``: read the
    aligned blocks covering the row into ``scratch`` (aligned, ``span`` bytes) and copy.
    """
    base = out.ctypes.data
    for k in range(order.size):
        i = order[k]
        offset = data_offset + ids[i] * row_bytes
        if span == 0:
            done = 0
            while done < row_bytes:
                got = _pread(fd, base + i * row_bytes + done, row_bytes - done, offset + done)
                if got <= 0:
                    return i
                done += got
        else:
            start = offset - offset % 4096
            need = offset - start + row_bytes
            length = ((need + 4095) // 4096) * 4096
            done = 0
            while done < need:
                got = _pread(fd, scratch_address + done, length - done, start + done)
                if got <= 0:
                    return i
                done += got
            skip = offset - start
            for b in range(row_bytes):
                out[i, b] = scratch[skip + b]
    return -1
