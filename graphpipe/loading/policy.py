"""The rewrites :class:`graphpipe.DataLoader` applies: each a function ``pipe -> pipe``.

``DataLoader(pipe)`` applies :func:`default_transforms`; pass ``transforms=[...]`` to
choose (``[]`` runs the chain as written). Each transform leaves the user's pipe
unchanged and is idempotent (it skips stages it already rewrote).
"""

from __future__ import annotations

from typing import Callable, List, Optional, Type

import numba
import torch

from graphpipe.batch.minibatch import MiniBatch
from graphpipe.pipes.base import Pipe
from graphpipe.pipes.copy_to import CopyTo
from graphpipe.pipes.feature_fetcher import FeatureFetcher
from graphpipe.pipes.item_sampler import ItemSampler
from graphpipe.loading.stages import Prefetcher, SideStream, ThreadPoolMap, Waiter
from graphpipe.loading.explain import MAIN, placement
from graphpipe._internal.checks import check_int
from graphpipe.pipes.subgraph_sampler import SubgraphSampler
from graphpipe.pipes.transform import Transform
from graphpipe.loading.workers import ProcessWorkers, Shard
from graphpipe.loading.rewrite import consumer_of, find, insert_after, replace_stage, stages, with_source

__all__ = [
    "batch_pool", "batch_pool_targets", "default_transforms", "gpu_side_streams", "one_background_thread", "overlap",
    "overlap_stages", "pinned_copy", "process_workers", "thread_pool",
]

PipeTransform = Callable[[Pipe], Pipe]
_MAX_BATCHES_IN_FLIGHT = 8  # sampler batches that overlap_stages runs at once
_QUEUE = 2  # batches a background thread or worker process may hold ready


def default_transforms(num_workers: int = 0) -> List[PipeTransform]:
    """``[process_workers(num_workers)]`` (when ``num_workers > 0``), ``gpu_side_streams``,
    ``overlap_stages``, ``pinned_copy``."""
    front = [process_workers(num_workers)] if num_workers else []
    return front + [gpu_side_streams, overlap_stages, pinned_copy]


def gpu_side_streams(pipe: Pipe) -> Pipe:
    """Run GPU sampling and UVA feature fetching on a high-priority side stream.

    A sampler or ``fetch_feature`` downstream of a ``copy_to("cuda")`` works on CUDA ids:
    each becomes ``SideStream(stage) -> prefetch -> wait``, so its kernels (sampling, the
    UVA gather from pinned host memory) are queued from a background thread on a side
    stream and overlap the training kernels of the previous batch; ``wait`` makes the
    consuming thread's stream wait on the batch's event and ``record_stream``s its tensors.
    Cooperative stages (collective calls) and pipes without CUDA are left unchanged.
    """
    if not torch.cuda.is_available():
        return pipe
    while True:
        todo = [
            stage
            for stage in find(pipe, (SubgraphSampler, FeatureFetcher))
            if not stage.collective
            and _reads_cuda_batches(stage)
            and not _wrapped(pipe, stage)
        ]
        if not todo:
            return pipe
        pipe = insert_after(pipe, todo[0], lambda stage: Waiter(Prefetcher(SideStream(stage), _QUEUE)))


def _wrapper(pipe: Pipe, stage: Pipe) -> Optional[Pipe]:
    """The stage of ``pipe`` that runs ``stage``'s work itself (a pool, a stream), or None."""
    return next((s for s in stages(pipe) if any(inner is stage for inner in s.wrapped_stages())), None)


def _wrapped(pipe: Pipe, stage: Pipe) -> bool:
    """Whether ``stage``'s work already runs inside a stage that wraps it (a pool, a stream)."""
    return _wrapper(pipe, stage) is not None


def _reads_cuda_batches(stage: Pipe) -> bool:
    return any(isinstance(s, CopyTo) and s.device.type == "cuda" for s in stages(stage.source))


def overlap_stages(pipe: Pipe) -> Pipe:
    """Run every sampler and every feature fetcher in the background, sharing the cores
    (:func:`overlap` with its defaults).

    Sampling of batch ``i + 1`` then overlaps fetching of batch ``i``, and both overlap
    the consumer's training step on batch ``i - 1``: the numba kernels release the GIL.

    * A sampler on CPU ids becomes ``ThreadPoolMap(sampler, P, kernel_threads=C // P)
      -> prefetch`` with ``C`` = numba's thread count when the loader is built (the
      cores by default) and ``P = min(C, 8)``: ``P`` batches are sampled at once, each
      by kernels on ``C // P`` threads (1 up to 8 cores). Parallelism across batches
      needs no synchronisation inside a batch and does not suffer from power-law
      imbalance between destinations: on 2 cores, LABOR-0 end-to-end went from 24-30
      to 37-39 it/s, neighbor sampling from 44-57 to 52-61. ``P`` is capped because
      every batch in flight holds its memory (the pool keeps ``2 P`` submitted, so that
      a thread done early starts the next batch).
    * A feature fetcher on CPU ids gets a ``prefetch`` whose thread runs its gather on
      ``max(1, C // 4)`` threads (a gather is bound by memory, and the sampler pool
      already uses every core). Fetchers of CUDA ids and cooperative samplers (whose
      batches are collective calls, one at a time) get a plain ``prefetch``.

    Stages that already feed a background stage, or run inside worker processes, are
    left alone. Batches keep their order and content, so results are unchanged.

    Under numba's ``workqueue`` threading layer (numba picks it when neither OpenMP nor
    TBB is installed, e.g. on some macOS setups), parallel kernels must not start from
    several threads at once: the whole chain then gets one background thread instead.
    """
    return _overlapped(pipe, None, None)


