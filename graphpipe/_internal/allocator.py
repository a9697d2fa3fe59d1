"""Opt-in: keep glibc's malloc from returning each batch's memory to the kernel.

Every batch allocates and frees arrays of a few MB to tens of MB (sampled edges, the
unique-and-compact tables, gathered features). A block malloc maps fresh is faulted in
page by page, and every unmap interrupts the other threads to flush their TLBs. graphpipe
avoids this locally: the feature fetcher reuses its output blocks (the largest, tens of
MB a batch), and glibc's own dynamic threshold keeps blocks up to 32 MB on the heap after
the first free. What is left are the blocks of the sampler pool's threads, in their own
malloc arenas (LABOR-0 loader on the 2-core benchmark machine: ~140 faults, ~1 ms of
kernel time per batch; neighbor sampling ~30).

:func:`retain_freed_memory` removes those too: it raises the mmap and trim thresholds so
freed blocks stay in the process and are reused, and keeps every thread on glibc's main
arena (a thread's own arena grows in heaps of at most 64 MB, so a larger block allocated
in a thread is mapped fresh every time whatever the thresholds). The few threads graphpipe
runs allocate a few blocks per batch, so they do not contend for the one arena's lock.

It is process-wide, so graphpipe never applies it by itself (importing graphpipe leaves
malloc's settings alone): a training script opts in by calling
``graphpipe._internal.allocator.retain_freed_memory()`` once, first thing (arenas that threads
made before stay). It costs memory: up to ``TRIM_THRESHOLD`` bytes of freed memory can
stay mapped in each arena. glibc before 2.35 refuses an mmap threshold above 32 MB; 32 MB
is then used. It does nothing on non-glibc systems and when the user tunes malloc through
glibc's own environment variables (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_ARENA_MAX``, ``GLIBC_TUNABLES``); under an ``LD_PRELOAD``-ed jemalloc or tcmalloc,
glibc's malloc is unused and the call is harmless.
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
