"""Worker processes for the part of a chain before feature fetching (``num_workers``).

For samplers with Python-heavy per-batch work, which threads cannot overlap. A
``"workers"`` place (:func:`graphpipe.loading.policy.place`) builds ``ProcessWorkers(chain
with a Shard)``: worker ``w`` of ``W`` iterates its own copy of the chain with the
:class:`Shard` set to keep batches ``i ≡ w (mod W)``, and the consumer takes batch ``i`` from worker ``i mod W``,
so batches keep their order and content (samplers key their randomness by
``batch_index``).

Start method: ``forkserver`` with graphpipe preloaded. ``fork`` is not safe here:
numba's threading layer on this stack is GNU OpenMP, which is not fork-safe once a
parallel kernel has run in the parent (and the parent has usually sampled a batch
already, e.g. to look at it). ``spawn`` would import torch and numba again in every
worker. The fork server is a fresh interpreter started once per program
(1-2 s for the imports); the workers fork from it in about 10 ms, receive the
chain pickled with torch's reductions (tensors are shared through shared memory, not
copied), and then load numba's cached kernels on their first batch (0.3-1 s, more on
a loaded machine). Workers persist across epochs, so these costs are paid once per loader.

Each worker first runs the main script again (as ``__mp_main__``, like every forkserver
or spawn child), so a script must start workers under ``if __name__ == "__main__":``;
starting them from unguarded module-level code is reported before any process starts.
"""

from __future__ import annotations

import ast
import itertools
import linecache
import os
import pickle
import queue
import signal
import sys
import threading
import time
import weakref
from typing import List, Optional, Tuple

import numba
import torch
import torch.multiprocessing as mp
from torch._utils import ExceptionWrapper

from graphpipe._internal.safe_files import process_exists
from graphpipe.pipes.base import Pipe, upstream
from graphpipe._internal.checks import check_int
from graphpipe.loading.stages import Timed, in_collector, watch_process

__all__ = ["ProcessWorkers", "Shard", "check_main_guard"]

_POLL_S = 0.05
_JOIN_TIMEOUT_S = 2.0  # how long stopping waits for busy workers before terminating them
_DEATH_WAIT_S = 2.0  # how long a worker whose batch could not be received may take to exit


class Shard(Pipe):
    """Keep the items ``i`` of ``source`` with ``i % count == index`` (``i`` from 0).

    Placed right after the source by :func:`graphpipe.loading.policy.place` when a stage
    runs in worker processes; each worker process sets ``index`` to its rank.
    """

    def __init__(self, source: Pipe, index: int = 0, count: int = 1):
        super().__init__()
        if not 0 <= index < count:
            raise ValueError(f"Shard: need 0 <= index < count, got index={index}, count={count}")
        self.source = source
        self.index = index
        self.count = count

    def stream(self, epoch: int, start: int = 0):
        for i, item in enumerate(self.source.stream(epoch, start), start):
            if i % self.count == self.index:
                yield item

    def __len__(self) -> int:
        return len(range(self.index, len(self.source), self.count))


class _WorkerDone:
    """End of a worker's epoch, with the seconds and batch counts of its Timed stages."""

    def __init__(self, timings):
        self.timings = timings


def _the_shard(pipe: Pipe) -> Shard:
    shards = [stage for stage in upstream(pipe) if isinstance(stage, Shard)]
    if len(shards) != 1:
        raise ValueError(f"ProcessWorkers: the chain must contain exactly one Shard stage, found {len(shards)}")
    return shards[0]


def _put(out, item, serving) -> bool:
    """Put ``item`` unless ``serving()`` turns false while the queue is full."""
    while serving():
        try:
            out.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _serve(pipe: Pipe, rank: int, num_workers: int, commands, out, current, stop, consumer_pid: int) -> None:
    """Body of worker process ``rank``: serve epochs of its shard of ``pipe`` until told to stop
    (``stop.value`` set, a ``None`` command, or the consumer gone).

    A command ``(run, epoch, start)`` starts an epoch at its batch ``start``; every message is tagged with ``run``, so
    the consumer can drop what an aborted run left in the queue. The run ends early when
    ``current.value`` (the run the consumer wants) changes.
    """
    # The consumer handles Ctrl-C and stops the workers; at shutdown nothing left in the
    # queue matters, so the process exits without flushing it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out.cancel_join_thread()
    torch.set_num_threads(1)
    numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS // num_workers))
    shard = _the_shard(pipe)
    shard.index, shard.count = rank, num_workers
    timed = [stage for stage in upstream(pipe) if isinstance(stage, Timed)]
    while not stop.value:
        try:
            command = commands.get(timeout=_POLL_S)
        except queue.Empty:
            if not process_exists(consumer_pid):
                return  # the consumer was killed (SIGKILL, OOM) without stopping us
            continue
        if command is None:
            return
        run, epoch, start = command

        def serving():
            return current.value == run and not stop.value and process_exists(consumer_pid)

        for stage in timed:
            stage.reset_stats()
        iterator = None
        try:
            iterator = pipe.stream(epoch, start)
            for item in iterator:
                if not _put(out, (run, item), serving):
                    break
            else:
                _put(out, (run, _WorkerDone([(stage.seconds, stage.batches) for stage in timed])), serving)
        except Exception:
            where = f"in graphpipe worker process {rank} (pid {os.getpid()})"
            _put(out, (run, ExceptionWrapper(where=where)), serving)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()


