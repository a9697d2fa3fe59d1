"""The stages that move work: :class:`Prefetcher` (a background thread), :class:`ThreadPoolMap`
(a pool of threads), :class:`SideStream` / :class:`Waiter` (a CUDA stream), and the helpers
:class:`PinMemory` and :class:`Timed`; worker processes are in :mod:`.workers`. The policy
puts them into a chain; each says where it moves work (``Pipe.upstream_location`` /
``Pipe.wrapped_location``) for ``explain()`` and ``stats()``.

Every background thread has a bounded queue and a stop event, and its exception is
re-raised in the consumer (the original object, with the thread's frames). Leaving a loop
early stops the threads, waiting at most ``_STOP_TIMEOUT_S`` for a batch in progress; a
thread still in a kernel then is a daemon left to finish, with a warning. Two exceptions:

* Inside the garbage collector stopping only signals: the collector can run while CPython
  holds its thread-list lock, and a join there deadlocks every thread.
* At exit an ``atexit`` hook stops the threads still running and waits for every batch in
  progress, also those a stop left running (``EXIT_WAIT_S`` at most; ``_STOP_TIMEOUT_S``
  after Ctrl-C, which must get through a hung stage): Python 3.11 ends a daemon thread
  wanting the GIL during finalization with ``pthread_exit``, whose unwinding through
  torch's C++ frames aborted the process.
"""

from __future__ import annotations

import atexit
import gc
import itertools
import queue
import sys
import threading
import time
import warnings
import weakref
from collections import deque
from concurrent.futures import Future
from typing import Callable, Iterable, Iterator, List, Optional

import numba
import torch

from graphpipe.graph.sampled_subgraph import map_tensors
from graphpipe._internal.devices import resolve_device
from graphpipe._internal.checks import check_int
from graphpipe.pipes.base import Pipe, functional_pipe, source_stream, upstream

__all__ = ["PinMemory", "Prefetcher", "SideStream", "ThreadPoolMap", "Timed", "Waiter"]

_POLL_S = 0.05
_STOP_TIMEOUT_S = 2.0  # how long stopping waits for a thread's batch in progress (a kernel cannot be interrupted)
EXIT_WAIT_S = 60.0  # how long exit waits for the batches in progress
# Batches a ThreadPoolMap keeps submitted per thread: with one, a thread that finished waited
# for the slower batch ahead of it (two: +4% NS, +2% LABOR-0 on 2 cores; benchmarks/RESULTS.md,
# "Planner (issue 18), fourth run").
_SUBMITTED_PER_THREAD = 2
_thread_ids = itertools.count(1)
# Background threads and pools not asked to stop yet, and all of them (a running thread keeps
# its stage alive): at exit the first are stopped, and the threads of all waited for (_stop_at_exit).
_running: "weakref.WeakSet" = weakref.WeakSet()
_started: "weakref.WeakSet" = weakref.WeakSet()
_running_lock = threading.Lock()
# The ident of the thread the garbage collector is running in, else None (set by _on_gc).
_collector_thread: List[Optional[int]] = [None]


def _on_gc(phase: str, info) -> None:
    _collector_thread[0] = threading.get_ident() if phase == "start" else None


def watch_process() -> None:
    """From the first background thread on (not at import), know when the garbage
    collector runs, and stop the threads still running at exit (:func:`_stop_at_exit`)."""
    with _running_lock:
        if _on_gc not in gc.callbacks:
            gc.callbacks.append(_on_gc)
            atexit.register(_stop_at_exit)


def in_collector() -> bool:
    """Whether this thread runs the garbage collector: stopping then only signals."""
    return _collector_thread[0] == threading.get_ident()


def _check_wrappable(stage: Pipe, where: str) -> None:
    """Check that ``stage`` has a per-batch ``process`` that may run batches concurrently."""
    if not isinstance(stage, Pipe) or type(stage).process is Pipe.process:
        raise TypeError(f"{where}: {type(stage).__name__} has no per-batch function (process); it cannot be wrapped")
    if stage.collective:
        raise ValueError(
            f"{where}: {type(stage).__name__}'s batches are collective calls (cooperative=True), which run one at "
            f"a time in order; it cannot be wrapped"
        )


