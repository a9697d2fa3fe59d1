"""Where stages run: the placement stages of the loader (threads, thread pools, CUDA streams).

Every other stage only says what it does to one batch (``Pipe.process``) and runs where
its consumer pulls it: in the training loop's thread unless a stage below moves it. The
placement (:mod:`graphpipe.loading.policy`) chooses which of these go into a user's
chain; they are ordinary pipes, so users can also chain them by hand. Each says
where it moves work through ``Pipe.upstream_location`` / ``Pipe.wrapped_location``, which
``explain()`` and ``stats()`` read. Any stage with a ``process`` method can be wrapped:
adding a stage type needs no change here.

=====================  ===========================================================
stage                  where the work runs
=====================  ===========================================================
:class:`Prefetcher`    everything upstream, in a new background thread (bounded queue)
:class:`ThreadPoolMap` the wrapped stage's ``process``, on a pool of threads, several
                       batches at once, in order; its upstream where it runs
:class:`SideStream`    the wrapped stage's ``process``, on a high-priority CUDA stream
                       (queued from the pulling thread)
:class:`~graphpipe.loading.workers.ProcessWorkers`
                       everything upstream, in worker processes (``num_workers``; the
                       process machinery is in :mod:`graphpipe.loading.workers`)
:class:`Waiter`        in the pulling thread: resolves the batches of a ``SideStream``
:class:`PinMemory`     where it is pulled: pins batches for non-blocking copies
:class:`Timed`         in the pulling thread: adds up the time spent pulling (``stats()``)
=====================  ===========================================================

Every background thread has a bounded queue and a stop event; an exception in it is
re-raised in the consumer (the original exception object, so its traceback still
shows the frames of the background thread). Leaving a loop early (``break``,
``close()``, KeyboardInterrupt) stops and joins the threads, waiting at most 2 s for the
batch each is computing: threads are daemons, and one still running then (a long kernel
cannot be interrupted) is left to finish with a warning, so Ctrl-C always gets through.
Two places only signal or wait less:

* Inside the garbage collector (an iterator or a loader in a reference cycle), stopping
  signals and does not wait: the collector can run while CPython holds its thread-list
  lock (it did inside ``sys._current_frames()``), and a join there releases the GIL with
  that lock held, which deadlocks every thread. The threads end on their own at their
  next poll (50 ms) or batch.
* At interpreter exit, threads not stopped yet (an unfinished epoch's iterator still
  referenced) are stopped and waited for, 2 s at most, by an ``atexit`` hook. Python 3.11
  kills a daemon thread that wants the GIL after finalization began with
  ``pthread_exit``, whose unwinding through torch's C++ frames (a tensor freed, an op
  returning) called ``std::terminate``: "terminate called without an active exception",
  SIGABRT, in most runs of a script that ended mid-epoch.
"""

from __future__ import annotations

import atexit
import gc
import itertools
import queue
import threading
import time
import warnings
import weakref
from collections import deque
from concurrent.futures import Future
from typing import Callable, Iterable, Iterator, List, Optional

import numba
import torch

from graphpipe.batch.minibatch import map_tensors
from graphpipe._internal.devices import resolve_device
from graphpipe._internal.checks import check_int
from graphpipe.pipes.base import Pipe, functional_pipe

__all__ = ["PinMemory", "Prefetcher", "SideStream", "ThreadPoolMap", "Timed", "Waiter"]

_POLL_S = 0.05
# How long stopping waits for a background thread to finish the batch it is computing.
# A kernel cannot be interrupted: past this the thread (a daemon, so it never keeps the
# process alive) is left to finish in the background, so that Ctrl-C and close() return.
_STOP_TIMEOUT_S = 2.0
# Batches a ThreadPoolMap keeps submitted per thread. With one (as many batches as threads),
# a thread that finished waited for the slower batch ahead of it: the default loader on 2
# cores (a pool of 2) ran NS at 95.0-99.5 it/s end to end, 100.2-102.9 with two per thread
# (LABOR-0: 51.8-54.4 and 54.0-55.5), four interleaved pairs on the 2M-node benchmark graph.
_SUBMITTED_PER_THREAD = 2
_thread_ids = itertools.count(1)
# Background threads and pools not asked to stop yet (stopped at exit by _stop_at_exit).
_running: "weakref.WeakSet" = weakref.WeakSet()
_running_lock = threading.Lock()
# The ident of the thread the garbage collector is running in, else None (set by _on_gc).
_collector_thread: List[Optional[int]] = [None]


