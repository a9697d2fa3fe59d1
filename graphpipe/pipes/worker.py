"""Worker processes for the part of a chain before feature fetching (``num_workers``).

For samplers with Python-heavy per-batch work, which threads cannot overlap. The
``process_workers`` transform builds ``ProcessWorkers(chain with a Shard)``: worker
``w`` of ``W`` iterates its own copy of the chain with the :class:`Shard` set to keep
batches ``i ≡ w (mod W)``, and the consumer takes batch ``i`` from worker ``i mod W``,
so batches keep their order and content (samplers key their randomness by
``batch_index``).

Start method: ``forkserver`` with graphpipe preloaded. ``fork`` is not safe here:
numba's threading layer on this stack is GNU OpenMP, which is not fork-safe once a
parallel kernel has run in the parent (and the parent has usually sampled a batch
already, e.g. to look at it). ``spawn`` would re-import torch and numba in every
worker every epoch. The fork server is a fresh interpreter started once per program
(1-2 s for the imports); each epoch's workers fork from it in about 10 ms, receive the
chain pickled with torch's reductions (tensors are shared through shared memory, not
copied), and then load numba's cached kernels on their first batch (0.3-1 s, more on
a loaded machine). Workers live for one epoch, so that cost recurs every epoch.
"""

from __future__ import annotations

import itertools
import os
import queue
from typing import List

import torch
import torch.multiprocessing as mp
from torch._utils import ExceptionWrapper

from .base import Pipe
from .stages import Timed, check_count

__all__ = ["ProcessWorkers", "Shard"]

_POLL_S = 0.05
_JOIN_TIMEOUT_S = 10.0


class Shard(Pipe):
    """Keep the items ``i`` of ``source`` with ``i % count == index`` (``i`` from 0).

    Placed right after the ItemSampler by the ``process_workers`` transform; each
    worker process sets ``index`` to its rank.
    """

    def __init__(self, source: Pipe, index: int = 0, count: int = 1):
        super().__init__()
        if not 0 <= index < count:
            raise ValueError(f"Shard: need 0 <= index < count, got index={index}, count={count}")
        self.source = source
        self.index = index
        self.count = count

    def __iter__(self):
        for i, item in enumerate(self.source):
            if i % self.count == self.index:
                yield item

    def __len__(self) -> int:
        return len(range(self.index, len(self.source), self.count))


class _WorkerDone:
    """End of a worker's epoch, with the seconds and batch counts of its Timed stages."""

    def __init__(self, timings):
        self.timings = timings


def _chain(pipe: Pipe) -> List[Pipe]:
    """``pipe`` and its upstream stages, following ``.source``."""
    chain = []
    while isinstance(pipe, Pipe):
        chain.append(pipe)
        pipe = getattr(pipe, "source", None)
    return chain


def _the_shard(pipe: Pipe) -> Shard:
    shards = [stage for stage in _chain(pipe) if isinstance(stage, Shard)]
    if len(shards) != 1:
        raise ValueError(f"ProcessWorkers: the chain must contain exactly one Shard stage, found {len(shards)}")
    return shards[0]


def _put(out, item, stop) -> bool:
    while not stop.is_set():
        try:
            out.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _worker_loop(pipe: Pipe, epoch: int, rank: int, num_workers: int, out, stop) -> None:
    """Body of worker process ``rank``: iterate its shard of ``pipe`` into ``out``."""
    # Once the consumer is done, nothing left in the pipe matters: exit without flushing it.
    out.cancel_join_thread()
    try:
        torch.set_num_threads(1)
        import numba

        numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS // num_workers))
        shard = _the_shard(pipe)
        shard.index, shard.count = rank, num_workers
        origin = _chain(shard)[-1]
        if hasattr(origin, "epoch"):
            origin.epoch = epoch
        for item in pipe:
            if not _put(out, item, stop):
                return
        timed = [stage for stage in _chain(pipe) if isinstance(stage, Timed)]
        _put(out, _WorkerDone([(stage.seconds, stage.batches) for stage in timed]), stop)
    except BaseException:
        _put(out, ExceptionWrapper(where=f"in graphpipe worker process {rank} (pid {os.getpid()})"), stop)
    # Tensors travel as file descriptors that this process serves until the consumer has
    # taken them: stay alive until the consumer is done with the epoch.
    stop.wait()


class ProcessWorkers(Pipe):
    """Run the upstream chain in ``num_workers`` processes and yield its batches in order.

    ``source`` must contain one :class:`Shard` stage (after the ItemSampler). Each epoch
    starts ``num_workers`` processes (from a fork server), each iterating a copy of the
    chain on its shard, with up to ``buffer_size`` batches queued per worker. An
    exception in a worker is re-raised in the consumer with the worker's traceback; a
    worker that dies is reported; leaving the loop early stops and joins the workers.
    """

    def __init__(self, source: Pipe, num_workers: int, buffer_size: int = 2):
        super().__init__()
        _the_shard(source)
        self.source = source
        self.num_workers = check_count(num_workers, "num_workers", "ProcessWorkers")
        self.buffer_size = check_count(buffer_size, "buffer_size", "ProcessWorkers")

    def __len__(self) -> int:
        return len(self.source)

    def __iter__(self):
        # The ItemSampler here keeps the epoch counter; the workers' copies are told it.
        origin = _chain(_the_shard(self.source))[-1]
        epoch = getattr(origin, "epoch", 0)
        if hasattr(origin, "epoch"):
            origin.epoch += 1
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(["graphpipe"])
        stop = context.Event()
        queues = [context.Queue(self.buffer_size) for _ in range(self.num_workers)]
        workers = []
        try:
            for rank, out in enumerate(queues):
                worker = context.Process(
                    target=_worker_loop,
                    args=(self.source, epoch, rank, self.num_workers, out, stop),
                    name=f"graphpipe-worker-{rank}",
                    daemon=True,
                )
                try:
                    worker.start()
                except Exception as error:
                    raise RuntimeError(
                        "ProcessWorkers: could not start a worker process; the part of the pipe that runs "
                        "in workers (before fetch_feature) must be picklable (no lambdas or local functions)"
                    ) from error
                workers.append(worker)
            done = 0
            for i in itertools.count():
                rank = i % self.num_workers
                item = self._get(queues[rank], workers[rank])
                if isinstance(item, _WorkerDone):
                    self._add_timings(item)
                    done += 1
                    if done == self.num_workers:
                        return
                    continue
                if done:
                    raise RuntimeError(f"ProcessWorkers: worker {rank} produced a batch after another worker ended")
                yield item
        finally:
            # Workers leave at `stop` without flushing their queues, so nothing needs draining.
            stop.set()
            for worker in workers:
                worker.join(_JOIN_TIMEOUT_S)
                if worker.is_alive():
                    worker.terminate()
                    worker.join()
            for out in queues:
                out.cancel_join_thread()
                out.close()

    def _get(self, out, worker):
        while True:
            try:
                item = out.get(timeout=_POLL_S)
            except queue.Empty:
                if not worker.is_alive():
                    raise RuntimeError(
                        f"ProcessWorkers: {worker.name} (pid {worker.pid}) exited unexpectedly "
                        f"with exit code {worker.exitcode}"
                    ) from None
                continue
            if isinstance(item, ExceptionWrapper):
                item.reraise()
            return item

    def _add_timings(self, done: _WorkerDone) -> None:
        timed = [stage for stage in _chain(self.source) if isinstance(stage, Timed)]
        for stage, (seconds, batches) in zip(timed, done.timings):
            stage.seconds += seconds
            stage.batches += batches