_END = object()  # the end of a background thread's stream


class _Failure:
    """An exception raised in a background thread, handed to the consumer."""

    def __init__(self, error: BaseException):
        self.error = error


def close_iterator(iterator) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


def put_while(out, item, going: Callable[[], bool]) -> bool:
    """Put ``item`` into the bounded queue ``out`` unless ``going()`` turns false while it is full."""
    while going():
        try:
            out.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _emptied(items) -> list:
    """What was left in the queue ``items``, which is now empty."""
    left = []
    while True:
        try:
            left.append(items.get_nowait())
        except queue.Empty:
            return left


def checked_kernel_threads(kernel_threads: Optional[int], where: str) -> Optional[int]:
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


class _Background:
    """Daemon ``threads``, started by :meth:`_start` and stopped at exit if still running then;
    a subclass's ``_signal()`` tells them to stop."""

    threads: List[threading.Thread]

    def _start(self, threads: List[threading.Thread]) -> None:
        self.threads = threads
        watch_process()
        for thread in threads:
            thread.start()
        with _running_lock:
            _running.add(self)
            _started.add(self)

    def signal_stop(self) -> None:
        """Tell the threads to stop, without waiting for them."""
        with _running_lock:
            _running.discard(self)
        self._signal()

    def stop(self) -> None:
        """:meth:`signal_stop`, then wait ``_STOP_TIMEOUT_S`` in all for the batches in progress
        and warn about the threads still running then. Inside the garbage collector: no wait."""
        self.signal_stop()
        running = [] if in_collector() else join_within(self.threads)
        if running:
            warnings.warn(
                f"graphpipe: background thread(s) {', '.join(running)} still running a batch {_STOP_TIMEOUT_S:g} s "
                "after being asked to stop (a long kernel?); left to finish it in the background. They are "
                "daemon threads: they do not keep the process from exiting.",
                RuntimeWarning,
                stacklevel=2,
            )


class _BackgroundThread(_Background):
    """Iterate ``make_iterator()`` in a daemon thread into a queue of ``maxsize`` items;
    the thread's numba kernels use ``kernel_threads`` threads (``None``: all)."""

    def __init__(self, make_iterator: Callable[[], Iterator], maxsize: int, name: str, kernel_threads=None):
        self.queue: queue.Queue = queue.Queue(maxsize)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(make_iterator, kernel_threads), name=name, daemon=True)
        self._start([self.thread])

    def _run(self, make_iterator, kernel_threads) -> None:
        iterator = None
        try:
            _set_kernel_threads(kernel_threads)
            iterator = make_iterator()
            for item in iterator:
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as error:  # re-raised by the consumer
            self._put(_Failure(error))
        finally:
            close_iterator(iterator)

    def _put(self, item) -> bool:
        return put_while(self.queue, item, lambda: not self.stop_event.is_set())

    def items(self) -> Iterator:
        """Yield the thread's items in the consumer; re-raise its exception; always stop it."""
        try:
            while True:
                try:
                    item = self.queue.get(timeout=_POLL_S)
                except queue.Empty:
                    if self.thread.is_alive() or not self.queue.empty():
                        continue
                    item = _Failure(RuntimeError(f"background thread {self.thread.name} ended without a result"))
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            self.stop()

    def _signal(self) -> None:
        self.stop_event.set()
        _emptied(self.queue)