def _on_gc(phase: str, info) -> None:
    _collector_thread[0] = threading.get_ident() if phase == "start" else None


def watch_process() -> None:
    """From the first background thread on (not at import: importing graphpipe changes
    nothing process-wide), know when the garbage collector runs, and stop the threads
    still running at interpreter exit (:func:`_stop_at_exit`)."""
    with _running_lock:
        if _on_gc not in gc.callbacks:
            gc.callbacks.append(_on_gc)
            atexit.register(_stop_at_exit)


def in_collector() -> bool:
    """Whether this thread is running the garbage collector (a finalizer it called):
    stopping then signals and does not wait (see the module docstring)."""
    return _collector_thread[0] == threading.get_ident()


def _per_batch_function(stage: Pipe, where: str) -> Callable:
    """``stage.process``, after checking ``stage`` has one and may run batches concurrently."""
    if not isinstance(stage, Pipe) or type(stage).process is Pipe.process:
        raise TypeError(f"{where}: {type(stage).__name__} has no per-batch function (process); it cannot be wrapped")
    if stage.collective:
        raise ValueError(
            f"{where}: {type(stage).__name__}'s batches are collective calls (cooperative=True), which run one at "
            f"a time in order; it cannot be wrapped"
        )
    return stage.process


class _End:
    """Marks the end of a background producer's stream."""


class _Failure:
    """An exception raised in a background producer, handed to the consumer."""

    def __init__(self, error: BaseException):
        self.error = error


def _close(iterator) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


def _checked_kernel_threads(kernel_threads: Optional[int], where: str) -> Optional[int]:
    """``kernel_threads`` after checking it is ``None`` or an int ``>= 1``."""
    return None if kernel_threads is None else check_int(kernel_threads, "kernel_threads", where, minimum=1)


def _kernel_threads(stage) -> str:
    """``", kernels on k threads"`` for a stage that sets its numba threads, for ``explain()``."""
    k = stage.kernel_threads
    return "" if k is None else f", kernels on {k} thread{'s' if k > 1 else ''}"


def _set_kernel_threads(kernel_threads: Optional[int]) -> None:
    """Set the calling thread's numba thread count (numba's setting is per thread)."""
    if kernel_threads is not None:
        numba.set_num_threads(min(kernel_threads, numba.config.NUMBA_NUM_THREADS))


class _BackgroundThread:
    """Iterate ``make_iterator()`` in a daemon thread into a queue of ``maxsize`` items;
    the thread's numba kernels use ``kernel_threads`` threads (``None``: all)."""

    def __init__(self, make_iterator: Callable[[], Iterator], maxsize: int, name: str, kernel_threads=None):
        self.queue: queue.Queue = queue.Queue(maxsize)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(make_iterator, kernel_threads), name=name, daemon=True)
        self.threads = [self.thread]
        watch_process()
        self.thread.start()
        with _running_lock:
            _running.add(self)

    def _run(self, make_iterator, kernel_threads) -> None:
        iterator = None
        try:
            _set_kernel_threads(kernel_threads)
            iterator = make_iterator()
            for item in iterator:
                if not self._put(item):
                    return
            self._put(_End)
        except BaseException as error:  # re-raised by the consumer
            self._put(_Failure(error))
        finally:
            _close(iterator)

    def _put(self, item) -> bool:
        while not self.stop_event.is_set():
            try:
                self.queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def get(self):
        """The next item, ``_End``, or a ``_Failure``."""
        while True:
            try:
                return self.queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self.thread.is_alive() and self.queue.empty():
                    return _Failure(RuntimeError(f"background thread {self.thread.name} ended without a result"))

    def signal_stop(self) -> None:
        """Tell the thread to stop at its next poll, without waiting for it."""
        with _running_lock:
            _running.discard(self)
        self.stop_event.set()

    def stop(self) -> None:
        """Stop the thread and wait up to ``_STOP_TIMEOUT_S`` for it to finish the item it is
        computing; warn and leave it behind if it is still running then."""
        self.signal_stop()
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break
        _join_or_warn([self.thread])


