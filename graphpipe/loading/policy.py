"""Where each stage runs: one value (:class:`Place` per stage), chosen by one policy
(:func:`default_placement`, which reads only what stages declare and the machine) and
applied by one rewrite (:func:`place`). ``DataLoader(pipe)`` keeps it as
``loader.placement``; ``DataLoader(pipe, transforms=[...])`` runs your rewrites instead
(:func:`thread_pool` is one).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional, Sequence, Tuple, Type

import numba
import torch
from numba.np.ufunc import parallel as numba_parallel

from graphpipe.pipes.base import ROLES, Pipe, upstream
from graphpipe.loading.stages import PinMemory, Prefetcher, SideStream, ThreadPoolMap, Waiter, checked_kernel_threads
from graphpipe.loading.workers import ProcessWorkers, Shard
from graphpipe._internal.checks import check_int
from graphpipe.loading.explain import MAIN, locations
from graphpipe.loading.rewrite import find, insert_after, rebuild, with_source

__all__ = ["KINDS", "Place", "Placement", "default_placement", "kernels_thread_safe", "place", "thread_pool"]

KINDS = ("inline", "thread", "pool", "stream", "workers")
MAX_POOL = 8  # sampler batches in flight at once: each holds its memory
QUEUE = 2  # batches a background thread or worker process may hold ready


@dataclasses.dataclass(frozen=True)
class Place:
    """Where one stage's per-batch work runs; ``kernel_threads``: numba threads of each of
    its threads (None: all cores). ``kind``:

    * ``"inline"``: where its consumer pulls it.
    * ``"thread"``: in a background thread with the inline stages upstream of it.
    * ``"pool"``: ``threads`` threads run it on that many batches at once, in order, fed by
      a background thread; consecutive equal pool places share one pool (a batch goes
      through all of them in one pool thread).
    * ``"stream"``: on a CUDA side stream, queued from a background thread (a ``"copy"``
      stage copies pinned batches without blocking).
    * ``"workers"``: ``threads`` worker processes run it and everything upstream.
    """

    kind: str = "inline"
    threads: int = 1
    kernel_threads: Optional[int] = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Place: `kind` must be one of {KINDS}, got {self.kind!r}")
        check_int(self.threads, "threads", "Place", minimum=1)
        checked_kernel_threads(self.kernel_threads, "Place")

    def __str__(self) -> str:
        size = f"{self.threads}" if self.kind in ("pool", "workers") else ""
        kernels = f"kernels on {self.kernel_threads}" if self.kernel_threads is not None else ""
        extra = ", ".join(part for part in (size, kernels) if part)
        return f"{self.kind}({extra})" if extra else self.kind


Placement = Tuple[Place, ...]  # one per stage of a pipe, source first
INLINE = Place()


def kernels_thread_safe() -> bool:
    """Whether numba's parallel kernels may start from several threads at once: true for
    its OpenMP and TBB threading layers, false for ``workqueue`` (which numba picks when
    neither is installed, e.g. on some macOS setups), where they abort."""
    numba_parallel._launch_threads()  # picks the layer, as the first parallel kernel would
    return numba.threading_layer() != "workqueue"


def default_placement(pipe: Pipe, num_workers: int = 0) -> Placement:
    """The placement ``DataLoader(pipe, num_workers=...)`` runs, one :class:`Place` per
    stage of ``pipe`` (source first), from what the stages declare:

    * a thread-safe sampler on CPU batches runs in a pool of ``P = min(C, 8)`` threads
      with kernels on ``C // P`` threads each (``C``: numba's thread count), and a
      thread-safe fetcher right after it in the same pool threads: whole batches, each
      on its share of the cores (0-7% faster for NS, 1-4% for LABOR-0 on 2 cores than a
      separate fetch thread; benchmarks/RESULTS.md, "Issue 30: what was removed");
    * another sampler runs in a thread of its own, another fetcher too;
    * a sampler or fetcher on CUDA batches, and a copy to a CUDA device, on a side stream;
    * a collective sampler or fetcher (cooperative) in a thread of its own, one batch at a
      time (a collective stage of another role inline);
    * ``num_workers > 0``: the stages before the first fetcher, the first collective stage
      and the first copy to a CUDA device in worker processes (those run in the training
      process).

    Other stages, and those ``pipe`` already runs elsewhere (e.g. upstream of a ``prefetch()``),
    run inline. Under numba's ``workqueue`` layer the whole chain runs in one background
    thread instead.
    """
    chain = upstream(pipe)[::-1]
    for stage in chain:
        _check_declarations(stage)
    places = [INLINE] * len(chain)
    movable = _movable(chain)
    first = 0  # the first stage in this process
    if num_workers:
        first = next((i for i, stage in enumerate(chain) if _in_training_process(stage)), len(chain))
        if first == 0:
            raise ValueError(
                f"DataLoader: num_workers={num_workers}, but the pipe's first stage, {type(chain[0]).__name__}, is a "
                f"fetcher, a collective stage or a copy to a CUDA device, which run in the training process; use num_workers=0"
            )
        if not movable[first - 1]:
            raise ValueError(
                f"DataLoader: num_workers={num_workers} would run {type(chain[first - 1]).__name__} and the stages before it "
                f"in worker processes, but the pipe already runs it elsewhere (a pool or thread of yours); use num_workers=0"
            )
        places[first - 1] = Place("workers", num_workers)
    if not kernels_thread_safe():
        if first < len(chain):
            places[-1] = Place("thread")
        return tuple(places)
    cuda = False  # whether the batches so far are on a CUDA device (the last device declared)
    for i, stage in enumerate(chain):
        if i >= first and movable[i]:
            places[i] = _place_of(stage, cuda, places[i - 1] if i > first else None, chain[i - 1])
        cuda = stage.device.type == "cuda" if stage.device is not None else cuda
    return tuple(places)


def _check_declarations(stage: Pipe) -> None:
    """Refuse a stage whose declarations (the Pipe protocol's) the placement cannot read."""
    declared = {"role": stage.role, "thread_safe": stage.thread_safe, "collective": stage.collective, "device": stage.device}
    expected = {
        "role": (stage.role in ROLES, f"one of {ROLES}"),
        "thread_safe": (stage.thread_safe is None or isinstance(stage.thread_safe, bool), "True, False or None"),
        "collective": (isinstance(stage.collective, bool), "a bool"),
        "device": (stage.device is None or isinstance(stage.device, torch.device), "a torch.device or None"),
    }
    for name, (ok, form) in expected.items():
        if not ok:
            raise ValueError(f"DataLoader: {type(stage).__name__}.{name} must be {form} (the Pipe protocol), got {declared[name]!r}")


def _in_training_process(stage: Pipe) -> bool:
    """Whether ``stage`` and the stages after it stay out of worker processes: a fetcher,
    a collective stage, a copy to a CUDA device (one CUDA context, no tensors between processes)."""
    to_cuda = stage.role == "copy" and stage.device is not None and stage.device.type == "cuda"
    return stage.role == "fetcher" or stage.collective or to_cuda


def _movable(chain: Sequence[Pipe]) -> List[bool]:
    """Per stage of ``chain`` (source first): whether it runs where its consumer does and
    no stage wraps it, i.e. nothing in the chain runs it elsewhere yet."""
    where = locations(chain[-1])
    wrapped = {id(inner) for stage in chain for inner in stage.wrapped_stages()}
    consumer_where = [where[id(stage)] for stage in chain[1:]] + [MAIN]
    return [id(stage) not in wrapped and where[id(stage)] == there for stage, there in zip(chain, consumer_where)]


def _place_of(stage: Pipe, cuda: bool, before: Optional[Place], previous: Pipe) -> Place:
    """The default place of ``stage``, reading batches on CUDA or not, after ``previous``
    placed at ``before``."""
    if stage.role == "copy":
        return Place("stream") if stage.device is not None and stage.device.type == "cuda" else INLINE
    if stage.role not in ("sampler", "fetcher"):
        return INLINE
    if stage.collective:
        return Place("thread")
    if cuda:
        return Place("stream")
    cores = numba.get_num_threads()
    pool = min(cores, MAX_POOL)
    in_pool = Place("pool", pool, max(1, cores // pool))
    if stage.thread_safe and (stage.role == "sampler" or (before == in_pool and previous.role == "sampler")):
        return in_pool
    return Place("thread")


def place(pipe: Pipe, placement: Sequence[Place]) -> Pipe:
    """A copy of ``pipe`` that runs each stage where ``placement`` (one :class:`Place` per
    stage, source first) says, with the stages of :mod:`graphpipe.loading.stages`."""
    chain = upstream(pipe)[::-1]
    placement = tuple(placement)
    if len(placement) != len(chain) or not all(isinstance(where, Place) for where in placement):
        raise ValueError(f"place: `placement` must be {len(chain)} Place values, one per stage, got {placement!r}")
    streamed = [type(stage).__name__ for stage, where in zip(chain, placement) if where.kind == "stream"]
    if streamed and not torch.cuda.is_available():
        raise ValueError(f"place: Place('stream') (for {', '.join(streamed)}) needs CUDA, which is not available; use Place('thread')")
    index = {id(stage): i for i, stage in enumerate(chain)}
    sharded = any(where.kind == "workers" for where in placement)

    def placed(stage: Pipe, on: Pipe) -> Pipe:
        i = index[id(stage)]
        where = placement[i]
        if i == 0 and sharded:
            on = Shard(on)
        if where.kind == "pool" and placement[i + 1 : i + 2] == (where,):
            return on  # the next stage's pool runs it too
        if where.kind == "pool":
            run = next(n for n in range(1, i + 2) if i - n < 0 or placement[i - n] != where)
            return Prefetcher(ThreadPoolMap(on, where.threads, where.kernel_threads, stages=run), QUEUE)
        if where.kind == "thread":
            return Prefetcher(on, QUEUE, where.kernel_threads)
        if where.kind == "stream":
            if stage.role == "copy":  # pinned batches copy without blocking the pulling thread
                on = with_source(on, PinMemory(on.source))
                on.non_blocking = True
            return Waiter(Prefetcher(SideStream(on), QUEUE))
        if where.kind == "workers":
            return ProcessWorkers(on, where.threads, QUEUE)
        return on

    return rebuild(pipe, placed)


def thread_pool(stage_type: Type[Pipe], num_threads: int) -> Callable[[Pipe], Pipe]:
    """A transform running the per-batch work of every ``stage_type`` stage on a pool of
    ``num_threads`` threads (:class:`ThreadPoolMap`): for a bottleneck stage whose kernels
    do not use all cores."""
    check_int(num_threads, "num_threads", "thread_pool", minimum=1)

    def run_in_thread_pool(pipe: Pipe) -> Pipe:
        wrapped = {id(inner) for stage in upstream(pipe) for inner in stage.wrapped_stages()}
        for stage in find(pipe, stage_type):
            if id(stage) not in wrapped:
                pipe = insert_after(pipe, stage, lambda s: ThreadPoolMap(s, num_threads))
        return pipe

    run_in_thread_pool.__name__ = run_in_thread_pool.__qualname__ = f"thread_pool({stage_type.__name__}, {num_threads})"
    return run_in_thread_pool