def join_within(threads, timeout: float = _STOP_TIMEOUT_S) -> List[str]:
    """Join ``threads`` (or processes) within ``timeout`` seconds in all; the names of those still running."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread.name for thread in threads if thread.is_alive()]


class _DaemonThreadPool(_Background):
    """A fixed pool of daemon threads running submitted calls, each returning a Future.

    Not ``ThreadPoolExecutor``, whose threads are joined at interpreter exit: a kernel
    that never returns would then keep the process alive after Ctrl-C.
    """

    def __init__(self, num_threads: int, name: str, kernel_threads: Optional[int]):
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()
        threads = [
            threading.Thread(target=self._work, args=(kernel_threads,), name=f"{name}_{i}", daemon=True)
            for i in range(num_threads)
        ]
        self._start(threads)

    def _work(self, kernel_threads: Optional[int]) -> None:
        try:
            _set_kernel_threads(kernel_threads)
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

    def _signal(self) -> None:
        """Cancel the calls not started yet; the threads stop after their current call."""
        for task in _emptied(self.tasks):
            if task is not None:
                task[0].cancel()
        for _ in self.threads:
            self.tasks.put(None)


def _stop_at_exit() -> None:
    """Before the interpreter finalizes: stop the background threads and pools still
    running (threads before pools, so none feeds a told pool), then wait for the batches in
    progress of every thread, those an earlier stop left running included, ``EXIT_WAIT_S``
    at most (``_STOP_TIMEOUT_S`` when a Ctrl-C ends the program), without a warning."""
    with _running_lock:
        running = sorted(_running, key=lambda stage: isinstance(stage, _DaemonThreadPool))
        started = list(_started)
    for stage in running:
        stage.signal_stop()
    join_within([thread for stage in started for thread in stage.threads], exit_wait_s())


def exit_wait_s() -> float:
    """How long exit waits for background work still running: ``EXIT_WAIT_S``, or
    ``_STOP_TIMEOUT_S`` when a Ctrl-C ends the program (it must get through a hung stage)."""
    interrupted = isinstance(getattr(sys, "last_value", None), KeyboardInterrupt)  # the uncaught exception, if any
    return _STOP_TIMEOUT_S if interrupted else EXIT_WAIT_S


class OnSource(Pipe):
    """A stage reading from ``source`` (the stages here, and the worker stages)."""

    def __init__(self, source: Pipe):
        super().__init__()
        self.source = source


@functional_pipe("prefetch")
class Prefetcher(OnSource):
    """Run the upstream chain (up to the next background stage) in a background thread,
    up to ``buffer_size`` items ahead. ``kernel_threads``: numba threads of that thread
    (``None``: all cores; on few cores, overlapping stages should share them)."""

    def __init__(self, source: Pipe, buffer_size: int = 2, kernel_threads: Optional[int] = None):
        super().__init__(source)
        self.buffer_size = check_int(buffer_size, "buffer_size", "Prefetcher", minimum=1)
        self.kernel_threads = checked_kernel_threads(kernel_threads, "Prefetcher")

    def upstream_location(self, here: str, new_thread: Callable[[], str]) -> str:
        return new_thread() + _kernel_threads(self)

    def label(self) -> str:
        return f"Prefetcher({self.buffer_size})"

    def stream(self, epoch: int, start: int = 0):
        name = f"graphpipe-prefetch-{next(_thread_ids)}"
        producer = _BackgroundThread(lambda: self.source.stream(epoch, start), self.buffer_size, name, self.kernel_threads)
        yield from producer.items()


def _submitted(pool, function, items: Iterator) -> Iterator[Future]:
    """``pool.submit(function, item)`` for every item; an error pulling an item is a failed
    future after those of the items before it, so their batches come first, as in the chain."""
    try:
        for item in items:
            yield pool.submit(function, item)
    except Exception as error:
        failed = Future()
        failed.set_exception(error)
        yield failed


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
class Waiter(OnSource):
    """Yield ``item.result()`` for every item: resolves ``concurrent.futures.Future`` s and
    the pending batches of :class:`SideStream` in the consumer's thread."""

    def process(self, item):
        return item.result()


class PinMemory(OnSource):
    """Yield ``item.pin_memory()`` (a MiniBatch with its CPU tensors in pinned memory), so
    that the copy to a CUDA device after it does not block the pulling thread."""

    def process(self, item):
        return item.pin_memory()


