"""A device-memory cache in front of a (pinned, CPU or memory-mapped) feature table.

``gpu_cached_feature(features, "feat", max_bytes=8 << 30, policy="clock")`` returns a
store whose ``"feat"`` is a :class:`GPUCachedFeature` (GraphBolt's form,
``gpu_cached_feature(feature, max_cache_size_in_bytes)``, the cached feature): cached rows
come from device memory, only the misses from the backing feature (a UVA gather when it is
pinned).

* ``"static"``: filled once, never changed: with ``hotness`` (a score per row:
  :func:`hotness_from_degree`, or :func:`~graphpipe.hotness_from_presampling` as GNNLab and
  NeutronOrch do) the hottest rows, else the first rows missed until full.
* ``"clock"``: CLOCK in batches: a hit sets its slot's reference bit; a read's misses
  replace, in hand order, the slots whose bit is clear, clearing the bits swept past (a
  second pass over those if one does not free enough); rows admitted together never
  evict each other.

Lookup is a direct map ``slot_of_row`` (``[num_rows]`` int32 on the device); on a GPU one
Triton kernel looks ids up and copies the hits (:mod:`graphpipe.ops.cache_lookup`), on CPU
tensors batched torch ops do; the misses' steps are batched torch ops. ``read_valid``
syncs with the host twice (the numbers of misses and of distinct misses); ``read`` once more.
Reads and updates hold a lock from the lookup through the admission of the misses (the
fallback read included), so several threads (loaders over one pipe, pipes sharing a store)
may read a cache, one at a time; on CUDA each read's stream waits for the previous one's work.
"""

from __future__ import annotations

import inspect
import math
import threading
from typing import Mapping, Optional, Union

import torch

from graphpipe.features.store import CachedFeature, Feature, FeatureStore, check_feature, output_rows, wrap_with_cache
from graphpipe._internal.checks import check_int
from graphpipe._internal.devices import device_or_cpu, resolve_device

__all__ = [
    "GPUCachedFeature",
    "gpu_cached_feature",
    "hotness_from_degree",
]

POLICIES = ("static", "clock")
_FILL_CHUNK_BYTES = 256 << 20