def _join_or_warn(threads) -> None:
    """Join ``threads`` within ``_STOP_TIMEOUT_S`` in all; warn about those still running.
    Inside the garbage collector: return at once (see the module docstring)."""
    if in_collector():
        return
    running = _join(threads)
    if running:
        warnings.warn(
            f"graphpipe: background thread(s) {', '.join(running)} still running a batch {_STOP_TIMEOUT_S:g} s "
            "after being asked to stop (a long kernel?); left to finish it in the background. They are "
            "daemon threads: they do not keep the process from exiting.",
            RuntimeWarning,
            stacklevel=3,
        )


def _join(threads) -> List[str]:
    """Join ``threads`` within ``_STOP_TIMEOUT_S`` in all; the names of those still running."""
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive()]


class _DaemonThreadPool:
    """A fixed pool of daemon threads running submitted calls, each returning a Future.

    Used instead of ``ThreadPoolExecutor``, whose threads are joined when the interpreter
    exits: a kernel that never returns would then keep the process alive after Ctrl-C.
    """

    def __init__(self, num_threads: int, name: str, initializer: Callable, initargs=()):
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=self._work, args=(initializer, initargs), name=f"{name}_{i}", daemon=True)
            for i in range(num_threads)
        ]
        watch_process()
        for thread in self.threads:
            thread.start()
        with _running_lock:
            _running.add(self)

    def _work(self, initializer, initargs) -> None:
        try:
            initializer(*initargs)
            failure = None
        except BaseException as error:  # every call on this thread then fails with it
            failure = error
        while True:
            task = self.tasks.get()
            if task is None:
                return
            future, fn, arg = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                if failure is not None:
                    raise failure
                future.set_result(fn(arg))
            except BaseException as error:  # re-raised by future.result() in the consumer
                future.set_exception(error)

    def submit(self, fn: Callable, arg) -> Future:
        future: Future = Future()
        self.tasks.put((future, fn, arg))
        return future

    def signal_stop(self) -> None:
        """Cancel the calls not started yet and tell the threads to stop after their current
        call, without waiting for them."""
        with _running_lock:
            _running.discard(self)
        while True:
            try:
                task = self.tasks.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                task[0].cancel()
        for _ in self.threads:
            self.tasks.put(None)

    def shutdown(self) -> None:
        """:meth:`signal_stop`, then wait for the threads (see :func:`_join_or_warn`)."""
        self.signal_stop()
        _join_or_warn(self.threads)


def _stop_at_exit() -> None:
    """Stop the background threads and pools still running (an unfinished epoch whose
    iterator is still referenced) before the interpreter finalizes, waiting
    ``_STOP_TIMEOUT_S`` at most (see the module docstring), without a warning: the
    threads of a stop that already warned (Ctrl-C in a long kernel) are among them.
    Background threads are told first, so none feeds a pool after the pool was told."""
    with _running_lock:
        running = sorted(_running, key=lambda stage: isinstance(stage, _DaemonThreadPool))
    for stage in running:
        stage.signal_stop()
    _join([thread for stage in running for thread in stage.threads])


def _drain(producer: _BackgroundThread) -> Iterator:
    """Yield the producer's items in the consumer; re-raise its exception; always stop it."""
    try:
        while True:
            item = producer.get()
            if item is _End:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        producer.stop()


@functional_pipe("prefetch")
class Prefetcher(Pipe):
    """Run the upstream chain in a background thread, up to ``buffer_size`` items ahead.

    Everything upstream of this stage (up to the next background stage) runs in the
    thread, so it overlaps whatever runs downstream. ``kernel_threads``: how many
    threads the numba kernels of that thread use (``None``: all cores); on few cores,
    stages that overlap should share the cores rather than each take all of them.
    """

    def __init__(self, source: Pipe, buffer_size: int = 2, kernel_threads: Optional[int] = None):
        super().__init__()
        self.source = source
        self.buffer_size = check_int(buffer_size, "buffer_size", "Prefetcher", minimum=1)
        self.kernel_threads = _checked_kernel_threads(kernel_threads, "Prefetcher")

    def upstream_location(self, here: str, new_thread: Callable[[], str]) -> str:
        return new_thread() + _kernel_threads(self)

    def label(self) -> str:
        return f"Prefetcher({self.buffer_size})"

    def stream(self, epoch: int, start: int = 0):
        name = f"graphpipe-prefetch-{next(_thread_ids)}"
        producer = _BackgroundThread(lambda: self.source.stream(epoch, start), self.buffer_size, name, self.kernel_threads)
        yield from _drain(producer)