def _is_main_guard(test: ast.expr) -> bool:
    """Whether an ``if`` test is ``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
        isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
    )


def _guarded_lines(path: str) -> List[range]:
    """The line ranges of the bodies of ``if __name__ == "__main__":`` blocks in ``path``."""
    with open(path, "rb") as file:
        tree = ast.parse(file.read(), path)
    return [
        range(node.body[0].lineno, node.body[-1].end_lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_main_guard(node.test)
    ]


def _unguarded_main_line() -> Optional[Tuple[str, int]]:
    """``(file, line)`` of the module-level code of the main script that is starting
    worker processes outside an ``if __name__ == "__main__":`` block, else None.

    Under the forkserver (and spawn) start method every worker first runs the main
    script again, as module ``__mp_main__``: unguarded module-level code that starts
    workers then runs in every worker. Seen from the main thread's stack, it is a
    module-level frame of ``__main__`` whose line is in no guard, or (inside a worker
    that re-runs the script) any module-level frame of ``__mp_main__``.

    Only the calling thread's own frames are walked, in the main thread (elsewhere it
    returns None): walking other threads' frames (``sys._current_frames()``) runs with
    CPython's thread-list lock held, and a garbage collection inside it that finalized a
    loader once deadlocked every thread. A DataLoader checks in the main thread when an
    epoch starts worker processes (:func:`check_main_guard`).
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    frame = sys._getframe(1)
    while frame is not None:
        code, name = frame.f_code, frame.f_globals.get("__name__")
        if code.co_name == "<module>" and name in ("__main__", "__mp_main__"):
            if name == "__mp_main__":
                return code.co_filename, frame.f_lineno
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            if not (main_file and os.path.isfile(code.co_filename) and os.path.samefile(code.co_filename, main_file)):
                return None  # python -c, a REPL, a notebook cell: the workers do not re-run it
            try:
                guarded = _guarded_lines(code.co_filename)
            except (OSError, SyntaxError, ValueError):
                return None
            if any(frame.f_lineno in lines for lines in guarded):
                return None
            return code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None


def check_main_guard(num_workers: int) -> None:
    """Raise if the main script starts worker processes from unguarded module-level code
    (see :func:`_unguarded_main_line`); a no-op outside the main thread."""
    unguarded = _unguarded_main_line()
    if unguarded is None:
        return
    path, line = unguarded
    source = linecache.getline(path, line).strip()
    raise RuntimeError(
        f"DataLoader(num_workers={num_workers}): the script starts worker processes from module-level code "
        f"outside `if __name__ == \"__main__\":` ({os.path.basename(path)}, line {line}: `{source}`). Every "
        "worker process first runs the script again (Python's forkserver/spawn start methods), which would "
        "run this line in every worker. Put the training code under `if __name__ == \"__main__\":` (e.g. in "
        "a main() function called from there)."
    )


class _WorkerPool:
    """``num_workers`` processes serving epochs of one chain; see :class:`ProcessWorkers`."""

    def __init__(self, pipe: Pipe, num_workers: int, buffer_size: int):
        check_main_guard(num_workers)
        watch_process()  # a finalizer in the garbage collector then only signals the workers
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(["graphpipe"])
        # Shared memory without locks: stopping (from a finalizer too) only writes them.
        self.current = context.RawValue("q", 0)  # the run the consumer wants, 0: none
        self.stop = context.RawValue("b", 0)  # 1: every worker exits
        self.commands = [context.Queue() for _ in range(num_workers)]
        self.results = [context.Queue(buffer_size) for _ in range(num_workers)]
        self.processes = []
        self.last_run = 0
        self._finalizer = weakref.finalize(self, _stop_pool, self.processes, self.commands, self.results, self.stop)
        for rank in range(num_workers):
            process = context.Process(
                target=_serve,
                args=(pipe, rank, num_workers, self.commands[rank], self.results[rank], self.current, self.stop, os.getpid()),
                name=f"graphpipe-worker-{rank}",
                daemon=True,
            )
            try:
                process.start()
            except Exception as error:
                self.close()
                hint = ""
                if isinstance(error, (pickle.PicklingError, TypeError, AttributeError)):
                    hint = (
                        "; the part of the pipe that runs in workers (before fetch_feature) must be picklable "
                        "(no lambdas or local functions)"
                    )
                raise RuntimeError(
                    f"ProcessWorkers: could not start a worker process ({type(error).__name__}: {error}){hint}"
                ) from error
            self.processes.append(process)

    def alive(self) -> bool:
        return all(process.is_alive() for process in self.processes)

    def close(self) -> None:
        self._finalizer()


