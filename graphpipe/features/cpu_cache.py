"""CPUCachedFeature: the hot rows of a slow feature (on disk, remote) kept in memory.

As GraphBolt's ``CPUCachedFeature``: a budget of rows in host memory in front of a
fallback :class:`~graphpipe.Feature` (typically a ``DiskBasedFeature``). ``read(ids)``
copies the cached rows, reads the others from the fallback in one call and admits them.

Eviction is S3-FIFO (Yang et al., SOSP'23), scan-resistant: one pass over cold rows does
not flush the rows every batch needs. A small FIFO (10% of the rows) admits new rows; a
row read again there moves to the main FIFO, others leave and are remembered in a ghost
FIFO of ids, and a remembered row that misses goes straight to the main FIFO, which
gives each row one more round per read (up to 3). ``policy="sieve"`` (Zhang et al.,
NSDI'24): one list with a visited mark per row and a hand moving from the oldest row,
clearing marks and evicting the first unmarked row; as good on skewed reads, but a long
scan evicts the hot rows too.

Book-keeping is numba kernels over plain arrays: an ``int32`` slot per feature row (-1:
not cached) and a byte of ghost state per row (5 bytes per row), plus per-slot queues.
"""

from __future__ import annotations

import math
import threading
from typing import Dict, Optional

import numba
import numpy as np
import torch

from graphpipe.features.store import CachedFeature, Feature, check_feature, output_rows, wrap_with_cache
from graphpipe._internal.checks import check_int, check_node_ids

__all__ = ["CPUCachedFeature", "cpu_cached_feature"]

_POLICIES = ("s3-fifo", "sieve")
# state[] entries
_S_HEAD, _S_TAIL, _M_HEAD, _M_TAIL, _G_HEAD, _G_TAIL, _USED = range(7)  # s3-fifo
_NEWEST, _OLDEST, _HAND = range(7, 10)  # sieve (slots, -1 for none)
_MAX_FREQ = 3