def _delayed(items: Iterable, delay: int) -> Iterator:
    """Yield item ``i`` after item ``i + delay`` was pulled (all of them at the end)."""
    pending: deque = deque()
    for item in items:
        pending.append(item)
        if len(pending) > delay:
            yield pending.popleft()
    while pending:
        yield pending.popleft()


@functional_pipe("wait")
class Waiter(Pipe):
    """Yield ``item.result()`` for every item: resolves ``concurrent.futures.Future`` s and
    the pending batches of :class:`SideStream` in the consumer's thread."""

    def __init__(self, source: Pipe):
        super().__init__()
        self.source = source

    def process(self, item):
        return item.result()


class PinMemory(Pipe):
    """Yield ``item.pin_memory()`` (a MiniBatch with its CPU tensors in pinned memory), so
    that the copy to a CUDA device after it does not block the pulling thread."""

    def __init__(self, source: Pipe):
        super().__init__()
        self.source = source

    def process(self, item):
        return item.pin_memory()


class ThreadPoolMap(Pipe):
    """Run ``stage``'s per-batch work for up to ``num_threads`` batches at once, in order.

    ``stage`` (any stage with a per-batch ``process``, not a collective one) is not
    iterated itself: this pipe pulls ``stage.source`` in the consumer's thread and
    submits ``stage.process`` to a pool of ``num_threads`` threads (with ``stages`` > 1,
    the run of stages ending at ``stage``, below).
    Batches come out in the order they went in. ``_SUBMITTED_PER_THREAD`` times
    ``num_threads`` batches are submitted ahead, so a thread that finishes its batch
    starts the next one instead of idling until a slower batch before it is done
    (batches of a power-law graph differ in cost); finished batches wait for their turn.
    ``stages``: how many stages, ``stage`` and those right before it, each batch goes
    through in its pool thread (2 with a fetcher as ``stage``: a batch is sampled and its
    features fetched in one thread, with no thread between them); the pool pulls the
    first one's source. ``work_seconds`` adds up the time the pool spent in the work
    (for :meth:`graphpipe.DataLoader.stats`). ``kernel_threads``:
    numba threads per pool thread (``None``: all cores; 1 runs each batch's kernels
    serially, the batches in parallel, with no per-kernel thread synchronisation).
    """

    wraps_source = True

    def __init__(self, stage: Pipe, num_threads: int, kernel_threads: Optional[int] = None, stages: int = 1):
        super().__init__()
        self.source = stage
        self.stages = check_int(stages, "stages", "ThreadPoolMap", minimum=1)
        for wrapped in self.wrapped_stages():
            _per_batch_function(wrapped, "ThreadPoolMap")
        self.num_threads = check_int(num_threads, "num_threads", "ThreadPoolMap", minimum=1)
        self.kernel_threads = _checked_kernel_threads(kernel_threads, "ThreadPoolMap")
        self.work_seconds = 0.0

    def wrapped_stages(self) -> List[Pipe]:
        run = [self.source]
        while len(run) < self.stages:
            upstream_stage = getattr(run[-1], "source", None)
            if not isinstance(upstream_stage, Pipe):
                raise ValueError(
                    f"ThreadPoolMap: `stages` is {self.stages}, but only {len(run)} stage(s) end at "
                    f"{type(self.source).__name__}"
                )
            run.append(upstream_stage)
        return run

    def wrapped_location(self, here: str) -> str:
        return f"pool of {self.num_threads} threads{_kernel_threads(self)}"

    def label(self) -> str:
        return f"ThreadPoolMap({self.num_threads})"

    def stream(self, epoch: int, start: int = 0):
        self.work_seconds = 0.0
        run = self.wrapped_stages()[::-1]  # upstream first
        functions = [stage.process for stage in run]

        def timed(item):
            start = time.perf_counter()
            for function in functions:
                item = function(item)
            return item, time.perf_counter() - start

        pool = _DaemonThreadPool(
            self.num_threads, f"graphpipe-pool-{next(_thread_ids)}", _set_kernel_threads, (self.kernel_threads,)
        )
        try:
            futures = (pool.submit(timed, item) for item in run[0].source.stream(epoch, start))
            for future in _delayed(futures, _SUBMITTED_PER_THREAD * self.num_threads - 1):
                result, seconds = future.result()
                self.work_seconds += seconds
                yield result
        finally:
            pool.shutdown()


