"""numba's on-disk cache, safe when several processes save kernels of one function at once.

numba saves a new kernel by reading the function's index, taking the first data-file
number the index does not use, writing the index, then the data. Two processes saving
kernels of one function at the same time (pytest workers sharing the compiling, the
compile helper beside the loader's process) read the same index and take the same number:
the last index written then names the other process's object code, and a later process
loads the wrong kernel for a signature (seen as numba's "'descr' is NULL" crash).
:func:`install` makes each save one critical section per cache directory, under an
``fcntl`` lock held across processes, with the data written before the index that names it.
"""

from __future__ import annotations

import itertools
import os

from numba.core import caching

__all__ = ["install"]


def _save_under_lock(self, key, data):
    """``IndexDataCacheFile.save`` (numba 0.59-0.68), with the index read, the data file
    chosen and both files written while this process holds the directory's lock."""
    import fcntl

    with open(os.path.join(self._cache_path, "graphpipe-numba-cache.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        overloads = self._load_index()
        data_name = overloads.get(key)
        if data_name is None:
            used = set(overloads.values())
            data_name = next(name for name in map(self._data_name, itertools.count(1)) if name not in used)
            overloads[key] = data_name
        self._save_data(data_name, data)
        self._save_index(overloads)


def install() -> None:
    """Make numba's cache saves take the lock (POSIX; elsewhere numba's own save stays)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return
    caching.IndexDataCacheFile.save = _save_under_lock