def overlap(pool: int, fetch_kernel_threads: int) -> PipeTransform:
    """:func:`overlap_stages` with ``pool`` sampler batches at once (kernels on
    ``max(1, C // pool)`` threads each) and the fetcher's gather on
    ``fetch_kernel_threads`` threads: the variants the planner (``plan="auto"``) weighs."""
    check_int(pool, "pool", "overlap", minimum=1)
    check_int(fetch_kernel_threads, "fetch_kernel_threads", "overlap", minimum=1)

    def overlap_with(pipe: Pipe) -> Pipe:
        return _overlapped(pipe, pool, fetch_kernel_threads)

    overlap_with.__name__ = overlap_with.__qualname__ = f"overlap(pool={pool}, fetch_kernel_threads={fetch_kernel_threads})"
    return overlap_with


def batch_pool(pool: int) -> PipeTransform:
    """Sample a batch and fetch its features in the same thread of a pool of ``pool``
    threads (kernels on ``max(1, C // pool)`` threads each): ``pool`` whole batches at
    once, and no third thread between sampling and fetching, for the fetchers of
    :func:`batch_pool_targets`; other samplers and fetchers as :func:`overlap` with the
    same pool and kernel threads.

    With ``pool`` no more than the cores, as many threads compute as there are cores: on
    2 cores, where the default layout (a pool of 2 sampling, a thread fetching) keeps three
    busy, it ran neighbor sampling end to end 0-7% faster than the default in four
    side-by-side runs (``benchmarks/RESULTS.md``), LABOR-0 1-4%."""
    check_int(pool, "pool", "batch_pool", minimum=1)

    def in_batch_pool(pipe: Pipe) -> Pipe:
        if not _kernels_thread_safe():
            return one_background_thread(pipe)
        kernel_threads = max(1, numba.get_num_threads() // pool)

        def with_its_sampler_in_a_pool(fetcher: Pipe) -> Pipe:
            return Prefetcher(ThreadPoolMap(fetcher, pool, kernel_threads=kernel_threads, stages=2), _QUEUE)

        while True:
            fetcher = next(iter(batch_pool_targets(pipe)), None)
            if fetcher is None:
                return _overlapped(pipe, pool, kernel_threads)
            pipe = insert_after(pipe, fetcher, with_its_sampler_in_a_pool)

    in_batch_pool.__name__ = in_batch_pool.__qualname__ = f"batch_pool(pool={pool})"
    return in_batch_pool


def batch_pool_targets(pipe: Pipe) -> List[FeatureFetcher]:
    """The fetchers :func:`batch_pool` runs in a pool with their sampler: on CPU ids,
    reading a sampler's batches directly, neither of them collective or already placed
    off their consumer's thread, every feature read safe in several threads at once."""
    targets = {id(stage) for stage in _overlap_targets(pipe)}
    return [
        fetcher
        for fetcher in find(pipe, FeatureFetcher)
        if isinstance(fetcher.source, SubgraphSampler)
        and id(fetcher) in targets
        and id(fetcher.source) in targets
        and not (fetcher.collective or fetcher.source.collective)
        and not _reads_cuda_batches(fetcher)
        and all(feature.concurrent_reads for _, _, feature in fetcher.fetched_features())
    ]


def one_background_thread(pipe: Pipe) -> Pipe:
    """The whole chain in one background thread (kernels on every core), overlapping only
    the training step: best when each stage alone already keeps every core busy."""
    if find(pipe, (Prefetcher, ThreadPoolMap)):
        return pipe
    return Prefetcher(pipe, _QUEUE)


def _overlapped(pipe: Pipe, pool: Optional[int], fetch_kernel_threads: Optional[int]) -> Pipe:
    if not _kernels_thread_safe():
        return one_background_thread(pipe)
    cores = numba.get_num_threads()
    pool = min(cores, _MAX_BATCHES_IN_FLIGHT) if pool is None else pool
    fetch_kernel_threads = max(1, cores // 4) if fetch_kernel_threads is None else fetch_kernel_threads
    kernel_threads = max(1, cores // pool)
    while True:
        target = next((stage for stage in _overlap_targets(pipe)), None)
        if target is None:
            return pipe
        on_cpu = not _reads_cuda_batches(target)
        if on_cpu and isinstance(target, SubgraphSampler) and not target.collective:
            background = lambda stage: Prefetcher(ThreadPoolMap(stage, pool, kernel_threads=kernel_threads), _QUEUE)
        elif on_cpu and isinstance(target, FeatureFetcher):
            background = lambda stage: Prefetcher(stage, _QUEUE, kernel_threads=fetch_kernel_threads)
        else:
            background = lambda stage: Prefetcher(stage, _QUEUE)
        pipe = insert_after(pipe, target, background)


def _kernels_thread_safe() -> bool:
    """Whether numba's parallel kernels may start from several threads at once: true for
    its OpenMP and TBB threading layers, false for ``workqueue``."""
    from numba.np.ufunc import parallel

    parallel._launch_threads()  # picks the layer, as the first parallel kernel would
    return numba.threading_layer() != "workqueue"


def _overlap_targets(pipe: Pipe):
    """Samplers and fetchers that run where their consumer runs (no thread or process
    boundary after them yet), upstream first; a wrapped one (in a pool or on a stream) is
    given as its wrapper."""
    where = placement(pipe)
    for stage in reversed(find(pipe, (SubgraphSampler, FeatureFetcher))):
        wrapper = _wrapper(pipe, stage)
        if wrapper is not None:
            stage = wrapper
        consumer = consumer_of(pipe, stage)
        if where[id(stage)] == (where[id(consumer)] if consumer is not None else MAIN):
            yield stage


def pinned_copy(pipe: Pipe) -> Pipe:
    """Turn every ``copy_to("cuda")`` into pinned staging + a non-blocking copy on a side stream.

    ``... -> copy_to(cuda)`` becomes ``... -> transform(MiniBatch.pin_memory) ->
    copy_to(cuda, non_blocking=True) [on a high-priority side stream] -> prefetch ->
    wait``: a background thread pins batch ``i + 1`` and queues its copy while the
    consumer trains on batch ``i``; ``wait`` makes the training stream wait on the copy's
    event. Without CUDA (or for CPU targets) the pipe is returned unchanged.
    """
    if not torch.cuda.is_available():
        return pipe
    while True:
        copies = [
            copy
            for copy in find(pipe, CopyTo)
            if copy.device.type == "cuda" and not _wrapped(pipe, copy)
        ]
        if not copies:
            return pipe
        copy = copies[0]
        staged = with_source(copy, Transform(copy.source, MiniBatch.pin_memory))
        staged.non_blocking = True
        pipe = replace_stage(pipe, copy, Waiter(Prefetcher(SideStream(staged), _QUEUE)))


def process_workers(num_workers: int) -> PipeTransform:
    """A transform running the chain before the first ``fetch_feature`` in worker processes.

    For samplers whose per-batch work is Python-heavy (threads would serialise on the
    GIL). The ItemSampler is sharded: worker ``w`` of ``num_workers`` takes batches
    ``i ≡ w (mod num_workers)``, and batches come back in order (see
    :class:`graphpipe.loading.workers.ProcessWorkers`). Without a ``fetch_feature`` stage
    the whole chain runs in the workers.
    """
    check_int(num_workers, "num_workers", "process_workers", minimum=1)

    def run_in_worker_processes(pipe: Pipe) -> Pipe:
        if find(pipe, ProcessWorkers):
            return pipe
        samplers = find(pipe, ItemSampler)
        if len(samplers) != 1:
            raise ValueError(f"process_workers: the pipe must have exactly one ItemSampler to shard, found {len(samplers)}")
        fetchers = find(pipe, FeatureFetcher)
        cut = fetchers[-1].source if fetchers else pipe
        front = replace_stage(cut, samplers[0], Shard(samplers[0]))
        return replace_stage(pipe, cut, ProcessWorkers(front, num_workers, _QUEUE))

    run_in_worker_processes.__name__ = f"process_workers({num_workers})"
    run_in_worker_processes.__qualname__ = run_in_worker_processes.__name__
    return run_in_worker_processes


def thread_pool(stage_type: Type[Pipe], num_threads: int) -> PipeTransform:
    """A transform running the per-batch work of every ``stage_type`` stage on a pool of
    ``num_threads`` threads, several batches at once, in order (:class:`ThreadPoolMap`).

    Useful when one stage is the bottleneck and its kernels do not use all cores.
    """
    check_int(num_threads, "num_threads", "thread_pool", minimum=1)

    def run_in_thread_pool(pipe: Pipe) -> Pipe:
        while True:
            todo = [
                stage
                for stage in find(pipe, stage_type)
                if not _wrapped(pipe, stage)
            ]
            if not todo:
                return pipe
            pipe = insert_after(pipe, todo[0], lambda stage: ThreadPoolMap(stage, num_threads))

    run_in_thread_pool.__name__ = f"thread_pool({stage_type.__name__}, {num_threads})"
    run_in_thread_pool.__qualname__ = run_in_thread_pool.__name__
    return run_in_thread_pool
