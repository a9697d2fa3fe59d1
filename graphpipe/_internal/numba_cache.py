"""numba's on-disk cache, safe when several processes save kernels of one function at once.

numba saves a kernel by reading the function's index, taking the first data-file number
it does not use, then writing the index and the data. Two processes saving at once
(pytest workers, the compile helper beside the loader) take the same number, and a later
process loads the wrong kernel for a signature (numba's "'descr' is NULL" crash).
:func:`lock_saves` makes each save one critical section per cache directory (an
``fcntl`` lock across processes), data before index. It patches the given functions'
cache objects only, never numba's classes; ``import graphpipe`` applies it to its kernels.
"""

from __future__ import annotations

import itertools
import os
import types
from typing import Iterable

from numba.core import caching

try:
    import fcntl
except ImportError:  # not POSIX: numba's own save stays
    fcntl = None

__all__ = ["lock_saves"]


def _save_under_lock(self, key, data):
    """``IndexDataCacheFile.save`` (numba 0.59-0.68), with the index read, the data file
    chosen and both files written while this process holds the directory's lock."""
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


def lock_saves(modules: Iterable[types.ModuleType]) -> None:
    """Make the cache saves of the numba functions defined at the top level of ``modules``
    (``@njit(cache=True)``) take the lock (POSIX; elsewhere numba's own save stays)."""
    if fcntl is None:
        return
    for module in modules:
        for value in list(vars(module).values()):
            cache_file = getattr(getattr(value, "_cache", None), "_cache_file", None)
            if isinstance(cache_file, caching.IndexDataCacheFile):
                cache_file.save = types.MethodType(_save_under_lock, cache_file)