class GPUCachedFeature(CachedFeature):
    """A :class:`Feature` that caches rows of ``feature`` in ``device`` memory.

    Args:
        feature: the backing :class:`Feature` (pin it for UVA reads of the misses).
        max_bytes: cache size; the cache holds ``max_bytes // row_nbytes`` rows (at most
            all of them), plus 4 bytes per row of the table for the slot map.
        policy: ``"static"`` or ``"clock"`` (see the module docs).
        hotness: optional ``[num_rows]`` scores; the hottest rows are loaded at once
            (``"static"``: for good; ``"clock"``: as a warm start).
        device: where the cache lives; default CUDA. Without CUDA, a CUDA device (the
            default included) warns once per process and the cache holds nothing: reads
            go to ``feature``, whose rows are in host memory already; ``device="cpu"``
            caches rows in host memory.

    ``read(ids)`` returns ``[n, *row_shape]`` on ``device``, equal to
    ``feature.read(ids)``.
    """

    # The slot map, the clock and the hit counts change on every read: reads hold a lock, so
    # a pipe does not fetch batches of one loader in a pool of threads (they would wait).
    concurrent_reads = False

    def __init__(
        self,
        feature: Feature,
        max_bytes: int,
        policy: str = "static",
        hotness: Optional[torch.Tensor] = None,
        device: Union[str, torch.device, None] = None,
    ):
        check_feature(feature, "feature", "GPUCachedFeature")
        if isinstance(feature, GPUCachedFeature):
            raise TypeError("GPUCachedFeature: `feature` is already cached")
        if policy not in POLICIES:
            raise ValueError(f"GPUCachedFeature: `policy` must be one of {list(POLICIES)}, got {policy!r}")
        max_bytes = check_int(max_bytes, "max_bytes", "GPUCachedFeature", minimum=0)
        self.fallback = feature
        self.policy = policy
        self.max_bytes = max_bytes
        asked = resolve_device(device, "GPUCachedFeature")
        self.device = device_or_cpu(
            asked,
            "GPUCachedFeature: CUDA is not available; reads go to the feature itself, nothing is cached (pass "
            "device='cpu' to cache rows in host memory)",
            "GPUCachedFeature",
        )
        num_rows = feature.num_rows
        row_nbytes = max(1, math.prod(feature.row_shape) * feature.dtype.itemsize)
        # Without CUDA a host copy of rows already in host memory would only cost memory.
        self._asked = asked
        self.capacity = min(num_rows, max_bytes // row_nbytes) if asked == self.device else 0
        self.cache = torch.empty((self.capacity,) + feature.row_shape, dtype=feature.dtype, device=self.device)
        # Entry num_rows (resp. capacity) is a scratch target for "no row" (resp. "no slot").
        self.slot_of_row = torch.full((num_rows + 1,), -1, dtype=torch.int32, device=self.device)
        self.row_of_slot = torch.full((self.capacity + 1,), num_rows, dtype=torch.int64, device=self.device)
        self.referenced = torch.zeros(self.capacity + 1, dtype=torch.int32, device=self.device)
        self.hand = torch.zeros((), dtype=torch.int64, device=self.device)
        self.num_filled = 0
        self._lookups = self._hits = 0
        self._lock = threading.Lock()
        self._done = None  # CUDA: an event after the last read's or update's work on the cache
        if hotness is not None:
            if not isinstance(hotness, torch.Tensor) or hotness.dim() != 1 or hotness.numel() != num_rows:
                raise ValueError(
                    f"GPUCachedFeature: `hotness` must be a 1-D tensor with one score per row ({num_rows}), got "
                    f"{type(hotness).__name__} shape {tuple(getattr(hotness, 'shape', ()))}"
                )
            self._fill_hottest(hotness)

    # ------------------------------------------------------------------ Feature protocol
    @property
    def data(self):
        return self.fallback.data

    def pin_memory_(self) -> "GPUCachedFeature":
        """Pin the backing feature in place (misses become UVA reads); return self."""
        self.fallback.pin_memory_()
        return self

    def read_valid(self, ids: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Rows ``ids`` (``[n]`` int32/int64 in range, repeats allowed; :meth:`read` checks a
        user's): ``[n, *row_shape]`` on the cache's device."""
        ids = ids.to(self.device, torch.int64)
        n = ids.numel()
        out = output_rows(out, (n, *self.row_shape), self.dtype, self.device, "GPUCachedFeature.read")
        if n == 0:
            return out
        with self._lock:
            self._after_last()
            self._read_locked(ids, out)
            self._mark_done()
        return out

    def _read_locked(self, ids: torch.Tensor, out: torch.Tensor) -> None:
        """:meth:`read_valid`'s lookup, fallback read and admission, under the lock."""
        n = ids.numel()
        if self.capacity and ids.is_cuda:
            from graphpipe.ops.cache_lookup import read_hits  # needs triton, which CUDA builds of torch ship

            miss, num_misses = read_hits(ids, self.slot_of_row, self.cache, out, self.referenced)
        else:
            slot = self.slot_of_row[ids].to(torch.int64)
            miss = slot < 0
            num_misses = int(miss.sum())
            if self.capacity:
                torch.index_select(self.cache, 0, slot.clamp(min=0), out=out)
                self.referenced.index_fill_(0, torch.where(miss, self.capacity, slot), 1)
        self._lookups += n
        self._hits += n - num_misses
        if num_misses:
            misses = torch.nonzero_static(miss, size=num_misses).view(-1)
            unique_misses, inverse = torch.unique(ids[misses], return_inverse=True)
            rows = self.fallback.read_valid(unique_misses).to(self.device)
            out[misses] = rows[inverse]
            self._admit(unique_misses, rows)

    def _after_last(self) -> None:
        """CUDA: make this thread's stream wait for the cache work another stream enqueued."""
        if self._done is not None:
            torch.cuda.current_stream(self.device).wait_event(self._done)

    def _mark_done(self) -> None:
        if self.device.type == "cuda":
            self._done = torch.cuda.Event()
            self._done.record(torch.cuda.current_stream(self.device))

    def update(self, value: torch.Tensor, ids: Optional[torch.Tensor] = None) -> None:
        """:meth:`CachedFeature.update` under the cache's lock: no read sees the fallback
        updated and the cache not yet."""
        with self._lock:
            self._after_last()
            super().update(value, ids)
            self._mark_done()

    def _empty(self) -> None:
        # Called by update, under the lock, which the new empty cache keeps.
        lock, done = self._lock, self._done
        self.__init__(self.fallback, self.max_bytes, self.policy, device=self._asked)
        self._lock, self._done = lock, done

    def _replace(self, ids: torch.Tensor, value: torch.Tensor) -> None:
        # Called by update, under the lock.
        slots = self.slot_of_row[ids.to(self.device, torch.int64)].to(torch.int64)
        held = slots >= 0
        self.cache[slots[held]] = value.to(self.device)[held]

    # ------------------------------------------------------------------ statistics
    @property
    def hit_rate(self) -> float:
        """Fraction of looked-up ids found in the cache since the last :meth:`reset_stats`."""
        return self._hits / self._lookups if self._lookups else 0.0

    @property
    def miss_rate(self) -> float:
        """GraphBolt's: fraction of looked-up ids read from the fallback since creation or
        the last :meth:`reset_stats` (0.0 before any read, where GraphBolt divides by zero)."""
        return (self._lookups - self._hits) / self._lookups if self._lookups else 0.0

    def reset_stats(self) -> None:
        with self._lock:
            self._lookups = self._hits = 0

    # ------------------------------------------------------------------ policies
    def _fill_hottest(self, hotness: torch.Tensor) -> None:
        if self.capacity == 0:
            return
        rows = torch.topk(hotness.to(self.device, torch.float64), self.capacity).indices
        chunk = max(1, _FILL_CHUNK_BYTES // max(1, self.cache[0].numel() * self.cache.element_size()))
        for lo in range(0, self.capacity, chunk):
            part = rows[lo : lo + chunk]
            self._place(part, torch.arange(lo, lo + part.numel(), device=self.device), self.fallback.read_valid(part).to(self.device))
        self.num_filled = self.capacity

    def _place(self, rows: torch.Tensor, slots: torch.Tensor, values: torch.Tensor) -> None:
        """Put ``rows`` (with ``values``) into ``slots``, evicting the slots' old rows."""
        # index_fill_ takes its value as a scalar: `t[i] = -1` copies it from the host and waits.
        self.slot_of_row.index_fill_(0, self.row_of_slot[slots], -1)
        self.row_of_slot[slots] = rows
        self.slot_of_row[rows] = slots.to(torch.int32)
        self.cache[slots] = values
        self.referenced.index_fill_(0, slots, 1)

    def _admit(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Admit distinct missed ``rows`` (``values`` their data) by the cache's policy."""
        if self.policy == "static":
            take = min(rows.numel(), self.capacity - self.num_filled)
            if take > 0:
                slots = torch.arange(self.num_filled, self.num_filled + take, device=self.device)
                self._place(rows[:take], slots, values[:take])
                self.num_filled += take
            return
        take = min(rows.numel(), self.capacity)
        if take > 0:
            self._place(rows[:take], self._clock_victims(take), values[:take])

    def _clock_victims(self, m: int) -> torch.Tensor:
        """``m`` slots chosen by a batched CLOCK sweep from the hand; moves the hand.

        Pass 1 takes the slots with a clear bit in hand order; if it has fewer than
        ``m``, pass 2 takes the remaining ones in hand order among the slots pass 1
        cleared. Bits swept past are cleared. No host synchronisation.
        """
        cap = self.capacity
        position = torch.arange(cap, device=self.device)
        order = (self.hand + position) % cap
        clear = self.referenced[order] == 0
        first_pass = torch.cumsum(clear.to(torch.int64), 0)
        num_clear = first_pass[-1]
        second_pass = torch.cumsum((~clear).to(torch.int64), 0)
        victim = torch.where(clear, first_pass <= m, second_pass <= m - num_clear)
        # Position of the last victim in hand order: where the hand stops.
        last_first = torch.searchsorted(first_pass, torch.full((), m, device=self.device))  # no copy from the host
        last_second = torch.searchsorted(second_pass, (m - num_clear).clamp(min=1))
        enough = num_clear >= m
        last = torch.where(enough, last_first, last_second)
        swept = torch.where(enough, position <= last, torch.ones_like(clear))
        self.referenced[order] = torch.where(swept, 0, self.referenced[order])
        self.hand.copy_((self.hand + last + 1) % cap)  # in place: a tensor other streams read stays alive
        return order[torch.nonzero_static(victim, size=m).view(-1)]

    def __getstate__(self):
        raise TypeError("GPUCachedFeature cannot be pickled: build the cache in the process that reads it")

    def __repr__(self) -> str:
        return (
            f"GPUCachedFeature(policy='{self.policy}', capacity={self.capacity} of {self.num_rows} rows, "
            f"device={self.device}, fallback={self.fallback!r})"
        )


_STORE_FORM = "gpu_cached_feature(store, key, max_bytes, policy='static', hotness=None, device=None)"
_GRAPHBOLT_FORM = "gpu_cached_feature(feature or {key: feature}, max_cache_size_in_bytes, policy='clock', device=None)"


def gpu_cached_feature(*args, **kwargs):
    """Wrap features in :class:`GPUCachedFeature`, in one of two forms:

    * graphpipe's, ``gpu_cached_feature(store, key, max_bytes, policy="static",
      hotness=None, device=None)``: a new :class:`FeatureStore` with feature ``key`` (any
      key of the store: ``"name"``, ``("node" | "edge", "name")`` or typed, ``("node",
      "paper", "feat")``) cached; the other features are shared with ``store``, which is
      not modified.
    * GraphBolt's, ``gpu_cached_feature(fallback_features, max_cache_size_in_bytes,
      policy="clock", device=None)``: a :class:`Feature` gives its cached feature, a dict
      of Features a dict of cached features (GraphBolt shares one cache between them; here
      each has its own, the bytes split in proportion to the features' sizes). The policy
      defaults to ``"clock"``, which evicts as GraphBolt's cache does.

    See :class:`GPUCachedFeature` for the options.
    """
    features = args[0] if args else kwargs.get("features", kwargs.get("fallback_features"))
    if isinstance(features, FeatureStore):
        form, described = _in_store, _STORE_FORM
    elif isinstance(features, (Feature, Mapping)):
        form, described = _graphbolt_form, _GRAPHBOLT_FORM
    else:
        raise TypeError(
            f"gpu_cached_feature: `features` must be a FeatureStore ({_STORE_FORM}) or a Feature or dict of "
            f"Features (GraphBolt's {_GRAPHBOLT_FORM}), got {type(features).__name__}"
        )
    try:
        inspect.signature(form).bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"gpu_cached_feature: {error}; this form is {described}") from None
    return form(*args, **kwargs)


def _in_store(features, key, max_bytes, policy="static", hotness=None, device=None) -> FeatureStore:
    return features.with_feature(key, GPUCachedFeature(features[key], max_bytes, policy, hotness, device))


def _graphbolt_form(fallback_features, max_cache_size_in_bytes, policy="clock", device=None):
    return wrap_with_cache(
        fallback_features, max_cache_size_in_bytes, "gpu_cached_feature",
        lambda feature, nbytes: GPUCachedFeature(feature, nbytes, policy, device=device),
    )


def hotness_from_degree(graph) -> torch.Tensor:
    """``[num_nodes]`` int64: how many nodes have each node as an in-neighbour.

    A node's chance of being sampled as a source grows with the number of neighbourhoods
    it is in (its out-degree; the in-degree on a symmetric graph), so this ranks the rows
    a sampler will fetch most without sampling anything.
    """
    return torch.bincount(graph.indices.to(torch.int64), minlength=graph.total_num_nodes)