class ThreadPoolMap(OnSource):
    """Run ``stage``'s per-batch work for up to ``num_threads`` batches at once, in order.

    ``stage`` (any non-collective stage with a ``process``) is not iterated: this pipe
    pulls its source in the consumer's thread and submits ``process`` to the pool,
    ``_SUBMITTED_PER_THREAD * num_threads`` batches ahead (batches of a power-law graph
    differ in cost); results come out in input order. ``stages``: how many stages,
    ``stage`` and those right before it, each batch goes through in one pool thread (2
    with a fetcher as ``stage``: sampled and fetched with no thread between); the pool
    pulls the first one's source. ``kernel_threads``: numba threads per pool thread
    (``None``: all cores; 1: each batch's kernels serial, batches in parallel).
    ``work_seconds``: the pool's time in the work (for ``DataLoader.stats()``).
    """

    wraps_source = True

    def __init__(self, stage: Pipe, num_threads: int, kernel_threads: Optional[int] = None, stages: int = 1):
        super().__init__(stage)
        self.stages = check_int(stages, "stages", "ThreadPoolMap", minimum=1)
        self.num_threads = check_int(num_threads, "num_threads", "ThreadPoolMap", minimum=1)
        for wrapped in self.wrapped_stages():
            _check_wrappable(wrapped, "ThreadPoolMap")
            if self.num_threads > 1 and wrapped.thread_safe is False:
                raise ValueError(
                    f"ThreadPoolMap: {wrapped.label()} declares that its process must not run for several batches "
                    f"at once (`thread_safe` is False; a FeatureFetcher reading a GPUCachedFeature does); pass "
                    f"num_threads=1"
                )
        self.kernel_threads = checked_kernel_threads(kernel_threads, "ThreadPoolMap")
        self.work_seconds = 0.0

    def wrapped_stages(self) -> List[Pipe]:
        run = upstream(self.source)[: self.stages]
        if len(run) < self.stages:
            raise ValueError(
                f"ThreadPoolMap: `stages` is {self.stages}, but only {len(run)} stage(s) end at "
                f"{type(self.source).__name__}"
            )
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

        pool = _DaemonThreadPool(self.num_threads, f"graphpipe-pool-{next(_thread_ids)}", self.kernel_threads)
        source = None
        try:
            source = source_stream(run[0].source, epoch, start)
            for future in _delayed(_submitted(pool, timed, source), _SUBMITTED_PER_THREAD * self.num_threads - 1):
                result, seconds = future.result()
                self.work_seconds += seconds
                yield result
        finally:
            pool.stop()
            close_iterator(source)  # its threads stop now, not when a kept traceback lets it go


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


class SideStream(OnSource):
    """Run ``stage``'s per-batch work on a high-priority CUDA side stream, overlapping
    the training stream's kernels (``copy_to("cuda", non_blocking=True)`` of pinned
    batches, UVA gathers). ``stage`` is not iterated: this pipe pulls its source.

    Yields pending batches: a :class:`Waiter` downstream makes the current stream wait
    for each and records its tensors on that stream (their memory is not reused early).
    An input with CUDA tensors makes the side stream wait for the pulling thread's
    stream first; CPU inputs (pinned batches to copy) do not wait.
    """

    wraps_source = True

    def __init__(self, stage: Pipe, device=None):
        super().__init__(stage)
        _check_wrappable(stage, "SideStream")
        self.device = resolve_device(device if device is not None else stage.device, "SideStream")
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
        for item in source_stream(self.source.source, epoch, start):
            if _has_cuda_tensor(item):
                # Inputs made on this thread's stream (ids for a UVA gather) must be ready.
                stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                value = work(item)
                event = torch.cuda.Event()
                event.record(stream)
            yield _StreamResult(value, event, self.device)


class Timed(OnSource):
    """Pass items through, adding the wall seconds spent in ``next(source)`` (upstream
    stages in the same thread included) to ``seconds`` and counting ``batches``."""

    def __init__(self, source: Pipe):
        super().__init__(source)
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
            close_iterator(iterator)