class _StreamResult:
    """A batch produced on a side stream; ``result()`` makes the caller's stream wait for it."""

    def __init__(self, value, event, device: torch.device):
        self.value = value
        self.event = event
        self.device = device

    def result(self):
        stream = torch.cuda.current_stream(self.device)
        stream.wait_event(self.event)

        def keep_alive(tensor: torch.Tensor) -> torch.Tensor:
            # The tensor was allocated on the side stream; without this the caching
            # allocator could hand its memory out again while `stream` still reads it.
            if tensor.is_cuda:
                tensor.record_stream(stream)
            return tensor

        return map_tensors(self.value, keep_alive)


def _has_cuda_tensor(item) -> bool:
    found = []
    map_tensors(item, lambda tensor: found.append(tensor.is_cuda) or tensor)
    return any(found)


class SideStream(Pipe):
    """Run ``stage``'s per-batch work on a dedicated high-priority CUDA stream.

    Made for ``copy_to("cuda", non_blocking=True)`` on pinned batches and UVA feature
    gathers: the work is queued on the side stream, so it overlaps kernels on the
    training stream. Yields pending batches; put a :class:`Waiter` downstream (in the
    training thread), whose ``result()`` makes the current stream wait on the batch's
    CUDA event and calls ``record_stream`` on its tensors so their memory is not reused
    early. Inputs with CUDA tensors make the side stream wait for the pulling thread's
    stream first; CPU inputs (pinned batches to copy) do not wait, so copies overlap the
    training kernels. ``stage`` itself is not iterated: this pipe pulls ``stage.source``.
    """

    wraps_source = True

    def __init__(self, stage: Pipe, device=None):
        super().__init__()
        _per_batch_function(stage, "SideStream")
        self.source = stage
        self.device = resolve_device(device if device is not None else stage.device)
        if self.device.type != "cuda":
            raise ValueError(f"SideStream: `device` must be a CUDA device, got {self.device}")

    def wrapped_location(self, here: str) -> str:
        return f"{here}, CUDA side stream"

    def stream(self, epoch: int, start: int = 0):
        if not torch.cuda.is_available():
            raise RuntimeError("SideStream: CUDA is not available")
        work = self.source.process
        # A priority beyond the device's range is clamped to its highest priority.
        stream = torch.cuda.Stream(self.device, priority=-1000)
        for item in self.source.source.stream(epoch, start):
            if _has_cuda_tensor(item):
                # Inputs made on this thread's stream (ids for a UVA gather) must be ready.
                stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                value = work(item)
                event = torch.cuda.Event()
                event.record(stream)
            yield _StreamResult(value, event, self.device)


class Timed(Pipe):
    """Pass items through, adding the wall seconds spent in ``next(source)`` to ``seconds``
    and counting ``batches`` (for ``DataLoader.stats()``).

    The time is inclusive: it contains the upstream stages that run in the same thread.
    """

    def __init__(self, source: Pipe):
        super().__init__()
        self.source = source
        self.reset_stats()

    def reset_stats(self) -> None:
        self.seconds = 0.0
        self.batches = 0

    def stream(self, epoch: int, start: int = 0):
        iterator = self.source.stream(epoch, start)
        try:
            while True:
                wall = time.perf_counter()
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                finally:
                    self.seconds += time.perf_counter() - wall
                self.batches += 1
                yield item
        finally:
            _close(iterator)