def _stop_pool(processes, commands, results, stop) -> None:
    """Ask the workers to stop; terminate those still busy after ``_JOIN_TIMEOUT_S`` in all
    (a batch in a long kernel), so that close() and Ctrl-C return promptly. Inside the
    garbage collector only ``stop`` is set: the workers see it within ``_POLL_S`` and
    exit, and nothing here waits (see :mod:`graphpipe.loading.stages`)."""
    stop.value = 1
    if in_collector():
        return
    for command in commands:
        command.put(None)
    deadline = time.monotonic() + _JOIN_TIMEOUT_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(_JOIN_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()
    for q in commands + results:
        q.cancel_join_thread()
        q.close()


def _death_message(process, rank: int) -> str:
    """Which worker died and how, from its exit code (``-N``: killed by signal ``N``)."""
    code = process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how = f"killed by signal {name}"
        if -code == signal.SIGKILL:
            how += " (out of memory? the kernel's OOM killer sends SIGKILL)"
    else:
        how = f"exited with code {code} (its traceback, if any, is on stderr)"
    return f"DataLoader worker {rank} (pid {process.pid}) died: {how}"


class ProcessWorkers(Pipe):
    """Run the upstream chain in ``num_workers`` processes and yield its batches in order.

    ``source`` must contain one :class:`Shard` stage (after the ItemSampler). The first
    epoch starts ``num_workers`` processes (from a fork server); they stay and serve
    later epochs (each iterates a copy of the chain on its shard, with up to
    ``buffer_size`` batches queued) until :meth:`close` (called by the DataLoader's
    ``close()`` / ``del``) or garbage collection. An exception in a worker is re-raised
    in the consumer with the worker's traceback; a worker that dies is reported and the
    next epoch starts fresh workers; leaving an epoch early stops the workers' epoch.
    """

    def __init__(self, source: Pipe, num_workers: int, buffer_size: int = 2):
        super().__init__()
        _the_shard(source)
        self.source = source
        self.num_workers = check_int(num_workers, "num_workers", "ProcessWorkers", minimum=1)
        self.buffer_size = check_int(buffer_size, "buffer_size", "ProcessWorkers", minimum=1)
        self._pool: Optional[_WorkerPool] = None

    def upstream_location(self, here: str, new_thread) -> str:
        return f"{self.num_workers} worker processes"

    def label(self) -> str:
        return f"ProcessWorkers({self.num_workers})"

    def running(self) -> bool:
        """Whether the worker processes are up (the next epoch starts none)."""
        return self._pool is not None and self._pool.alive()

    def close(self) -> None:
        """Stop the worker processes (the next epoch starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def stream(self, epoch: int, start: int = 0):
        if self._pool is None or not self._pool.alive():
            self.close()
            self._pool = _WorkerPool(self.source, self.num_workers, self.buffer_size)
        pool = self._pool
        pool.last_run += 1
        run = pool.current.value = pool.last_run
        for command in pool.commands:
            command.put((run, epoch, start))
        finished = False
        try:
            done = 0
            for i in itertools.count():
                rank = (start + i) % self.num_workers  # worker w has the batches j = w (mod W)
                item = self._get(pool, rank, run)
                if isinstance(item, _WorkerDone):
                    self._add_timings(item)
                    done += 1
                    if done == self.num_workers:
                        finished = True
                        return
                    continue
                if done:
                    raise RuntimeError(f"ProcessWorkers: worker {rank} produced a batch after another worker ended")
                yield item
        finally:
            if not finished:
                pool.current.value = 0  # the workers abandon this run

    def _get(self, pool: _WorkerPool, rank: int, run: int):
        process = pool.processes[rank]
        while True:
            try:
                message_run, item = pool.results[rank].get(timeout=_POLL_S)
            except queue.Empty:
                if not process.is_alive():
                    raise RuntimeError(_death_message(process, rank)) from None
                continue
            except (OSError, EOFError) as error:
                # A batch's tensors travel as file descriptors that the consumer fetches
                # from the worker when it unpickles the batch: a worker killed after
                # queueing a batch shows up here as ConnectionResetError or similar.
                process.join(_DEATH_WAIT_S)
                if not process.is_alive():
                    raise RuntimeError(_death_message(process, rank)) from None
                raise RuntimeError(
                    f"DataLoader worker {rank} (pid {process.pid}) is alive but its batch could not be "
                    f"received: {type(error).__name__}: {error}"
                ) from error
            if message_run != run:
                continue  # left over from an epoch that ended early
            if isinstance(item, ExceptionWrapper):
                item.reraise()
            return item

    def _add_timings(self, done: _WorkerDone) -> None:
        timed = [stage for stage in upstream(self.source) if isinstance(stage, Timed)]
        for stage, (seconds, batches) in zip(timed, done.timings):
            stage.seconds += seconds
            stage.batches += batches
