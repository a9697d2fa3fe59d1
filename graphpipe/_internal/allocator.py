"""Opt-in (``gp.retain_freed_memory()``, README "The DataLoader rewrites your chain"): keep
glibc's malloc from unmapping each batch's blocks, which the sampler pool's threads, in
their own arenas, fault back in every batch (LABOR-0 loader: 143 -> 0 faults, ~1 ms a
batch; benchmarks/RESULTS.md, "malloc left alone"). Raises the mmap and trim thresholds
and keeps every thread on the main arena (a thread's arena grows in heaps of at most 64 MB).

Process-wide, so never applied by graphpipe itself; arenas made before the call stay. Costs
up to ``TRIM_THRESHOLD`` bytes of freed memory kept per arena; glibc before 2.35 caps the
mmap threshold at 32 MB. A no-op off glibc and when the user tunes malloc through glibc's
variables (``_USER_TUNING``); harmless under an ``LD_PRELOAD``-ed jemalloc or tcmalloc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Mapping

__all__ = ["FALLBACK_MMAP_THRESHOLD", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "retain_freed_memory"]

MMAP_THRESHOLD = 256 << 20  # blocks below this come from the heap and are reused
FALLBACK_MMAP_THRESHOLD = 32 << 20  # the most that every glibc accepts
TRIM_THRESHOLD = 1 << 30  # free memory at the top of an arena kept before trimming
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_USER_TUNING = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES")


def retain_freed_memory(environ: Mapping[str, str] = os.environ) -> bool:
    """Set glibc's ``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD`` and ``M_ARENA_MAX`` (1);
    ``True`` if all three were set."""
    if not sys.platform.startswith("linux") or any(name in environ for name in _USER_TUNING):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # only glibc has mallopt's M_* parameters
    except (OSError, AttributeError):
        return False
    mmap_set = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) or libc.mallopt(_M_MMAP_THRESHOLD, FALLBACK_MMAP_THRESHOLD)
    trim_set = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    arenas_set = libc.mallopt(_M_ARENA_MAX, 1)
    return bool(mmap_set and trim_set and arenas_set)