class CPUCachedFeature(CachedFeature):
    """A fallback feature with its most useful rows cached in host memory.

    Args:
        fallback: the feature read on a miss (any :class:`~graphpipe.Feature`).
        max_cache_size_in_bytes: the budget for cached rows (at least one row).
        policy: ``"s3-fifo"`` (default) or ``"sieve"``.

    Thread-safe as far as ``fallback`` is (:attr:`concurrent_reads`): lookups and admissions
    hold a lock, fallback reads do not (a read does not cache the rows it read from the
    fallback if an :meth:`update` landed meanwhile).
    """

    @property
    def concurrent_reads(self) -> bool:
        """The fallback's: it is read outside the lock."""
        return self.fallback.concurrent_reads

    def __init__(self, fallback: Feature, max_cache_size_in_bytes: int, policy: str = "s3-fifo"):
        check_feature(fallback, "fallback", "CPUCachedFeature")
        budget = check_int(max_cache_size_in_bytes, "max_cache_size_in_bytes", "CPUCachedFeature", minimum=1)
        if policy not in _POLICIES:
            raise ValueError(f"CPUCachedFeature: `policy` must be one of {list(_POLICIES)}, got {policy!r}")
        self.fallback = fallback
        self.policy = policy
        self.max_cache_size_in_bytes = budget
        self.capacity = min(_rows_within(budget, fallback.row_shape, fallback.dtype, "CPUCachedFeature"), fallback.num_rows)
        self._rows = torch.empty((self.capacity, *fallback.row_shape), dtype=fallback.dtype)
        self._slot_of = np.full(fallback.num_rows, -1, dtype=np.int32)
        self._slot_id = np.full(self.capacity, -1, dtype=np.int64)
        self._freq = np.zeros(self.capacity, dtype=np.uint8)
        # s3-fifo: the small and main FIFOs of slots; sieve: the newer / older neighbour
        # of each slot in its one list.
        self._small = np.zeros(self.capacity, dtype=np.int32)
        self._main = np.zeros(self.capacity, dtype=np.int32)
        self._ghost = np.zeros(self.capacity if policy == "s3-fifo" else 0, dtype=np.int64)
        self._in_ghost = np.zeros(fallback.num_rows if policy == "s3-fifo" else 0, dtype=np.uint8)
        self._state = np.zeros(10, dtype=np.int64)
        self._state[[_NEWEST, _OLDEST, _HAND]] = -1
        self._small_capacity = max(1, self.capacity // 10)
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        # Bumped (under the lock) by every update: a read admits the rows it read from the
        # fallback only if none landed since its lookup, or it would cache the old rows.
        self._updates = 0

    # ------------------------------------------------------------------ the Feature protocol
    @property
    def data(self):
        raise AttributeError("CPUCachedFeature has no single table; read rows with read(ids)")

    def pin_memory_(self) -> "CPUCachedFeature":
        return self

    def read_valid(self, ids: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Rows ``ids`` (``[n]`` int32/int64, in range) as ``[n, *row_shape]``, on the
        device of ``ids`` (gathered on the CPU)."""
        rows = self._read_host(ids.cpu(), out)
        return rows.to(ids.device) if ids.is_cuda else rows

    def _read_host(self, ids: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
        n = ids.numel()
        out = output_rows(out, (n, *self.row_shape), self.dtype, torch.device("cpu"), "CPUCachedFeature.read")
        ids64 = ids.numpy().astype(np.int64, copy=False)
        out_bytes = _as_bytes(out, n)
        missed = np.empty(n, dtype=np.int64)
        with self._lock:
            num_missed = _lookup(ids64, self._slot_of, self._freq, _as_bytes(self._rows, self.capacity), out_bytes, missed)
            self._hits += n - num_missed
            self._misses += num_missed
            updates = self._updates
        if num_missed == 0:  # all hits (or no ids): the backing store is not read, the lock not taken again
            return out
        missed = missed[:num_missed]
        unique, inverse = np.unique(ids64[missed], return_inverse=True)
        fetched = self.fallback.read_valid(torch.from_numpy(unique))
        out[torch.from_numpy(missed)] = fetched[torch.from_numpy(inverse.reshape(-1))]
        with self._lock:
            if self._updates == updates:
                _admit(
                    unique, _as_bytes(fetched, unique.size), _as_bytes(self._rows, self.capacity), self._slot_of,
                    self._slot_id, self._freq, self._small, self._main, self._ghost, self._in_ghost, self._state,
                    self._small_capacity, self.policy == "sieve",
                )
        return out

    def update(self, value: torch.Tensor, ids: Optional[torch.Tensor] = None) -> None:
        if ids is None and isinstance(value, torch.Tensor) and value.dim() >= 1:  # before the fallback changes
            _rows_within(self.max_cache_size_in_bytes, tuple(value.shape[1:]), value.dtype, "CPUCachedFeature.update")
        super().update(value, ids)

    def _empty(self) -> None:
        with self._lock:
            lock, updates = self._lock, self._updates
            self.__init__(self.fallback, self.max_cache_size_in_bytes, self.policy)
            self._lock, self._updates = lock, updates + 1

    def _replace(self, ids: torch.Tensor, value: torch.Tensor) -> None:
        with self._lock:
            self._updates += 1
            slots = torch.from_numpy(self._slot_of[ids.cpu().numpy()]).to(torch.int64)
            held = slots >= 0
            self._rows[slots[held]] = value.cpu()[held]

    # ------------------------------------------------------------------ statistics
    def cache_stats(self) -> Dict[str, float]:
        """Counts since construction or the last :meth:`reset_stats`: ``hits``,
        ``misses`` (rows requested, repeats included), ``hit_rate``, and
        ``cached_rows`` / ``capacity_rows`` now."""
        with self._lock:
            total = self._hits + self._misses
            return {
                "hits": self._hits,
                "misses": self._misses,
                "hit_rate": self._hits / total if total else 0.0,
                "cached_rows": int(self._state[_USED]),
                "capacity_rows": self.capacity,
            }

    @property
    def hit_rate(self) -> float:
        """Fraction of requested rows found in the cache since the last :meth:`reset_stats`
        (as :attr:`graphpipe.GPUCachedFeature.hit_rate`)."""
        return self.cache_stats()["hit_rate"]

    @property
    def miss_rate(self) -> float:
        """GraphBolt's: fraction of requested rows read from the fallback since creation or
        the last :meth:`reset_stats` (0.0 before any read, where GraphBolt divides by zero)."""
        stats = self.cache_stats()
        return stats["misses"] / (stats["hits"] + stats["misses"]) if stats["misses"] else 0.0

    def reset_stats(self) -> None:
        """Zero the hit and miss counts (the cache keeps its rows)."""
        with self._lock:
            self._hits = self._misses = 0

    def cached(self, ids: torch.Tensor) -> torch.Tensor:
        """``[n]`` bool: which of ``ids`` (checked as :meth:`read` checks them) are in the
        cache now (no statistics counted)."""
        ids = check_node_ids(ids, self.num_rows, "ids", "CPUCachedFeature.cached", "row")
        return torch.from_numpy(self._slot_of[ids.cpu().numpy()] >= 0)

    def __getstate__(self):
        # The cache travels with its rows and statistics (a worker starts warm), not its lock.
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        # Each process gets a cache of its own: torch's reductions send the rows in shared
        # memory, while the slot map arrives as a copy, so a shared row buffer would be
        # overwritten by processes that each think the slots hold their rows.
        self.__dict__.update(state)
        self._rows = self._rows.clone()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"CPUCachedFeature(policy='{self.policy}', capacity_rows={self.capacity}, "
            f"fallback={self.fallback!r})"
        )


def cpu_cached_feature(fallback_features, max_cache_size_in_bytes, policy: Optional[str] = None, pin_memory: bool = False):
    """GraphBolt's: ``fallback_features`` (a :class:`~graphpipe.Feature`, or a dict of
    them) wrapped in :class:`CPUCachedFeature`: the cached feature, or a dict of the same
    keys (GraphBolt shares one cache between them; here each has its own, the bytes split
    in proportion to the features' sizes).

    ``policy``: ``"sieve"`` (None, GraphBolt's default) or ``"s3-fifo"``; GraphBolt's
    ``"lru"`` and ``"clock"`` are not provided. ``pin_memory`` is accepted and changes
    nothing: the cache gathers its rows on the CPU into the batch, which ``copy_to`` moves
    (GraphBolt pins the cache for the GPU to read it in place).
    """
    if not isinstance(pin_memory, bool):
        raise TypeError(f"cpu_cached_feature: `pin_memory` must be a bool, got {type(pin_memory).__name__}")
    policy = "sieve" if policy is None else policy
    if policy not in _POLICIES:
        raise ValueError(
            f"cpu_cached_feature: `policy` must be None (sieve) or one of {list(_POLICIES)} (GraphBolt's 'lru' and "
            f"'clock' are not provided), got {policy!r}"
        )
    return wrap_with_cache(
        fallback_features, max_cache_size_in_bytes, "cpu_cached_feature",
        lambda feature, nbytes: CPUCachedFeature(feature, nbytes, policy),
    )


def _rows_within(budget: int, row_shape: tuple, dtype: torch.dtype, where: str) -> int:
    """How many rows of ``row_shape`` and ``dtype`` ``budget`` bytes hold; at least one."""
    row_bytes = max(1, math.prod(row_shape) * dtype.itemsize)
    if budget < row_bytes:
        raise ValueError(f"{where}: `max_cache_size_in_bytes` ({budget}) holds no row of {row_bytes} bytes")
    return budget // row_bytes


def _as_bytes(t: torch.Tensor, rows: int) -> np.ndarray:
    return t.view(torch.uint8).reshape(rows, -1).numpy() if t.numel() else np.empty((rows, 0), np.uint8)


@numba.njit(nogil=True, cache=True)
def _lookup(ids, slot_of, freq, rows, out, missed):
    """Copy cached rows into ``out``, count a read on each; return the number of misses,
    whose positions go to ``missed``."""
    num_missed = 0
    for i in range(ids.size):
        slot = slot_of[ids[i]]
        if slot < 0:
            missed[num_missed] = i
            num_missed += 1
        else:
            if freq[slot] < _MAX_FREQ:
                freq[slot] += 1
            out[i, :] = rows[slot, :]
    return num_missed


@numba.njit(nogil=True, cache=True)
def _push(queue, state, tail, value):
    queue[state[tail] % queue.size] = value
    state[tail] += 1


@numba.njit(nogil=True, cache=True)
def _pop(queue, state, head):
    value = queue[state[head] % queue.size]
    state[head] += 1
    return value


@numba.njit(nogil=True, cache=True)
def _evict_s3fifo(slot_of, slot_id, freq, small, main, ghost, in_ghost, state, small_capacity):
    """Free one slot (S3-FIFO) and return it."""
    while True:
        small_size = state[_S_TAIL] - state[_S_HEAD]
        main_size = state[_M_TAIL] - state[_M_HEAD]
        if small_size > 0 and (small_size >= small_capacity or main_size == 0):
            slot = _pop(small, state, _S_HEAD)
            if freq[slot] > 0:  # read again while in S: promote
                freq[slot] = 0
                _push(main, state, _M_TAIL, slot)
                continue
            row = slot_id[slot]
            if state[_G_TAIL] - state[_G_HEAD] == ghost.size:
                in_ghost[_pop(ghost, state, _G_HEAD)] -= 1
            _push(ghost, state, _G_TAIL, row)
            in_ghost[row] += 1
        else:
            slot = _pop(main, state, _M_HEAD)
            if freq[slot] > 0:  # one more round
                freq[slot] -= 1
                _push(main, state, _M_TAIL, slot)
                continue
        slot_of[slot_id[slot]] = -1
        return slot


@numba.njit(nogil=True, cache=True)
def _admit(ids, fetched, rows, slot_of, slot_id, freq, small, main, ghost, in_ghost, state, small_capacity, sieve):
    """Cache rows ``ids`` with their bytes ``fetched``, evicting as the policy says
    (``sieve``, else S3-FIFO)."""
    for i in range(ids.size):
        row = ids[i]
        if slot_of[row] >= 0:  # admitted meanwhile by another thread
            continue
        if state[_USED] < slot_id.size:
            slot = state[_USED]
            state[_USED] += 1
        elif sieve:
            slot = _evict_sieve(slot_of, slot_id, freq, small, main, state)
        else:
            slot = _evict_s3fifo(slot_of, slot_id, freq, small, main, ghost, in_ghost, state, small_capacity)
        slot_id[slot] = row
        slot_of[row] = slot
        freq[slot] = 0
        rows[slot, :] = fetched[i, :]
        if sieve:
            _link_newest(small, main, state, slot)
        elif in_ghost[row] > 0:
            _push(main, state, _M_TAIL, slot)
        else:
            _push(small, state, _S_TAIL, slot)


@numba.njit(nogil=True, cache=True)
def _evict_sieve(slot_of, slot_id, freq, newer, older, state):
    """Free one slot (SIEVE) and return it: the hand moves from the oldest row towards
    the newest, clearing visited marks, and stops at the first unmarked row."""
    slot = state[_HAND] if state[_HAND] >= 0 else state[_OLDEST]
    while freq[slot] > 0:
        freq[slot] = 0
        slot = newer[slot] if newer[slot] >= 0 else state[_OLDEST]
    state[_HAND] = newer[slot]
    if older[slot] >= 0:
        newer[older[slot]] = newer[slot]
    else:
        state[_OLDEST] = newer[slot]
    if newer[slot] >= 0:
        older[newer[slot]] = older[slot]
    else:
        state[_NEWEST] = older[slot]
    slot_of[slot_id[slot]] = -1
    return slot


@numba.njit(nogil=True, cache=True)
def _link_newest(newer, older, state, slot):
    newer[slot] = -1
    older[slot] = state[_NEWEST]
    if state[_NEWEST] >= 0:
        newer[state[_NEWEST]] = slot
    else:
        state[_OLDEST] = slot
    state[_NEWEST] = slot
